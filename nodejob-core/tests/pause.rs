//! The pause switch on the shared Lease object ([`nodejob_core::pause`]) on the fake: set on a
//! cluster that never had the Lease (created, held by nobody), taken by an acquisition that
//! keeps it, kept through renewals and the release, lifted; the annotation key reaches a
//! cluster, so it is pinned.

use std::time::Duration;

use nodejob_core::lease::{Claim, LeaseConfig, acquire, holder};
use nodejob_core::pause::{PAUSE_ANNOTATION, Pause, paused, set_pause};
use nodejob_core::{Clock, LeaseApi};
use nodejob_fake::FakeCluster;

const NS: &str = "kube-system";
const NAME: &str = "nodejob";

fn config() -> LeaseConfig {
    LeaseConfig {
        namespace: NS.into(),
        name: NAME.into(),
        identity: "driver-a".into(),
        duration: Duration::from_secs(30),
    }
}

#[test]
fn the_annotation_key_is_pinned() {
    assert_eq!(PAUSE_ANNOTATION, "stratum.ciq.com/paused");
}

#[tokio::test(start_paused = true)]
async fn the_switch_outlives_every_holding_of_the_lease_until_lifted() {
    let fake = FakeCluster::new();
    let pause = Pause {
        by: "alice@console".into(),
        at: Some(fake.wall_time()),
        reason: "the storage team is failing over".into(),
    };
    // No Lease yet: created held by nobody, the switch on it.
    assert_eq!(
        set_pause(&fake, NS, NAME, Some(&pause)).await.unwrap(),
        None
    );
    let lease = fake.get_lease(NS, NAME).await.unwrap();
    assert_eq!(holder(&lease), None);
    assert_eq!(paused(&lease), Some(pause.clone()));
    // Set again: the first kept, and said.
    let later = Pause {
        by: "bob".into(),
        ..pause.clone()
    };
    assert_eq!(
        set_pause(&fake, NS, NAME, Some(&later)).await.unwrap(),
        Some(pause.clone())
    );
    // A driver acquires the Lease, renews it, releases it: the switch stays through all.
    let (mut held, _) = acquire(&fake, &config(), &Claim::default()).await.unwrap();
    assert_eq!(paused(held.lease()), Some(pause.clone()));
    fake.sleep(Duration::from_secs(11)).await;
    held.check(&fake).await.unwrap();
    let renewed = fake.get_lease(NS, NAME).await.unwrap();
    assert!(holder(&renewed).is_some());
    assert_eq!(paused(&renewed), Some(pause.clone()));
    // Lifted while held: the holder's next renewal meets the Conflict, reads the Lease again
    // and keeps it lifted (it writes the Lease as it read it).
    assert_eq!(
        set_pause(&fake, NS, NAME, None).await.unwrap(),
        Some(pause.clone())
    );
    fake.sleep(Duration::from_secs(11)).await;
    held.renew(&fake).await.unwrap();
    assert_eq!(paused(held.lease()), None);
    // Paused again while held: the release keeps it.
    set_pause(&fake, NS, NAME, Some(&pause)).await.unwrap();
    held.check(&fake).await.unwrap();
    held.release(&fake).await.unwrap();
    let released = fake.get_lease(NS, NAME).await.unwrap();
    assert_eq!(holder(&released), None);
    assert_eq!(paused(&released), Some(pause.clone()));
    // Lifted; lifting again changes nothing.
    assert_eq!(set_pause(&fake, NS, NAME, None).await.unwrap(), Some(pause));
    assert_eq!(set_pause(&fake, NS, NAME, None).await.unwrap(), None);
    assert_eq!(paused(&fake.get_lease(NS, NAME).await.unwrap()), None);
}
