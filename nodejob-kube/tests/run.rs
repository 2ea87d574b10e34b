//! Whole runs of `nodejob_core`'s runner against the scripted apiserver, request by request: the
//! request sequence is the cost of a run, and a long Job costs no more than a short one (one
//! watch streams every status change; nothing polls).

mod support;

use nodejob_core::{CONTROLLER_UID_LABEL, Error, LOG_LIMIT_BYTES, build};
use serde_json::{Value, json};
use support::*;

type TestResult = Result<(), Box<dyn std::error::Error>>;

fn not_found() -> Value {
    status(404, "NotFound", "jobs.batch \"upgrade-node-a\" not found")
}

fn log_path() -> String {
    format!("{PODS_PATH}/{POD}/log")
}

fn deleting(rv: &str) -> Value {
    let mut job = job_complete(rv);
    job["metadata"]["deletionTimestamp"] = json!("2025-06-01T10:00:10Z");
    job["metadata"]["finalizers"] = json!(["foregroundDeletion"]);
    job
}

/// The requests every run starts with: no Job of that name, create ours, one watch that streams
/// its status changes (a Pod started, then the Job finished), then its Pods by our UID.
fn up_to_pods(finished: Value, exit_code: i32) -> Vec<Exchange> {
    let selector = format!("{CONTROLLER_UID_LABEL}={UID}");
    vec![
        get(JOB_PATH).reply_json(404, &not_found()),
        post(
            JOBS_PATH,
            serde_json::to_value(build(&spec())).expect("a job"),
        )
        .reply_json(201, &job("1200", json!({}))),
        // Sent at once: the runner waits at most POLL_INTERVAL for a Pod before it lists events.
        watch(JOBS_PATH, NAME, "1200").reply(
            200,
            event("MODIFIED", &job_running("1201")) + &event("MODIFIED", &finished),
        ),
        get(PODS_PATH)
            .query(&[("labelSelector", &selector)])
            .reply_json(200, &list("Pod", "v1", "1210", vec![pod(exit_code)])),
    ]
}

fn read_log() -> Exchange {
    get(&log_path()).query(&[
        ("container", "upgrade"),
        ("limitBytes", &LOG_LIMIT_BYTES.to_string()),
    ])
}

fn delete_exactly(rv: &str) -> Exchange {
    delete(
        JOB_PATH,
        json!({
            "propagationPolicy": "Foreground",
            "preconditions": { "uid": UID, "resourceVersion": rv }
        }),
    )
    .reply_json(200, &deleting(rv))
}

#[tokio::test(start_paused = true)]
async fn run_exit_code_logs_costs_six_requests() -> TestResult {
    let mut script = up_to_pods(job_complete("1209"), 0);
    script.push(read_log().reply(200, "upgrading node-a\ndone\n"));
    script.push(delete_exactly("1209"));
    let (api, server) = serve(script);

    let (exit_code, log) = nodejob_core::run_exit_code_logs(&api, &spec()).await?;
    assert_eq!((exit_code, log.as_str()), (0, "upgrading node-a\ndone\n"));
    drop(api);
    assert_eq!(
        server.finish().await,
        [
            format!("GET {JOB_PATH}"),
            format!("POST {JOBS_PATH}"),
            format!("WATCH {JOBS_PATH}"),
            format!("GET {PODS_PATH}"),
            format!("GET {}", log_path()),
            format!("DELETE {JOB_PATH}"),
        ]
    );
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn run_costs_four_requests() -> TestResult {
    // A succeeded Job answers 0 with no Pod read: the list `up_to_pods` ends with is not made.
    let mut script = up_to_pods(job_complete("1209"), 0);
    script.pop();
    script.push(delete_exactly("1209"));
    let (api, server) = serve(script);

    nodejob_core::run(&api, &spec()).await?;
    drop(api);
    assert_eq!(
        server.finish().await,
        [
            format!("GET {JOB_PATH}"),
            format!("POST {JOBS_PATH}"),
            format!("WATCH {JOBS_PATH}"),
            format!("DELETE {JOB_PATH}"),
        ]
    );
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn a_failed_job_is_left_in_place_and_its_exit_code_returned() -> TestResult {
    let failed = job(
        "1209",
        json!({
            "conditions": [{
                "type": "Failed",
                "status": "True",
                "lastProbeTime": "2025-06-01T10:00:09Z",
                "lastTransitionTime": "2025-06-01T10:00:09Z",
                "reason": "BackoffLimitExceeded",
                "message": "Job has reached the specified backoff limit"
            }],
            "startTime": "2025-06-01T10:00:01Z",
            "failed": 1,
            "ready": 0,
            "terminating": 0,
            "uncountedTerminatedPods": {}
        }),
    );
    let (api, server) = serve(up_to_pods(failed, 3));

    assert_eq!(nodejob_core::run_exit_code(&api, &spec()).await?, 3);
    drop(api);
    // No DELETE: a failed Job is left for inspection.
    assert_eq!(server.finish().await.len(), 4);
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn an_unreachable_kubelet_leaves_the_log_unread_with_the_exit_code() -> TestResult {
    let message = "Get \"https://10.0.3.17:10250/containerLogs/kube-system/upgrade-node-a-x7k2p/\
                   upgrade?limitBytes=4194304\": dial tcp 10.0.3.17:10250: connect: connection \
                   refused";
    let mut script = up_to_pods(job_complete("1209"), 0);
    // Transient: the runner reads it three times (two retries), then gives up on the log.
    for _ in 0..3 {
        script.push(read_log().reply_json(500, &status(500, "", message)));
    }
    let (api, server) = serve(script);

    let err = nodejob_core::run_exit_code_logs(&api, &spec())
        .await
        .expect_err("the log cannot be read");
    let Error::LogUnread {
        exit_code, detail, ..
    } = &err
    else {
        panic!("expected LogUnread, got {err:?}");
    };
    assert_eq!(*exit_code, 0);
    assert!(detail.contains(message), "{detail}");
    drop(api);
    // No DELETE: the Job is left in place, its log still to be read.
    let seen = server.finish().await;
    assert_eq!(seen.len(), 7, "{seen:#?}");
    assert!(!seen.iter().any(|r| r.starts_with("DELETE")));
    Ok(())
}
