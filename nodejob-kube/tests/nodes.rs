//! `NodeApi` on the wire: the list selector, and a patch that carries its precondition.

mod support;

use nodejob_core::{ErrorKind, NodeApi, NodeChange};
use serde_json::{Value, json};
use support::*;

type TestResult = Result<(), Box<dyn std::error::Error>>;

const NODES: &str = "/api/v1/nodes";
const NODE_A: &str = "/api/v1/nodes/node-a";

fn named(name: &str, rv: &str) -> Value {
    let mut n = node(rv, true);
    n["metadata"]["name"] = json!(name);
    n
}

fn names(nodes: &[k8s_openapi::api::core::v1::Node]) -> Vec<&str> {
    nodes
        .iter()
        .map(|n| n.metadata.name.as_deref().unwrap_or_default())
        .collect()
}

#[tokio::test]
async fn nodes_are_listed_by_label_selector_or_all_in_name_order() -> TestResult {
    let selector = "node-role.kubernetes.io/worker=,stratum.ciq.com/pool=blue";
    let (api, server) = serve(vec![
        get(NODES).query(&[("labelSelector", selector)]).reply_json(
            200,
            &list(
                "Node",
                "v1",
                "900",
                vec![
                    named("node-c", "3"),
                    named("node-a", "1"),
                    named("node-b", "2"),
                ],
            ),
        ),
        // An empty selector is no selector at all: every node.
        get(NODES).raw_query("").reply_json(
            200,
            &list(
                "Node",
                "v1",
                "901",
                vec![named("node-b", "2"), named("node-a", "1")],
            ),
        ),
    ]);
    let picked = api.list_nodes(selector).await?;
    assert_eq!(names(&picked), ["node-a", "node-b", "node-c"]);
    let all = api.list_nodes("").await?;
    assert_eq!(names(&all), ["node-a", "node-b"]);
    drop(api);
    assert_eq!(
        server.finish().await,
        [format!("GET {NODES}"), format!("GET {NODES}")]
    );
    Ok(())
}

#[tokio::test]
async fn a_patch_is_one_merge_patch_of_the_changes_in_order_with_the_resource_version() -> TestResult
{
    let key = "stratum.ciq.com/upgrade";
    let mut cordoned = node("78", true);
    cordoned["spec"] = json!({ "unschedulable": true });
    cordoned["metadata"]["annotations"] = json!({ key: "cordoned-by-upgrade" });
    let uncordoned = node("79", true);
    let (api, server) = serve(vec![
        merge_patch(
            NODE_A,
            json!({
                "metadata": {
                    "resourceVersion": "77",
                    "annotations": { key: "cordoned-by-upgrade" }
                },
                "spec": { "unschedulable": true }
            }),
        )
        .reply_json(200, &cordoned),
        // Uncordon and RemoveAnnotation are nulls: a merge patch removes what is null.
        merge_patch(
            NODE_A,
            json!({
                "metadata": { "resourceVersion": "78", "annotations": { key: null } },
                "spec": { "unschedulable": null }
            }),
        )
        .reply_json(200, &uncordoned),
    ]);
    let written = api
        .patch_node(
            "node-a",
            "77",
            &[
                NodeChange::Cordon,
                NodeChange::set_annotation(key, "cordoned-by-upgrade"),
            ],
        )
        .await?;
    assert_eq!(written.metadata.resource_version.as_deref(), Some("78"));
    assert_eq!(written.spec.and_then(|s| s.unschedulable), Some(true));
    let written = api
        .patch_node(
            "node-a",
            "78",
            &[NodeChange::Uncordon, NodeChange::remove_annotation(key)],
        )
        .await?;
    assert_eq!(written.metadata.resource_version.as_deref(), Some("79"));
    drop(api);
    assert_eq!(
        server.finish().await,
        [format!("PATCH {NODE_A}"), format!("PATCH {NODE_A}")]
    );
    Ok(())
}

