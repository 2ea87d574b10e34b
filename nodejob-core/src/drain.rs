//! [`drain`]: evict the Pods of a node as `kubectl drain` does (kubectl's
//! `staging/src/k8s.io/kubectl/pkg/drain/`), and wait until they are gone.
//!
//! # Expected flow
//! 1. List the Pods bound to the node. Run kubectl's filters on each, in kubectl's order, the
//!    first that does not say "delete" deciding (`filters.go`, `makeFilters`):
//!    1. a Pod whose `deletionTimestamp` (the end of its grace period) passed longer ago than
//!       [`DrainOptions::skip_terminating_after`] is skipped (`skipDeletedFilter`);
//!    2. a DaemonSet Pod is skipped: its controller would recreate it on the node
//!       (`daemonSetFilter`, as with `--ignore-daemonsets`);
//!    3. a mirror Pod (annotation `kubernetes.io/config.mirror`) is skipped: the kubelet owns
//!       it (`mirrorPodFilter`);
//!    4. a Pod with an `emptyDir` volume is refused unless [`EmptyDir::Delete`]
//!       (`localStorageFilter`);
//!    5. a Pod with no controller is refused unless [`Unreplicated::Force`]
//!       (`unreplicatedFilter`).
//!
//!    A Pod that has already ended (Succeeded, Failed) passes filters 2, 4 and 5, as in kubectl.
//!
//!    One filter is nodejob's, not kubectl's, and goes first: the Pod of a node Job of
//!    nodejob's own (a Job's Pod carrying [`NODE_ANNOTATION`])
//!    that has ended is skipped. It runs nothing and holds nothing a reboot could hurt, and it
//!    is kept with its Job for its exit code and log (`kubectl logs job/…`); evicting it
//!    would delete them (kubectl would, and count it as evicted).
//!    Any refusal aborts **before the first eviction** with [`Error::DrainRefused`], listing
//!    every refused Pod and why.
//! 2. Evict each Pod (policy/v1 Eviction, its UID as a precondition). A Pod a budget protects
//!    ([`Eviction::Blocked`], 429) is tried again after a capped, jittered backoff, never in a
//!    tight loop (kubectl's default retry delay of 0 s, since kubernetes#133461, spins in the
//!    tools built on it). A Pod whose name now holds another UID is read again and put through
//!    the filters again.
//! 3. Wait until every evicted Pod is gone (by UID).
//!
//! The whole drain is bounded by [`DrainOptions::timeout`]; when it runs out,
//! [`Error::DrainTimeout`] names the budget that blocked and the Pods left, and nothing is
//! evicted after that.
//!
//! The caller cordons the node first (with [`NodeApi::patch_node`](crate::NodeApi::patch_node),
//! recording that it did): a drain neither cordons nor uncordons.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use sha2::{Digest, Sha256};

use crate::api::{DryRun, Eviction, PodApi};
use crate::error::{Action, ApiError, Error, ErrorKind, ObjectKind, Operation, Result, Target};
use crate::job::NODE_ANNOTATION;
use crate::runner::retrying;
use crate::spec::{Level, Note, Sink};
use crate::wait::wait_pod_gone;

/// What the apiserver says of a Pod that several PodDisruptionBudgets cover.
const SEVERAL_BUDGETS: &str = "more than one PodDisruptionBudget";

/// What the apiserver says when a budget's status lags its spec, or a not-Ready Pod's delete
/// conflicted.
const STILL_PROCESSED: &str = "is still being processed by the server";

/// The annotation the kubelet puts on a mirror Pod (`corev1.MirrorPodAnnotationKey`).
pub const MIRROR_ANNOTATION: &str = "kubernetes.io/config.mirror";

/// What to do with a Pod that has an `emptyDir` volume (its data is lost on eviction).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum EmptyDir {
    /// Refuse the drain (kubectl's default).
    #[default]
    Refuse,
    /// Evict it, losing the data (`--delete-emptydir-data`).
    Delete,
}

/// What to do with a Pod that no controller would recreate.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Unreplicated {
    /// Refuse the drain (kubectl's default).
    #[default]
    Refuse,
    /// Evict it: it is gone for good (`--force`).
    Force,
}

