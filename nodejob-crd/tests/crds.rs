//! The CRDs as a cluster takes them: their names, every printer column pointing at a field of
//! its own type, and the examples of `examples/` read as the types read them.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, JSONSchemaProps,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use nodejob_crd::{CARotation, NodeUpgrade, OnFailure, OnUndrainable, crds};

fn schema(crd: &CustomResourceDefinition) -> &JSONSchemaProps {
    let version = &crd.spec.versions[0];
    version
        .schema
        .as_ref()
        .and_then(|s| s.open_api_v3_schema.as_ref())
        .expect("a schema")
}

/// The schema of the field `path` points at (`.status.counts.nodes`, `.status.conditions[?(@.
/// type=="Ready")].reason`), or why there is none.
fn field<'a>(root: &'a JSONSchemaProps, path: &str) -> Result<&'a JSONSchemaProps, String> {
    let mut at = root;
    for part in path.trim_start_matches('.').split('.') {
        // A filter on a list selects among its items.
        let (name, filtered) = match part.split_once('[') {
            Some((name, _)) => (name, true),
            None => (part, false),
        };
        if name.starts_with("type==") || name.ends_with(")]") {
            continue;
        }
        at = at
            .properties
            .as_ref()
            .and_then(|p| p.get(name))
            .ok_or_else(|| format!("{path}: no field {name}"))?;
        if filtered {
            at = match &at.items {
                Some(k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::JSONSchemaPropsOrArray::Schema(s)) => s,
                _ => return Err(format!("{path}: {name} is not a list")),
            };
        }
    }
    Ok(at)
}

#[test]
fn both_kinds_are_cluster_scoped_in_the_group_with_their_short_names() {
    let names: Vec<_> = crds()
        .iter()
        .map(|c| {
            (
                c.metadata.name.clone().unwrap(),
                c.spec.scope.clone(),
                c.spec.names.short_names.clone().unwrap_or_default(),
                c.spec.versions.iter().filter(|v| v.storage).count(),
                c.spec.versions[0]
                    .subresources
                    .as_ref()
                    .and_then(|s| s.status.as_ref())
                    .is_some(),
            )
        })
        .collect();
    assert_eq!(
        names,
        vec![
            (
                "nodeupgrades.nodejob.stratum.ciq.com".to_string(),
                "Cluster".to_string(),
                vec!["nu".to_string()],
                1,
                true
            ),
            (
                "carotations.nodejob.stratum.ciq.com".to_string(),
                "Cluster".to_string(),
                vec!["car".to_string()],
                1,
                true
            ),
        ]
    );
}

#[test]
fn every_printer_column_points_at_a_field_of_its_type() {
    let mut checked = 0;
    for crd in crds() {
        let root = schema(&crd);
        let columns = crd.spec.versions[0]
            .additional_printer_columns
            .clone()
            .unwrap();
        for column in columns {
            if column.json_path == ".metadata.creationTimestamp" {
                assert_eq!(column.type_, "date", "{}", column.name);
                continue;
            }
            let at = field(root, &column.json_path).unwrap();
            assert_eq!(
                at.type_.as_deref(),
                Some(column.type_.as_str()),
                "{} of {}: {} is {:?}",
                column.name,
                crd.spec.names.kind,
                column.json_path,
                at.type_
            );
            if column.type_ == "integer" {
                assert_eq!(at.format.as_deref(), Some("int32"), "{}", column.name);
            }
            checked += 1;
        }
    }
    // Target, Ready, Reason, Nodes, Up-To-Date, Failed, Blocked, In-Flight, Paused,
    // Lease-Holder; Fingerprint, Phase, Ready, Staged, Issued, Finalized, Failed.
    assert_eq!(checked, 17);
}

#[test]
fn the_status_conditions_are_a_map_by_type_as_server_side_apply_merges_them() {
    for crd in crds() {
        let conditions = field(schema(&crd), ".status.conditions").unwrap();
        assert_eq!(conditions.x_kubernetes_list_type.as_deref(), Some("map"));
        assert_eq!(
            conditions.x_kubernetes_list_map_keys.as_deref(),
            Some(&["type".to_string()][..])
        );
    }
}

