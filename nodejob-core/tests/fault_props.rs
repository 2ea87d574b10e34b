//! Runner invariants under seeded fault schedules on the in-memory cluster: whatever transient
//! errors the apiserver answers and whatever an earlier run left behind, the run ends within its
//! bound, never deletes without preconditions, never kills a running host operation, and never
//! reports another Job's result.

use std::time::Duration;

use nodejob_core::{ApiError, Clock, Error, POLL_INTERVAL, Spec, build, run_exit_code_logs};
use nodejob_fake::{FakeCluster, Verb, Verbs, host};
use proptest::prelude::*;

const NS: &str = "kube-system";
const NAME: &str = "upgrade-node-a";

fn spec(host: &[String]) -> Spec {
    let mut argv = vec![
        "nsenter".to_string(),
        "-t".into(),
        "1".into(),
        "--".into(),
        "stratum".into(),
    ];
    argv.extend(host.iter().cloned());
    Spec {
        namespace: NS.into(),
        name: NAME.into(),
        node: "node-a".into(),
        label_key: "stratum.ciq.com/upgrade".into(),
        container: "upgrade".into(),
        argv,
        active_deadline: Duration::from_secs(300),
        poll_attempts: 24,
        kind: "per-node upgrade".into(),
        output: Some(std::sync::Arc::new(|_: &nodejob_core::Note| {})),
        ..Spec::default()
    }
}

/// What an earlier run left behind.
#[derive(Clone, Copy, Debug)]
enum Stale {
    None,
    Running,
    Succeeded,
    Failed,
}

fn stale() -> impl Strategy<Value = Stale> {
    prop_oneof![
        Just(Stale::None),
        Just(Stale::Running),
        Just(Stale::Succeeded),
        Just(Stale::Failed)
    ]
}

async fn scenario(seed: u64, p: f64, stale: Stale) -> Result<(), TestCaseError> {
    let c = FakeCluster::with_seed(seed);
    c.add_node("node-a").unwrap();
    let stale_run = Duration::from_secs(30);
    let stale_uid = match stale {
        Stale::None => None,
        s => {
            let host = match s {
                Stale::Failed => vec![host::log("stale"), host::exit(7)],
                _ => vec![host::log("stale"), host::run(stale_run)],
            };
            let job = c.create_job_now(&build(&spec(&host))).unwrap();
            if !matches!(s, Stale::Running) {
                tokio::time::sleep(stale_run + Duration::from_secs(10)).await;
            }
            job.metadata.uid
        }
    };
    let started = c.now();
    c.fail_randomly(Verbs::All, ApiError::transient(503, "unavailable"), p);
    let ours = spec(&[host::log("ours"), host::exit(3)]);
    let outcome = run_exit_code_logs(&c, &ours).await;
    let took = c.now() - started;

    // Ends within its bound: the guard's and ours, plus one backoff and the post-finish retries.
    let bound = ours.wait_bound();
    prop_assert!(
        took <= bound * 2 + POLL_INTERVAL * 6,
        "took {took:?}, bound {bound:?}: {outcome:?}"
    );
    let calls = c.calls();
    for call in calls.iter().filter(|call| call.verb == Verb::DeleteJob) {
        let pre = call.preconditions.as_ref();
        prop_assert!(
            pre.is_some_and(|p| p.uid.is_some() && p.resource_version.is_some()),
            "inexact delete: {call:?}"
        );
        // A running earlier Job is never deleted before its host operation ended.
        if matches!(stale, Stale::Running) && pre.and_then(|p| p.uid.clone()) == stale_uid {
            prop_assert!(call.at >= stale_run, "running job deleted at {:?}", call.at);
        }
    }
    match outcome {
        Ok((code, log)) => prop_assert_eq!((code, log.as_str()), (3, "ours\n")),
        Err(Error::LogUnread { exit_code, .. }) => prop_assert_eq!(exit_code, 3),
        // Under faults a run may give up, but only with an API error or a timeout.
        Err(e @ (Error::Api { .. } | Error::Timeout { .. })) => {
            prop_assert!(p > 0.0, "failed without faults: {e}")
        }
        Err(e) => prop_assert!(false, "unexpected error: {e}"),
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn runs_under_seeded_faults_keep_their_guarantees(seed in any::<u64>(), p in prop_oneof![Just(0.0), 0.0..0.5f64], stale in stale()) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_time().start_paused(true).build().unwrap();
        rt.block_on(scenario(seed, p, stale))?;
    }
}
