//! The declarative rolls' CRDs (`deploy/controller/crds.yaml`, which `nodejob render-crds`
//! prints) on a real apiserver: taken and Established, the examples of `examples/` accepted,
//! a status written through the `/status` subresource, the printer columns as `kubectl get`
//! and `kubectl get -o wide` show them (the apiserver's own Table, which kubectl prints), and
//! the rule on a rotation's CA source enforced by the apiserver.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use std::time::Duration;

use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::wait::{await_condition, conditions};
use kube::{Client, ResourceExt};
use nodejob_conformance::{Failure, ensure};
use nodejob_crd::{CARotation, NodeUpgrade};
use nodejob_e2e::{admin, install_crds};
use serde_json::{Value, json};

nodejob_e2e::on_kubelets! {
    source: include_str!("crds.rs");
    both: ;
    agent_only: ;
    no_nodes:
        the_crds_are_taken_and_kubectl_get_shows_the_columns =>
            "it installs cluster-scoped resources and reads no node";
}

const UPGRADE: &str = include_str!("../../examples/nodeupgrade.yaml");
const ROTATION: &str = include_str!("../../examples/carotation.yaml");

fn fail(what: impl std::fmt::Display) -> impl FnOnce(kube::Error) -> Failure {
    move |e| Failure(format!("{what}: {e}"))
}

/// `path` as `kubectl get` asks for it: the apiserver's Table, with every column (`-o wide`
/// shows those of priority 1 too): the column names, their priorities, the first row's cells.
async fn table(admin: &Client, path: &str) -> Result<(Vec<(String, i64)>, Vec<Value>), Failure> {
    let request = http::Request::get(path)
        .header(
            http::header::ACCEPT,
            "application/json;as=Table;v=v1;g=meta.k8s.io",
        )
        .body(Vec::new())
        .map_err(|e| Failure(format!("{path}: {e}")))?;
    let table: Value = admin.request(request).await.map_err(fail(path))?;
    let columns = (table["columnDefinitions"].as_array())
        .ok_or_else(|| Failure(format!("{path}: no columns in {table}")))?
        .iter()
        .map(|c| {
            let name = c["name"].as_str().unwrap_or_default().to_string();
            (name, c["priority"].as_i64().unwrap_or(0))
        })
        .collect();
    let cells = table["rows"][0]["cells"]
        .as_array()
        .cloned()
        .ok_or_else(|| Failure(format!("{path}: no row in {table}")))?;
    Ok((columns, cells))
}

/// Installs the CRDs, checks what the apiserver makes of them and the examples, and removes
/// them (with every object of theirs) at the end, passed or not, waiting until they are gone:
/// a CRD still terminating when the next suite applies it would vanish under that suite.
async fn the_crds_are_taken_and_kubectl_get_shows_the_columns() -> Result<(), Failure> {
    let admin = admin().await?;
    let crds: Api<CustomResourceDefinition> = Api::all(admin.clone());
    let names = install_crds(&admin).await?;
    ensure!(names.len() == 2, "two CRDs in the file, not {names:?}");
    let result = checks(&admin).await;
    for name in &names {
        let Ok(crd) = crds.get(name).await else {
            continue;
        };
        let _ = crds.delete(name, &DeleteParams::foreground()).await;
        let uid = crd.uid().unwrap_or_default();
        let gone = await_condition(crds.clone(), name, conditions::is_deleted(&uid));
        tokio::time::timeout(Duration::from_secs(120), gone)
            .await
            .map_err(|_| Failure(format!("CRD {name} still there 120s after its delete")))?
            .map_err(|e| Failure(format!("watching CRD {name} go: {e}")))?;
    }
    result
}

