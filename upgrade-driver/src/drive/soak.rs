//! The soak's watch: a node back in service watched until the plan's soak, counted from the
//! start recorded on it, has passed, or it breaks it (NotReady, another boot, deleted); the
//! time left told as it goes; a stop cuts it short.

use std::time::Duration;

use jiff::Timestamp;
use nodejob_core::watch::{From, Until, watch_until};
use nodejob_core::{JobApi, LeaseApi, NodeApi, PodApi, ready};
use nodejob_roll::Cause;

use super::{Run, get_node};
use crate::machine::Observation;
use crate::progress::{Progress, UpgradeEvent};
use crate::records::boot_id;

/// How often at most the time left is told: a tenth of the soak, but not more often than
/// every 30 s.
fn tick(soak: Duration) -> Duration {
    (soak / 10).max(Duration::from_secs(30))
}

impl<A> Run<'_, A>
where
    A: JobApi + NodeApi + PodApi + LeaseApi + ?Sized,
{
    /// Watches node `name` from `since` (RFC 3339; unreadable: from now) for the plan's soak,
    /// on boot `boot`: [`Observation::Soaked`] once it held, or as it broke it; `None` when a
    /// stop was requested first.
    pub(super) async fn soak(&self, name: &str, since: &str, boot: &str) -> Option<Observation> {
        let api = self.api;
        let soak = self.plan.spec().soak.unwrap_or_default();
        let start: Timestamp = since.parse().unwrap_or_else(|_| api.wall_time());
        let end = start
            .checked_add(jiff::SignedDuration::try_from(soak).unwrap_or_default())
            .unwrap_or(start);
        let mut seen = None;
        loop {
            let left = api.wall_time().duration_until(end).unsigned_abs();
            if api.wall_time() >= end {
                let node = match seen {
                    Some(node) => Some(node),
                    None => get_node(api, name).await.ok(),
                };
                return Some(Observation::Soaked {
                    held: node
                        .as_ref()
                        .is_some_and(|n| ready(n) && boot_id(n) == boot),
                    node: node.map(Box::new),
                });
            }
            self.ctx.tell(&Progress::Driver(UpgradeEvent::Soaking {
                node: name.to_string(),
                left_ms: nodejob_roll::millis(left),
            }));
            let watch = watch_until(
                api,
                left.min(tick(soak)),
                From::Read,
                || api.get_node(name),
                |since, t| async move { api.wait_node(name, since.as_deref(), t).await },
                // Deleted, NotReady or rebooted ends the soak at once.
                |node| node.is_none_or(|n| !ready(n) || boot_id(n) != boot),
            );
            let watched = {
                let watch = std::pin::pin!(watch);
                match futures::future::select(watch, self.ctx.limits.stop.asked()).await {
                    futures::future::Either::Left((watched, _)) => watched,
                    futures::future::Either::Right(_) => return None,
                }
            };
            match watched {
                Ok(Until::Met(node)) => {
                    return Some(Observation::Soaked {
                        node: node.map(Box::new),
                        held: false,
                    });
                }
                Ok(Until::TimedOut(node)) => seen = node,
                Err((_, cause)) => {
                    return Some(Observation::Failed(Cause::api(format!(
                        "watching node {name} during its soak: {cause}"
                    ))));
                }
            }
        }
    }
}