/// How to drain, as `kubectl drain`'s flags say it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DrainOptions {
    /// The grace period each Pod gets (`--grace-period`); `None`: the Pod's own.
    pub grace_period: Option<Duration>,
    /// The whole drain's bound (`--timeout`), waiting for evicted Pods to be gone included.
    pub timeout: Duration,
    /// Skip a Pod whose `deletionTimestamp` passed longer ago than this
    /// (`--skip-wait-for-delete-timeout`); `None`: wait for it like any other. A graceful
    /// deletion sets `deletionTimestamp` to the end of the grace period, so this skips Pods
    /// still there that long after they should have ended (a kubelet that is down).
    pub skip_terminating_after: Option<Duration>,
    /// Pods with `emptyDir` volumes.
    pub empty_dir: EmptyDir,
    /// Pods with no controller.
    pub unreplicated: Unreplicated,
    /// [`DryRun::All`]: every eviction is only checked by the apiserver; nothing is evicted and
    /// nothing waited for, and a Pod a budget blocks is reported in [`Drained::blocked`] rather
    /// than retried.
    pub dry_run: DryRun,
}

impl Default for DrainOptions {
    fn default() -> Self {
        DrainOptions {
            grace_period: None,
            timeout: Duration::from_secs(600),
            skip_terminating_after: None,
            empty_dir: EmptyDir::Refuse,
            unreplicated: Unreplicated::Refuse,
            dry_run: DryRun::No,
        }
    }
}

/// Why a Pod is left on the node.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Skip {
    /// Its grace period ended longer ago than [`DrainOptions::skip_terminating_after`].
    Terminating,
    /// Managed by a DaemonSet.
    DaemonSet,
    /// A mirror Pod of a static Pod.
    Mirror,
    /// The ended Pod of a node Job of nodejob's own, kept for its exit code and log.
    EndedNodeJob,
}

impl std::fmt::Display for Skip {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Skip::Terminating => "still terminating past its grace period and the skip timeout",
            Skip::DaemonSet => "DaemonSet-managed",
            Skip::Mirror => "mirror pod",
            Skip::EndedNodeJob => {
                "a node job of nodejob's that ended, kept for its exit code and log"
            }
        })
    }
}

/// Why a drain refuses a Pod (kubectl's messages).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Refusal {
    /// It has an `emptyDir` volume and [`EmptyDir::Refuse`].
    LocalStorage,
    /// No controller and [`Unreplicated::Refuse`].
    Unreplicated,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Refusal::LocalStorage => "has local storage (emptyDir): allow deleting emptyDir data",
            Refusal::Unreplicated => "declares no controller: force to evict it for good",
        })
    }
}

/// What the filters say of one Pod.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Verdict {
    /// Evict it.
    Evict,
    /// Leave it.
    Skip(Skip),
    /// Refuse the whole drain.
    Refuse(Refusal),
}

/// Whether `pod` has ended (phase Succeeded or Failed): it runs nothing a drain or a reboot
/// could hurt.
pub fn ended(pod: &Pod) -> bool {
    matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    )
}

/// kubectl drain's filters, in kubectl's order (see the [module docs](self)), at wall time
/// `now`.
pub fn verdict(pod: &Pod, options: &DrainOptions, now: Timestamp) -> Verdict {
    let meta = &pod.metadata;
    if let (Some(after), Some(deleted)) = (options.skip_terminating_after, &meta.deletion_timestamp)
    {
        let terminating = now.duration_since(deleted.0);
        if terminating.as_secs() > i64::try_from(after.as_secs()).unwrap_or(i64::MAX) {
            return Verdict::Skip(Skip::Terminating);
        }
    }
    let ended = ended(pod);
    let controller = meta
        .owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true));
    let ours = (meta.annotations.as_ref()).is_some_and(|a| a.contains_key(NODE_ANNOTATION));
    if ended && ours && controller.is_some_and(|c| c.kind == "Job") {
        return Verdict::Skip(Skip::EndedNodeJob);
    }
    if controller.is_some_and(|c| c.kind == "DaemonSet") && !ended {
        return Verdict::Skip(Skip::DaemonSet);
    }
    if meta
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(MIRROR_ANNOTATION))
    {
        return Verdict::Skip(Skip::Mirror);
    }
    let empty_dir = pod
        .spec
        .as_ref()
        .and_then(|s| s.volumes.as_ref())
        .is_some_and(|vs| vs.iter().any(|v| v.empty_dir.is_some()));
    if empty_dir && !ended && options.empty_dir == EmptyDir::Refuse {
        return Verdict::Refuse(Refusal::LocalStorage);
    }
    if controller.is_none() && !ended && options.unreplicated == Unreplicated::Refuse {
        return Verdict::Refuse(Refusal::Unreplicated);
    }
    Verdict::Evict
}

