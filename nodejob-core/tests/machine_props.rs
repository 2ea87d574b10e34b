//! Property tests of the run state machine under arbitrary (but type-correct) answers: whatever
//! the cluster does, the run ends within its bound, every delete is exact and aimed at a Job the
//! machine inspected, and a result is only ever reported for the Job it created; whether the
//! run reads its Job's name first or the caller did ([`Policy::known_free`]).

mod support;

use std::collections::BTreeSet;
use std::time::Duration;

use nodejob_core::runner::{Intent, Machine, Mode, Observation as Obs, Policy};
use nodejob_core::{ApiError, Change, POLL_INTERVAL};
use proptest::prelude::*;
use support::*;

/// Answers one intent from the next choice byte; returns the answer and how much time passed.
fn answer(intent: &Intent, choice: u8, created: &mut u32, uids: &[&str]) -> (Obs, Duration) {
    let uid = uids[choice as usize % uids.len()];
    let rv = 10 + u32::from(choice);
    let state = match choice % 5 {
        0 => running(uid, rv),
        1 => complete(uid, rv),
        2 => failed(uid, rv),
        3 => deleting(complete(uid, rv)),
        _ => deadline_exceeded(uid, rv),
    };
    let transient = Obs::Failed(ApiError::transient(503, "unavailable"));
    match intent {
        Intent::GetJob => match choice % 4 {
            0 => (
                Obs::Failed(ApiError::not_found("not found")),
                Duration::ZERO,
            ),
            1 => (transient, Duration::ZERO),
            _ => (Obs::Job(state), Duration::ZERO),
        },
        Intent::CreateJob(_) => match choice % 4 {
            0 => (
                Obs::Failed(ApiError::already_exists("exists")),
                Duration::ZERO,
            ),
            1 => (transient, Duration::ZERO),
            _ => {
                *created += 1;
                (
                    Obs::Job(job(&format!("ours-{created}"), rv)),
                    Duration::ZERO,
                )
            }
        },
        Intent::DeleteJob(_) => match choice % 4 {
            0 => (
                Obs::Failed(ApiError::conflict("precondition")),
                Duration::ZERO,
            ),
            1 => (
                Obs::Failed(ApiError::not_found("not found")),
                Duration::ZERO,
            ),
            2 => (transient, Duration::ZERO),
            _ => (Obs::Deleted, Duration::ZERO),
        },
        Intent::WaitJob { timeout, .. } => match choice % 6 {
            0 => (Obs::Changed(Change::TimedOut), *timeout),
            1 => (Obs::Changed(Change::Deleted(state)), Duration::from_secs(1)),
            2 => (
                Obs::Failed(ApiError::gone("expired")),
                Duration::from_secs(1),
            ),
            3 => (transient, Duration::from_secs(1)),
            _ => (
                Obs::Changed(Change::Applied(state)),
                Duration::from_secs(u64::from(choice % 7)),
            ),
        },
        Intent::ListPods { .. } => {
            let pods = vec![pod("p", uid, "upgrade", Some(i32::from(choice % 3)))];
            if choice.is_multiple_of(5) {
                (transient, Duration::ZERO)
            } else {
                (Obs::Pods(pods), Duration::ZERO)
            }
        }
        Intent::ReadLog { .. } => {
            if choice.is_multiple_of(3) {
                (transient, Duration::ZERO)
            } else {
                (Obs::Log("log".into()), Duration::ZERO)
            }
        }
        Intent::ListEvents { uid } => {
            let reason = if choice.is_multiple_of(4) {
                "FailedCreate"
            } else {
                "Scheduled"
            };
            (Obs::Events(vec![event(uid, reason, "m")]), Duration::ZERO)
        }
        Intent::GetNode => match choice % 3 {
            0 => (
                Obs::Failed(ApiError::not_found("nodes \"node-a\" not found")),
                Duration::ZERO,
            ),
            1 => (transient, Duration::ZERO),
            _ => (
                Obs::Node(Box::new(node(choice.is_multiple_of(2)))),
                Duration::ZERO,
            ),
        },
        Intent::Sleep(d) => (Obs::Slept, *d),
        Intent::Finish(_) => unreachable!(),
    }
}

