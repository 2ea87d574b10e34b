//! What a real host keeps between two `stratum` processes: its [`StratumState`] as one JSON
//! record, and its [`StratumTiming`] as one line (the node agent's timing annotation reads
//! the same way). The model itself keeps nothing: the fake and the node agent hold a
//! [`StratumHost`](super::StratumHost) in memory, where `stratum` on a real node reads its
//! record before a command and writes it back after.

use std::collections::{BTreeMap, BTreeSet};
use std::str::FromStr;
use std::time::Duration;

use serde_json::{Map, Value, json};

use super::{CaPhase, Operation, StratumState, StratumTiming};

impl Operation {
    /// Every operation, in order.
    pub const ALL: [Operation; 10] = [
        Operation::Upgrade,
        Operation::Health,
        Operation::Rollback,
        Operation::CaStage,
        Operation::CaIssue,
        Operation::CaFinalize,
        Operation::CaAbort,
        Operation::CaStatus,
        Operation::CaVerify,
        Operation::Usage,
    ];
}

impl FromStr for Operation {
    type Err = String;

    /// The operation [`Operation::as_str`] names.
    fn from_str(s: &str) -> Result<Self, String> {
        (Operation::ALL.into_iter())
            .find(|o| o.as_str() == s)
            .ok_or_else(|| format!("{s:?} is no stratum operation"))
    }
}

impl FromStr for CaPhase {
    type Err = String;

    /// The phase [`CaPhase::as_str`] names.
    fn from_str(s: &str) -> Result<Self, String> {
        [
            CaPhase::Idle,
            CaPhase::Staged,
            CaPhase::Issued,
            CaPhase::Finalized,
        ]
        .into_iter()
        .find(|p| p.as_str() == s)
        .ok_or_else(|| format!("{s:?} is no CA rotation phase"))
    }
}

impl StratumState {
    /// The state as one JSON object: `{"version": "v1.37.2", "previous": "v1.36.4" (or
    /// `null`: no deployment to roll back to), "bootID": "…", "phase": "idle",
    /// "trusted": ["sha256:…"], "issuer": "sha256:…", "executions": {"upgrade": 1}}`, each
    /// operation that ran by its command ([`Operation::as_str`]), as the node agent's host
    /// report names them.
    pub fn to_record(&self) -> String {
        let executions: Map<String, Value> = (self.executions.iter())
            .map(|(operation, n)| (operation.as_str().to_string(), (*n).into()))
            .collect();
        json!({
            "version": self.version,
            "previous": self.previous,
            "bootID": self.boot_id,
            "phase": self.phase.as_str(),
            "trusted": self.trusted,
            "issuer": self.issuer,
            "executions": executions,
        })
        .to_string()
    }

    /// The state [`to_record`](Self::to_record) wrote, or why `record` is not one.
    pub fn from_record(record: &str) -> Result<StratumState, String> {
        let value: Value = serde_json::from_str(record).map_err(|e| e.to_string())?;
        let text = |key: &str| {
            value[key]
                .as_str()
                .map(String::from)
                .ok_or_else(|| format!("{key}: not a string"))
        };
        let trusted = (value["trusted"].as_array())
            .ok_or("trusted: not a list")?
            .iter()
            .map(|t| t.as_str().map(String::from).ok_or("trusted: not strings"))
            .collect::<Result<BTreeSet<_>, _>>()?;
        let executions = (value["executions"].as_object())
            .ok_or("executions: not an object")?
            .iter()
            .map(|(command, n)| {
                let n = (n.as_u64())
                    .and_then(|n| u32::try_from(n).ok())
                    .ok_or_else(|| format!("executions of {command}: not a count"))?;
                Ok((command.parse::<Operation>()?, n))
            })
            .collect::<Result<BTreeMap<_, _>, String>>()?;
        let previous = match &value["previous"] {
            Value::Null => None,
            Value::String(v) => Some(v.clone()),
            _ => return Err("previous: not a string or null".into()),
        };
        Ok(StratumState {
            version: text("version")?,
            previous,
            boot_id: text("bootID")?,
            trusted,
            issuer: text("issuer")?,
            phase: text("phase")?.parse()?,
            executions,
        })
    }
}

impl FromStr for StratumTiming {
    type Err = String;