async fn checks(admin: &Client) -> Result<(), Failure> {
    // The example as a person writes it, and a status as the controller writes it.
    let upgrades: Api<NodeUpgrade> = Api::all(admin.clone());
    let example: NodeUpgrade = serde_saphyr::from_str(UPGRADE)
        .map_err(|e| Failure(format!("examples/nodeupgrade.yaml: {e}")))?;
    let name = example.name_any();
    upgrades
        .create(&PostParams::default(), &example)
        .await
        .map_err(fail("creating the example NodeUpgrade"))?;
    let status = json!({"status": {
        "observedGeneration": 1,
        "conditions": [{
            "type": "Ready", "status": "False", "reason": "Progressing",
            "message": "2 of 5 nodes at v1.38.0", "lastTransitionTime": "2026-12-06T18:00:00Z",
            "observedGeneration": 1,
        }],
        "counts": {"nodes": 5, "upToDate": 2, "inProgress": 2, "soaking": 0, "failed": 1,
                   "blocked": 0, "rolledBack": 0},
        "leaseHolder": "nodejob-controller-0",
    }});
    upgrades
        .patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .map_err(fail(format!("writing the status of NodeUpgrade {name}")))?;
    let path = format!("/apis/nodejob.stratum.ciq.com/v1alpha1/nodeupgrades/{name}");
    let (columns, cells) = table(admin, &path).await?;
    let want = [
        ("Name", 0),
        ("Target", 0),
        ("Ready", 0),
        ("Reason", 0),
        ("Nodes", 0),
        ("Up-To-Date", 0),
        ("Failed", 0),
        ("Age", 0),
        ("Blocked", 1),
        ("In-Flight", 1),
        ("Paused", 1),
        ("Lease-Holder", 1),
    ];
    let want: Vec<(String, i64)> = want.iter().map(|(n, p)| (n.to_string(), *p)).collect();
    ensure!(columns == want, "kubectl get nu's columns: {columns:?}");
    let shown: Vec<String> = cells
        .iter()
        .map(|c| match c {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        })
        .collect();
    // As `kubectl get nu -o wide` prints the Table (column names upper-cased, a null cell
    // `<none>`, three spaces between columns), for the log.
    let rows = [
        (columns.iter())
            .map(|(n, _)| n.to_uppercase())
            .collect::<Vec<_>>(),
        (shown.iter())
            .map(|c| {
                if c == "null" {
                    "<none>".into()
                } else {
                    c.clone()
                }
            })
            .collect(),
    ];
    let widths: Vec<usize> = (0..rows[0].len())
        .map(|i| {
            rows.iter()
                .map(|r| r.get(i).map_or(0, String::len))
                .max()
                .unwrap_or(0)
        })
        .collect();
    for row in &rows {
        let cells: Vec<String> = (row.iter().zip(&widths))
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        eprintln!("kubectl get nu -o wide: {}", cells.join("   ").trim_end());
    }
    // Age is the apiserver's, so not compared; the integer columns are integers; `paused`
    // unset is a null cell (kubectl's `<none>`).
    let expected = [&name, "v1.38.0", "False", "Progressing", "5", "2", "1"];
    ensure!(
        shown.len() == 12
            && shown[..7] == expected
            && shown[8..] == ["0", "2", "null", "nodejob-controller-0"],
        "kubectl get nu {name} -o wide shows {shown:?}"
    );
    ensure!(
        cells[4].is_i64() && cells[5].is_i64() && cells[6].is_i64(),
        "the counts are shown as integers: {cells:?}"
    );

    // A percentage for maxUnavailable is taken as the command takes it.
    let mut percent = example.clone();
    percent.metadata = Default::default();
    percent.metadata.name = Some(format!("{name}-percent"));
    percent.spec.max_unavailable =
        k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::String("25%".into());
    upgrades
        .create(&PostParams::default(), &percent)
        .await
        .map_err(fail("a NodeUpgrade with maxUnavailable 25%"))?;

    // The rotation's example is taken; a CA given twice is refused by the apiserver's rule.
    let rotations: Api<CARotation> = Api::all(admin.clone());
    let rotation: CARotation = serde_saphyr::from_str(ROTATION)
        .map_err(|e| Failure(format!("examples/carotation.yaml: {e}")))?;
    rotations
        .create(&PostParams::default(), &rotation)
        .await
        .map_err(fail("creating the example CARotation"))?;
    let mut twice = rotation.clone();
    twice.metadata = Default::default();
    twice.metadata.name = Some("ca-given-twice".into());
    twice.spec.ca.config_map_ref = Some(nodejob_crd::KeyRef {
        namespace: "kube-system".into(),
        name: "cluster-ca-next".into(),
        key: None,
    });
    match rotations.create(&PostParams::default(), &twice).await {
        Err(kube::Error::Api(e)) if e.code == 422 && e.message.contains("exactly one of") => {}
        other => {
            return Err(Failure(format!(
                "a CARotation with both pem and configMapRef must be refused (422, exactly \
                 one of ...), got {other:?}"
            )));
        }
    }
    let path = format!(
        "/apis/nodejob.stratum.ciq.com/v1alpha1/carotations/{}",
        rotation.name_any()
    );
    let (columns, _) = table(admin, &path).await?;
    let columns: Vec<&str> = columns.iter().map(|(n, _)| n.as_str()).collect();
    ensure!(
        columns
            == [
                "Name",
                "Fingerprint",
                "Phase",
                "Ready",
                "Staged",
                "Issued",
                "Finalized",
                "Failed",
                "Age"
            ],
        "kubectl get carotation's columns: {columns:?}"
    );
    Ok(())
}
