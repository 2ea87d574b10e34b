//! `nodejob pause` and `nodejob resume`: the pause switch on the shared Lease object
//! ([`nodejob_core::pause`]), honoured by both drivers before every step starts, by a run in
//! flight and by any later run.

use nodejob_core::pause::{Pause, set_pause};

use serde::Serialize;

use super::{Banner, say_simulated};
use crate::args::{Format, Global, PauseArgs, ResumeArgs};
use crate::backend::{Backend, Prepare, Target};
use crate::exit::Exit;
use crate::inspect::status::{PauseState, lease_name};

/// What `pause` and `resume` did, as `-o json|yaml` prints it.
#[derive(Debug, Serialize)]
struct Switched {
    /// `namespace/name` of the Lease object the switch is kept on.
    lease: String,
    /// Whether this command changed the switch (`false`: already paused, or not paused).
    changed: bool,
    /// The pause in force after the command (`null` once resumed).
    paused: Option<PauseState>,
    /// The pause in force before it (`null` when there was none).
    was: Option<PauseState>,
}

impl Switched {
    /// Prints it in `format` (json or yaml; text is each command's own).
    fn print(&self, format: Format) -> Result<(), Exit> {
        match format {
            Format::Json => outln!("{}", serde_json::to_string(self).unwrap_or_default()),
            Format::Yaml | Format::Text | Format::Wide => out!(
                "{}",
                serde_saphyr::to_string(self).map_err(|e| Exit::failed(e.to_string()))?
            ),
        }
        Ok(())
    }
}

/// Who pauses, when `--by` does not say: who the apiserver takes the kubeconfig's
/// credentials for (`kubectl auth whoami`: `alice@example.com`,
/// `system:serviceaccount:ops:roller`), else (under `--simulate`, or an apiserver that cannot
/// say) `$USER@host`.
pub(crate) async fn who(target: &Target) -> String {
    match target.whoami().await {
        Some(user) => user,
        None => local_user(),
    }
}

/// `$USER@host`: who runs this, as this machine says.
pub(crate) fn local_user() -> String {
    let user = std::env::var("USER").unwrap_or_else(|_| "someone".into());
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "localhost".into());
    format!("{user}@{host}")
}

/// Runs `nodejob pause`.
pub(crate) fn pause(global: &Global, args: PauseArgs) -> Result<Exit, Exit> {
    let ns = global.namespace.clone();
    let backend = Backend::new(global, args.sim.simulate)
        .clocked(None, args.sim.start.simulate_start)
        .prepared(Prepare::History(ns.clone()));
    let reason = args.reason.unwrap_or_default();
    backend.block_on(|t| async move {
        say_simulated(&t, Banner::Stderr);
        let by = match args.by {
            Some(by) => by,
            None => who(&t).await,
        };
        let pause = Pause {
            by,
            at: Some(t.clock()()),
            reason,
        };
        let lease = lease_name();
        let before = set_pause(&*t.api, &ns, &lease, Some(&pause))
            .await
            .map_err(|e| Exit::failed(e.to_string()))?;
        if global.output != Format::Text {
            Switched {
                lease: format!("{ns}/{lease}"),
                changed: before.is_none(),
                paused: Some(PauseState::of(before.as_ref().unwrap_or(&pause))),
                was: before.as_ref().map(PauseState::of),
            }
            .print(global.output)?;
            return Ok(Exit::ok());
        }
        match before {
            Some(was) => outln!(
                "already paused (lease {ns}/{lease}): {was}; left as it was (`nodejob resume` \
                 lifts it)"
            ),
            None => outln!(
                "{pause} (lease {ns}/{lease}): every roll, in flight or to come, finishes the \
                 step under way and starts no other until `nodejob resume`"
            ),
        }
        Ok(Exit::ok())
    })
}

/// Runs `nodejob resume`.
pub(crate) fn resume(global: &Global, args: ResumeArgs) -> Result<Exit, Exit> {
    let ns = global.namespace.clone();
    let backend = Backend::new(global, args.sim.simulate)
        .clocked(None, args.sim.start.simulate_start)
        .prepared(Prepare::History(ns.clone()));
    backend.block_on(|t| async move {
        say_simulated(&t, Banner::Stderr);
        let lease = lease_name();
        let before = set_pause(&*t.api, &ns, &lease, None)
            .await
            .map_err(|e| Exit::failed(e.to_string()))?;
        if global.output != Format::Text {
            Switched {
                lease: format!("{ns}/{lease}"),
                changed: before.is_some(),
                paused: None,
                was: before.as_ref().map(PauseState::of),
            }
            .print(global.output)?;
            return Ok(Exit::ok());
        }
        match before {
            Some(was) => outln!(
                "resumed (lease {ns}/{lease}; it was {was}): paused runs go on with their next \
                 step"
            ),
            None => outln!("not paused (lease {ns}/{lease}): nothing to resume"),
        }
        Ok(Exit::ok())
    })
}
