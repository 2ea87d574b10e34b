//! What the upgrade's actor soaks check, shared by the seeded one (`tests/actors.rs`) and the
//! exhaustive one (`tests/every_write.rs`): the invariants at every write of the driver
//! ([`Watch`]), the report against the cluster ([`check_report`]), a run in a line ([`short`]).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::Node;
use nodejob_conformance::soak::lease_known_lost;
use nodejob_conformance::{Observe, Write};
use nodejob_core::Verb;
use nodejob_fake::FakeCluster;
use nodejob_fake::schedule::ActorSchedule;
use upgrade_driver::records::{self, BLOCKED, DONE, HOST_JOB, IN_PROGRESS, InProgress};
use upgrade_driver::{NodeResult, Outcome, Report, Undrainable, UpgradeStep};

use crate::support::{evictable_on, kubelet_version};

/// Checks every write of the driver against the invariants of `tests/actors.rs`'s module docs
/// (1-4, 6 and 7 before a write, 2 after it).
pub(crate) struct Watch {
    pub(crate) fake: Arc<FakeCluster>,
    /// The run's target (a controller's test moves it as the resource's target moves).
    pub(crate) target: Mutex<String>,
    pub(crate) width: usize,
    /// The identities the driver runs under.
    pub(crate) ours: BTreeSet<String>,
    /// The actors' schedule (when the Lease was taken), as armed, or as an actor acts.
    pub(crate) schedule: Mutex<ActorSchedule>,
    /// Nodes an actor made report another version (their host's version is not ours to judge).
    pub(crate) versioned: BTreeSet<String>,
    /// Nodes an actor made unavailable or changed by itself.
    pub(crate) touched: BTreeSet<String>,
    /// Host Jobs recorded failed without an exit code (killed), by node: each may be retried.
    pub(crate) killed: Mutex<BTreeMap<String, u32>>,
    pub(crate) violations: Mutex<Vec<String>>,
}

/// Whether `node` carries the soak record.
pub(crate) fn soaking(node: &Node) -> bool {
    (node.metadata.annotations.as_ref()).is_some_and(|a| a.contains_key(records::SOAK))
}

pub(crate) fn our_record(node: &Node) -> Option<InProgress> {
    records::read::<InProgress>(node, IN_PROGRESS)
        .ok()
        .flatten()
}

impl Watch {
    fn node_of_job(write: &Write) -> Option<String> {
        let job: k8s_openapi::api::batch::v1::Job = serde_json::from_str(&write.body).ok()?;
        job.spec?.template.spec?.node_name
    }

