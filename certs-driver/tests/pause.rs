//! The pause switch (issue 22, item 3) in the CA rotation, on the fake in paused virtual time:
//! a rotation begun paused runs no phase until the switch is lifted, then rotates every node;
//! one still paused at its pause deadline ends paused, no phase run on any node.

mod support;

use std::time::Duration;

use certs_driver::{Outcome, quiet, run};
use nodejob_core::Clock;
use nodejob_core::pause::{Pause, set_pause};
use support::*;

type TestResult = Result<(), Box<dyn std::error::Error>>;

fn pause() -> Pause {
    Pause {
        by: "alice@console".into(),
        at: None,
        reason: "the storage team is failing over".into(),
    }
}

#[tokio::test(start_paused = true)]
async fn a_rotation_begun_paused_runs_no_phase_until_resumed() -> TestResult {
    let ca = new_ca();
    let (fake, names) = cluster(7, 1, 2);
    set_pause(&*fake, NS, "nodejob", Some(&pause())).await?;
    {
        let fake = fake.clone();
        tokio::spawn(async move {
            fake.sleep(Duration::from_secs(1800)).await;
            set_pause(&*fake, NS, "nodejob", None).await.unwrap();
        });
    }
    let began = fake.now();
    // Half an hour in, still paused: no phase ran anywhere.
    let rotation = {
        let (fake, spec) = (fake.clone(), plan_spec(&ca));
        tokio::spawn(async move { run(&harness(fake), &plan(spec), quiet()).await })
    };
    fake.sleep(Duration::from_secs(1790)).await;
    for name in &names {
        assert_eq!(
            phase_runs(&fake, name),
            [0; 4],
            "{name} ran a phase while paused"
        );
    }
    let report = rotation.await??;
    assert_eq!(report.outcome, Outcome::Done, "{report:#?}");
    assert!(fake.now().saturating_sub(began) >= Duration::from_secs(1800));
    for name in &names {
        assert_eq!(phase_runs(&fake, name)[..3], [1, 1, 1], "{name}");
    }
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn a_rotation_still_paused_at_its_deadline_ends_paused() -> TestResult {
    let ca = new_ca();
    let (fake, names) = cluster(7, 1, 2);
    set_pause(&*fake, NS, "nodejob", Some(&pause())).await?;
    let report = run(&harness(fake.clone()), &plan(plan_spec(&ca)), quiet()).await?;
    let Outcome::Paused { why } = &report.outcome else {
        return Err(format!("ended {:?}", report.outcome).into());
    };
    assert!(
        why.starts_with("paused by alice@console: the storage team is failing over; still paused"),
        "{why}"
    );
    for name in &names {
        assert_eq!(
            phase_runs(&fake, name),
            [0; 4],
            "{name} ran a phase while paused"
        );
    }
    Ok(())
}
