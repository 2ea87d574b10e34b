//! [`Drains`]: what proves that a roll drained its nodes, not that the workload merely
//! survived: each workload Pod on a node evicted once, through the eviction subresource (the
//! apiserver's audit log), before that node's host Job was created, and the budget never
//! broken, read from the PodDisruptionBudget's own status and from the Pods' readiness.
//!
//! Without it a roll whose drain did nothing would pass: the reboot kills the Pods, the
//! kubelet starts them again, and the Deployment ends whole.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::Api;
use kube::runtime::watcher;
use nodejob_conformance::workloads::APP_LABEL;
use nodejob_conformance::{Failure, ensure};

use crate::audit::{Audited, audited};
use crate::recorder::{Recorder, Seen, record, record_changes};

/// The Pods of one workload and its budget, watched from before a roll until [`Drains::check`].
pub struct Drains {
    /// When the watch began: what the audit log has of before is another roll's.
    since: Timestamp,
    app: String,
    namespace: String,
    pods: Recorder<Seen<Pod>>,
    budgets: Recorder<PodDisruptionBudget>,
}

/// What [`Drains::check`] found, for the scenario's log.
#[derive(Debug)]
pub struct Drained {
    /// Each Pod evicted: its node, when the eviction was answered, and how many evictions of
    /// it the budget refused first (429).
    pub evicted: Vec<(String, String, Timestamp, usize)>,
    /// Each node's host Job: when its creation was received.
    pub host_jobs: Vec<(String, Timestamp)>,
    /// The fewest Pods of the workload Ready at once through the roll.
    pub fewest_ready: usize,
    /// The fewest healthy Pods the budget's status counted (`currentHealthy`).
    pub fewest_healthy: i32,
}

