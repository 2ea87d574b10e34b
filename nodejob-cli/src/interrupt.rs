//! Ctrl-C during a run: once stops starting nodes, twice exits at once.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use upgrade_driver::Stop;

/// Ctrl-C once: stop starting nodes (`stop`; without one, an operation that cannot stop
/// midway, such as an abort, says so and carries on); twice: exit at once.
pub(crate) fn on_interrupt(stop: Option<Stop>) {
    let presses = Arc::new(AtomicU32::new(0));
    let _ = ctrlc::set_handler(move || {
        if presses.fetch_add(1, Ordering::SeqCst) == 0 {
            match &stop {
                Some(stop) => {
                    stop.request();
                    eprintln!(
                        "\nstopping: no further node starts; the step in flight finishes \
                         (Ctrl-C again to exit at once)"
                    );
                }
                None => eprintln!(
                    "\nan abort does not stop midway: it finishes restoring the nodes (Ctrl-C \
                     again to exit at once; run it again to resume)"
                ),
            }
        } else {
            eprintln!(
                "\nexiting now; the cluster keeps the run's state: run the same command again \
                 to resume"
            );
            std::process::exit(130);
        }
    });
}
