//! `NodeApi`: get, list by label, watch, patch under a resourceVersion precondition; and the
//! node actors (labels, kubelet version, boot ID).

mod common;

use std::time::Duration;

use common::{TestResult, rv};
use k8s_openapi::api::core::v1::Node;
use nodejob_core::{Change, ErrorKind, NodeApi, NodeChange};
use nodejob_fake::{DEFAULT_KUBELET_VERSION, FakeCluster, Verb, labels};

fn unschedulable(node: &Node) -> bool {
    node.spec.as_ref().and_then(|s| s.unschedulable) == Some(true)
}

fn annotation<'a>(node: &'a Node, key: &str) -> Option<&'a str> {
    node.metadata
        .annotations
        .as_ref()?
        .get(key)
        .map(String::as_str)
}

fn info(node: &Node) -> (String, String) {
    let info = node.status.clone().unwrap().node_info.unwrap();
    (info.kubelet_version, info.boot_id)
}

#[tokio::test(start_paused = true)]
async fn patch_is_refused_at_a_stale_version_and_applies_in_one_write() -> TestResult {
    let cluster = FakeCluster::new();
    let seen = cluster.add_node("n1")?;
    let stale = seen.metadata.resource_version.clone().unwrap();
    cluster.patch_node_now("n1", &[NodeChange::set_annotation("other", "1")])?;
    let before = cluster.resource_version();

    let ours = [NodeChange::Cordon, NodeChange::set_annotation("ours", "x")];
    let err = cluster.patch_node("n1", &stale, &ours).await.unwrap_err();
    assert_eq!((err.kind, err.code), (ErrorKind::Conflict, 409));
    assert_eq!(
        err.message,
        r#"Operation cannot be fulfilled on nodes "n1": the object has been modified; please apply your changes to the latest version and try again"#
    );
    assert_eq!(
        cluster.resource_version(),
        before,
        "a refused patch writes nothing"
    );

    let current = cluster.get_node("n1").await?;
    let version = current.metadata.resource_version.clone().unwrap();
    let mut watch = cluster.resource_version();
    let patched = cluster.patch_node("n1", &version, &ours).await?;
    assert_eq!(
        rv(&patched.metadata),
        rv(&current.metadata) + 1,
        "one write"
    );
    assert!(unschedulable(&patched));
    assert_eq!(annotation(&patched, "ours"), Some("x"));
    assert_eq!(
        annotation(&patched, "other"),
        Some("1"),
        "the other actor's stays"
    );
    let seen = cluster
        .wait_node("n1", Some(&watch), Duration::from_secs(1))
        .await?;
    assert_eq!(
        seen,
        Change::Applied(patched.clone()),
        "watchers see the patch"
    );

    // A patch that changes nothing writes nothing.
    watch = cluster.resource_version();
    let version = patched.metadata.resource_version.clone().unwrap();
    let same = cluster
        .patch_node("n1", &version, &[NodeChange::Cordon])
        .await?;
    assert_eq!(same, patched);
    assert_eq!(cluster.resource_version(), watch);

    let undone = [NodeChange::Uncordon, NodeChange::remove_annotation("ours")];
    let back = cluster.patch_node("n1", &version, &undone).await?;
    assert!(!unschedulable(&back) && annotation(&back, "ours").is_none());

    let err = cluster
        .patch_node("n9", "1", &[NodeChange::Cordon])
        .await
        .unwrap_err();
    assert_eq!(
        (err.kind, err.message.as_str()),
        (ErrorKind::NotFound, r#"nodes "n9" not found"#)
    );
    let calls: Vec<_> = cluster
        .calls()
        .into_iter()
        .filter(|c| c.verb == Verb::PatchNode)
        .collect();
    assert_eq!(calls.len(), 5);
    assert_eq!(
        calls[0]
            .preconditions
            .as_ref()
            .unwrap()
            .resource_version
            .as_deref(),
        Some(stale.as_str())
    );
    assert_eq!(calls[4].error, Some(ErrorKind::NotFound));
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn nodes_are_listed_by_label_in_name_order() -> TestResult {
    let cluster = FakeCluster::new();
    for name in ["n3", "n1", "cp", "n2"] {
        cluster.add_node(name)?;
    }
    cluster.label_node("cp", labels::CONTROL_PLANE, "")?;
    cluster.label_node("n1", labels::ZONE, "a")?;
    cluster.label_node("n2", labels::ZONE, "b")?;
    cluster.label_node("n3", labels::ZONE, "a")?;
    let names = |nodes: Vec<Node>| -> Vec<String> {
        nodes
            .into_iter()
            .map(|n| n.metadata.name.unwrap())
            .collect()
    };
    let table = [
        ("", vec!["cp", "n1", "n2", "n3"]),
        ("node-role.kubernetes.io/control-plane", vec!["cp"]),
        (
            "!node-role.kubernetes.io/control-plane",
            vec!["n1", "n2", "n3"],
        ),
        ("topology.kubernetes.io/zone=a", vec!["n1", "n3"]),
        ("topology.kubernetes.io/zone!=a", vec!["cp", "n2"]),
        ("kubernetes.io/hostname=n2", vec!["n2"]),
        ("topology.kubernetes.io/zone=c", vec![]),
        // Set-based requirements, which a real apiserver serves.
        ("topology.kubernetes.io/zone in (b,c)", vec!["n2"]),
        ("topology.kubernetes.io/zone notin (a)", vec!["cp", "n2"]),
    ];
    for (selector, want) in table {
        assert_eq!(
            names(cluster.list_nodes(selector).await?),
            want,
            "{selector:?}"
        );
    }
    // What the apiserver cannot parse is a 400.
    let err = cluster.list_nodes("zone in a").await.unwrap_err();
    assert_eq!((err.kind, err.code), (ErrorKind::BadRequest, 400));

    let unlabelled = cluster.unlabel_node("n1", labels::ZONE)?;
    assert!(
        !unlabelled
            .metadata
            .labels
            .unwrap()
            .contains_key(labels::ZONE)
    );
    assert_eq!(
        names(cluster.list_nodes("topology.kubernetes.io/zone=a").await?),
        ["n3"]
    );
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn kubelet_version_and_boot_id() -> TestResult {
    let cluster = FakeCluster::with_seed(3);
    let node = cluster.add_node("n1")?;
    let (version, boot) = info(&node);
    assert_eq!(version, DEFAULT_KUBELET_VERSION);
    assert_eq!(boot.len(), 36);

    let since = cluster.resource_version();
    let upgraded = cluster.set_kubelet_version("n1", "v1.38.0")?;
    assert_eq!(info(&upgraded), ("v1.38.0".to_string(), boot.clone()));
    let seen = cluster
        .wait_node("n1", Some(&since), Duration::from_secs(1))
        .await?;
    assert_eq!(seen, Change::Applied(upgraded.clone()));
    // The same version again is no write.
    let before = cluster.resource_version();
    cluster.set_kubelet_version("n1", "v1.38.0")?;
    assert_eq!(cluster.resource_version(), before);

    let rebooted = cluster.reboot_node("n1")?;
    let (version, new_boot) = info(&rebooted);
    assert_eq!(version, "v1.38.0");
    assert_ne!(new_boot, boot);

    // Node identities come from a stream of their own: the same seed draws the same ones.
    let again = FakeCluster::with_seed(3);
    assert_eq!(info(&again.add_node("n1")?).1, boot);
    for missing in [
        cluster.set_kubelet_version("n9", "v1").unwrap_err(),
        cluster.reboot_node("n9").unwrap_err(),
        cluster.label_node("n9", "k", "v").unwrap_err(),
    ] {
        assert!(missing.is_not_found(), "{missing}");
    }
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn wait_node_reports_readiness_and_removal() -> TestResult {
    let cluster = FakeCluster::new();
    let node = cluster.add_node("n1")?;
    let since = node.metadata.resource_version.clone();
    cluster.schedule(Duration::from_secs(5), |c| {
        c.set_node_ready("n1", false).unwrap()
    });
    cluster.schedule(Duration::from_secs(8), |c| c.remove_node("n1").unwrap());
    let hour = Duration::from_secs(3600);
    let Change::Applied(not_ready) = cluster.wait_node("n1", since.as_deref(), hour).await? else {
        return Err("expected the NotReady update".into());
    };
    assert_eq!(cluster.now_secs(), 5);
    let since = not_ready.metadata.resource_version.clone();
    let removed = cluster.wait_node("n1", since.as_deref(), hour).await?;
    assert!(matches!(removed, Change::Deleted(_)), "{removed:?}");
    assert_eq!(cluster.now_secs(), 8);
    Ok(())
}

trait NowSecs {
    fn now_secs(&self) -> u64;
}

impl NowSecs for FakeCluster {
    fn now_secs(&self) -> u64 {
        nodejob_core::Clock::now(self).as_secs()
    }
}

/// A strategic merge of conditions as the apiserver orders it (`mergeSortedSlice` in
/// `k8s.io/apimachinery/pkg/util/strategicpatch`): a condition the list did not have goes
/// first, in the patch's order; one it had is updated in its place; the others keep theirs.
#[tokio::test(start_paused = true)]
async fn conditions_merge_by_type_in_the_order_a_strategic_merge_gives() {
    use k8s_openapi::api::core::v1::NodeCondition;
    let cluster = FakeCluster::new();
    cluster.add_node("n1").unwrap();
    let condition = |t: &str, status: &str| NodeCondition {
        type_: t.into(),
        status: status.into(),
        ..NodeCondition::default()
    };
    let types = |n: &Node| -> Vec<(String, String)> {
        (n.status.as_ref().and_then(|s| s.conditions.clone()))
            .unwrap_or_default()
            .into_iter()
            .map(|c| (c.type_, c.status))
            .collect()
    };
    let pair = |t: &str, s: &str| (t.to_string(), s.to_string());
    let new = [condition("A", "True"), condition("B", "True")];
    let node = cluster
        .patch_node_conditions("n1", None, &[], &new)
        .await
        .unwrap();
    assert_eq!(
        types(&node),
        [pair("A", "True"), pair("B", "True"), pair("Ready", "True")]
    );
    let node = (cluster.patch_node_conditions("n1", None, &[], &[condition("B", "False")]))
        .await
        .unwrap();
    assert_eq!(
        types(&node),
        [pair("A", "True"), pair("B", "False"), pair("Ready", "True")]
    );
    let stale = cluster
        .patch_node_conditions("n1", Some("1"), &[], &[condition("A", "False")])
        .await;
    assert!(stale.is_err_and(|e| e.is_conflict()));
    // A record beside a condition lands in the same write; a change to the spec, which the
    // status subresource would drop, is refused and nothing is written.
    let record = [nodejob_core::NodeChange::set_annotation("k", "v")];
    let node = cluster
        .patch_node_conditions("n1", None, &record, &[condition("A", "False")])
        .await
        .unwrap();
    let annotation = (node.metadata.annotations.as_ref()).and_then(|a| a.get("k").cloned());
    assert_eq!(annotation.as_deref(), Some("v"));
    assert_eq!(types(&node)[0], pair("A", "False"));
    let spec = [nodejob_core::NodeChange::Cordon];
    let refused = cluster.patch_node_conditions("n1", None, &spec, &[]).await;
    assert!(refused.is_err_and(|e| e.kind == nodejob_core::ErrorKind::Invalid));
}