    /// `upgrade=2s,reboot-delay=1s,reboot=3s`: fields of [`StratumTiming`] (`upgrade`,
    /// `reboot-delay`, `reboot`, `op`, `restart-delay`, `restart`), each `<n>s` or `<n>ms`,
    /// every field left out at its default; the empty line is the default timing.
    fn from_str(line: &str) -> Result<Self, String> {
        let mut timing = StratumTiming::default();
        for field in line.split(',').map(str::trim).filter(|f| !f.is_empty()) {
            let bad = || format!("{field:?} is not <field>=<n>s or <n>ms");
            let (key, amount) = field.split_once('=').ok_or_else(bad)?;
            let duration = match amount.strip_suffix("ms") {
                Some(ms) => ms.parse().map(Duration::from_millis),
                None => (amount.strip_suffix('s').ok_or_else(bad)?)
                    .parse()
                    .map(Duration::from_secs),
            }
            .map_err(|_| bad())?;
            let slot = match key.trim() {
                "upgrade" => &mut timing.upgrade_time,
                "reboot-delay" => &mut timing.reboot_delay,
                "reboot" => &mut timing.reboot_time,
                "op" => &mut timing.op_time,
                "restart-delay" => &mut timing.restart_delay,
                "restart" => &mut timing.restart_time,
                other => {
                    return Err(format!(
                        "unknown field {other:?} (upgrade, reboot-delay, reboot, op, \
                         restart-delay, restart)"
                    ));
                }
            };
            *slot = duration;
        }
        Ok(timing)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stratum::StratumHost;

    #[test]
    fn a_state_reads_back_as_it_was_written() {
        let mut host = StratumHost::new("v1.37.2", "boot-1");
        let argv = |line: &str| line.split(' ').map(String::from).collect::<Vec<_>>();
        host.exec(&argv("stratum carotate stage --add sha256:new"));
        host.exec(&argv("stratum carotate issue --ca sha256:new"));
        host.exec(&argv("stratum carotate status"));
        host.exec(&argv("stratum carotate status"));
        host.exec(&argv("stratum nonsense"));
        let record = host.state.to_record();
        assert_eq!(StratumState::from_record(&record), Ok(host.state.clone()));
        let value: Value = serde_json::from_str(&record).unwrap();
        assert_eq!(value["phase"], "issued");
        assert_eq!(
            value["executions"],
            json!({"carotate stage": 1, "carotate issue": 1, "carotate status": 2, "usage": 1})
        );
        let fresh = StratumState::new("v1", "b");
        assert_eq!(StratumState::from_record(&fresh.to_record()), Ok(fresh));
    }

    #[test]
    fn the_deployment_a_rollback_goes_back_to_is_kept() {
        // A real node's stratum runs `rollback` in a process of its own, after the upgrade's:
        // the other deployment and the rollback's count must survive the record.
        let mut host = StratumHost::new("v1.37.2", "boot-1");
        host.state.previous = Some("v1.36.4".into());
        host.state.executions.insert(Operation::Rollback, 1);
        let record = host.state.to_record();
        let value: Value = serde_json::from_str(&record).unwrap();
        assert_eq!(value["previous"], "v1.36.4");
        assert_eq!(value["executions"], json!({"rollback": 1}));
        let back = StratumState::from_record(&record).unwrap();
        assert_eq!(back.previous.as_deref(), Some("v1.36.4"));
        assert_eq!(back, host.state);
        let fresh: Value = serde_json::from_str(&StratumState::new("v1", "b").to_record()).unwrap();
        assert_eq!(fresh["previous"], Value::Null);
    }

    #[test]
    fn a_record_that_is_not_one_says_why() {
        let fresh: Value = serde_json::from_str(&StratumState::new("v1", "b").to_record()).unwrap();
        let broken = |key: &str, value: Value| {
            let mut v = fresh.clone();
            v[key] = value;
            StratumState::from_record(&v.to_string()).unwrap_err()
        };
        assert_eq!(
            broken("phase", json!("rotating")),
            "\"rotating\" is no CA rotation phase"
        );
        assert_eq!(broken("trusted", json!("sha256:1")), "trusted: not a list");
        assert_eq!(
            broken("executions", json!({"reboot": 1})),
            "\"reboot\" is no stratum operation"
        );
        assert_eq!(
            broken("executions", json!({"upgrade": -1})),
            "executions of upgrade: not a count"
        );
        assert_eq!(broken("version", json!(1)), "version: not a string");
        assert_eq!(
            broken("previous", json!(1)),
            "previous: not a string or null"
        );
        assert!(StratumState::from_record("{").is_err());
    }

    #[test]
    fn every_operation_reads_back_from_its_command() {
        for operation in Operation::ALL {
            assert_eq!(operation.as_str().parse(), Ok(operation));
        }
    }

    #[test]
    fn timing_from_a_line() {
        let parse = |line: &str| line.parse::<StratumTiming>();
        assert_eq!(parse(""), Ok(StratumTiming::default()));
        let t = parse("upgrade=2s, reboot-delay=500ms,reboot=3s,op=0s").unwrap();
        assert_eq!(t.upgrade_time, Duration::from_secs(2));
        assert_eq!(t.reboot_delay, Duration::from_millis(500));
        assert_eq!(t.reboot_time, Duration::from_secs(3));
        assert_eq!(t.op_time, Duration::ZERO);
        assert_eq!(t.restart_time, StratumTiming::default().restart_time);
        let t = parse("restart-delay=1ms,restart=4s").unwrap();
        assert_eq!(
            (t.restart_delay, t.restart_time),
            (Duration::from_millis(1), Duration::from_secs(4))
        );
        for bad in [
            "upgrade",
            "upgrade=2",
            "upgrade=2m",
            "upgrade=-1s",
            "boot=1s",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }
}
