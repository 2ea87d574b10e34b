//! Configuration is loaded as kubectl loads it, with kube's retry off.
//!
//! `KUBECONFIG` is process-wide and setting it is `unsafe` in edition 2024 (and `unsafe_code` is
//! forbidden here), so the test re-runs itself as a child process with `KUBECONFIG` pointing at a
//! kubeconfig it wrote; the child does the loading and the assertions.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::process::Command;

use nodejob_core::{ErrorKind, JobApi};
use nodejob_kube::{ConnectError, KubeApi, load_config};

type TestResult = Result<(), Box<dyn std::error::Error>>;

const CHILD: &str = "NODEJOB_KUBE_CONFIG_TEST_CHILD";

const KUBECONFIG: &str = r#"apiVersion: v1
kind: Config
clusters:
- name: alpha
  cluster:
    server: https://alpha.example.invalid:6443
    insecure-skip-tls-verify: true
- name: beta
  cluster:
    server: https://beta.example.invalid:16443
    insecure-skip-tls-verify: true
contexts:
- name: alpha
  context:
    cluster: alpha
    user: operator
    namespace: upgrades
- name: beta
  context:
    cluster: beta
    user: operator
current-context: alpha
users:
- name: operator
  user:
    token: not-a-real-token
"#;

#[tokio::test]
async fn configuration_comes_from_kubeconfig_with_kube_retry_off() -> TestResult {
    if std::env::var_os(CHILD).is_some() {
        return child().await;
    }
    let path = std::env::temp_dir().join(format!("nodejob-kube-{}.kubeconfig", std::process::id()));
    std::fs::write(&path, KUBECONFIG)?;
    let output = Command::new(std::env::current_exe()?)
        .args([
            "configuration_comes_from_kubeconfig_with_kube_retry_off",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD, "1")
        .env("KUBECONFIG", &path)
        .env_remove("KUBE_RS_DEBUG_OVERRIDE_URL")
        .output()?;
    std::fs::remove_file(&path)?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "child failed:\n{stdout}\n{stderr}");
    // The child ran this very test (a filter matching nothing would pass with 0 tests).
    assert!(stdout.contains("1 passed"), "{stdout}");
    Ok(())
}

async fn child() -> TestResult {
    // The current context of the file KUBECONFIG names.
    let config = load_config(None).await?;
    assert_eq!(
        config.cluster_url.to_string(),
        "https://alpha.example.invalid:6443/"
    );
    assert_eq!(config.default_namespace, "upgrades");
    assert!(!config.default_retry, "kube's retry layer must be off");

    // A named context, as `kubectl --context beta`.
    let config = load_config(Some("beta")).await?;
    assert_eq!(
        config.cluster_url.to_string(),
        "https://beta.example.invalid:16443/"
    );
    assert_eq!(config.default_namespace, "default");
    assert!(!config.default_retry);

    let err = load_config(Some("gamma"))
        .await
        .expect_err("no such context");
    assert!(
        matches!(&err, ConnectError::Context { context, .. } if context == "gamma"),
        "{err:?}"
    );

    // A client builds from it: rustls with the ring provider, chosen without a panic.
    let api = KubeApi::connect(None).await?;
    assert_eq!(api.client().default_namespace(), "upgrades");
    Ok(())
}

/// On a real connection: a 503 is answered to the caller at once, not retried by kube (whose
/// default, on for any `Config`, would resend it and return the next answer instead).
#[tokio::test]
async fn kube_retry_is_off_even_for_a_config_that_had_it_on() -> TestResult {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let url = format!("http://{}", listener.local_addr()?);
    let answers = [
        (
            503,
            "Service Unavailable",
            r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"the server is currently unable to handle the request","reason":"ServiceUnavailable","code":503}"#,
        ),
        (
            404,
            "Not Found",
            r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"jobs.batch \"a\" not found","reason":"NotFound","code":404}"#,
        ),
    ];
    let server = std::thread::spawn(move || -> std::io::Result<Vec<String>> {
        let mut seen = Vec::new();
        for (code, phrase, body) in answers {
            let (mut conn, _) = listener.accept()?;
            let mut head = String::new();
            let mut reader = BufReader::new(conn.try_clone()?);
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line)? == 0 || line == "\r\n" {
                    break;
                }
                head.push_str(&line);
            }
            seen.push(head.lines().next().unwrap_or_default().to_string());
            write!(
                conn,
                "HTTP/1.1 {code} {phrase}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            )?;
        }
        Ok(seen)
    });

    let config = kube::Config::new(url.parse()?);
    assert!(config.default_retry, "kube 5 retries by default");
    let api = KubeApi::from_config(config)?;
    let first = api.get_job("ns", "a").await.expect_err("503");
    assert_eq!((first.kind, first.code), (ErrorKind::Transient, 503));
    let second = api.get_job("ns", "a").await.expect_err("404");
    assert!(second.is_not_found(), "{second}");
    drop(api);
    let seen = server.join().expect("the server thread")?;
    assert_eq!(
        seen,
        [
            "GET /apis/batch/v1/namespaces/ns/jobs/a HTTP/1.1",
            "GET /apis/batch/v1/namespaces/ns/jobs/a HTTP/1.1"
        ]
    );
    Ok(())
}
