//! Scenarios of the node, pod, eviction and Lease verbs, of Events on Nodes, and of core's
//! algorithms over them (drain, the fenced Lease), generic over a [`Workloads`] backend. Expanded into tests by
//! [`conformance_nodes!`](crate::conformance_nodes).

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use nodejob_core::drain::{DrainOptions, Drained, EmptyDir, Skip, Unreplicated, drain};
use nodejob_core::lease::{Acquired, Claim, LeaseConfig, acquire, holder};
use nodejob_core::{
    Clock, DryRun, Error, EventType, Eviction, JobApi, LeaseApi, NodeApi, NodeChange, PodApi, Verb,
    node_event,
};

use crate::workloads::{
    APP_LABEL, Object, Workloads, bare_pod, budget, daemonset, deployment, mirror_pod,
    with_empty_dir,
};
use crate::{Backend, Ctx, Failure, ensure};

/// The name of every scenario of this module, in the order [`conformance_nodes!`](crate::conformance_nodes) expands
/// them: what a backend that cannot run them all accounts for, each it leaves out with a reason
/// (`nodejob-e2e/tests/real_node.rs`). `tests/lists.rs` keeps it equal to the macro's list.
pub const ALL: &[&str] = &[
    "cordon_and_uncordon_with_a_concurrent_writer",
    "a_no_schedule_taint_is_added_beside_anothers_once_and_removed_by_key",
    "nodes_are_listed_by_label",
    "every_node_is_listed_then_watched_from_the_lists_version",
    "drain_waits_out_a_budget_that_releases",
    "drain_fails_at_its_timeout_naming_the_budget",
    "daemonset_and_mirror_pods_stay",
    "bare_pod_is_refused_unless_forced",
    "empty_dir_pod_is_refused_unless_allowed",
    "pod_terminating_with_a_long_grace_period",
    "dry_run_eviction_changes_nothing",
    "lease_is_acquired_renewed_and_released",
    "lease_held_by_another_is_refused",
    "expired_lease_is_taken_over_and_the_loser_stops",
    "node_event_is_created_and_found_by_the_node_name",
    "node_event_in_another_namespace_is_invalid",
    "event_in_a_missing_namespace_is_refused",
    "version_names_the_servers_release",
    "a_node_condition_merges_by_type_and_outlives_the_kubelets_posts",
];

/// The annotation a driver writes with its cordon.
const CORDONED_BY: &str = "stratum.ciq.com/cordoned-by";
/// A label set and removed by a patch, beside the annotation.
const QUARANTINED_BY: &str = "stratum.ciq.com/quarantined-by";

/// How long a scenario waits for workloads to settle.
const SETTLE: Duration = Duration::from_secs(120);

fn unschedulable(node: &Node) -> bool {
    node.spec
        .as_ref()
        .and_then(|s| s.unschedulable)
        .unwrap_or(false)
}

fn annotation<'a>(node: &'a Node, key: &str) -> Option<&'a str> {
    node.metadata
        .annotations
        .as_ref()?
        .get(key)
        .map(String::as_str)
}

fn rv(node: &Node) -> String {
    node.metadata.resource_version.clone().unwrap_or_default()
}

fn app_of(pod: &Pod) -> Option<&str> {
    pod.metadata
        .labels
        .as_ref()?
        .get(APP_LABEL)
        .map(String::as_str)
}