/// The Pods of `pods` (those of one node) that a drain under `options` would still evict or
/// refuse at wall time `now`, `namespace/name`: what a host operation about to reboot the node
/// must not find there. A Pod that ended (Succeeded, Failed) runs nothing a reboot could hurt,
/// and is left out.
pub fn left_to_evict(pods: &[Pod], options: &DrainOptions, now: Timestamp) -> Vec<String> {
    (pods.iter())
        .filter(|p| !ended(p))
        .filter(|p| !matches!(verdict(p, options, now), Verdict::Skip(_)))
        .map(pod_name)
        .collect()
}

/// What a drain under `options` would refuse of `pods` (those of one node) at wall time `now`,
/// each `namespace/name: why`: empty when it would go ahead. What a driver reads before its
/// first write on a node, so that a node whose drain kubectl's rules refuse is never cordoned.
pub fn refusals(pods: &[Pod], options: &DrainOptions, now: Timestamp) -> Vec<String> {
    (pods.iter())
        .filter_map(|p| match verdict(p, options, now) {
            Verdict::Refuse(why) => Some(format!("{}: {why}", pod_name(p))),
            _ => None,
        })
        .collect()
}

/// What a drain did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Drained {
    /// The Pods evicted (with [`DryRun::All`]: that would be), `namespace/name`, in order.
    pub evicted: Vec<String>,
    /// The Pods left on the node, with why.
    pub skipped: Vec<(String, Skip)>,
    /// With [`DryRun::All`] only: the Pods a budget would block now, with the apiserver's
    /// message naming it. A dry run changes no budget, so it does not wait for one to release.
    pub blocked: Vec<(String, String)>,
}

/// The first retry delay after a budget blocked an eviction.
const BLOCKED_BASE: Duration = Duration::from_secs(1);
/// How long before the drain's deadline its last eviction round may start.
const LAST_TRY: Duration = Duration::from_millis(500);
/// The longest retry delay.
const BLOCKED_CAP: Duration = Duration::from_secs(16);

/// Drains `node` as the [module docs](self) say.
///
/// # Errors
/// [`Error::DrainRefused`] before any eviction; [`Error::DrainTimeout`] at the bound;
/// [`Error::Api`] when the apiserver refuses otherwise (Forbidden, the 500 of a Pod several
/// budgets cover).
pub async fn drain<A: PodApi + ?Sized>(
    api: &A,
    node: &str,
    options: &DrainOptions,
    notes: &dyn Sink,
) -> Result<Drained> {
    let mut drained = Drained::default();
    drain_into(api, node, options, notes, &mut drained).await?;
    Ok(drained)
}