fn mode(m: u8) -> Mode {
    match m % 3 {
        0 => Mode::Run,
        1 => Mode::ExitCode,
        _ => Mode::ExitCodeLogs,
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn runs_end_in_bound_delete_exactly_and_report_only_their_own_job(
        choices in proptest::collection::vec(any::<u8>(), 1..64),
        m in any::<u8>(),
        known_free in any::<bool>(),
    ) {
        let spec = spec();
        let bound = spec.wait_bound();
        // Created at once or after the guard's read: the same properties either way.
        let policy = Policy { known_free, ..Policy::default() };
        let mut machine = Machine::with_policy(&spec, mode(m), Duration::ZERO, policy);
        let mut step = machine.start();
        let (mut now, mut created) = (Duration::ZERO, 0u32);
        let mut inspected: BTreeSet<String> = BTreeSet::new();
        let mut last_job: Option<String> = None;
        let mut selected: Option<String> = None;
        let mut last_pods = Vec::new();
        let uids = ["old", "ours-1", "ours-2", "theirs"];
        // Answers cycle through the choices so that every run has an answer for each intent.
        for (i, choice) in choices.iter().cycle().enumerate() {
            prop_assert!(i < 10_000, "no end after {i} steps");
            let outcome = match &step.intent {
                Intent::Finish(outcome) => outcome.clone(),
                intent => {
                    if let Intent::DeleteJob(pre) = intent {
                        let uid = pre.uid.clone().unwrap_or_default();
                        prop_assert!(pre.resource_version.is_some(), "delete without a resourceVersion");
                        prop_assert!(inspected.contains(&uid), "deleted {uid}, never inspected");
                    }
                    if let Intent::WaitJob { timeout, .. } = intent {
                        prop_assert!(*timeout <= bound, "a wait beyond the bound: {timeout:?}");
                    }
                    if let Intent::ListPods { selector } = intent {
                        // Pods are read for the Job just seen finished, by its UID.
                        let uid = selector.rsplit('=').next().map(String::from);
                        prop_assert_eq!(&uid, &last_job, "pods read for another job");
                        selected = uid;
                    }
                    let (obs, took) = answer(intent, choice.wrapping_add(i as u8), &mut created, &uids);
                    match &obs {
                        Obs::Job(j) | Obs::Changed(Change::Applied(j)) | Obs::Changed(Change::Deleted(j)) => {
                            let uid = j.metadata.uid.clone().unwrap_or_default();
                            inspected.insert(uid.clone());
                            last_job = Some(uid);
                        }
                        Obs::Pods(pods) => last_pods = pods.clone(),
                        _ => {}
                    }
                    now += took;
                    step = machine.step(now, obs);
                    continue;
                }
            };
            // Two bounds at most: the guard's, then ours from its creation; plus one backoff.
            prop_assert!(now <= bound * 2 + POLL_INTERVAL, "ended at {now:?}, bound {bound:?}");
            if let Ok(report) = outcome {
                // From ours, or from a Job of the name it read: pods read by its UID, or (a
                // success answers 0 with no Pod read) the Job itself, named by the report.
                prop_assert!(
                    created > 0 || selected.is_some() || inspected.contains(&report.uid),
                    "a result without a job"
                );
                if report.exit_code != 0 {
                    // A non-zero code can only come from a pod the selected Job controls.
                    let from_ours = last_pods.iter().any(|p| {
                        let owner = &p.metadata.owner_references.as_ref().unwrap()[0].uid;
                        Some(owner) == selected.as_ref()
                    });
                    prop_assert!(from_ours, "exit {} reported from another job's pod", report.exit_code);
                }
            }
            break;
        }
    }
}
