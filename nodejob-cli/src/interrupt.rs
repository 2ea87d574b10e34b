//! Ctrl-C during a run: once stops starting nodes, twice exits at once. The acknowledgement
//! goes where a person sees it ([`Notice`]): on the terminal's board while one is drawn
//! (stderr would be drawn over), on stderr otherwise.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use upgrade_driver::Stop;

/// Where Ctrl-C's acknowledgement goes.
pub(crate) type Say = Arc<dyn Fn(&str) + Send + Sync>;

/// Where Ctrl-C's acknowledgement goes: stderr, unless routed elsewhere (the board).
#[derive(Default)]
pub(crate) struct Notice {
    to: Mutex<Option<Say>>,
}

impl Notice {
    /// The acknowledgement goes to `say` from now on.
    pub(crate) fn route(&self, say: Say) {
        *self.to.lock().unwrap_or_else(|e| e.into_inner()) = Some(say);
    }

    /// The acknowledgement goes to stderr again.
    pub(crate) fn unroute(&self) {
        *self.to.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }

    /// Says `text` where it is routed.
    fn say(&self, text: &str) {
        let to = self.to.lock().unwrap_or_else(|e| e.into_inner()).clone();
        match to {
            Some(say) => say(text),
            None => eprintln!("\n{text}"),
        }
    }
}

/// Ctrl-C once: stop starting nodes (`stop`; without one, an operation that cannot stop
/// midway, such as an abort, says so and carries on); twice: exit at once, saying when a rerun
/// is accepted: the run's Lease (`lease`, renewed every third of it) is left held, and another
/// run is refused until it expires. Returns where the acknowledgement goes, for the renderer
/// to route it.
pub(crate) fn on_interrupt(stop: Option<Stop>, lease: Duration) -> Arc<Notice> {
    let notice = Arc::new(Notice::default());
    // A reader of stdout gone (`| head`) is one Ctrl-C: the roll stops where it safely can.
    let on_pipe = stop.clone();
    crate::stdout::on_reader_gone(move || match &on_pipe {
        Some(stop) => {
            stop.request();
            eprintln!(
                "\nstdout's reader went away: stopping as on Ctrl-C: no further node starts; \
                 the step in flight finishes (the rest is said on stderr only)"
            );
        }
        None => eprintln!(
            "\nstdout's reader went away: the abort does not stop midway; it finishes \
             restoring the nodes (the rest is said on stderr only)"
        ),
    });
    let said = notice.clone();
    let presses = Arc::new(AtomicU32::new(0));
    let _ = ctrlc::set_handler(move || {
        if presses.fetch_add(1, Ordering::SeqCst) == 0 {
            match &stop {
                Some(stop) => {
                    stop.request();
                    said.say(
                        "stopping: no further node starts; the step in flight finishes \
                         (Ctrl-C again to exit at once)",
                    );
                }
                None => said.say(
                    "an abort does not stop midway: it finishes restoring the nodes (Ctrl-C \
                     again to exit at once; run it again to resume)",
                ),
            }
        } else {
            eprintln!("\n{}", forced_exit(lease));
            std::process::exit(130);
        }
    });
    notice
}

/// What the second Ctrl-C says as the process exits: the run's state is in the cluster, and its
/// Lease, not released (a release is a write to the apiserver, not made from a signal handler),
/// refuses another run until it expires, at most `lease` after now.
fn forced_exit(lease: Duration) -> String {
    format!(
        "exiting now; the cluster keeps the run's state. The run's Lease is left held: a rerun \
         before it expires, within {}s, is refused (exit 3, naming it); then run the same \
         command again to resume (`nodejob status` shows the Lease's holder and renewal)",
        lease.as_secs()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_forced_exit_says_when_a_rerun_is_accepted() {
        let said = forced_exit(Duration::from_secs(60));
        assert!(
            said.contains("within 60s, is refused (exit 3")
                && said.contains("run the same command again to resume"),
            "{said}"
        );
    }
}