    fn before_write(&self, write: &Write) -> Vec<String> {
        let mut v = Vec::new();
        // 6. Nothing written once the driver knows the Lease is another's.
        if let Err(why) = lease_known_lost(&self.fake, &self.schedule.lock().unwrap(), &self.ours) {
            v.push(format!("{write}: {why}"));
        }
        match write.verb {
            // 1. The host Job (the upgrade's, or the rollback's): on a cordoned node, drained,
            // with no other host Pod.
            Verb::CreateJob
                if write.target.contains("/upgrade-") || write.target.contains("/rollback-") =>
            {
                let Some(node) = Self::node_of_job(write) else {
                    return v;
                };
                match self.fake.node(&node) {
                    Some(n) if !records::unschedulable(&n) => {
                        v.push(format!("{write}: host job on schedulable node {node}"));
                    }
                    _ => {}
                }
                let evictable = evictable_on(&self.fake, &node);
                if !evictable.is_empty() {
                    v.push(format!(
                        "{write}: host job on {node} with evictable pods {evictable:?}"
                    ));
                }
                let live_hosts = (self.fake.pods_on(&node).into_iter())
                    .filter(|p| {
                        p.metadata.name.as_deref().is_some_and(|n| {
                            n.starts_with("upgrade-") || n.starts_with("rollback-")
                        })
                    })
                    .filter(|p| {
                        let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
                        matches!(phase, Some("Pending" | "Running") | None)
                    })
                    .count();
                if live_hosts > 0 {
                    v.push(format!(
                        "{write}: host job on {node} while a host pod runs there"
                    ));
                }
                // Never again once an upgrade took effect on the host.
                let host = self
                    .fake
                    .host_state(&node)
                    .map(|h| h.version)
                    .unwrap_or_default();
                if write.target.contains("/upgrade-")
                    && host == *self.target.lock().unwrap()
                    && !self.versioned.contains(&node)
                {
                    v.push(format!(
                        "{write}: host job on {node}, whose host is at {} already",
                        self.target.lock().unwrap()
                    ));
                }
            }
            Verb::PatchNode => {
                let node = self.fake.node(&write.target);
                // A patch to a node gone, or changed since the read it was decided on, is
                // refused by the apiserver (404, 409): it writes nothing to judge.
                let applies = node.as_ref().is_some_and(|n| {
                    write.precondition.as_deref() == n.metadata.resource_version.as_deref()
                });
                if !applies {
                    return v;
                }
                // 7. A quarantined node is never uncordoned by us.
                if write.body.contains("Uncordon")
                    && node.as_ref().is_some_and(records::quarantined)
                {
                    v.push(format!("{write}: uncordons a quarantined node"));
                }
                // 3. Only what we cordoned is uncordoned.
                if write.body.contains("Uncordon") {
                    let cordoned = node
                        .as_ref()
                        .and_then(our_record)
                        .is_some_and(|r| r.cordoned);
                    if !cordoned {
                        v.push(format!("{write}: uncordons a node we did not cordon"));
                    }
                }
                if write
                    .body
                    .contains(&format!("SetAnnotation {{ key: {HOST_JOB:?}"))
                    && write.body.contains(r#"exitCode\":null"#)
                {
                    *self
                        .killed
                        .lock()
                        .unwrap()
                        .entry(write.target.clone())
                        .or_default() += 1;
                }
                // 4. Done only on a node at the target.
                if write
                    .body
                    .contains(&format!("SetAnnotation {{ key: {DONE:?}"))
                {
                    let at = node.as_ref().map(kubelet_version).unwrap_or_default();
                    if at != *self.target.lock().unwrap() {
                        v.push(format!("{write}: recorded done while at {at:?}"));
                    }
                }
            }
            _ => {}
        }
        v
    }

    fn after_write(&self, write: &Write) -> Vec<String> {
        // 2. At most `width` nodes taken down (cordoned by us, or NotReady), control plane one
        // at a time; over the nodes no actor cordoned, uncordoned, flapped, rebooted or
        // re-versioned, whose state is then the driver's doing alone.
        let mut v = Vec::new();
        let down: Vec<String> = (self.fake.node_names().into_iter())
            .filter(|n| !self.touched.contains(n))
            .filter(|n| {
                self.fake.node(n).is_some_and(|node| {
                    let ours = our_record(&node).is_some_and(|r| r.cordoned);
                    (ours && records::unschedulable(&node)) || !nodejob_core::ready(&node)
                })
            })
            .collect();
        if down.len() > self.width {
            v.push(format!(
                "after {write}: taken down {down:?} > {}",
                self.width
            ));
        }
        let control: Vec<&String> = down.iter().filter(|n| n.starts_with("cp-")).collect();
        if control.len() > 1 {
            v.push(format!(
                "after {write}: control-plane nodes down together: {control:?}"
            ));
        }
        v
    }
}

impl Observe for Watch {
    fn before(&self, write: &Write) {
        let v = self.before_write(write);
        self.violations.lock().unwrap().extend(v);
    }
    fn after(&self, write: &Write) {
        let v = self.after_write(write);
        self.violations.lock().unwrap().extend(v);
    }
}

pub(crate) fn short(result: &Result<Report, upgrade_driver::Error>) -> String {
    match result {
        Err(e) => format!("error: {e}"),
        Ok(r) => match &r.outcome {
            Outcome::Done => "done".into(),
            Outcome::Stopped { why } => format!("stopped: {why}"),
            Outcome::Paused { why } => format!("paused: {why}"),
            Outcome::Failed { .. } => {
                let failures: Vec<String> = (r.nodes.iter())
                    .filter_map(|n| match (&n.result, n.failure()) {
                        (Some(NodeResult::RolledBack { .. }), Some(f)) => {
                            Some(format!("{} rolled-back-{}: {}", n.name, f.step, f.message))
                        }
                        (_, Some(f)) => Some(format!("{} {}: {}", n.name, f.step, f.message)),
                        (Some(NodeResult::Blocked { policy, .. }), None) => {
                            Some(format!("{} blocked: {policy}", n.name))
                        }
                        _ => None,
                    })
                    .collect();
                format!("failed: {}", failures.join("; "))
            }
        },
    }
}

/// 11. The report agrees with the cluster.
///
/// `versioned`: nodes an actor made report another version, whose version now says nothing of
/// a rollback the report tells.
pub(crate) fn check_report(
    fake: &FakeCluster,
    report: &Report,
    versioned: &BTreeSet<String>,
) -> Result<(), String> {
    for n in &report.nodes {
        if let Some(result) = &n.result {
            check_node(fake, &n.name, result, versioned)?;
        }
    }
    if report.outcome == Outcome::Done {
        check_done(fake)?;
    }
    Ok(())
}

/// 11, for one node: the cluster agrees with `result`, as the run tells it of the node `name`.
pub(crate) fn check_node(
    fake: &FakeCluster,
    name: &str,
    result: &NodeResult,
    versioned: &BTreeSet<String>,
) -> Result<(), String> {
    let Some(node) = fake.node(name) else {
        return Ok(());
    };
    let record = our_record(&node);
    match result {
        NodeResult::Upgraded => {
            let done = (node.metadata.annotations.as_ref()).is_some_and(|a| a.contains_key(DONE));
            if record.is_some() || !done {
                return Err(format!(
                    "{} reported upgraded, but its in-progress record is {record:?} and done \
                         record present: {done}",
                    name
                ));
            }
        }
        NodeResult::Failed(f) if f.step == UpgradeStep::Soak && !soaking(&node) => {
            return Err(format!(
                "{} failed at its soak, but carries no soak record",
                name
            ));
        }
        NodeResult::Interrupted {
            step: UpgradeStep::Soak,
            ..
        } if !soaking(&node) => {
            return Err(format!(
                "{} interrupted at its soak, but carries no soak record",
                name
            ));
        }
        NodeResult::Failed(f) if f.step == UpgradeStep::Soak => {}
        NodeResult::Interrupted {
            step: UpgradeStep::Soak,
            ..
        } => {}
        NodeResult::Failed(f) if f.step > UpgradeStep::Cordon && record.is_none() => {
            return Err(format!(
                "{} failed at {}, but carries no in-progress record",
                name, f.step
            ));
        }
        NodeResult::Interrupted { step, .. } if *step > UpgradeStep::Cordon && record.is_none() => {
            return Err(format!(
                "{} interrupted at {step}, but carries no in-progress record",
                name
            ));
        }
        // A rolled-back node ends at the version recorded before its host upgrade.
        NodeResult::RolledBack { version, .. } => {
            let at = kubelet_version(&node);
            let moved = versioned.contains(name);
            if record.is_some() || (!moved && !upgrade_driver::version::same_version(&at, version))
            {
                return Err(format!(
                    "{} reported rolled back to {version}, but it is at {at} with our \
                         in-progress record {record:?}",
                    name
                ));
            }
        }
        NodeResult::Blocked { policy, .. } => {
            let blocked =
                (node.metadata.annotations.as_ref()).is_some_and(|a| a.contains_key(BLOCKED));
            let labelled = records::quarantined(&node);
            let quarantined = *policy == Undrainable::Quarantine;
            if record.is_some() || (!blocked && !labelled) || (quarantined && !labelled) {
                return Err(format!(
                    "{} reported blocked ({policy}), but its in-progress record is \
                         {record:?}, blocked record present: {blocked}, labelled: {labelled}",
                    name
                ));
            }
        }
        _ => {}
    }
    Ok(())
}

/// 11, for a run that is done: no node keeps our in-progress or soak record.
pub(crate) fn check_done(fake: &FakeCluster) -> Result<(), String> {
    let left: Vec<String> = (fake.node_names().into_iter())
        .filter(|n| {
            fake.node(n)
                .is_some_and(|node| our_record(&node).is_some() || soaking(&node))
        })
        .collect();
    if !left.is_empty() {
        return Err(format!(
            "done, but nodes keep our in-progress record: {left:?}"
        ));
    }
    Ok(())
}