fn ready(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_none()
        && (pod.status.as_ref().and_then(|s| s.conditions.as_ref()))
            .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

impl Drains {
    /// Starts watching the Pods labelled `app=APP` and budget `app` in `namespace`, as an
    /// administrator; returns once both watches have listed what exists.
    pub async fn watch(admin: &Client, namespace: &str, app: &str) -> Result<Self, Failure> {
        let since = Timestamp::now();
        let pods = record_changes(
            Api::<Pod>::namespaced(admin.clone(), namespace),
            watcher::Config::default().labels(&format!("{APP_LABEL}={app}")),
        )
        .await?;
        let budgets = record(
            Api::<PodDisruptionBudget>::namespaced(admin.clone(), namespace),
            watcher::Config::default().fields(&format!("metadata.name={app}")),
        )
        .await?;
        Ok(Drains {
            since,
            app: app.into(),
            namespace: namespace.into(),
            pods,
            budgets,
        })
    }

    /// Stops watching and checks, for the roll of `nodes` by `user` (who must have sent every
    /// eviction and created every host Job) under a budget keeping `min_available` Pods, of
    /// the requests the audit log has since the watch began (the apiserver runs on this
    /// machine's clock; an earlier roll's are not this one's):
    ///
    /// - every Pod of the workload seen on a node either was evicted exactly once (one
    ///   eviction answered 2xx; refusals by the budget do not count), answered before that
    ///   node's first host Job was received, or was bound to the node after that Job (it came
    ///   to the node once the node was back); every eviction is of such a Pod;
    /// - at every moment the watch saw, at least `min_available` Pods Ready and not being
    ///   deleted;
    /// - in every status of the budget that observed its spec, `currentHealthy` at least
    ///   `desiredHealthy`, which is `min_available`: a field the apiserver omits because it is
    ///   0 reads as 0 (k8s-openapi's default for a required field), so a broken budget fails;
    /// - on every node, one Pod of the workload evicted at least: a node that ran none before
    ///   its host Job would pass the other checks whatever its drain did.
    pub fn check(
        self,
        nodes: &[String],
        min_available: i32,
        user: &str,
    ) -> Result<Drained, Failure> {
        let (since, app, namespace) = (self.since, self.app, self.namespace);
        let changes = self.pods.stop();
        let budgets = self.budgets.stop();

        // The Pods' readiness at every moment the watch saw, and where each Pod ran.
        let mut now: BTreeMap<String, Pod> = BTreeMap::new();
        let mut listing = false;
        let mut fewest_ready = usize::MAX;
        let mut placed: BTreeMap<String, (String, Timestamp)> = BTreeMap::new();
        for change in &changes {
            match change {
                Seen::Listing => (listing, now) = (true, BTreeMap::new()),
                Seen::Listed => listing = false,
                Seen::Applied(pod) => {
                    let name = pod.metadata.name.clone().unwrap_or_default();
                    let node = pod.spec.as_ref().and_then(|s| s.node_name.clone());
                    if let (Some(node), Some(bound)) = (node, bound(pod)) {
                        placed.insert(name.clone(), (node, bound));
                    }
                    now.insert(name, pod.clone());
                }
                Seen::Deleted(pod) => {
                    now.remove(pod.metadata.name.as_deref().unwrap_or_default());
                }
            }
            if !listing {
                let count = now.values().filter(|p| ready(p)).count();
                fewest_ready = fewest_ready.min(count);
                ensure!(
                    i32::try_from(count).is_ok_and(|c| c >= min_available),
                    "the budget of {namespace}/{app} is broken: {count} Pods Ready, fewer than \
                     {min_available}, after {}",
                    describe(change)
                );
            }
        }
        ensure!(
            fewest_ready != usize::MAX && !placed.is_empty(),
            "the watch of {namespace}/{app}'s Pods saw none"
        );

        // The budget's own status, missing fields read as 0.
        let mut fewest_healthy = i32::MAX;
        for budget in &budgets {
            let Some(status) = budget.status.as_ref() else {
                continue;
            };
            if status.observed_generation < budget.metadata.generation {
                continue;
            }
            fewest_healthy = fewest_healthy.min(status.current_healthy);
            ensure!(
                status.desired_healthy == min_available
                    && status.current_healthy >= status.desired_healthy,
                "the budget of {namespace}/{app} is broken by its own status: currentHealthy \
                 {}, desiredHealthy {} (expected {min_available}), disruptionsAllowed {}",
                status.current_healthy,
                status.desired_healthy,
                status.disruptions_allowed
            );
        }
        ensure!(
            fewest_healthy != i32::MAX,
            "no status of budget {namespace}/{app} observed its spec: {budgets:?}"
        );

        // What the apiserver was asked: the evictions and the host Jobs.
        let audit: Vec<Audited> = (audited()?.into_iter())
            .filter(|a| a.received >= since)
            .collect();
        let evictions: Vec<&Audited> = (audit.iter())
            .filter(|a| a.is_eviction() && a.namespace == namespace)
            .collect();
        let host_jobs: Vec<&Audited> = (audit.iter())
            .filter(|a| a.is_job_creation() && a.succeeded())
            .filter(|a| a.node.as_ref().is_some_and(|n| nodes.contains(n)))
            .collect();
        for a in evictions.iter().chain(&host_jobs) {
            ensure!(
                a.user == user,
                "{} {}/{} {} was asked by {}, not {user}",
                a.verb,
                a.resource,
                a.subresource,
                a.name,
                a.user
            );
        }
        let mut first_job: BTreeMap<&str, Timestamp> = BTreeMap::new();
        for job in &host_jobs {
            let node = job.node.as_deref().unwrap_or_default();
            let at = first_job.entry(node).or_insert(job.received);
            *at = (*at).min(job.received);
        }
        let mut evicted = Vec::new();
        let mut known = BTreeSet::new();
        for node in nodes {
            let job = *first_job
                .get(node.as_str())
                .ok_or_else(|| Failure(format!("node {node}: no host Job was created")))?;
            for (pod, (_, bound)) in placed.iter().filter(|(_, (n, _))| n == node) {
                known.insert(pod.as_str());
                let of_pod = || evictions.iter().filter(|a| &a.name == pod);
                let done: Vec<&&Audited> = of_pod().filter(|a| a.succeeded()).collect();
                let refused = of_pod().filter(|a| a.code == 429).count();
                match done.as_slice() {
                    // A binding's time carries whole seconds: the Job's time is cut to its
                    // second. A Pod that came once the node was back comes seconds after.
                    [] => ensure!(
                        *bound >= whole_second(job),
                        "pod {namespace}/{pod} on node {node} (bound there {bound}) was never \
                         evicted, yet node {node}'s host Job was created at {job}"
                    ),
                    [once] => {
                        ensure!(
                            once.answered < job,
                            "pod {namespace}/{pod} was evicted from node {node} at {}, after \
                             the node's host Job was created at {job}",
                            once.answered
                        );
                        evicted.push((pod.clone(), node.clone(), once.answered, refused));
                    }
                    more => ensure!(
                        false,
                        "pod {namespace}/{pod} on node {node} was evicted {} times: {more:?}",
                        more.len()
                    ),
                }
            }
        }
        for eviction in evictions.iter().filter(|a| a.succeeded()) {
            ensure!(
                known.contains(eviction.name.as_str()),
                "pod {namespace}/{} was evicted, but was never seen on the nodes {nodes:?}",
                eviction.name
            );
        }
        for node in nodes {
            ensure!(
                evicted.iter().any(|(_, n, _, _)| n == node),
                "no Pod of {namespace}/{app} was evicted from node {node}: none ran there \
                 before its host Job, so nothing here proves its drain (Pods seen: {placed:?})"
            );
        }
        Ok(Drained {
            evicted,
            host_jobs: first_job
                .into_iter()
                .map(|(n, t)| (n.to_string(), t))
                .collect(),
            fewest_ready,
            fewest_healthy,
        })
    }
}

/// When a Pod was bound to its node: its `PodScheduled` condition's transition (the scheduler's
/// binding; a replacement created while it had nowhere to go binds later), else its creation
/// (a Pod created bound, as a node Job's).
fn bound(pod: &Pod) -> Option<Timestamp> {
    let scheduled = (pod.status.as_ref().and_then(|s| s.conditions.as_ref()))
        .and_then(|c| {
            c.iter()
                .find(|c| c.type_ == "PodScheduled" && c.status == "True")
        })
        .and_then(|c| c.last_transition_time.as_ref())
        .map(|t| t.0);
    scheduled.or_else(|| pod.metadata.creation_timestamp.as_ref().map(|t| t.0))
}

fn whole_second(t: Timestamp) -> Timestamp {
    Timestamp::from_second(t.as_second()).unwrap_or(t)
}

fn describe(change: &Seen<Pod>) -> String {
    let (what, pod) = match change {
        Seen::Applied(p) => ("a change of", p),
        Seen::Deleted(p) => ("the deletion of", p),
        Seen::Listing | Seen::Listed => return "a list".into(),
    };
    format!(
        "{what} pod {} on node {:?}",
        pod.metadata.name.as_deref().unwrap_or_default(),
        pod.spec.as_ref().and_then(|s| s.node_name.as_deref())
    )
}