/// [`drain`], writing what it did into `drained` as it goes, so that a caller whose drain
/// failed (a timeout after some evictions, a Pod refused halfway) still knows which Pods it
/// evicted.
///
/// # Errors
/// As [`drain`].
pub async fn drain_into<A: PodApi + ?Sized>(
    api: &A,
    node: &str,
    options: &DrainOptions,
    notes: &dyn Sink,
    drained: &mut Drained,
) -> Result<()> {
    let deadline = api.now().saturating_add(options.timeout);
    let left = |api: &A| deadline.saturating_sub(api.now());
    let pods = retrying(api, left(api), || api.list_node_pods(node))
        .await
        .map_err(|cause| Error::Api {
            op: Operation::on_node(Action::Listing, ObjectKind::Pod, node),
            cause,
        })?;

    let now = api.wall_time();
    let mut refused = Vec::new();
    let mut pending = Vec::new();
    for pod in pods {
        match verdict(&pod, options, now) {
            Verdict::Evict => pending.push(pod),
            Verdict::Skip(why) => drained.skipped.push((pod_name(&pod), why)),
            Verdict::Refuse(why) => refused.push((pod_name(&pod), why.to_string())),
        }
    }
    if !refused.is_empty() {
        return Err(Error::DrainRefused {
            node: node.to_string(),
            pods: refused,
        });
    }

    let mut evicted: Vec<Pod> = Vec::new();
    let mut blocked: Option<String> = None;
    // The budget that last refused each Pod, by the Pod's `namespace/name`.
    let mut refused_by: std::collections::BTreeMap<String, String> = Default::default();
    let mut attempt = 0u32;
    while !pending.is_empty() {
        let mut still = Vec::new();
        for pod in pending {
            if left(api).is_zero() {
                still.push(pod);
                continue;
            }
            let outcome = match evict(api, &pod, options, left(api)).await {
                // Transient failures that ran into the deadline: the pod is left, and the
                // timeout below says so (with the budget that blocked, if one did).
                Err(Error::Api { cause, .. }) if cause.is_retryable() && left(api) <= LAST_TRY => {
                    still.push(pod);
                    continue;
                }
                other => other?,
            };
            match outcome {
                Outcome::Evicted => {
                    note(
                        notes,
                        Level::Info,
                        format!("evicted pod {} from node {node}", pod_name(&pod)),
                    );
                    drained.evicted.push(pod_name(&pod));
                    evicted.push(pod);
                }
                Outcome::Gone => {}
                Outcome::Blocked(message) if options.dry_run == DryRun::All => {
                    drained.blocked.push((pod_name(&pod), message));
                }
                Outcome::Blocked(message) => {
                    if let Some(budget) = budget_named(&message) {
                        let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
                        refused_by.insert(pod_name(&pod), format!("{namespace}/{budget}"));
                    }
                    blocked = Some(message);
                    still.push(pod);
                }
                Outcome::Replaced(Some(new)) => match verdict(&new, options, api.wall_time()) {
                    Verdict::Evict => still.push(*new),
                    Verdict::Skip(why) => drained.skipped.push((pod_name(&new), why)),
                    Verdict::Refuse(why) => {
                        return Err(Error::DrainRefused {
                            node: node.to_string(),
                            pods: vec![(pod_name(&new), why.to_string())],
                        });
                    }
                },
                Outcome::Replaced(None) => {}
            }
        }
        pending = still;
        if pending.is_empty() {
            break;
        }
        // The last retry comes just before the deadline, not a whole backoff early: a budget
        // that releases in that last stretch is still met.
        if left(api) <= LAST_TRY {
            // Only what is still there: the Pods not evicted, and those evicted that have not
            // gone yet (still terminating, by UID).
            let mut pods_left: Vec<String> = pending.iter().map(pod_name).collect();
            let mut budgets: Vec<String> = Vec::new();
            for budget in pods_left.iter().filter_map(|p| refused_by.get(p)) {
                if !budgets.contains(budget) {
                    budgets.push(budget.clone());
                }
            }
            for pod in &evicted {
                if still_there(api, pod).await {
                    pods_left.push(pod_name(pod));
                }
            }
            return Err(Error::DrainTimeout {
                node: node.to_string(),
                waited: options.timeout,
                blocked,
                pods_left,
                budgets,
            });
        }
        let pause = blocked_backoff(node, attempt).min(left(api).saturating_sub(LAST_TRY));
        if let Some(why) = &blocked {
            note(
                notes,
                Level::Warn,
                format!(
                    "drain of node {node}: {} pod(s) blocked, retrying in {:.1} s: {why}",
                    pending.len(),
                    pause.as_secs_f64()
                ),
            );
        }
        api.sleep(pause).await;
        attempt += 1;
    }

    if options.dry_run == DryRun::All {
        return Ok(());
    }
    let mut pods_left = Vec::new();
    for pod in &evicted {
        if !wait_pod_gone(api, pod, left(api)).await? {
            pods_left.push(pod_name(pod));
        }
    }
    if !pods_left.is_empty() {
        return Err(Error::DrainTimeout {
            node: node.to_string(),
            waited: options.timeout,
            blocked: None,
            pods_left,
            budgets: Vec::new(),
        });
    }
    Ok(())
}

