//! `status` for people: the Lease's line, a table of the nodes, the simulated cluster's counters.

use crate::inspect::status::{Ca, LeaseState, NodeState, Status, UpgradeRecord, UpgradeState};
use crate::present::{Columns, table};

/// Which nodes a `status` shows: every node of the cluster, or the ones named.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Named {
    /// Every node: the conditions of those not in a clean final state only, so that a
    /// failed node is not buried among hundreds of done ones.
    None,
    /// The nodes named (`status NODE...`): each with its conditions.
    These,
}

/// `status` for people: the Lease's line, a table of the nodes, the drivers' conditions of
/// the nodes `named` says, then the simulated cluster's counters when there are some. With
/// [`Columns::Wide`] (`-o wide`) the table also has each node's ROLES and ZONE, as `kubectl
/// get nodes -o wide` and `-L topology.kubernetes.io/zone` show them.
pub(crate) fn text(status: &Status, named: Named, columns: Columns) -> String {
    let mut out = format!(
        "lease {}: {}\n",
        status.lease_name,
        lease_line(status.lease.as_ref())
    );
    if let Some(p) = status.lease.as_ref().and_then(|l| l.paused.as_ref()) {
        out.push_str(&format!(
            "PAUSED: {}; no roll starts a step until `nodejob resume`\n",
            p.said
        ));
    }
    if !status.node_upgrades.is_empty() {
        out.push_str(&rolls(status));
    }
    if !status.ca_rotations.is_empty() {
        out.push_str(&rotations(status));
    }
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
                    let rolling_back = match &n.rollback_record {
                        Some(r) if r.why.is_some() && r.done.is_none() => {
                            format!("; rolling back to {}", r.to)
                        }
                        _ => String::new(),
                    };
                    format!(
                        "{head} to {} ({note}epoch {}{}){rolling_back}",
                        p.target,
                        p.epoch,
                        if p.cordoned { ", cordoned by us" } else { "" }
                    )
                }
                Some(UpgradeRecord::Done(d)) => format!("upgraded to {} at {}", d.version, d.at),
                None => blocked_cell(n),
            },
        ]);
    }
    let mut rows: Vec<Vec<String>> = rows.into_iter().map(Vec::from).collect();
    if columns == Columns::Wide {
        let wide = std::iter::once(["ROLES".to_string(), "ZONE".to_string()]).chain(
            (status.nodes.iter()).map(|n| [n.roles(), n.zone.clone().unwrap_or("-".into())]),
        );
        for (row, cells) in rows.iter_mut().zip(wide) {
            row.splice(1..1, cells);
        }
    }
    out.push_str(&table(&rows));
    out.push_str(&blocked_lines(status));
    let (shown, clean): (Vec<&NodeState>, Vec<&NodeState>) = (status.nodes.iter())
        .filter(|n| !n.conditions.is_empty())
        .partition(|n| named == Named::These || !n.clean());
    let groups = match named {
        Named::These => shown.into_iter().map(|n| vec![n]).collect(),
        Named::None => alike(shown),
    };
    for group in groups {
        out.push_str(&conditions_block(&group));
    }
    if !clean.is_empty() {
        out.push_str(&format!(
            "{} node(s) in a clean final state (each driver let it go): their conditions are \
             left out; `nodejob status NODE...` shows them\n",
            clean.len()
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

/// How many nodes a block of conditions shared by several names before it says how many more.
const NAMED_IN_A_BLOCK: usize = 5;

/// `nodes` in groups whose drivers' conditions say the same (type, status, reason, message;
/// their times aside), each in the nodes' order, the groups by size (a node alone in its
/// state, as a failed one, first) then by first node.
fn alike(nodes: Vec<&NodeState>) -> Vec<Vec<&NodeState>> {
    let said = |n: &NodeState| -> Vec<(String, String, Option<String>, Option<String>)> {
        (n.conditions.iter())
            .map(|c| {
                let c = c.clone();
                (c.type_, c.status, c.reason, c.message)
            })
            .collect()
    };
    let mut groups: Vec<(Vec<_>, Vec<&NodeState>)> = Vec::new();
    for n in nodes {
        let key = said(n);
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, group)) => group.push(n),
            None => groups.push((key, vec![n])),
        }
    }
    let mut groups: Vec<Vec<&NodeState>> = groups.into_iter().map(|(_, g)| g).collect();
    groups.sort_by_key(Vec::len);
    groups
}