#[tokio::test]
async fn a_patch_of_a_node_changed_since_it_was_read_is_a_conflict() -> TestResult {
    // What `Store.Update` answers when the patched resourceVersion is not the stored one.
    let message = "Operation cannot be fulfilled on nodes \"node-a\": the object has been \
                   modified; please apply your changes to the latest version and try again";
    let (api, server) =
        serve(vec![
        merge_patch(
            NODE_A,
            json!({ "metadata": { "resourceVersion": "77" }, "spec": { "unschedulable": true } }),
        )
        .reply_json(409, &status(409, "Conflict", message)),
        merge_patch("/api/v1/nodes/node-z", json!({ "metadata": { "resourceVersion": "1" } }))
            .reply_json(404, &status(404, "NotFound", "nodes \"node-z\" not found")),
    ]);
    let err = api
        .patch_node("node-a", "77", &[NodeChange::Cordon])
        .await
        .expect_err("the node changed");
    assert_eq!(
        (err.kind, err.code, err.message.as_str()),
        (ErrorKind::Conflict, 409, message)
    );
    let err = api
        .patch_node("node-z", "1", &[])
        .await
        .expect_err("no such node");
    assert!(err.is_not_found(), "{err}");
    drop(api);
    assert_eq!(server.finish().await.len(), 2);
    Ok(())
}

/// `spec.taints` is an atomic list: a change of taints writes the whole list (another's taint
/// kept, ours added or removed by key) under the same resourceVersion precondition, from the
/// node at that version: as the client last saw it when it saw that version (the first write's
/// answer), else read first; a node read at another version is a Conflict, not written.
#[tokio::test]
async fn a_change_of_taints_reads_the_node_then_writes_its_whole_list_under_the_version()
-> TestResult {
    let (theirs, ours) = ("example.com/theirs", "stratum.ciq.com/upgrade");
    let tainted = |rv: &str, keys: &[&str]| {
        let mut n = node(rv, true);
        n["metadata"]["name"] = json!("node-a");
        n["spec"] = json!({
            "unschedulable": true,
            "taints": (keys.iter())
                .map(|k| json!({ "key": k, "effect": "NoSchedule" }))
                .collect::<Vec<_>>()
        });
        n
    };
    let (api, server) = serve(vec![
        get(NODE_A).reply_json(200, &tainted("77", &[theirs])),
        merge_patch(
            NODE_A,
            json!({
                "metadata": { "resourceVersion": "77" },
                "spec": {
                    "unschedulable": true,
                    "taints": [
                        { "key": theirs, "effect": "NoSchedule" },
                        { "key": ours, "effect": "NoSchedule" }
                    ]
                }
            }),
        )
        .reply_json(200, &tainted("78", &[theirs, ours])),
        // 78 is the first write's answer: no read.
        merge_patch(
            NODE_A,
            json!({
                "metadata": { "resourceVersion": "78" },
                "spec": { "taints": [{ "key": theirs, "effect": "NoSchedule" }] }
            }),
        )
        .reply_json(200, &tainted("79", &[theirs])),
        // Decided at 76, not the version last seen (79): read, at 80: refused without a write.
        get(NODE_A).reply_json(200, &tainted("80", &[theirs])),
    ]);
    let fence = [
        NodeChange::Cordon,
        NodeChange::TaintNoSchedule { key: ours.into() },
    ];
    let written = api.patch_node("node-a", "77", &fence).await?;
    assert_eq!(written.metadata.resource_version.as_deref(), Some("78"));
    let lift = [NodeChange::Untaint { key: ours.into() }];
    let written = api.patch_node("node-a", "78", &lift).await?;
    assert_eq!(written.metadata.resource_version.as_deref(), Some("79"));
    let err = api
        .patch_node("node-a", "76", &fence)
        .await
        .expect_err("the node changed");
    assert_eq!(err.kind, ErrorKind::Conflict, "{err}");
    drop(api);
    assert_eq!(
        server.finish().await,
        [
            format!("GET {NODE_A}"),
            format!("PATCH {NODE_A}"),
            format!("PATCH {NODE_A}"),
            format!("GET {NODE_A}"),
        ]
    );
    Ok(())
}