/// The name of the PodDisruptionBudget an eviction's refusal names: the apiserver's
/// `DisruptionBudget` cause, "The disruption budget NAME needs 2 healthy pods and has 2
/// currently" or "The disruption budget NAME is still being processed by the server"
/// (`pkg/registry/core/pod/storage/eviction.go`), as the message carries it; `None` when it
/// names none.
pub fn budget_named(message: &str) -> Option<&str> {
    const CAUSE: &str = "The disruption budget ";
    let rest = &message[message.find(CAUSE)? + CAUSE.len()..];
    let name = rest.split_whitespace().next()?;
    (!name.is_empty()).then_some(name)
}

/// The Pod, `namespace/name`, at which `error` (a drain's) stopped because more than one
/// PodDisruptionBudget covers it: the apiserver refuses its eviction with a 500 until the
/// budgets change (`eviction.go`), so, as for a budget allowing no disruption, the drain
/// cannot go on until someone changes them. `None` for any other error.
pub fn covered_twice(error: &Error) -> Option<String> {
    let Error::Api { op, cause } = error else {
        return None;
    };
    let several = cause.code == 500 && cause.message.contains(SEVERAL_BUDGETS);
    match (&op.target, op.verb, op.kind) {
        (Target::Named { namespace, name }, Action::Evicting, ObjectKind::Pod) if several => {
            Some(format!("{namespace}/{name}"))
        }
        _ => None,
    }
}

/// Whether `pod` (by UID) is still there, one read; one that cannot be read counts as there.
async fn still_there<A: PodApi + ?Sized>(api: &A, pod: &Pod) -> bool {
    let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
    let name = pod.metadata.name.as_deref().unwrap_or_default();
    match api.get_pod(namespace, name).await {
        Ok(now) => now.metadata.uid == pod.metadata.uid,
        Err(e) => !e.is_not_found(),
    }
}

/// What one eviction came to.
enum Outcome {
    Evicted,
    Gone,
    Blocked(String),
    /// The name holds another Pod now (the UID precondition failed): that Pod, or `None` when it
    /// is gone too.
    Replaced(Option<Box<Pod>>),
}

async fn evict<A: PodApi + ?Sized>(
    api: &A,
    pod: &Pod,
    options: &DrainOptions,
    bound: Duration,
) -> Result<Outcome> {
    let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
    let name = pod.metadata.name.as_deref().unwrap_or_default();
    let uid = pod.metadata.uid.as_deref().unwrap_or_default();
    let answer = retrying(api, bound, || async {
        match api
            .evict_pod(namespace, name, uid, options.grace_period, options.dry_run)
            .await
        {
            // The 500 for a Pod several budgets cover is no passing fault: the apiserver answers
            // it again until the budgets change (`eviction.go`). Not retried.
            Err(e) if e.code == 500 && e.message.contains(SEVERAL_BUDGETS) => {
                Err(ApiError::new(ErrorKind::Other, e.code, e.message))
            }
            other => other,
        }
    })
    .await;
    match answer {
        Ok(Eviction::Evicted) => Ok(Outcome::Evicted),
        Ok(Eviction::Gone) => Ok(Outcome::Gone),
        // For a Pod that is not Ready, the apiserver turns a conflict on its delete (our UID
        // precondition included) into this 429 (`eviction.go`): a Pod replaced under the name
        // would look blocked for ever. Read it again.
        Ok(Eviction::Blocked { message }) if message.contains(STILL_PROCESSED) => {
            match reread(api, namespace, name, bound).await? {
                Some(now) if now.metadata.uid.as_deref() == Some(uid) => {
                    Ok(Outcome::Blocked(message))
                }
                now => Ok(Outcome::Replaced(now.map(Box::new))),
            }
        }
        Ok(Eviction::Blocked { message }) => Ok(Outcome::Blocked(message)),
        // Another Pod under the name, or the same one changed meanwhile: either way, it goes
        // through the filters again as it is now.
        Err(e) if e.is_conflict() => Ok(Outcome::Replaced(
            reread(api, namespace, name, bound).await?.map(Box::new),
        )),
        Err(cause) => Err(Error::Api {
            op: Operation::named(Action::Evicting, ObjectKind::Pod, namespace, name)
                .with_detail(format!("uid {uid}")),
            cause,
        }),
    }
}