/// The drivers' conditions of a group of nodes that say the same, as `kubectl describe node`
/// shows them: of the first node, naming the others (at most [`NAMED_IN_A_BLOCK`], then how
/// many more).
fn conditions_block(group: &[&NodeState]) -> String {
    let Some(first) = group.first() else {
        return String::new();
    };
    let head = match group {
        [one] => format!("node {}", one.node),
        group => {
            let named: Vec<&str> = (group.iter().take(NAMED_IN_A_BLOCK))
                .map(|n| n.node.as_str())
                .collect();
            let more = group.len().saturating_sub(NAMED_IN_A_BLOCK);
            format!(
                "nodes {}{} ({} alike but for their times; {}'s shown)",
                named.join(", "),
                if more > 0 {
                    format!(" and {more} more")
                } else {
                    String::new()
                },
                group.len(),
                first.node
            )
        }
    };
    format!(
        "{head}, as `kubectl describe node` shows the drivers' conditions:\n{}",
        super::describe::kubectl_describe(&first.conditions)
    )
}

/// The UPGRADE cell of a node with no upgrade under way nor done: rolled back or blocked, if
/// it was.
fn blocked_cell(n: &NodeState) -> String {
    if let Some(r) = n.rollback_record.as_ref().filter(|r| r.done.is_some()) {
        return format!("ROLLED BACK to {} (from {})", r.to, r.from);
    }
    match (&n.blocked_record, n.quarantined) {
        (Some(b), _) if b.policy == upgrade_driver::Undrainable::Quarantine || n.quarantined => {
            format!("QUARANTINED toward {} (drain blocked)", b.target)
        }
        (Some(b), _) => format!("BLOCKED toward {} (drain blocked, skipped)", b.target),
        (None, true) => "QUARANTINED (labelled)".into(),
        (None, false) => "-".into(),
    }
}

