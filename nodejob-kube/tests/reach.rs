//! `KubeApi::reach`: one `GET /version`; any HTTP answer is reached, no answer is not.

mod support;

use std::time::Duration;

use nodejob_core::ErrorKind;
use support::{get, serve};

type TestResult = Result<(), Box<dyn std::error::Error>>;

#[tokio::test(start_paused = true)]
async fn any_answer_to_get_version_is_reached_and_none_is_a_transient_error() -> TestResult {
    let (api, server) = serve(vec![
        get("/version").reply(200, r#"{"major":"1","minor":"33"}"#),
        // Credentials refused: the apiserver is there; the verbs will say the rest.
        get("/version").reply(
            401,
            r#"{"kind":"Status","code":401,"reason":"Unauthorized"}"#,
        ),
        get("/version").fail("tcp connect error: Connection refused (os error 111)"),
        get("/version").hang(),
    ]);
    let within = Duration::from_secs(3);
    api.reach(within).await?;
    api.reach(within).await?;
    let refused = api.reach(within).await.unwrap_err();
    assert_eq!(refused.kind, ErrorKind::Transient);
    assert!(
        refused.message.contains("Connection refused"),
        "{refused:?}"
    );
    let silent = api.reach(within).await.unwrap_err();
    assert_eq!(silent.kind, ErrorKind::Transient);
    assert_eq!(silent.message, "no answer within 3s");
    drop(api);
    assert_eq!(server.finish().await, vec!["GET /version"; 4]);
    Ok(())
}

/// Issue 34: the version a reach read is the next `version()`'s answer, once, within
/// `REACHED_STANDS`: a command's reach and its skew gate make one `GET /version`, not two; a
/// later read, or one after the reach's answer is too old, is a request of its own.
#[tokio::test(start_paused = true)]
async fn the_version_a_reach_read_answers_the_next_version_read_once() -> TestResult {
    use nodejob_core::NodeApi;
    let (api, server) = serve(vec![
        get("/version").reply(200, r#"{"major":"1","minor":"37","gitVersion":"v1.37.2"}"#),
        get("/version").reply(200, r#"{"major":"1","minor":"38","gitVersion":"v1.38.0"}"#),
        get("/version").reply(200, r#"{"major":"1","minor":"38","gitVersion":"v1.38.0"}"#),
        get("/version").reply(200, r#"{"major":"1","minor":"38","gitVersion":"v1.38.1"}"#),
    ]);
    api.reach(Duration::from_secs(3)).await?;
    assert_eq!(api.version().await?.git_version, "v1.37.2");
    assert_eq!(api.version().await?.git_version, "v1.38.0");
    // Reached again, then asked only once its answer is too old to stand for a read now.
    api.reach(Duration::from_secs(3)).await?;
    tokio::time::sleep(nodejob_kube::REACHED_STANDS + Duration::from_secs(1)).await;
    assert_eq!(api.version().await?.git_version, "v1.38.1");
    drop(api);
    assert_eq!(server.finish().await, vec!["GET /version"; 4]);
    Ok(())
}
