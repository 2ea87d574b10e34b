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