/// After the table, a line per node an upgrade rolled back (why, when) or blocked (what was
/// done, when, the budgets and the Pods left). Nothing when none was.
fn blocked_lines(status: &Status) -> String {
    let mut out = String::new();
    for n in &status.nodes {
        if let Some(r) = &n.rollback_record
            && let (Some(done), Some(why)) = (&r.done, &r.why)
        {
            out.push_str(&format!(
                "rolled back {}: from {} to {} at {done}, after it failed at {}: {why}\n",
                n.node,
                r.from,
                r.to,
                r.step.as_deref().unwrap_or("?")
            ));
        }
    }
    for n in &status.nodes {
        let Some(b) = &n.blocked_record else {
            continue;
        };
        let what = if n.quarantined {
            "quarantined (left cordoned, labelled)"
        } else if b.policy == upgrade_driver::Undrainable::Quarantine {
            "was quarantined (its label since removed)"
        } else {
            "skipped"
        };
        let list = |items: &[String]| match items {
            [] => "-".to_string(),
            items => items.join(", "),
        };
        out.push_str(&format!(
            "blocked {}: {what} toward {} at {}; budgets: {}; pods left: {}\n",
            n.node,
            b.target,
            b.at,
            list(&b.budgets),
            list(&b.pods)
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
    if lease.holder.is_none() && lease.operation.is_none() && lease.renewed.is_none() {
        // Created by `nodejob pause` before any run took it.
        return "free (never taken)".into();
    }
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

/// The `NodeUpgrade`s as `kubectl get nu` shows them, then a blank line.
fn rolls(status: &Status) -> String {
    let mut rows = vec![
        [
            "NODEUPGRADE",
            "TARGET",
            "READY",
            "REASON",
            "NODES",
            "UP-TO-DATE",
            "FAILED",
        ]
        .map(String::from),
    ];
    for r in &status.node_upgrades {
        rows.push([
            r.name.clone(),
            r.target.clone(),
            r.ready.clone(),
            r.reason.clone(),
            r.nodes.to_string(),
            r.up_to_date.to_string(),
            r.failed.to_string(),
        ]);
    }
    let mut out = table(&rows);
    out.push('\n');
    out
}

/// The `CARotation`s as `kubectl get car` shows them, then a blank line.
fn rotations(status: &Status) -> String {
    let mut rows = vec![
        [
            "CAROTATION",
            "FINGERPRINT",
            "PHASE",
            "READY",
            "REASON",
            "STAGED",
            "ISSUED",
            "FINALIZED",
            "FAILED",
        ]
        .map(String::from),
    ];
    for r in &status.ca_rotations {
        rows.push([
            r.name.clone(),
            r.fingerprint.clone(),
            r.phase.clone(),
            r.ready.clone(),
            r.reason.clone(),
            r.staged.to_string(),
            r.issued.to_string(),
            r.finalized.to_string(),
            r.failed.to_string(),
        ]);
    }
    let mut out = table(&rows);
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inspect::status::{Ca, LeaseState};
    use std::collections::BTreeSet;

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
            paused: None,
        }
    }

    /// A node whose one driver condition says `status`, `reason`, `message`.
    fn node(name: &str, status: &str, reason: &str, message: &str) -> NodeState {
        NodeState {
            node: name.into(),
            version: Some("v1.38.0".into()),
            ready: true,
            cordoned: false,
            upgrade_state: None,
            in_progress: None,
            host_job: None,
            done: None,
            ca: None,
            conditions: vec![k8s_openapi::api::core::v1::NodeCondition {
                type_: "NodejobUpgrade".into(),
                status: status.into(),
                reason: Some(reason.into()),
                message: Some(message.into()),
                ..Default::default()
            }],
            upgrade: None,
            blocked: None,
            quarantined: false,
            blocked_record: None,
            rollback: None,
            rollback_record: None,
            role_labels: BTreeSet::new(),
            zone: None,
        }
    }

    #[test]
    fn conditions_are_shown_for_nodes_not_in_a_clean_final_state_alike_ones_once() {
        let mut nodes: Vec<NodeState> = (0..300)
            .map(|i| node(&format!("done-{i}"), "False", "Upgraded", "upgraded"))
            .collect();
        nodes.push(node(
            "broken",
            "True",
            "Failed",
            "the host upgrade exited 1",
        ));
        for i in 0..7 {
            nodes.push(node(
                &format!("stopped-{i}"),
                "True",
                "Stopped",
                "a rerun goes on",
            ));
        }
        let status = Status {
            lease_name: "kube-system/nodejob".into(),
            lease: None,
            nodes,
            node_upgrades: Vec::new(),
            ca_rotations: Vec::new(),
            simulated: None,
        };
        let all = text(&status, Named::None, Columns::Narrow);
        let blocks: Vec<&str> = all.lines().filter(|l| l.starts_with("node")).collect();
        assert_eq!(
            blocks,
            [
                "node broken, as `kubectl describe node` shows the drivers' conditions:",
                "nodes stopped-0, stopped-1, stopped-2, stopped-3, stopped-4 and 2 more (7 alike \
                 but for their times; stopped-0's shown), as `kubectl describe node` shows the \
                 drivers' conditions:",
            ],
            "{all}"
        );
        assert!(
            all.contains("\n300 node(s) in a clean final state"),
            "{all}"
        );
        // Every node stays in the table.
        assert_eq!(all.lines().filter(|l| l.starts_with("done-")).count(), 300);

        let named = status.only(&["done-7".into(), "broken".into()]).unwrap();
        let text = text(&named, Named::These, Columns::Narrow);
        let blocks: Vec<&str> = text.lines().filter(|l| l.starts_with("node")).collect();
        assert_eq!(
            blocks,
            [
                "node done-7, as `kubectl describe node` shows the drivers' conditions:",
                "node broken, as `kubectl describe node` shows the drivers' conditions:",
            ],
            "{text}"
        );
        assert!(!text.contains("clean final state"), "{text}");
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
                blocked: None,
                quarantined: false,
                blocked_record: None,
                rollback: None,
                rollback_record: None,
                role_labels: BTreeSet::new(),
                zone: None,
            }],
            node_upgrades: Vec::new(),
            ca_rotations: Vec::new(),
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
            text(&status, Named::None, Columns::Narrow),
            "lease kube-system/nodejob: free (never taken)\n\
             NODE  VERSION  READY  CORDONED  CA (LAST READ)  UPGRADE\n\
             cp-0  ?        yes    no        unreadable      -\n"
        );
        Ok(())
    }
    #[test]
    fn a_blocked_node_shows_its_budgets_and_pods_in_text_and_json() -> serde_json::Result<()> {
        let record = upgrade_driver::records::Blocked {
            target: "v1.38.0".into(),
            policy: upgrade_driver::Undrainable::Quarantine,
            budgets: vec!["default/pinned".into()],
            pods: vec!["default/pinned-abc".into()],
            at: "2026-01-01T00:40:00Z".into(),
            cordoned: true,
        };
        let node =
            |name: &str, quarantined: bool, record: Option<upgrade_driver::records::Blocked>| {
                NodeState {
                    node: name.into(),
                    version: Some("v1.37.2".into()),
                    ready: true,
                    cordoned: quarantined,
                    upgrade_state: None,
                    in_progress: None,
                    host_job: None,
                    done: None,
                    ca: None,
                    conditions: Vec::new(),
                    upgrade: None,
                    blocked: record
                        .as_ref()
                        .map(|r| serde_json::to_value(r).unwrap_or_default()),
                    quarantined,
                    blocked_record: record,
                    rollback: None,
                    rollback_record: None,
                    role_labels: BTreeSet::new(),
                    zone: None,
                }
            };
        let skipped = upgrade_driver::records::Blocked {
            policy: upgrade_driver::Undrainable::Skip,
            cordoned: false,
            ..record.clone()
        };
        let status = Status {
            lease_name: "kube-system/nodejob".into(),
            lease: None,
            nodes: vec![
                node("worker-a-0", true, Some(record)),
                node("worker-b-0", false, Some(skipped)),
                node("worker-b-1", false, None),
            ],
            node_upgrades: Vec::new(),
            ca_rotations: Vec::new(),
            simulated: None,
        };
        let text = text(&status, Named::None, Columns::Narrow);
        assert!(
            text.contains("QUARANTINED toward v1.38.0 (drain blocked)")
                && text.contains("BLOCKED toward v1.38.0 (drain blocked, skipped)"),
            "{text}"
        );
        assert!(
            text.contains(
                "blocked worker-a-0: quarantined (left cordoned, labelled) toward v1.38.0 at \
                 2026-01-01T00:40:00Z; budgets: default/pinned; pods left: default/pinned-abc\n"
            ),
            "{text}"
        );
        assert!(
            text.contains("blocked worker-b-0: skipped toward"),
            "{text}"
        );
        assert!(!text.contains("blocked worker-b-1"), "{text}");
        let json = serde_json::to_value(&status)?;
        assert_eq!(json["nodes"][0]["quarantined"], true);
        assert_eq!(json["nodes"][0]["blocked"]["budgets"][0], "default/pinned");
        let plain = json["nodes"][2].as_object().cloned().unwrap_or_default();
        assert!(!plain.contains_key("blocked") && !plain.contains_key("quarantined"));
        Ok(())
    }
    #[test]
    fn a_rolled_back_node_says_from_what_to_what_and_why() {
        let record = upgrade_driver::records::Rollback {
            from: "v1.38.0".into(),
            to: "v1.37.2".into(),
            boot_id: "b1".into(),
            why: Some("the host upgrade exited 1".into()),
            step: Some("Upgrade".into()),
            rollback_boot_id: Some("b1".into()),
            uid: Some("r".into()),
            exit_code: Some(0),
            done: Some("2026-01-01T00:04:17Z".into()),
        };
        let status = Status {
            lease_name: "kube-system/nodejob".into(),
            lease: None,
            nodes: vec![NodeState {
                node: "worker-a-0".into(),
                version: Some("v1.37.2".into()),
                ready: true,
                cordoned: false,
                upgrade_state: None,
                in_progress: None,
                host_job: None,
                done: None,
                ca: None,
                conditions: Vec::new(),
                upgrade: None,
                blocked: None,
                quarantined: false,
                blocked_record: None,
                rollback: serde_json::to_value(&record).ok(),
                rollback_record: Some(record),
                role_labels: BTreeSet::new(),
                zone: None,
            }],
            node_upgrades: Vec::new(),
            ca_rotations: Vec::new(),
            simulated: None,
        };
        let text = text(&status, Named::None, Columns::Narrow);
        assert!(
            text.contains("ROLLED BACK to v1.37.2 (from v1.38.0)"),
            "{text}"
        );
        assert!(
            text.contains(
                "rolled back worker-a-0: from v1.38.0 to v1.37.2 at 2026-01-01T00:04:17Z, after it \
                 failed at Upgrade: the host upgrade exited 1\n"
            ),
            "{text}"
        );
    }

    #[test]
    fn the_declared_rolls_are_shown_as_kubectl_get_nu_and_car_show_them() {
        use crate::inspect::status::RollState;
        let status = Status {
            lease_name: "kube-system/nodejob".into(),
            lease: None,
            nodes: Vec::new(),
            node_upgrades: vec![RollState {
                name: "upgrade-to-v1-38-0".into(),
                target: "v1.38.0".into(),
                ready: "False".into(),
                reason: "Progressing".into(),
                message: "1 of 3 nodes up to date".into(),
                nodes: 3,
                up_to_date: 1,
                failed: 0,
            }],
            ca_rotations: vec![crate::inspect::status::RotationState {
                name: "ca-2027".into(),
                fingerprint: "d4501ab39bde".into(),
                phase: "Issuing".into(),
                ready: "False".into(),
                reason: "Progressing".into(),
                message: "5 nodes: 5 staged, 2 issued".into(),
                staged: 5,
                issued: 2,
                finalized: 0,
                failed: 0,
            }],
            simulated: None,
        };
        let text = text(&status, Named::None, Columns::Narrow);
        let lines: Vec<&str> = text.lines().skip(1).take(5).collect();
        assert_eq!(
            lines,
            [
                "NODEUPGRADE         TARGET   READY  REASON       NODES  UP-TO-DATE  FAILED",
                "upgrade-to-v1-38-0  v1.38.0  False  Progressing  3      1           0",
                "",
                "CAROTATION  FINGERPRINT   PHASE    READY  REASON       STAGED  ISSUED  FINALIZED  FAILED",
                "ca-2027     d4501ab39bde  Issuing  False  Progressing  5       2       0          0",
            ],
            "{text}"
        );
        let json = serde_json::to_value(&status).unwrap();
        assert_eq!(json["node_upgrades"][0]["up_to_date"], 1);
        assert_eq!(json["ca_rotations"][0]["issued"], 2);
    }
}
