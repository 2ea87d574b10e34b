//! `status` for people: the Lease's line, a table of the nodes, the simulated cluster's counters.

use crate::inspect::status::{Ca, LeaseState, Status, UpgradeRecord, UpgradeState};
use crate::present::table;

/// `status` for people: the Lease's line, a table of the nodes, then the simulated cluster's
/// counters when there are some.
pub(crate) fn text(status: &Status) -> String {
    let mut out = format!(
        "lease {}: {}\n",
        status.lease_name,
        lease_line(status.lease.as_ref())
    );
    let mut rows = vec![
        [
            "NODE",
            "VERSION",
            "READY",
            "CORDONED",
            "CA (LAST READ)",
            "UPGRADE",
        ]
        .map(String::from),
    ];
    let yes = |b: bool| if b { "yes" } else { "no" }.to_string();
    for n in &status.nodes {
        rows.push([
            n.node.clone(),
            n.version.clone().unwrap_or_else(|| "?".into()),
            yes(n.ready),
            yes(n.cordoned),
            match &n.ca {
                Some(Ca::Reported { phase, .. }) => phase.to_string(),
                Some(Ca::Unreadable { .. }) => "unreadable".into(),
                None => "-".into(),
            },
            match &n.upgrade {
                Some(UpgradeRecord::InProgress(p)) => {
                    let (head, note) = match n.upgrade_state {
                        Some(UpgradeState::Failed) => ("FAILED upgrading", "host upgrade failed; "),
                        Some(UpgradeState::Interrupted) => {
                            ("stopped upgrading", "no upgrade running; ")
                        }
                        _ => ("upgrading", ""),
                    };
                    format!(
                        "{head} to {} ({note}epoch {}{})",
                        p.target,
                        p.epoch,
                        if p.cordoned { ", cordoned by us" } else { "" }
                    )
                }
                Some(UpgradeRecord::Done(d)) => format!("upgraded to {} at {}", d.version, d.at),
                None => "-".into(),
            },
        ]);
    }
    out.push_str(&table(&rows));
    for n in status.nodes.iter().filter(|n| !n.conditions.is_empty()) {
        out.push_str(&format!(
            "node {}, as `kubectl describe node` shows the drivers' conditions:\n{}",
            n.node,
            nodejob_roll::condition::kubectl_describe(&n.conditions)
        ));
    }
    if let Some(sim) = &status.simulated {
        out.push_str(&format!(
            "simulated cluster: {} API calls so far, {} of them writes; resourceVersion {:?}\n",
            sim.api_calls, sim.writes, sim.resource_version
        ));
    }
    out
}

/// One line: `held by X for rotate-ca sha256:…, epoch 2, renewed T, expires T`, or `free
/// (last: upgrade v1.38.0, epoch 1, released T)`.
fn lease_line(lease: Option<&LeaseState>) -> String {
    let Some(lease) = lease else {
        return "free (never taken)".into();
    };
    let text = |v: &Option<String>| v.clone().unwrap_or_default();
    let what = match (text(&lease.operation), text(&lease.target)) {
        (op, _) if op.is_empty() => "an unnamed operation".to_string(),
        (op, target) => format!("{op} {target}").trim_end().to_string(),
    };
    let epoch = lease.epoch;
    match &lease.holder {
        Some(identity) => format!(
            "held by {identity} for {what}, epoch {epoch}, renewed {}, {} {}",
            text(&lease.renewed),
            if lease.expired == Some(true) {
                "expired at"
            } else {
                "expires"
            },
            text(&lease.expires)
        ),
        None => format!(
            "free (last: {what}, epoch {epoch}, released {})",
            text(&lease.renewed)
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inspect::status::{Ca, LeaseState, NodeState};

    fn lease(holder: Option<&str>, expired: Option<bool>, operation: Option<&str>) -> LeaseState {
        LeaseState {
            name: "kube-system/nodejob".into(),
            holder: holder.map(str::to_string),
            expired,
            operation: operation.map(str::to_string),
            target: operation.map(|_| "v1.38.0".to_string()),
            epoch: 2,
            renewed: Some("T1".into()),
            expires: expired.map(|_| "T2".to_string()),
        }
    }

    #[test]
    fn the_lease_line_says_who_holds_it_for_what_or_what_it_was_last_taken_for() {
        let table = [
            (None, "free (never taken)"),
            (
                Some(lease(Some("me"), Some(false), Some("upgrade"))),
                "held by me for upgrade v1.38.0, epoch 2, renewed T1, expires T2",
            ),
            (
                Some(lease(Some("me"), Some(true), None)),
                "held by me for an unnamed operation, epoch 2, renewed T1, expired at T2",
            ),
            (
                Some(lease(None, None, Some("upgrade"))),
                "free (last: upgrade v1.38.0, epoch 2, released T1)",
            ),
        ];
        for (lease, want) in table {
            assert_eq!(lease_line(lease.as_ref()), want);
        }
    }

    #[test]
    fn an_unreadable_ca_record_shows_as_such_in_json_and_text() -> serde_json::Result<()> {
        let status = Status {
            lease_name: "kube-system/nodejob".into(),
            lease: None,
            nodes: vec![NodeState {
                node: "cp-0".into(),
                version: None,
                ready: true,
                cordoned: false,
                upgrade_state: None,
                in_progress: None,
                host_job: None,
                done: None,
                ca: Some(Ca::Unreadable {
                    unreadable: "not the driver's record".into(),
                }),
                conditions: Vec::new(),
                upgrade: None,
            }],
            simulated: None,
        };
        assert_eq!(
            serde_json::to_value(&status)?,
            serde_json::json!({
                "lease": null,
                "nodes": [{
                    "node": "cp-0",
                    "version": null,
                    "ready": true,
                    "cordoned": false,
                    "upgrade_state": null,
                    "in_progress": null,
                    "host_job": null,
                    "done": null,
                    "ca": {"unreadable": "not the driver's record"},
                }],
            })
        );
        assert_eq!(
            text(&status),
            "lease kube-system/nodejob: free (never taken)\n\
             NODE  VERSION  READY  CORDONED  CA (LAST READ)  UPGRADE\n\
             cp-0  ?        yes    no        unreadable      -\n"
        );
        Ok(())
    }
}