#[tokio::test]
async fn the_version_is_one_get_of_slash_version() -> TestResult {
    let answer = json!({
        "major": "1", "minor": "37", "emulationMajor": "1", "emulationMinor": "37",
        "minCompatibilityMajor": "1", "minCompatibilityMinor": "36",
        "gitVersion": "v1.37.2", "gitCommit": "", "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z", "goVersion": "go1.26.8", "compiler": "gc",
        "platform": "linux/amd64"
    });
    let (api, server) = serve(vec![get("/version").reply_json(200, &answer)]);
    let info = api.version().await?;
    assert_eq!(
        (
            info.git_version.as_str(),
            info.major.as_str(),
            info.minor.as_str()
        ),
        ("v1.37.2", "1", "37")
    );
    drop(api);
    assert_eq!(server.finish().await, ["GET /version"]);
    Ok(())
}

#[tokio::test]
async fn a_condition_is_one_strategic_merge_patch_of_the_status_conditions() -> TestResult {
    use k8s_openapi::api::core::v1::NodeCondition;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    let at: k8s_openapi::jiff::Timestamp = "2026-01-01T00:00:30Z".parse()?;
    let condition = NodeCondition {
        type_: "NodejobUpgrade".into(),
        status: "True".into(),
        reason: Some("Drain".into()),
        message: Some("upgrading to v1.38.0: draining".into()),
        last_heartbeat_time: Some(Time(at)),
        last_transition_time: Some(Time(at)),
    };
    let mut answered = node("80", true);
    answered["status"]["conditions"] = json!([
        {"type": "Ready", "status": "True"},
        {"type": "NodejobUpgrade", "status": "True", "reason": "Drain"},
    ]);
    let (api, server) = serve(vec![
        strategic_patch(
            &format!("{NODE_A}/status"),
            json!({"metadata": {"resourceVersion": "79"}, "status": {"conditions": [{
                "type": "NodejobUpgrade",
                "status": "True",
                "reason": "Drain",
                "message": "upgrading to v1.38.0: draining",
                "lastHeartbeatTime": "2026-01-01T00:00:30Z",
                "lastTransitionTime": "2026-01-01T00:00:30Z",
            }]}}),
        )
        .reply_json(200, &answered),
        // A record beside the condition: in the same patch's metadata (the status subresource
        // keeps it), no precondition when none is given.
        strategic_patch(
            &format!("{NODE_A}/status"),
            json!({
                "metadata": {"annotations": {"stratum.ciq.com/a": "1", "stratum.ciq.com/b": null}},
                "status": {"conditions": []}
            }),
        )
        .reply_json(404, &status(404, "NotFound", "nodes \"node-a\" not found")),
    ]);
    let written = api
        .patch_node_conditions("node-a", Some("79"), &[], &[condition])
        .await?;
    let types: Vec<String> = (written.status.and_then(|s| s.conditions))
        .unwrap_or_default()
        .into_iter()
        .map(|c| c.type_)
        .collect();
    assert_eq!(types, ["Ready", "NodejobUpgrade"]);
    let records = [
        NodeChange::set_annotation("stratum.ciq.com/a", "1"),
        NodeChange::remove_annotation("stratum.ciq.com/b"),
    ];
    let missing = api
        .patch_node_conditions("node-a", None, &records, &[])
        .await;
    assert!(missing.is_err_and(|e| e.is_not_found()));
    // A change to the spec, which the status subresource would drop: refused, never sent.
    let cordon = api
        .patch_node_conditions("node-a", None, &[NodeChange::Cordon], &[])
        .await;
    assert!(cordon.is_err_and(|e| e.kind == ErrorKind::Invalid));
    drop(api);
    assert_eq!(
        server.finish().await,
        [
            format!("PATCH {NODE_A}/status"),
            format!("PATCH {NODE_A}/status")
        ]
    );
    Ok(())
}
