//! A node's conditions as `kubectl describe node` prints its `Conditions:` table: how `status`
//! shows the drivers' conditions, and what the end-to-end suite holds `kubectl`'s own table to
//! (`nodejob-e2e/src/describe.rs`, through `nodejob status NODE`).

use k8s_openapi::api::core::v1::NodeCondition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

/// `conditions` as `kubectl describe node` prints its `Conditions:` table
/// (`describeNode` in `k8s.io/kubectl/pkg/describe/describe.go`: a header, a rule, a row per
/// condition as `"%v \t%v \t%s \t%s \t%v \t%v"`, the times as `time.RFC1123Z`, indented
/// two spaces, through a `tabwriter` of padding 2, so each column but the message is as wide
/// as its widest cell and two spaces more). The times are said in UTC (kubectl says them in
/// its machine's zone: the same with `TZ=UTC`). Empty when there is no condition.
pub(crate) fn kubectl_describe(conditions: &[NodeCondition]) -> String {
    if conditions.is_empty() {
        return String::new();
    }
    let time = |t: &Option<Time>| {
        t.as_ref().map_or_else(
            || "Mon, 01 Jan 0001 00:00:00 +0000".to_string(),
            |t| {
                let utc = t.0.to_zoned(k8s_openapi::jiff::tz::TimeZone::UTC);
                utc.strftime("%a, %d %b %Y %H:%M:%S %z").to_string()
            },
        )
    };
    // The header and the rule carry no trailing space (their cells are the literal's); each
    // line's first cell takes the two-space indent.
    let head = |cells: [&str; 6]| cells.map(String::from);
    let mut rows: Vec<[String; 6]> = vec![
        head([
            "  Type",
            "Status",
            "LastHeartbeatTime",
            "LastTransitionTime",
            "Reason",
            "Message",
        ]),
        head([
            "  ----",
            "------",
            "-----------------",
            "------------------",
            "------",
            "-------",
        ]),
    ];
    for c in conditions {
        rows.push([
            format!("  {} ", c.type_),
            format!("{} ", c.status),
            format!("{} ", time(&c.last_heartbeat_time)),
            format!("{} ", time(&c.last_transition_time)),
            format!("{} ", c.reason.as_deref().unwrap_or_default()),
            c.message.clone().unwrap_or_default(),
        ]);
    }
    let widths: Vec<usize> = (0..5)
        .map(|i| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0) + 2)
        .collect();
    let mut out = String::from("Conditions:\n");
    for row in &rows {
        let mut line = String::new();
        for (cell, width) in row.iter().zip(&widths) {
            line.push_str(&format!("{cell:<width$}"));
        }
        line.push_str(&row[5]);
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use k8s_openapi::jiff::Timestamp;
    use nodejob_roll::condition::{Held, Standing, UPGRADE, next};

    use super::*;

    fn at(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    #[test]
    fn conditions_read_as_kubectl_describe_node_prints_them() {
        let ready = NodeCondition {
            type_: "Ready".into(),
            status: "True".into(),
            reason: Some("KubeletReady".into()),
            message: Some("kubelet is posting ready status".into()),
            last_heartbeat_time: Some(Time(at("2026-01-01T00:00:40Z"))),
            last_transition_time: Some(Time(at("2026-01-01T00:00:00Z"))),
        };
        let ours = next(
            None,
            UPGRADE,
            &Standing::new(Held::No, "Upgraded", "upgraded to v1.38.0"),
            at("2026-01-01T00:00:51Z"),
        );
        assert_eq!(
            kubectl_describe(&[ready, ours]),
            "Conditions:\n\
             \x20 Type             Status  LastHeartbeatTime                 LastTransitionTime                Reason         Message\n\
             \x20 ----             ------  -----------------                 ------------------                ------         -------\n\
             \x20 Ready            True    Thu, 01 Jan 2026 00:00:40 +0000   Thu, 01 Jan 2026 00:00:00 +0000   KubeletReady   kubelet is posting ready status\n\
             \x20 NodejobUpgrade   False   Thu, 01 Jan 2026 00:00:51 +0000   Thu, 01 Jan 2026 00:00:51 +0000   Upgraded       upgraded to v1.38.0\n"
        );
        assert_eq!(kubectl_describe(&[]), "");
    }
}