/// The Pod `namespace/name` as it is now; `None` when it is gone.
async fn reread<A: PodApi + ?Sized>(
    api: &A,
    namespace: &str,
    name: &str,
    bound: Duration,
) -> Result<Option<Pod>> {
    match retrying(api, bound, || api.get_pod(namespace, name)).await {
        Ok(pod) => Ok(Some(pod)),
        Err(e) if e.is_not_found() => Ok(None),
        Err(cause) => Err(Error::Api {
            op: Operation::named(Action::Reading, ObjectKind::Pod, namespace, name),
            cause,
        }),
    }
}

/// The delay before the `attempt`-th retry of blocked evictions: doubling from 1 s, capped at
/// 16 s, less up to a quarter drawn from the node's name and the attempt (no OS randomness in
/// core), so drains of several nodes blocked on one budget do not retry in step.
fn blocked_backoff(node: &str, attempt: u32) -> Duration {
    let full = BLOCKED_BASE
        .saturating_mul(1 << attempt.min(8))
        .min(BLOCKED_CAP);
    let digest = Sha256::new()
        .chain_update(node.as_bytes())
        .chain_update(attempt.to_be_bytes())
        .finalize();
    let fraction = f64::from(digest[0]) / 255.0;
    full.saturating_sub(full.mul_f64(0.25 * fraction))
}

fn pod_name(pod: &Pod) -> String {
    format!(
        "{}/{}",
        pod.metadata.namespace.as_deref().unwrap_or_default(),
        pod.metadata.name.as_deref().unwrap_or_default()
    )
}

fn note(sink: &dyn Sink, level: Level, text: String) {
    sink.note(&Note {
        level,
        message: text,
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_is_read_from_either_cause_the_apiserver_gives() {
        let needs = "Cannot evict pod as it would violate the pod's disruption budget. The \
                     disruption budget web needs 2 healthy pods and has 2 currently";
        let processing = "Cannot evict pod as it would violate the pod's disruption budget. The \
                          disruption budget web-pdb is still being processed by the server.";
        assert_eq!(budget_named(needs), Some("web"));
        assert_eq!(budget_named(processing), Some("web-pdb"));
        assert_eq!(
            budget_named("Cannot evict pod as it would violate the pod's disruption budget."),
            None
        );
    }

    /// Our own ended node Job's Pod is left (its exit code and log kept); the same Pod still
    /// running, or another Job's ended Pod, goes as kubectl would have it go.
    #[test]
    fn an_ended_node_job_of_ours_is_left_and_nothing_else_is() {
        use k8s_openapi::api::core::v1::PodStatus;
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
        let pod = |ours: bool, phase: &str, kind: &str| {
            let mut pod = Pod::default();
            pod.metadata.owner_references = Some(vec![OwnerReference {
                kind: kind.into(),
                controller: Some(true),
                ..OwnerReference::default()
            }]);
            if ours {
                pod.metadata.annotations =
                    Some([(NODE_ANNOTATION.to_string(), "node-a".to_string())].into());
            }
            pod.status = Some(PodStatus {
                phase: Some(phase.into()),
                ..PodStatus::default()
            });
            pod
        };
        let (options, now) = (DrainOptions::default(), Timestamp::UNIX_EPOCH);
        for phase in ["Failed", "Succeeded"] {
            assert_eq!(
                verdict(&pod(true, phase, "Job"), &options, now),
                Verdict::Skip(Skip::EndedNodeJob)
            );
            assert_eq!(
                verdict(&pod(false, phase, "Job"), &options, now),
                Verdict::Evict
            );
            assert_eq!(
                verdict(&pod(true, phase, "ReplicaSet"), &options, now),
                Verdict::Evict
            );
        }
        assert_eq!(
            verdict(&pod(true, "Running", "Job"), &options, now),
            Verdict::Evict
        );
    }

    #[test]
    fn blocked_backoff_doubles_is_capped_and_never_zero() {
        let delays: Vec<Duration> = (0..10).map(|a| blocked_backoff("node-a", a)).collect();
        for (a, d) in delays.iter().enumerate() {
            let full = BLOCKED_BASE.saturating_mul(1 << a.min(8)).min(BLOCKED_CAP);
            assert!(*d <= full && *d >= full.mul_f64(0.75), "attempt {a}: {d:?}");
        }
        assert!(delays[9] <= BLOCKED_CAP);
        assert_ne!(blocked_backoff("node-a", 3), blocked_backoff("node-b", 3));
    }
}