#[test]
fn max_unavailable_takes_a_count_or_a_percentage() {
    let crd = &crds()[0];
    let max = field(schema(crd), ".spec.maxUnavailable").unwrap();
    assert_eq!(max.x_kubernetes_int_or_string, Some(true));
    let read = |v: &str| -> NodeUpgrade {
        serde_saphyr::from_str(&format!(
            "apiVersion: nodejob.stratum.ciq.com/v1alpha1\nkind: NodeUpgrade\nmetadata: {{name: a}}\nspec: {{target: v1.38.0, maxUnavailable: {v}}}\n"
        ))
        .unwrap()
    };
    assert_eq!(read("3").spec.max_unavailable, IntOrString::Int(3));
    assert_eq!(
        read("'25%'").spec.max_unavailable,
        IntOrString::String("25%".into())
    );
}

#[test]
fn the_examples_read_as_the_types_read_them_and_a_bare_spec_takes_the_commands_defaults() {
    let upgrade: NodeUpgrade =
        serde_saphyr::from_str(include_str!("../../examples/nodeupgrade.yaml")).unwrap();
    assert_eq!(upgrade.spec.target, "v1.38.0");
    assert_eq!(upgrade.spec.max_unavailable, IntOrString::Int(2));
    assert_eq!(upgrade.spec.on_undrainable, OnUndrainable::Skip);
    assert_eq!(upgrade.spec.soak.as_deref(), Some("10m"));
    assert_eq!(upgrade.spec.on_failure, OnFailure::Rollback);
    assert!(upgrade.spec.selector.is_none());
    let rotation: CARotation =
        serde_saphyr::from_str(include_str!("../../examples/carotation.yaml")).unwrap();
    let pem = rotation.spec.ca.pem.unwrap();
    assert!(
        pem.starts_with("-----BEGIN CERTIFICATE-----\n") && !pem.contains("PRIVATE KEY"),
        "{pem}"
    );
    assert!(rotation.spec.ca.config_map_ref.is_none() && rotation.spec.ca.secret_ref.is_none());
    assert_eq!(rotation.spec.concurrency, Some(4));

    let bare: NodeUpgrade = serde_saphyr::from_str(
        "apiVersion: nodejob.stratum.ciq.com/v1alpha1\nkind: NodeUpgrade\nmetadata: {name: a}\nspec: {target: v1.38.0}\n",
    )
    .unwrap();
    assert_eq!(bare.spec.version_from, "kubelet");
    assert_eq!(bare.spec.max_unavailable, IntOrString::Int(1));
    assert_eq!(bare.spec.on_undrainable, OnUndrainable::Fail);
    assert!(!bare.spec.paused);
    // Written back, a bare spec says only what was given.
    let json = serde_json::to_value(&bare.spec).unwrap();
    assert_eq!(json, serde_json::json!({"target": "v1.38.0"}));
}

#[test]
fn the_ca_source_is_exactly_one_of_three_checked_by_the_apiserver() {
    let crd = &crds()[1];
    let ca = field(schema(crd), ".spec.ca").unwrap();
    let rules = ca.x_kubernetes_validations.clone().unwrap();
    assert_eq!(rules.len(), 1);
    assert!(rules[0].rule.contains("size() == 1"), "{}", rules[0].rule);
}

#[test]
fn each_kind_is_served_where_its_crd_says() {
    use nodejob_crd::Roll;
    for (crd, kind) in crds().iter().zip([NodeUpgrade::KIND, CARotation::KIND]) {
        assert_eq!(crd.spec.group, kind.group);
        assert_eq!(crd.spec.versions[0].name, kind.version);
        assert_eq!(crd.spec.names.kind, kind.kind);
        assert_eq!(crd.spec.names.plural, kind.plural);
    }
}