fn pod_ready(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_none()
        && pod
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// The live Pods of workload `app` on `node`.
async fn pods_of<B: Workloads>(ctx: &Ctx<B>, node: &str, app: &str) -> Result<Vec<Pod>, Failure> {
    Ok(ctx
        .api
        .inner()
        .list_node_pods(node)
        .await?
        .into_iter()
        .filter(|p| app_of(p) == Some(app))
        .collect())
}

/// Waits until `want(ready pods of app per node)` holds, re-reading as the backend's time
/// passes (each look is a LIST per node; the bound is [`SETTLE`]).
async fn wait_pods<B: Workloads>(
    ctx: &Ctx<B>,
    app: &str,
    what: &str,
    want: impl Fn(&[usize]) -> bool,
) -> Result<(), Failure> {
    let api = ctx.api.inner();
    let deadline = api.now() + SETTLE;
    let nodes = ctx.backend.nodes();
    loop {
        let mut ready = Vec::new();
        for node in &nodes {
            let pods = pods_of(ctx, node, app).await?;
            ready.push(pods.iter().filter(|p| pod_ready(p)).count());
        }
        if want(&ready) {
            return Ok(());
        }
        ensure!(
            api.now() < deadline,
            "workload {app}: {what} not reached after {SETTLE:?}; ready pods per node {nodes:?}: {ready:?}"
        );
        api.sleep(Duration::from_millis(250)).await;
    }
}

/// Patches `node` with `changes` from a fresh read (an administrator's write, below the
/// interposer).
async fn patch<B: Workloads>(
    ctx: &Ctx<B>,
    node: &str,
    changes: &[NodeChange],
) -> Result<Node, Failure> {
    let api = ctx.api.inner();
    let seen = api.get_node(node).await?;
    Ok(api.patch_node(node, &rv(&seen), changes).await?)
}

/// Runs Deployment `name` with `replicas` Pods, all on the scenario's first node (the others
/// are cordoned while it starts, then uncordoned), and a budget over it with `min_available`
/// when given. Answers once every replica is Ready there.
async fn deploy_on_first_node<B: Workloads>(
    ctx: &Ctx<B>,
    name: &str,
    replicas: i32,
    min_available: Option<i32>,
    empty_dir: bool,
) -> Result<(), Failure> {
    let nodes = ctx.backend.nodes();
    for other in &nodes[1..] {
        patch(ctx, other, &[NodeChange::Cordon]).await?;
    }
    let mut d = deployment(&ctx.namespace, name, replicas, &ctx.backend.node_label());
    if empty_dir {
        d = with_empty_dir(d);
    }
    ctx.backend.create(Object::Deployment(Box::new(d))).await?;
    if let Some(min) = min_available {
        let b = budget(&ctx.namespace, name, name, min);
        ctx.backend.create(Object::Budget(Box::new(b))).await?;
    }
    let want = usize::try_from(replicas).unwrap_or(0);
    wait_pods(ctx, name, "every replica Ready on the first node", |r| {
        r[0] == want
    })
    .await?;
    for other in &nodes[1..] {
        patch(ctx, other, &[NodeChange::Uncordon]).await?;
    }
    Ok(())
}

/// Drains `node` with `options`, its progress notes dropped.
async fn quiet<B: Workloads>(
    ctx: &Ctx<B>,
    node: &str,
    options: &DrainOptions,
) -> Result<Drained, Error> {
    drain(
        ctx.api.as_ref(),
        node,
        options,
        &|_: &nodejob_core::Note| {},
    )
    .await
}

/// The pods a drain refused, checking that it refused before any eviction.
fn refused_before_any_eviction<B: Workloads>(
    ctx: &Ctx<B>,
    result: Result<Drained, Error>,
) -> Result<Vec<(String, String)>, Failure> {
    let Err(Error::DrainRefused { pods, .. }) = result else {
        return Err(Failure(format!("want a refusal, got {result:?}")));
    };
    ensure!(
        ctx.api.count(Verb::EvictPod) == 0,
        "evicted before refusing"
    );
    Ok(pods)
}

fn options(timeout: Duration) -> DrainOptions {
    DrainOptions {
        timeout,
        ..DrainOptions::default()
    }
}

/// A patch carrying a stale resourceVersion is refused with Conflict and changes nothing; after
/// a re-read it succeeds: cordon and its record in one write, then uncordon and remove it.
pub async fn cordon_and_uncordon_with_a_concurrent_writer<B: Workloads>(
    backend: Arc<B>,
) -> Result<(), Failure> {
    let ctx = Ctx::new(backend);
    let api = &ctx.api;
    let node = ctx.node.clone();
    let seen = api.get_node(&node).await?;
    // Another actor writes the node between our read and our patch.
    patch(
        &ctx,
        &node,
        &[NodeChange::set_annotation("nodejob.test/other", "1")],
    )
    .await?;
    let ours = [
        NodeChange::Cordon,
        NodeChange::set_annotation(CORDONED_BY, "conformance"),
        NodeChange::set_label(QUARANTINED_BY, "conformance"),
    ];
    let refused = api.patch_node(&node, &rv(&seen), &ours).await;
    ensure!(
        refused.as_ref().is_err_and(|e| e.is_conflict()),
        "a patch at a stale resourceVersion must be a Conflict, got {refused:?}"
    );
    let after = api.get_node(&node).await?;
    ensure!(
        !unschedulable(&after) && annotation(&after, CORDONED_BY).is_none(),
        "a refused patch changed the node: {:?}",
        after.spec
    );
    let cordoned = api.patch_node(&node, &rv(&after), &ours).await?;
    ensure!(
        unschedulable(&cordoned),
        "cordon did not set spec.unschedulable"
    );
    ensure!(
        annotation(&cordoned, CORDONED_BY) == Some("conformance")
            && annotation(&cordoned, "nodejob.test/other") == Some("1"),
        "the patch must set ours and keep the other actor's annotation: {:?}",
        cordoned.metadata.annotations
    );
    let labels =
        |n: &k8s_openapi::api::core::v1::Node| n.metadata.labels.clone().unwrap_or_default();
    ensure!(
        labels(&cordoned).get(QUARANTINED_BY).map(String::as_str) == Some("conformance")
            && labels(&cordoned).len() == labels(&after).len() + 1,
        "the patch must set our label and keep the others: {:?}",
        cordoned.metadata.labels
    );
    let undone = [
        NodeChange::Uncordon,
        NodeChange::remove_annotation(CORDONED_BY),
        NodeChange::remove_label(QUARANTINED_BY),
    ];
    let back = api.patch_node(&node, &rv(&cordoned), &undone).await?;
    ensure!(
        !unschedulable(&back),
        "uncordon left the node unschedulable"
    );
    ensure!(
        annotation(&back, CORDONED_BY).is_none(),
        "the annotation was not removed"
    );
    ensure!(
        labels(&back) == labels(&after),
        "the label was not removed, or another went with it: {:?}",
        back.metadata.labels
    );
    let missing = api
        .patch_node("nodejob-no-such-node", "1", &[NodeChange::Cordon])
        .await;
    ensure!(
        missing.as_ref().is_err_and(|e| e.is_not_found()),
        "patching a missing node must be NotFound, got {missing:?}"
    );
    Ok(())
}

/// The keys of `node`'s `NoSchedule` taints, in order.
fn no_schedule_taints(node: &Node) -> Vec<String> {
    (node.spec.as_ref().and_then(|s| s.taints.as_ref()))
        .into_iter()
        .flatten()
        .filter(|t| t.effect == nodejob_core::NO_SCHEDULE)
        .map(|t| t.key.clone())
        .collect()
}

/// `spec.taints` is an atomic list, replaced whole by a patch: a `NoSchedule` taint is added
/// beside another actor's (never in place of it), once however often it is asked for, under
/// the same resourceVersion precondition as any change (a stale one is a Conflict that
/// changes nothing), and removed by its key alone, the other's left.
pub async fn a_no_schedule_taint_is_added_beside_anothers_once_and_removed_by_key<B: Workloads>(
    backend: Arc<B>,
) -> Result<(), Failure> {
    let ctx = Ctx::new(backend);
    let api = &ctx.api;
    let node = ctx.node.clone();
    let (theirs, ours) = ("nodejob.test/other", "stratum.ciq.com/upgrade");
    let seen = api.get_node(&node).await?;
    // Another actor taints the node between our read and our patch.
    let tainted = patch(
        &ctx,
        &node,
        &[NodeChange::TaintNoSchedule { key: theirs.into() }],
    )
    .await?;
    ensure!(
        no_schedule_taints(&tainted) == [theirs],
        "the other's taint: {:?}",
        tainted.spec
    );
    let fence = [
        NodeChange::Cordon,
        NodeChange::TaintNoSchedule { key: ours.into() },
    ];
    let refused = api.patch_node(&node, &rv(&seen), &fence).await;
    ensure!(
        refused.as_ref().is_err_and(|e| e.is_conflict()),
        "a taint at a stale resourceVersion must be a Conflict, got {refused:?}"
    );
    let after = api.get_node(&node).await?;
    ensure!(
        no_schedule_taints(&after) == [theirs] && !unschedulable(&after),
        "a refused patch changed the node: {:?}",
        after.spec
    );
    let fenced = api.patch_node(&node, &rv(&after), &fence).await?;
    ensure!(
        no_schedule_taints(&fenced) == [theirs, ours] && unschedulable(&fenced),
        "ours must be added beside theirs, with the cordon: {:?}",
        fenced.spec
    );
    let again = api.patch_node(&node, &rv(&fenced), &fence[1..]).await?;
    ensure!(
        no_schedule_taints(&again) == [theirs, ours],
        "a taint asked for again must be there once: {:?}",
        again.spec
    );
    let lifted = [
        NodeChange::Uncordon,
        NodeChange::Untaint { key: ours.into() },
    ];
    let back = api.patch_node(&node, &rv(&again), &lifted).await?;
    ensure!(
        no_schedule_taints(&back) == [theirs] && !unschedulable(&back),
        "ours must go by its key alone, theirs left: {:?}",
        back.spec
    );
    let clean = api
        .patch_node(
            &node,
            &rv(&back),
            &[NodeChange::Untaint { key: theirs.into() }],
        )
        .await?;
    ensure!(
        clean
            .spec
            .as_ref()
            .and_then(|s| s.taints.as_ref())
            .is_none_or(Vec::is_empty),
        "the last taint removed leaves none: {:?}",
        clean.spec
    );
    Ok(())
}

/// Nodes are listed by label selector.
pub async fn nodes_are_listed_by_label<B: Workloads>(backend: Arc<B>) -> Result<(), Failure> {
    let ctx = Ctx::new(backend);
    let (key, value) = ctx.backend.node_label();
    let listed = ctx.api.list_nodes(&format!("{key}={value}")).await?;
    let mut names: Vec<String> = listed
        .iter()
        .filter_map(|n| n.metadata.name.clone())
        .collect();
    names.sort();
    let mut want = ctx.backend.nodes();
    want.sort();
    ensure!(names == want, "listed {names:?}, want exactly {want:?}");
    Ok(())
}

/// Every node is listed with the list's resourceVersion, and a watch of every node from it
/// delivers each later change once, in order, resuming from the resourceVersion it answers (a
/// reflector's list-then-watch): an annotation written twice is seen as 1 then 2, never 1
/// again; a zero timeout answers at once.
pub async fn every_node_is_listed_then_watched_from_the_lists_version<B: Workloads>(
    backend: Arc<B>,
) -> Result<(), Failure> {
    const KEY: &str = "nodejob.test/watched";
    let ctx = Ctx::new(backend);
    let api = &ctx.api;
    let node = ctx.node.clone();
    let listed = api.list_nodes_at().await?;
    let names: Vec<&str> = (listed.nodes.iter())
        .filter_map(|n| n.metadata.name.as_deref())
        .collect();
    ensure!(
        names.contains(&node.as_str()) && names.is_sorted(),
        "the list must hold {node}, in name order: {names:?}"
    );
    ensure!(
        !listed.resource_version.is_empty(),
        "a list answers its resourceVersion"
    );
    // Other writers (a kubelet's status) may change nodes too: read on until ours shows.
    let mut since = listed.resource_version;
    let mut seen: Vec<String> = Vec::new();
    for value in ["1", "2"] {
        patch(&ctx, &node, &[NodeChange::set_annotation(KEY, value)]).await?;
        let deadline = api.now() + SETTLE;
        while seen.last().map(String::as_str) != Some(value) {
            ensure!(
                api.now() < deadline,
                "no change with {KEY}={value} on {node} after {SETTLE:?}; seen {seen:?}"
            );
            let answer = api.wait_nodes(&since, Duration::from_secs(10)).await?;
            ensure!(
                !answer.resource_version.is_empty(),
                "a watch answers where to resume"
            );
            since = answer.resource_version;
            for change in answer.changes {
                let nodejob_core::Change::Applied(n) = change else {
                    continue;
                };
                let ours = n.metadata.name.as_deref() == Some(node.as_str());
                match annotation(&n, KEY) {
                    // A change of ours, or a later one of the node carrying it along.
                    Some(v) if ours && seen.last().map(String::as_str) != Some(v) => {
                        seen.push(v.to_string());
                    }
                    _ => {}
                }
            }
        }
    }
    ensure!(seen == ["1", "2"], "each change once, in order: {seen:?}");
    // Caught up: a zero timeout answers at once, from where it was asked or later.
    let now = api.wait_nodes(&since, Duration::ZERO).await?;
    ensure!(
        !now.resource_version.is_empty(),
        "a zero-timeout watch answers where to resume"
    );
    patch(&ctx, &node, &[NodeChange::remove_annotation(KEY)]).await?;
    Ok(())
}

/// A drain of a node running a Deployment behind a budget that allows one disruption: the
/// second eviction is blocked (429) until a replacement is Ready elsewhere, then proceeds;
/// every Pod ends up off the node.
pub async fn drain_waits_out_a_budget_that_releases<B: Workloads>(
    backend: Arc<B>,
) -> Result<(), Failure> {
    let ctx = Ctx::new(backend);
    let node = ctx.node.clone();
    deploy_on_first_node(&ctx, "web", 3, Some(2), false).await?;
    patch(&ctx, &node, &[NodeChange::Cordon]).await?;
    let notes = ctx.notes.clone();
    let sink = move |n: &nodejob_core::Note| {
        notes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(n.clone())
    };
    let drained = drain(ctx.api.as_ref(), &node, &options(SETTLE), &sink).await?;
    ensure!(
        drained.evicted.len() == 3,
        "every replica must be evicted: {drained:?}"
    );
    let evictions = ctx.api.count(Verb::EvictPod);
    ensure!(
        evictions > 3,
        "the budget allows one disruption at a time, so some eviction must have been blocked and retried; {evictions} evictions"
    );
    ensure!(
        ctx.said("blocked"),
        "a blocked eviction must be reported as progress"
    );
    ensure!(
        pods_of(&ctx, &node, "web").await?.is_empty(),
        "pods of web are still on the drained node"
    );
    wait_pods(&ctx, "web", "3 replicas Ready off the drained node", |r| {
        r[0] == 0 && r.iter().sum::<usize>() == 3
    })
    .await
}

/// A budget that never releases: the drain fails at its timeout naming the budget and the Pods
/// left, and nothing is evicted after it gave up.
pub async fn drain_fails_at_its_timeout_naming_the_budget<B: Workloads>(
    backend: Arc<B>,
) -> Result<(), Failure> {
    let ctx = Ctx::new(backend);
    let node = ctx.node.clone();
    deploy_on_first_node(&ctx, "strict", 2, Some(2), false).await?;
    let before: Vec<Option<String>> = pods_of(&ctx, &node, "strict")
        .await?
        .into_iter()
        .map(|p| p.metadata.uid)
        .collect();
    patch(&ctx, &node, &[NodeChange::Cordon]).await?;
    // A dry run says at once what the budget would block, and waits for nothing.
    let dry = DrainOptions {
        dry_run: DryRun::All,
        ..options(Duration::from_secs(600))
    };
    let started = ctx.api.now();
    let preview = quiet(&ctx, &node, &dry).await?;
    ensure!(
        preview.evicted.is_empty()
            && preview.blocked.len() == 2
            && preview
                .blocked
                .iter()
                .all(|(_, why)| why.contains("strict")),
        "a dry run reports both pods blocked by the budget: {preview:?}"
    );
    ensure!(
        ctx.api.now() - started < Duration::from_secs(30),
        "a dry run does not wait for a budget to release"
    );
    let timeout = Duration::from_secs(15);
    let result = quiet(&ctx, &node, &options(timeout)).await;
    let gave_up = ctx.api.now();
    let Err(Error::DrainTimeout {
        blocked,
        pods_left,
        budgets,
        ..
    }) = &result
    else {
        return Err(Failure(format!("want a drain timeout, got {result:?}")));
    };
    let why = blocked.clone().unwrap_or_default();
    ensure!(
        why.contains("strict"),
        "the timeout must name the budget that blocked: {why:?}"
    );
    ensure!(
        budgets.len() == 1 && budgets[0].ends_with("/strict"),
        "the timeout must list the budget that blocked, by namespace/name: {budgets:?}"
    );
    ensure!(pods_left.len() == 2, "both pods are left: {pods_left:?}");
    // Let the backend's time pass: nothing of the drain goes on behind the error.
    ctx.api.inner().sleep(Duration::from_secs(5)).await;
    let late: Vec<_> = ctx
        .api
        .calls()
        .into_iter()
        .filter(|c| c.verb == Verb::EvictPod && c.at > gave_up)
        .collect();
    ensure!(
        late.is_empty(),
        "evictions after the drain gave up: {late:?}"
    );
    let after: Vec<Option<String>> = pods_of(&ctx, &node, "strict")
        .await?
        .into_iter()
        .map(|p| p.metadata.uid)
        .collect();
    ensure!(
        after == before,
        "the pods must be untouched: {before:?} -> {after:?}"
    );
    Ok(())
}

/// DaemonSet and mirror Pods are left in place; the drain evicts nothing.
pub async fn daemonset_and_mirror_pods_stay<B: Workloads>(backend: Arc<B>) -> Result<(), Failure> {
    let ctx = Ctx::new(backend);
    let node = ctx.node.clone();
    let ds = daemonset(&ctx.namespace, "agentd", &ctx.backend.node_label());
    ctx.backend.create(Object::DaemonSet(Box::new(ds))).await?;
    let mirror = mirror_pod(&ctx.namespace, "static-web", &node);
    ctx.backend.create(Object::Pod(Box::new(mirror))).await?;
    wait_pods(&ctx, "agentd", "a DaemonSet pod Ready on every node", |r| {
        r.iter().all(|n| *n == 1)
    })
    .await?;
    patch(&ctx, &node, &[NodeChange::Cordon]).await?;
    let drained = quiet(&ctx, &node, &options(SETTLE)).await?;
    ensure!(drained.evicted.is_empty(), "nothing to evict: {drained:?}");
    let skipped: Vec<Skip> = drained.skipped.iter().map(|(_, s)| *s).collect();
    ensure!(
        skipped.contains(&Skip::DaemonSet) && skipped.contains(&Skip::Mirror),
        "the DaemonSet and mirror pods must be skipped: {drained:?}"
    );
    ensure!(ctx.api.count(Verb::EvictPod) == 0, "an eviction was sent");
    ensure!(
        pods_of(&ctx, &node, "agentd").await?.len() == 1
            && pods_of(&ctx, &node, "static-web").await?.len() == 1,
        "the skipped pods must still be on the node"
    );
    Ok(())
}

/// A Pod with no controller is refused, naming it, before any eviction; forced, it is evicted
/// and gone.
pub async fn bare_pod_is_refused_unless_forced<B: Workloads>(
    backend: Arc<B>,
) -> Result<(), Failure> {
    let ctx = Ctx::new(backend);
    let node = ctx.node.clone();
    let pod = bare_pod(&ctx.namespace, "lonely", &node, 5);
    ctx.backend.create(Object::Pod(Box::new(pod))).await?;
    wait_pods(&ctx, "lonely", "the bare pod Ready", |r| r[0] == 1).await?;
    patch(&ctx, &node, &[NodeChange::Cordon]).await?;
    let refused = quiet(&ctx, &node, &options(SETTLE)).await;
    let lonely = format!("{}/lonely", ctx.namespace);
    let pods = refused_before_any_eviction(&ctx, refused)?;
    ensure!(
        pods.iter()
            .any(|(p, why)| *p == lonely && why.contains("no controller")),
        "the refusal must name the bare pod and why: {pods:?}"
    );
    let forced = DrainOptions {
        unreplicated: Unreplicated::Force,
        ..options(SETTLE)
    };
    let drained = quiet(&ctx, &node, &forced).await?;
    ensure!(
        drained.evicted == vec![lonely.clone()],
        "forced: {drained:?}"
    );
    let gone = ctx.api.inner().get_pod(&ctx.namespace, "lonely").await;
    ensure!(
        gone.as_ref().is_err_and(|e| e.is_not_found()),
        "the drain returns once the pod is gone, got {gone:?}"
    );
    Ok(())
}

/// A Pod with an emptyDir volume is refused unless deleting its data is allowed.
pub async fn empty_dir_pod_is_refused_unless_allowed<B: Workloads>(
    backend: Arc<B>,
) -> Result<(), Failure> {
    let ctx = Ctx::new(backend);
    let node = ctx.node.clone();
    deploy_on_first_node(&ctx, "scratch", 1, None, true).await?;
    patch(&ctx, &node, &[NodeChange::Cordon]).await?;
    let refused = quiet(&ctx, &node, &options(SETTLE)).await;
    let pods = refused_before_any_eviction(&ctx, refused)?;
    ensure!(
        pods.len() == 1 && pods[0].1.contains("emptyDir"),
        "the refusal must name the emptyDir pod: {pods:?}"
    );
    let allowed = DrainOptions {
        empty_dir: EmptyDir::Delete,
        ..options(SETTLE)
    };
    let drained = quiet(&ctx, &node, &allowed).await?;
    ensure!(drained.evicted.len() == 1, "allowed: {drained:?}");
    Ok(())
}

/// A Pod already terminating with a long grace period (ignoring SIGTERM) is waited for, bounded
/// by the drain's timeout, which names it; a skip timeout counts from the end of its grace
/// period (its `deletionTimestamp`), so it does not skip it before.
pub async fn pod_terminating_with_a_long_grace_period<B: Workloads>(
    backend: Arc<B>,
) -> Result<(), Failure> {
    let ctx = Ctx::new(backend);
    let node = ctx.node.clone();
    let mut pod = bare_pod(&ctx.namespace, "slow", &node, 600);
    // The container ignores SIGTERM: it runs until the grace period ends.
    pod.spec.as_mut().expect("a spec").containers[0].command =
        Some(vec!["sleep".into(), nodejob_fake::host::ignore_sigterm()]);
    ctx.backend.create(Object::Pod(Box::new(pod))).await?;
    wait_pods(&ctx, "slow", "the pod Ready", |r| r[0] == 1).await?;
    let api = ctx.api.inner();
    let seen = api.get_pod(&ctx.namespace, "slow").await?;
    let uid = seen.metadata.uid.clone().unwrap_or_default();
    let evicted = api
        .evict_pod(&ctx.namespace, "slow", &uid, None, DryRun::No)
        .await?;
    ensure!(
        evicted == Eviction::Evicted,
        "a bare pod with no budget is evicted: {evicted:?}"
    );
    patch(&ctx, &node, &[NodeChange::Cordon]).await?;
    let waited = quiet(
        &ctx,
        &node,
        &DrainOptions {
            unreplicated: Unreplicated::Force,
            ..options(Duration::from_secs(4))
        },
    )
    .await;
    let slow = format!("{}/slow", ctx.namespace);
    ensure!(
        matches!(&waited, Err(Error::DrainTimeout { pods_left, .. }) if pods_left.contains(&slow)),
        "a pod terminating for 600s outlasts a 4s drain, which names it: {waited:?}"
    );
    // Its deletionTimestamp is the end of its grace period, 600 s ahead: a skip timeout counts
    // from there, so it is not skipped yet either.
    let skipping = DrainOptions {
        unreplicated: Unreplicated::Force,
        skip_terminating_after: Some(Duration::from_secs(1)),
        ..options(Duration::from_secs(2))
    };
    let waited = quiet(&ctx, &node, &skipping).await;
    ensure!(
        matches!(&waited, Err(Error::DrainTimeout { pods_left, .. }) if pods_left.contains(&slow)),
        "within its grace period the pod is waited for, skip timeout or not: {waited:?}"
    );
    let still = api.get_pod(&ctx.namespace, "slow").await?;
    ensure!(
        still.metadata.uid.as_deref() == Some(uid.as_str()),
        "the pod is still terminating"
    );
    Ok(())
}

/// A dry-run eviction answers as a real one would and changes nothing: neither the Pod nor the
/// budget's allowance.
pub async fn dry_run_eviction_changes_nothing<B: Workloads>(
    backend: Arc<B>,
) -> Result<(), Failure> {
    let ctx = Ctx::new(backend);
    let node = ctx.node.clone();
    deploy_on_first_node(&ctx, "dry", 2, Some(1), false).await?;
    let pods = pods_of(&ctx, &node, "dry").await?;
    ensure!(pods.len() == 2, "two replicas: {}", pods.len());
    let api = &ctx.api;
    // Both replicas Ready is not yet the budget's status saying so: the disruption controller
    // counts them a moment later, and until then the eviction subresource refuses (429). The
    // first dry run is asked again until the budget allows it, at most SETTLE.
    let deadline = api.now() + SETTLE;
    for (i, pod) in pods.iter().enumerate() {
        let name = pod.metadata.name.as_deref().unwrap_or_default();
        let uid = pod.metadata.uid.as_deref().unwrap_or_default();
        // Each would be allowed alone: the budget allows one disruption, and a dry run uses
        // none of it (the second is asked once).
        let answer = loop {
            let answer = api
                .evict_pod(&ctx.namespace, name, uid, None, DryRun::All)
                .await?;
            if i > 0 || answer == Eviction::Evicted || api.now() >= deadline {
                break answer;
            }
            api.sleep(Duration::from_millis(250)).await;
        };
        ensure!(answer == Eviction::Evicted, "dry run of {name}: {answer:?}");
    }
    let after = pods_of(&ctx, &node, "dry").await?;
    for (a, b) in pods.iter().zip(&after) {
        ensure!(
            a.metadata.uid == b.metadata.uid && b.metadata.deletion_timestamp.is_none(),
            "a dry run touched pod {:?}",
            a.metadata.name
        );
    }
    let first = &pods[0];
    let name = first.metadata.name.as_deref().unwrap_or_default();
    let stale = api
        .evict_pod(&ctx.namespace, name, "not-its-uid", None, DryRun::All)
        .await;
    ensure!(
        stale.as_ref().is_err_and(|e| e.is_conflict()),
        "an eviction whose uid precondition fails is a Conflict: {stale:?}"
    );
    let missing = api
        .evict_pod(&ctx.namespace, "no-such-pod", "x", None, DryRun::No)
        .await?;
    ensure!(
        missing == Eviction::Gone,
        "evicting a missing pod: {missing:?}"
    );
    let real = api
        .evict_pod(
            &ctx.namespace,
            name,
            first.metadata.uid.as_deref().unwrap_or_default(),
            None,
            DryRun::No,
        )
        .await?;
    ensure!(real == Eviction::Evicted, "the real eviction: {real:?}");
    let second = &pods[1];
    let blocked = api
        .evict_pod(
            &ctx.namespace,
            second.metadata.name.as_deref().unwrap_or_default(),
            second.metadata.uid.as_deref().unwrap_or_default(),
            None,
            DryRun::All,
        )
        .await?;
    ensure!(
        matches!(&blocked, Eviction::Blocked { message } if message.contains("dry")),
        "right after a real eviction the budget allows none, and says which: {blocked:?}"
    );
    Ok(())
}

fn lease_config<B: Workloads>(ctx: &Ctx<B>, identity: &str, seconds: u64) -> LeaseConfig {
    LeaseConfig {
        namespace: ctx.namespace.clone(),
        name: "nodejob".into(),
        identity: identity.into(),
        duration: Duration::from_secs(seconds),
    }
}

fn claim(target: &str) -> Claim {
    Claim {
        operation: "upgrade".into(),
        target: target.into(),
    }
}

/// Acquire (creating the Lease), check and renew, release; then acquire again at a new epoch.
pub async fn lease_is_acquired_renewed_and_released<B: Workloads>(
    backend: Arc<B>,
) -> Result<(), Failure> {
    let ctx = Ctx::new(backend);
    let api = ctx.api.as_ref();
    let a = lease_config(&ctx, "driver-a", 30);
    let (mut held, how) = acquire(api, &a, &claim("v1.38.0")).await?;
    ensure!(
        how == Acquired::Free && held.epoch() == 0,
        "fresh: {how:?} epoch {}",
        held.epoch()
    );
    let read = api.get_lease(&ctx.namespace, "nodejob").await?;
    let h = holder(&read).ok_or_else(|| Failure("the lease names no holder".into()))?;
    ensure!(
        h.identity == "driver-a" && h.claim == claim("v1.38.0"),
        "the lease records who holds it and what for: {h:?}"
    );
    held.check(api).await?;
    // A renewal at the same instant writes nothing new (the apiserver skips a no-op update, so
    // the resourceVersion would not move): renew a second later.
    api.sleep(Duration::from_secs(1)).await;
    let before = held.lease().metadata.resource_version.clone();
    held.renew(api).await?;
    ensure!(
        held.lease().metadata.resource_version != before,
        "a renewal writes the lease"
    );
    held.release(api).await?;
    let released = api.get_lease(&ctx.namespace, "nodejob").await?;
    ensure!(holder(&released).is_none(), "released: nobody holds it");
    let (again, how) = acquire(api, &a, &claim("v1.38.0")).await?;
    ensure!(
        how == Acquired::Free && again.epoch() == 1,
        "a released lease is free, and taking it raises the epoch: {how:?} epoch {}",
        again.epoch()
    );
    Ok(())
}

/// A live Lease held by another is refused, naming its holder and what for.
pub async fn lease_held_by_another_is_refused<B: Workloads>(
    backend: Arc<B>,
) -> Result<(), Failure> {
    let ctx = Ctx::new(backend);
    let api = ctx.api.as_ref();
    let (_held, _) = acquire(api, &lease_config(&ctx, "driver-a", 60), &claim("v1.38.0")).await?;
    let refused = acquire(api, &lease_config(&ctx, "driver-b", 60), &claim("v1.39.0")).await;
    let Err(e @ Error::LeaseHeld { .. }) = &refused else {
        return Err(Failure(format!("want LeaseHeld, got {refused:?}")));
    };
    let text = e.to_string();
    ensure!(
        text.contains("driver-a") && text.contains("upgrade v1.38.0"),
        "the refusal names the holder and its operation: {text}"
    );
    Ok(())
}

/// An expired Lease is taken over (the previous holder reported, the epoch raised), and the
/// holder that lost it is stopped at its next check.
pub async fn expired_lease_is_taken_over_and_the_loser_stops<B: Workloads>(
    backend: Arc<B>,
) -> Result<(), Failure> {
    let ctx = Ctx::new(backend);
    let api = ctx.api.as_ref();
    let (mut a, _) = acquire(api, &lease_config(&ctx, "driver-a", 2), &claim("v1.38.0")).await?;
    api.sleep(Duration::from_secs(3)).await;
    let (b, how) = acquire(api, &lease_config(&ctx, "driver-b", 60), &claim("v1.39.0")).await?;
    ensure!(
        matches!(&how, Acquired::TakenOver { previous } if previous.identity == "driver-a"),
        "the takeover reports the previous holder: {how:?}"
    );
    ensure!(
        b.epoch() == a.epoch() + 1,
        "the epoch is raised: {} -> {}",
        a.epoch(),
        b.epoch()
    );
    let writes_before = ctx.api.count(Verb::ReplaceLease);
    let stopped = a.check(api).await;
    ensure!(
        matches!(&stopped, Err(Error::LeaseLost { now, .. }) if now.contains("driver-b")),
        "the old holder is stopped, told who holds it now: {stopped:?}"
    );
    // Its renewal was due: that renewal is its read of the Lease, a PUT under the
    // resourceVersion it last knew, refused with a Conflict. Nothing of it lands: the Lease is
    // still exactly as the new holder wrote it.
    ensure!(
        ctx.api.count(Verb::ReplaceLease) <= writes_before + 1,
        "the old holder wrote the lease after losing it, more than the renewal refused"
    );
    let now = api.get_lease(&ctx.namespace, "nodejob").await?;
    ensure!(
        now.metadata.resource_version == b.lease().metadata.resource_version
            && holder(&now).is_some_and(|h| h.identity == "driver-b" && h.epoch == b.epoch()),
        "the old holder's write landed: {now:?}"
    );
    Ok(())
}

/// Where the drivers record their Events on Nodes: their own namespace in `deploy/rbac.yaml`,
/// and one of the two where the apiserver takes an Event with an `eventTime` about an object
/// without a namespace (`legacyValidateEvent`).
const NODE_EVENTS_NAMESPACE: &str = "kube-system";

/// A step Event on the scenario's node, as a driver records it.
fn step<B: Backend>(ctx: &Ctx<B>, namespace: &str) -> k8s_openapi::api::core::v1::Event {
    node_event(
        namespace,
        &ctx.node,
        EventType::Normal,
        "NodejobConformanceStep",
        "a step of the conformance suite",
        "nodejob-conformance",
        ctx.api.wall_time(),
    )
}

/// A step Event on the node, created where the drivers create theirs, is answered as stored:
/// named by the apiserver from `<node>.`, with a UID, its `involvedObject` as sent. It is found
/// again by the node's name as its involved UID, as `kubectl describe node` finds it.
pub async fn node_event_is_created_and_found_by_the_node_name<B: Backend>(
    backend: Arc<B>,
) -> Result<(), Failure> {
    let ctx = Ctx::new(backend);
    let api = ctx.api.as_ref();
    let sent = step(&ctx, NODE_EVENTS_NAMESPACE);
    let created = api.create_event(&sent).await?;
    let name = created.metadata.name.clone().unwrap_or_default();
    let prefix = format!("{}.", ctx.node);
    ensure!(
        name.len() > prefix.len() && name.starts_with(&prefix),
        "the server names the Event from its generateName {prefix:?}: {name:?}"
    );
    ensure!(
        created
            .metadata
            .uid
            .as_deref()
            .is_some_and(|u| !u.is_empty()),
        "the Event has a UID: {:?}",
        created.metadata
    );
    ensure!(
        created.involved_object == sent.involved_object,
        "involvedObject kept: sent {:?}, stored {:?}",
        sent.involved_object,
        created.involved_object
    );
    ensure!(
        (
            created.reason.as_deref(),
            created.type_.as_deref(),
            &created.event_time
        ) == (
            sent.reason.as_deref(),
            sent.type_.as_deref(),
            &sent.event_time
        ) && created.message == sent.message,
        "reason, type, message and eventTime kept: {created:?}"
    );
    ensure!(
        ctx.api.count(Verb::CreateEvent) == 1,
        "one create: {:?}",
        ctx.api.calls()
    );
    let found = api.list_events(NODE_EVENTS_NAMESPACE, &ctx.node).await?;
    ensure!(
        found.iter().any(|e| e.metadata.uid == created.metadata.uid),
        "listed by the node's name: {found:?}"
    );
    ensure!(
        found
            .iter()
            .all(|e| e.involved_object.uid.as_deref() == Some(ctx.node.as_str())),
        "only Events whose involved UID is the node's name: {found:?}"
    );
    Ok(())
}

/// An Event about a Node (with an `eventTime`) outside `default` and `kube-system` is refused
/// as Invalid, naming `involvedObject.namespace`: the rule that ties the drivers' Events to
/// `kube-system`.
pub async fn node_event_in_another_namespace_is_invalid<B: Backend>(
    backend: Arc<B>,
) -> Result<(), Failure> {
    let ctx = Ctx::new(backend);
    let refused = ctx.api.create_event(&step(&ctx, &ctx.namespace)).await;
    ensure!(
        refused
            .as_ref()
            .is_err_and(|e| e.kind == nodejob_core::ErrorKind::Invalid
                && e.message.contains("involvedObject.namespace")),
        "in namespace {}: {refused:?}",
        ctx.namespace
    );
    let found = ctx.api.list_events(&ctx.namespace, &ctx.node).await?;
    ensure!(found.is_empty(), "nothing stored: {found:?}");
    Ok(())
}

/// An Event in a namespace that does not exist is refused before any check of the Event: 404
/// (namespace lifecycle admission) for a caller that may create Events in every namespace, as
/// on the in-memory cluster; 403 for one granted Events per namespace, as `deploy/rbac.yaml`'s
/// Role grants them, since authorization runs before admission. Never created, never Invalid.
pub async fn event_in_a_missing_namespace_is_refused<B: Backend>(
    backend: Arc<B>,
) -> Result<(), Failure> {
    let ctx = Ctx::new(backend);
    let missing = format!("{}-missing", ctx.namespace);
    let mut event = step(&ctx, NODE_EVENTS_NAMESPACE);
    event.metadata.namespace = Some(missing.clone());
    let refused = ctx.api.create_event(&event).await;
    ensure!(
        refused
            .as_ref()
            .is_err_and(|e| e.is_not_found() || e.is_forbidden()),
        "in namespace {missing}: {refused:?}"
    );
    Ok(())
}

// ---- the apiserver's version (issue 22, the version-skew gate) ----

/// `GET /version` names the apiserver's release: a `gitVersion` of `vMAJOR.MINOR.PATCH` (a
/// build suffix allowed), and `major` and `minor` that agree with it (a provider's `minor` may
/// end in `+`, as GKE's `"30+"`). What the version-skew gate judges a kubelet against.
pub async fn version_names_the_servers_release<B: Backend>(backend: Arc<B>) -> Result<(), Failure> {
    let ctx = Ctx::new(backend);
    let info = ctx.api.version().await?;
    let v = info.git_version.trim_start_matches('v');
    let mut parts = v.splitn(3, '.');
    let (major, minor) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let patch: String = (parts.next().unwrap_or("").chars())
        .take_while(char::is_ascii_digit)
        .collect();
    ensure!(
        info.git_version.starts_with('v')
            && major.parse::<u64>().is_ok()
            && minor.parse::<u64>().is_ok()
            && !patch.is_empty(),
        "gitVersion {:?} is not vMAJOR.MINOR.PATCH",
        info.git_version
    );
    ensure!(
        info.major == major && info.minor.trim_end_matches('+') == minor,
        "major {:?} and minor {:?} disagree with gitVersion {:?}",
        info.major,
        info.minor,
        info.git_version
    );
    Ok(())
}

// ---- the drivers' node conditions (issue 22) ----

/// A condition of a type of its own, written through `nodes/status` as a strategic-merge patch
/// of the conditions: added beside the kubelet's, which stay; kept through the kubelet's own
/// status posts (on the fake, its kubelet model; on a real cluster, the node agent, as a
/// kubelet merges its conditions by type); replaced in place by the next write of its type,
/// alone, under the node's current resourceVersion (an older one: Conflict); NotFound on a
/// node that does not exist.
pub async fn a_node_condition_merges_by_type_and_outlives_the_kubelets_posts<B: Backend>(
    backend: Arc<B>,
) -> Result<(), Failure> {
    use k8s_openapi::api::core::v1::NodeCondition;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    const TYPE: &str = "NodejobConformance";
    let ctx = Ctx::new(backend);
    let (api, node) = (&ctx.api, ctx.node.clone());
    let types = |n: &Node| -> Vec<String> {
        (n.status.as_ref().and_then(|s| s.conditions.as_ref()))
            .into_iter()
            .flatten()
            .map(|c| c.type_.clone())
            .collect()
    };
    let ours = |n: &Node| -> Vec<NodeCondition> {
        (n.status.as_ref().and_then(|s| s.conditions.as_ref()))
            .into_iter()
            .flatten()
            .filter(|c| c.type_ == TYPE)
            .cloned()
            .collect()
    };
    // Times as the API keeps them: whole seconds.
    let now = || {
        Time(
            k8s_openapi::jiff::Timestamp::from_second(api.wall_time().as_second())
                .unwrap_or_default(),
        )
    };
    let before = api.get_node(&node).await?;
    let kubelets = types(&before);
    ensure!(
        kubelets.iter().any(|t| t == "Ready"),
        "the kubelet posts Ready: {kubelets:?}"
    );
    let first = NodeCondition {
        type_: TYPE.into(),
        status: "True".into(),
        reason: Some("Probing".into()),
        message: Some("a conformance probe".into()),
        last_heartbeat_time: Some(now()),
        last_transition_time: Some(now()),
    };
    let written = api
        .patch_node_conditions(&node, None, &[], std::slice::from_ref(&first))
        .await?;
    ensure!(
        ours(&written) == [first.clone()],
        "as written: {:?}",
        ours(&written)
    );
    // A strategic merge puts an item the list did not have first (`mergeSortedSlice`).
    let mut want = vec![TYPE.to_string()];
    want.extend(kubelets.iter().cloned());
    ensure!(
        types(&written) == want,
        "the kubelet's kept, in their order, ours before them: {:?}",
        types(&written)
    );
    // The kubelet posts its status twice (NotReady, then Ready): ours stays as it was.
    ctx.backend.set_node_ready(&node, false).await?;
    ctx.backend.set_node_ready(&node, true).await?;
    let posted = api.get_node(&node).await?;
    ensure!(
        ours(&posted) == [first.clone()],
        "after the kubelet's posts: {:?}",
        ours(&posted)
    );
    ensure!(nodejob_core::ready(&posted), "Ready again");
    // The next write of its type replaces it in place; every other condition is left alone.
    // Under a resourceVersion, only the node's current one is taken: an older one (the node
    // changed since: the kubelet's posts) is a Conflict, and nothing is written.
    let second = NodeCondition {
        status: "False".into(),
        reason: Some("Probed".into()),
        message: Some("probed".into()),
        ..first.clone()
    };
    let stale = api
        .patch_node_conditions(
            &node,
            Some(&rv(&before)),
            &[],
            std::slice::from_ref(&second),
        )
        .await;
    ensure!(
        stale.as_ref().is_err_and(|e| e.is_conflict()),
        "under the resourceVersion before the kubelet's posts: {stale:?}"
    );
    // Other writers (the agent's taints) may move the node on: read, then write under it.
    let mut rewritten = None;
    for _ in 0..5 {
        let current = api.get_node(&node).await?;
        let at = rv(&current);
        let sent = std::slice::from_ref(&second);
        match api.patch_node_conditions(&node, Some(&at), &[], sent).await {
            Ok(n) => {
                rewritten = Some((current, n));
                break;
            }
            Err(e) if e.is_conflict() => continue,
            Err(e) => return Err(e.into()),
        }
    }
    let Some((current, rewritten)) = rewritten else {
        return Err(Failure(
            "no write under the current resourceVersion in 5 tries".into(),
        ));
    };
    ensure!(
        ours(&rewritten) == [second],
        "rewritten: {:?}",
        ours(&rewritten)
    );
    ensure!(
        types(&rewritten) == types(&current),
        "the list as it was: {:?} then {:?}",
        types(&current),
        types(&rewritten)
    );
    let missing = api
        .patch_node_conditions(
            "nodejob-no-such-node",
            None,
            &[],
            std::slice::from_ref(&first),
        )
        .await;
    ensure!(
        missing.as_ref().is_err_and(|e| e.is_not_found()),
        "a missing node must be NotFound, got {missing:?}"
    );
    Ok(())
}
