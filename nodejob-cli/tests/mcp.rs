//! `nodejob mcp --simulate 5` as an MCP client sees it: rmcp's client side speaks to the built
//! binary over stdio. The tools and their schemas; an upgrade after its preview, with its
//! progress and report; tokens refused (stale, missing, for other arguments) with nothing
//! changed; a cancelled upgrade stopping after the step in flight; bad arguments refused naming
//! the field, with no API call; the long-roll arguments (`on_undrainable`, `max_blocked`,
//! `soak`, `on_failure`) said by the preview, covered by its token and acted on by the upgrade.

use std::collections::BTreeSet;
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail, ensure};
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResult, ClientRequest,
    ProgressNotificationParam, ProgressToken, ServerResult,
};
use rmcp::service::{NotificationContext, PeerRequestOptions, RunningService};
use rmcp::transport::{ConfigureCommandExt, TokioChildProcess};
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::{Value, json};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};

/// Where the simulated clock starts in these tests (by default it is the machine's time): fixed,
/// so that every simulated run prints the same lines.
const SIMULATE_START: &str = "2026-01-01T00:00:00Z";

/// How long any one wait may take before the test fails (a bound, not a pause).
const PATIENCE: Duration = Duration::from_secs(120);

const TARGET: &str = "v1.38.0";
const NODES: [&str; 5] = ["cp-0", "cp-1", "cp-2", "worker-a-0", "worker-b-0"];

/// The client: records every progress and logging notification it receives (of the latter,
/// the data).
#[derive(Clone)]
struct Recorder {
    progress: UnboundedSender<ProgressNotificationParam>,
    logs: UnboundedSender<Value>,
}

impl ClientHandler for Recorder {
    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let _ = self.progress.send(params);
    }

    #[allow(deprecated)] // MCP logging: deprecated in the SDK for a future protocol
    async fn on_logging_message(
        &self,
        params: rmcp::model::LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let _ = self.logs.send(params.data);
    }
}

/// A session with `nodejob mcp --simulate 5`, and what it has been notified of.
struct Session {
    client: RunningService<RoleClient, Recorder>,
    progress_rx: UnboundedReceiver<ProgressNotificationParam>,
    logs_rx: UnboundedReceiver<Value>,
    /// The progress notifications received, not yet handed out by [`Session::finished`].
    progress: Vec<ProgressNotificationParam>,
    /// The logging notifications' data received, not yet handed out.
    logs: Vec<Value>,
}

impl Session {
    async fn start() -> Result<Session> {
        Session::start_with(&[]).await
    }

    /// A session with `nodejob mcp --simulate 5 MORE...`.
    async fn start_with(more: &[&str]) -> Result<Session> {
        let args = [&["mcp", "--simulate", "5"], more].concat();
        Session::start_on(&args).await
    }

    /// A session with `nodejob ARGS...`.
    async fn start_on(args: &[&str]) -> Result<Session> {
        let (progress, progress_rx) = unbounded_channel();
        let (logs, logs_rx) = unbounded_channel();
        let command = tokio::process::Command::new(env!("CARGO_BIN_EXE_nodejob")).configure(|c| {
            c.args(args)
                .env_remove("KUBECONFIG")
                .env("NODEJOB_SIMULATE_START", SIMULATE_START)
                .env("RUST_LOG", "error");
        });
        let client = Recorder { progress, logs }
            .serve(TokioChildProcess::new(command)?)
            .await
            .context("starting the session")?;
        Ok(Session {
            client,
            progress_rx,
            logs_rx,
            progress: Vec::new(),
            logs: Vec::new(),
        })
    }

    /// Calls `tool` with `arguments` and waits for its result.
    async fn call(&self, tool: &'static str, arguments: Value) -> Result<CallToolResult> {
        let arguments = arguments.as_object().cloned().context("arguments")?;
        let call = self
            .client
            .call_tool(CallToolRequestParams::new(tool).with_arguments(arguments));
        Ok(tokio::time::timeout(PATIENCE, call).await??)
    }

    /// Sends a call of `tool`, not waiting for its result: its request handle.
    async fn send(
        &self,
        tool: &'static str,
        arguments: Value,
    ) -> Result<rmcp::service::RequestHandle<RoleClient>> {
        let arguments = arguments.as_object().cloned().context("arguments")?;
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(
            CallToolRequestParams::new(tool).with_arguments(arguments),
        ));
        Ok(self
            .client
            .send_cancellable_request(request, PeerRequestOptions::no_options())
            .await?)
    }

    /// Calls `tool` with `arguments` and waits for its result: the tool's result and the
    /// call's progress token (for [`Session::finished`]).
    async fn run(
        &self,
        tool: &'static str,
        arguments: Value,
    ) -> Result<(CallToolResult, ProgressToken)> {
        let handle = self.send(tool, arguments).await?;
        let progress_token = handle.progress_token.clone();
        let response = tokio::time::timeout(PATIENCE, handle.await_response()).await??;
        let ServerResult::CallToolResult(result) = response else {
            bail!("not a tool result: {response:?}");
        };
        Ok((result, progress_token))
    }

    /// The `status` tool's structured content.
    async fn status(&self) -> Result<Value> {
        let result = self.call("status", json!({})).await?;
        ensure!(result.is_error != Some(true), "status: {}", text(&result));
        result
            .structured_content
            .context("status: no structured content")
    }

    /// `upgrade_preview` with `arguments`, and the token it returned.
    async fn preview(&self, arguments: Value) -> Result<(Value, String)> {
        let result = self.call("upgrade_preview", arguments).await?;
        ensure!(result.is_error != Some(true), "preview: {}", text(&result));
        let content = result.structured_content.context("preview: no structure")?;
        let token = content["preview_token"]
            .as_str()
            .context("preview: no token")?
            .to_string();
        Ok((content, token))
    }

    /// Waits for the end of the call of `tool` whose progress token is `token`: its report
    /// notification, and every notification the server sent before it (the report counts
    /// them: the client handles each notification in a task of its own, so they may come in
    /// any order). Returns the report, the call's progress and its logging notifications.
    async fn finished(
        &mut self,
        tool: &str,
        token: &ProgressToken,
    ) -> Result<(Value, Vec<ProgressNotificationParam>, Vec<Value>)> {
        let is_report = |l: &Value| l["event"] == "report" && l["tool"] == tool;
        let end = loop {
            if let Some(end) = self.logs.iter().find(|l| is_report(l)) {
                break end.clone();
            }
            self.receive().await?;
        };
        let logged = end["logging_notifications"].as_u64().context("a count")? as usize;
        let progressed = end["progress_notifications"].as_u64().context("a count")? as usize;
        let ours = |l: &Value| l["tool"] == tool && !is_report(l);
        while self.logs.iter().filter(|l| ours(l)).count() < logged
            || self
                .progress
                .iter()
                .filter(|p| &p.progress_token == token)
                .count()
                < progressed
        {
            self.receive().await?;
        }
        let (logs, rest) = std::mem::take(&mut self.logs)
            .into_iter()
            .partition(|l| l["tool"] == tool);
        self.logs = rest;
        let (progress, rest) = std::mem::take(&mut self.progress)
            .into_iter()
            .partition(|p| &p.progress_token == token);
        self.progress = rest;
        let logs: Vec<Value> = logs.into_iter().filter(|l| !is_report(l)).collect();
        Ok((end["report"].clone(), progress, logs))
    }

    /// Waits for the next notification, and keeps it.
    async fn receive(&mut self) -> Result<()> {
        let next = async {
            tokio::select! {
                log = self.logs_rx.recv() => log.map(|l| self.logs.push(l)),
                p = self.progress_rx.recv() => p.map(|p| self.progress.push(p)),
            }
        };
        tokio::time::timeout(PATIENCE, next)
            .await
            .map_err(|_| anyhow!("no notification in {PATIENCE:?}"))?
            .context("the session ended")
    }

    async fn close(self) -> Result<()> {
        self.client.cancel().await?;
        Ok(())
    }
}

/// Asserts that the call with `arguments` was refused, its text saying `says`.
fn refused_saying(result: &CallToolResult, arguments: &Value, says: &str) {
    assert_eq!(result.is_error, Some(true), "{arguments}: {}", text(result));
    assert!(text(result).contains(says), "{arguments}: {}", text(result));
}

fn text(result: &CallToolResult) -> String {
    (result.content.iter())
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Each node's version, as `status` reports it.
fn versions(status: &Value) -> Vec<(String, String)> {
    (status["nodes"].as_array().into_iter().flatten())
        .map(|n| {
            (
                n["node"].as_str().unwrap_or("?").to_string(),
                n["version"].as_str().unwrap_or("?").to_string(),
            )
        })
        .collect()
}

/// The simulated cluster's write count and resourceVersion, as `status` reports them.
fn writes(status: &Value) -> (Value, Value) {
    (
        status["simulated"]["writes"].clone(),
        status["simulated"]["resource_version"].clone(),
    )
}

/// The entry of `node` in `list` (a report's or `status`'s nodes), found by `key`.
fn entry<'a>(list: &'a Value, key: &str, node: &str) -> Result<&'a Value> {
    (list.as_array().into_iter().flatten())
        .find(|n| n[key] == node)
        .with_context(|| format!("{node} not in {list}"))
}

/// `arguments` with `token` as their `preview_token`.
fn with_token(mut arguments: Value, token: &str) -> Value {
    arguments["preview_token"] = json!(token);
    arguments
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tools_are_listed_with_their_schemas_and_annotations() -> Result<()> {
    let session = Session::start().await?;
    let tools = session.client.list_all_tools().await?;
    let names: BTreeSet<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    let read_only = [
        "status",
        "jobs",
        "render",
        "upgrade_preview",
        "rotate_ca_preview",
        "pause_preview",
    ];
    let mutating = [
        "upgrade",
        "rotate_ca",
        "rotate_ca_abort",
        "run",
        "pause",
        "resume",
    ];
    let want: BTreeSet<&str> = read_only.iter().chain(&mutating).copied().collect();
    assert_eq!(names, want);
    for tool in &tools {
        let name = tool.name.as_ref();
        let a = tool.annotations.clone().context("annotations")?;
        let schema = tool.schema_as_json_value();
        assert_eq!(schema["type"], "object", "{name}");
        let required: Vec<&str> = (schema["required"].as_array().into_iter().flatten())
            .filter_map(Value::as_str)
            .collect();
        if mutating.contains(&name) {
            assert_eq!(a.read_only_hint, Some(false), "{name}");
            assert_eq!(a.destructive_hint, Some(true), "{name}");
            assert!(required.contains(&"preview_token"), "{name}: {schema}");
            assert_eq!(schema["properties"]["preview_token"]["type"], "string");
        } else {
            assert_eq!(a.read_only_hint, Some(true), "{name}");
            assert_eq!(a.destructive_hint, Some(false), "{name}");
            assert!(!required.contains(&"preview_token"), "{name}: {schema}");
        }
        assert!(tool.description.as_ref().is_some_and(|d| d.len() > 40));
    }
    let upgrade = (tools.iter())
        .find(|t| t.name == "upgrade")
        .context("upgrade")?
        .schema_as_json_value();
    for field in [
        "to",
        "max_unavailable",
        "drain_timeout",
        "window",
        "health_check",
    ] {
        assert!(
            upgrade["properties"].get(field).is_some(),
            "{field}: {upgrade}"
        );
    }
    assert_eq!(upgrade["required"], json!(["to", "preview_token"]));
    let info = session.client.peer_info().context("server info")?;
    assert!(
        (info.instructions.as_deref()).is_some_and(|i| i.contains("simulated")),
        "{info:?}"
    );
    session.close().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upgrade_with_its_preview_token_streams_progress_and_reports_every_node_at_the_target()
-> Result<()> {
    let mut session = Session::start().await?;
    let before = session.status().await?;
    assert!(
        versions(&before).iter().all(|(_, v)| v == "v1.37.2"),
        "{before}"
    );

    let (preview, token) = session.preview(json!({"to": TARGET})).await?;
    let batches = preview["preview"]["batches"]
        .as_array()
        .context("batches")?;
    assert_eq!(batches.len(), 5, "{preview}");

    let (result, progress_token) = session
        .run("upgrade", json!({"to": TARGET, "preview_token": token}))
        .await?;
    assert_eq!(result.is_error, Some(false), "{}", text(&result));
    let report = result.structured_content.clone().context("no report")?;
    assert_eq!(report["outcome"]["outcome"], "done", "{report}");
    assert_eq!(report["totals"]["upgraded"], 5, "{report}");
    for node in NODES {
        let n = (report["nodes"].as_array().into_iter().flatten())
            .find(|n| n["name"] == node)
            .with_context(|| format!("{node} not in the report"))?;
        assert_eq!(n["to"], TARGET, "{n}");
        assert_eq!(n["result"]["result"], "upgraded", "{n}");
        assert!(text(&result).contains(node), "the summary lists {node}");
    }

    let (reported, progress, logged) = session.finished("upgrade", &progress_token).await?;
    assert_eq!(
        reported, report,
        "the report notification carries the result's report"
    );
    // Progress: with the call's token, one per event, counting up, each a line of text.
    let mut counts: Vec<f64> = progress.iter().map(|p| p.progress).collect();
    counts.sort_by(f64::total_cmp);
    let expected: Vec<f64> = (1..=progress.len()).map(|i| i as f64).collect();
    assert_eq!(counts, expected);
    let messages: BTreeSet<String> = progress.iter().filter_map(|p| p.message.clone()).collect();
    for node in NODES {
        for step in ["Cordon", "Drain", "Upgrade", "Reboot", "Uncordon"] {
            assert!(
                messages.contains(&format!("{node}: {step}...")),
                "no progress for {node} {step}: {messages:?}"
            );
        }
        assert!(
            messages
                .iter()
                .any(|m| m.starts_with(&format!("{node}: upgraded after")))
        );
    }
    // Logging: the drivers' events as they serialise them.
    let finished: BTreeSet<&str> = (logged.iter())
        .filter(|l| l["event"]["event"] == "node_finished")
        .filter_map(|l| l["event"]["node"].as_str())
        .collect();
    assert_eq!(finished, NODES.into_iter().collect());

    let after = session.status().await?;
    for (node, version) in versions(&after) {
        assert_eq!(version, TARGET, "{node}");
    }
    assert!(
        after["lease"]["holder"].is_null(),
        "the Lease is released: {after}"
    );
    session.close().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_stale_or_foreign_token_is_refused_and_nothing_changes() -> Result<()> {
    let session = Session::start().await?;
    let (_, whole) = session.preview(json!({"to": TARGET})).await?;

    // The cluster changes after that preview: cp-0 alone is upgraded, with its own preview.
    let (_, first) = session
        .preview(json!({"to": TARGET, "nodes": ["cp-0"]}))
        .await?;
    let one = session
        .call(
            "upgrade",
            json!({"to": TARGET, "nodes": ["cp-0"], "preview_token": first}),
        )
        .await?;
    assert_eq!(one.is_error, Some(false), "{}", text(&one));

    let before = session.status().await?;
    let refused = [
        (json!({"to": TARGET}), "preview_token: required"),
        (
            json!({"to": TARGET, "preview_token": whole}),
            "upgrade_preview again",
        ),
        (
            json!({"to": TARGET, "preview_token": "sha256:00"}),
            "upgrade_preview again",
        ),
        (
            json!({"to": "v1.39.0", "preview_token": first}),
            "upgrade_preview again",
        ),
        (
            json!({"to": TARGET, "nodes": ["cp-0"], "preview_token": first}),
            "upgrade_preview again",
        ),
    ];
    for (arguments, why) in refused {
        let result = session.call("upgrade", arguments.clone()).await?;
        refused_saying(&result, &arguments, why);
        assert!(text(&result).contains("preview_token"), "{}", text(&result));
        assert!(result.structured_content.is_none());
    }
    let after = session.status().await?;
    assert_eq!(
        writes(&after),
        writes(&before),
        "a refused call wrote: {after}"
    );
    assert_eq!(versions(&after), versions(&before));
    let moved: Vec<_> = (versions(&after).into_iter())
        .filter(|(_, v)| v == TARGET)
        .map(|(n, _)| n)
        .collect();
    assert_eq!(
        moved,
        ["cp-0"],
        "only the upgrade with its token moved a node"
    );

    // A fresh preview of what is left sees the cluster as it is.
    let (preview, _) = session.preview(json!({"to": TARGET})).await?;
    let skipped: Vec<&str> = (preview["preview"]["skipped"]
        .as_array()
        .into_iter()
        .flatten())
    .filter_map(|s| s[0].as_str())
    .collect();
    assert_eq!(skipped, ["cp-0"], "{preview}");
    session.close().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_upgrade_stops_after_the_step_in_flight_and_resumes() -> Result<()> {
    let mut session = Session::start().await?;
    let (_, token) = session.preview(json!({"to": TARGET})).await?;
    let handle = session
        .send("upgrade", json!({"to": TARGET, "preview_token": token}))
        .await?;
    let progress_token = handle.progress_token.clone();
    // Cancel as soon as a step has started: it is then in flight.
    while !(session.progress.iter()).any(|p| {
        p.progress_token == progress_token
            && p.message.as_deref().is_some_and(|m| m.ends_with("..."))
    }) {
        session.receive().await?;
    }
    handle.cancel(Some("the operator said stop".into())).await?;

    // The result of a cancelled call is not sent: the report comes as a notification.
    let (report, _, logged) = session.finished("upgrade", &progress_token).await?;
    assert_eq!(report["outcome"]["outcome"], "stopped", "{report}");
    let nodes: Vec<&Value> = report["nodes"].as_array().into_iter().flatten().collect();
    let started = nodes.iter().take_while(|n| !n["result"].is_null()).count();
    assert!(started >= 1, "{report}");
    assert!(
        nodes[started..].iter().all(|n| n["result"].is_null()),
        "{report}"
    );
    assert!(
        nodes[4]["result"].is_null(),
        "the last node was never started: {report}"
    );
    // Each started node was upgraded, or stopped at the step that was in flight: nothing on
    // it after that step started, every step before it finished.
    let steps = |event: &str, node: &Value| -> BTreeSet<String> {
        (logged.iter())
            .filter(|l| l["tool"] == "upgrade" && l["event"]["event"] == event)
            .filter(|l| &l["event"]["node"] == node)
            .filter_map(|l| l["event"]["step"].as_str().map(str::to_string))
            .collect()
    };
    const ORDER: [&str; 6] = ["Cordon", "Drain", "Upgrade", "Reboot", "Health", "Uncordon"];
    for n in &nodes[..started] {
        let (began, ended) = (
            steps("step_started", &n["name"]),
            steps("step_finished", &n["name"]),
        );
        if n["result"]["result"] == "upgraded" {
            assert_eq!(began, ended, "{n}");
            continue;
        }
        let at = n["result"]["step"]
            .as_str()
            .with_context(|| format!("{n}"))?;
        let at = ORDER.iter().position(|s| *s == at).context("a step")?;
        for (i, step) in ORDER.iter().enumerate() {
            let step = step.to_string();
            if i < at {
                // Before the step in flight: each step that began, ended.
                assert!(
                    !began.contains(&step) || ended.contains(&step),
                    "{n}: {ended:?}"
                );
            } else if i > at {
                // After it: nothing began.
                assert!(!began.contains(&step), "{n} went on: {began:?}");
            }
        }
    }
    for n in &nodes[started..] {
        assert!(steps("step_started", &n["name"]).is_empty(), "{n} began");
    }
    assert!(
        logged
            .iter()
            .any(|l| (l["text"].as_str()).is_some_and(|t| t.starts_with("cancelled:"))),
        "the cancellation is acknowledged: {logged:?}"
    );
    // A host Job in flight ran to its end: none was killed or failed.
    let jobs = session.call("jobs", json!({})).await?;
    let jobs = jobs.structured_content.context("jobs")?;
    assert!(
        (jobs["jobs"].as_array().into_iter().flatten()).all(|j| j["status"] != "Failed"),
        "{jobs}"
    );

    // The nodes not started are where they were; a new preview and upgrade resume the roll.
    let status = session.status().await?;
    let last = versions(&status)
        .into_iter()
        .find(|(n, _)| n == "worker-b-0");
    assert_eq!(
        last,
        Some(("worker-b-0".into(), "v1.37.2".into())),
        "{status}"
    );
    let (_, token) = session.preview(json!({"to": TARGET})).await?;
    let resumed = session
        .call("upgrade", json!({"to": TARGET, "preview_token": token}))
        .await?;
    let report = resumed.structured_content.context("no report")?;
    assert_eq!(report["outcome"]["outcome"], "done", "{report}");
    let status = session.status().await?;
    for (node, version) in versions(&status) {
        assert_eq!(version, TARGET, "{node}");
    }
    session.close().await
}

/// On a real cluster, a connection that cannot be made (here a context the kubeconfig lacks)
/// refuses the tool with what the command says of it, and the session goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_not_reached_refuses_the_tool_as_the_command_says_it() -> Result<()> {
    let dir = std::env::temp_dir().join(format!("nodejob-mcp-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let kubeconfig = dir.join("config");
    std::fs::write(
        &kubeconfig,
        "apiVersion: v1\nkind: Config\ncurrent-context: c\nclusters:\n- name: k\n  cluster:\n    server: https://127.0.0.1:1\ncontexts:\n- name: c\n  context:\n    cluster: k\n    user: u\nusers:\n- name: u\n  user:\n    token: t\n",
    )?;
    let kc = kubeconfig.to_str().context("a temporary path in UTF-8")?;
    let command = std::process::Command::new(env!("CARGO_BIN_EXE_nodejob"))
        .args(["status", "--kubeconfig", kc, "--context", "nope"])
        .env_remove("KUBECONFIG")
        .output()?;
    let said = String::from_utf8(command.stderr)?;
    ensure!(said.contains("--context nope"), "{said}");
    let session = Session::start_on(&["mcp", "--kubeconfig", kc, "--context", "nope"]).await?;
    for _ in 0..2 {
        let result = session.call("status", json!({})).await?;
        assert_eq!(result.is_error, Some(true), "{}", text(&result));
        assert_eq!(text(&result), said.trim_end());
    }
    session.close().await.map_err(|e| anyhow!("{e}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_arguments_are_refused_naming_the_field_with_no_api_call() -> Result<()> {
    let session = Session::start().await?;
    // What a `status` costs in API calls, to tell the calls between two of them.
    let calls = |s: &Value| s["simulated"]["api_calls"].as_u64().unwrap_or(0);
    let first = session.status().await?;
    let second = session.status().await?;
    let per_status = calls(&second) - calls(&first);
    assert!(per_status > 0);

    let cases = [
        ("upgrade_preview", json!({}), "to: required"),
        ("upgrade_preview", json!({"to": 5}), "to: invalid type"),
        ("upgrade_preview", json!({"to": ""}), "to: "),
        (
            "upgrade_preview",
            json!({"to": TARGET, "max_unavailable": "150%"}),
            "max_unavailable: ",
        ),
        (
            "upgrade_preview",
            json!({"to": TARGET, "max_unavailable": 0}),
            "max_unavailable: ",
        ),
        (
            "upgrade_preview",
            json!({"to": TARGET, "drain_timeout": "soon"}),
            "drain_timeout: ",
        ),
        (
            "upgrade_preview",
            json!({"to": TARGET, "window": "never"}),
            "window: ",
        ),
        (
            "upgrade_preview",
            json!({"to": TARGET, "binary": "stratum"}),
            "binary: ",
        ),
        (
            "upgrade_preview",
            json!({"to": TARGET, "failure_budget": 2}),
            "failure_budget: 2 is more than max_unavailable (1)",
        ),
        (
            "upgrade_preview",
            json!({"to": TARGET, "window": "sat 01:00-05:00 Mars/Olympus"}),
            "window: \"Mars/Olympus\"",
        ),
        (
            "upgrade_preview",
            json!({"to": TARGET, "nodes": "cp-0"}),
            "nodes: invalid type",
        ),
        (
            "upgrade_preview",
            json!({"to": TARGET, "on_undrainable": "maybe"}),
            "on_undrainable: unknown variant `maybe`, expected one of `fail`, `skip`, `quarantine`",
        ),
        (
            "upgrade_preview",
            json!({"to": TARGET, "max_blocked": -1}),
            "max_blocked: invalid value: integer `-1`",
        ),
        (
            "upgrade_preview",
            json!({"to": TARGET, "max_blocked": "two"}),
            "max_blocked: invalid type",
        ),
        (
            "upgrade_preview",
            json!({"to": TARGET, "soak": "a while"}),
            "soak: ",
        ),
        (
            "upgrade_preview",
            json!({"to": TARGET, "soak": "48h"}),
            "soak: 48h must be more than zero and at most 24h",
        ),
        (
            "upgrade_preview",
            json!({"to": TARGET, "on_failure": "undo"}),
            "on_failure: unknown variant `undo`, expected `stop` or `rollback`",
        ),
        (
            "upgrade",
            json!({"to": TARGET, "on_undrainable": "maybe", "preview_token": "x"}),
            "on_undrainable: unknown variant `maybe`",
        ),
        (
            "upgrade",
            json!({"to": TARGET, "drain_timout": "1m", "preview_token": "x"}),
            "drain_timout: no such argument",
        ),
        (
            "upgrade",
            json!({"to": TARGET, "preview_token": 7}),
            "preview_token: must be a string",
        ),
        (
            "rotate_ca_preview",
            json!({"concurrency": "two"}),
            "concurrency: invalid type",
        ),
        (
            "rotate_ca_preview",
            json!({"concurrency": 0}),
            "concurrency: ",
        ),
        (
            "rotate_ca",
            json!({"new_ca": "/nonexistent/ca.pem", "preview_token": "x"}),
            "new_ca: ",
        ),
        (
            "render",
            json!({"node": "Not_A_Node", "argv": ["true"]}),
            "node: ",
        ),
        (
            "render",
            json!({"node": "cp-0", "argv": ["true"], "image": "busybox"}),
            "image: ",
        ),
        (
            "run",
            json!({"node": "cp-0", "argv": [], "preview_token": "x"}),
            "argv: ",
        ),
        (
            "run",
            json!({"node": "cp-0", "argv": ["true"], "deadline": "0s", "preview_token": "x"}),
            "deadline: ",
        ),
        ("jobs", json!({"selector": 3}), "selector: invalid type"),
        (
            "status",
            json!({"verbose": true}),
            "verbose: no such argument",
        ),
    ];
    for (tool, arguments, field) in cases {
        let result = session.call(tool, arguments.clone()).await?;
        let said = text(&result);
        assert_eq!(result.is_error, Some(true), "{tool} {arguments}: {said}");
        assert!(
            said.contains(field),
            "{tool} {arguments}: {said:?} does not name {field:?}"
        );
    }
    let third = session.status().await?;
    assert_eq!(
        calls(&third) - calls(&second),
        per_status,
        "a refused call made API calls"
    );
    assert_eq!(writes(&third), writes(&first));

    // A selection refused once the nodes are listed names the argument too.
    let result = session
        .call(
            "upgrade_preview",
            json!({"to": TARGET, "selector": "role=wrker"}),
        )
        .await?;
    let said = text(&result);
    assert_eq!(result.is_error, Some(true), "{said}");
    assert!(
        said.ends_with("matches no node; check selector"),
        "{said:?}"
    );

    // An unknown tool is a protocol error.
    let unknown = session.call("reboot_everything", json!({})).await;
    assert!(unknown.is_err(), "{unknown:?}");
    session.close().await.map_err(|e| anyhow!("{e}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn render_then_run_and_a_ca_rotation_each_with_its_token() -> Result<()> {
    let mut session = Session::start().await?;
    let probe = json!({
        "node": "cp-1",
        "argv": ["/bin/probe", "nodejob-test:log=hello from the host", "nodejob-test:exit=7"],
    });
    let rendered = session.call("render", probe.clone()).await?;
    let rendered = rendered.structured_content.context("render")?;
    let job = &rendered["job"];
    assert_eq!(job["kind"], "Job");
    let pod = &job["spec"]["template"]["spec"];
    assert_eq!(pod["nodeName"], "cp-1", "{job}");
    assert_eq!(pod["hostPID"], true, "{job}");
    assert!(
        rendered["yaml"]
            .as_str()
            .is_some_and(|y| y.contains("hostPID: true"))
    );
    let token = rendered["preview_token"]
        .as_str()
        .context("a token")?
        .to_string();

    let mut run = probe.clone();
    run["preview_token"] = json!(token);
    let (ran, progress_token) = session.run("run", run.clone()).await?;
    let ran_content = ran.structured_content.clone().context("run")?;
    assert_eq!(ran_content["exit_code"], 7, "{ran_content}");
    assert_eq!(ran_content["log"], "hello from the host\n");
    assert_eq!(
        ran.is_error,
        Some(true),
        "a command that failed is an error"
    );
    let (_, progress, _) = session.finished("run", &progress_token).await?;
    assert!(
        progress
            .iter()
            .any(|p| p.message.as_deref().is_some_and(|m| m.contains("created"))),
        "the runner's notes stream: {progress:?}"
    );
    // The Job is the cluster's now: the same token is stale.
    let again = session.call("run", run).await?;
    assert_eq!(again.is_error, Some(true));
    assert!(
        text(&again).contains("call render again"),
        "{}",
        text(&again)
    );

    // A CA rotation with the simulation's CA, then its abort, refused once issued.
    let preview = session.call("rotate_ca_preview", json!({})).await?;
    let preview = preview.structured_content.context("rotate_ca_preview")?;
    assert_eq!(preview["for"], "rotate_ca");
    let token = preview["preview_token"]
        .as_str()
        .context("a token")?
        .to_string();
    let abort_preview = session
        .call("rotate_ca_preview", json!({"abort": true}))
        .await?;
    let abort_token = abort_preview.structured_content.context("abort preview")?["preview_token"]
        .as_str()
        .context("a token")?
        .to_string();
    assert_ne!(token, abort_token, "a token is good for one operation");
    let wrong = session
        .call("rotate_ca", json!({"preview_token": abort_token}))
        .await?;
    assert_eq!(wrong.is_error, Some(true), "{}", text(&wrong));
    assert!(
        text(&wrong).contains("rotate_ca_preview"),
        "{}",
        text(&wrong)
    );

    let rotated = session
        .call("rotate_ca", json!({"preview_token": token}))
        .await?;
    let report = rotated.structured_content.clone().context("report")?;
    assert_eq!(report["outcome"]["outcome"], "done", "{}", text(&rotated));
    assert_eq!(report["totals"]["rotated"], 5, "{report}");
    let status = session.status().await?;
    for n in status["nodes"].as_array().into_iter().flatten() {
        assert_eq!(n["ca"]["phase"], "finalized", "{n}");
    }

    let abort_preview = session
        .call("rotate_ca_preview", json!({"abort": true}))
        .await?;
    let abort_token = abort_preview.structured_content.context("abort preview")?["preview_token"]
        .as_str()
        .context("a token")?
        .to_string();
    let before = session.status().await?;
    let abort = session
        .call("rotate_ca_abort", json!({"preview_token": abort_token}))
        .await?;
    assert_eq!(abort.is_error, Some(true), "{}", text(&abort));
    assert!(text(&abort).contains("abort refused"), "{}", text(&abort));
    let after = session.status().await?;
    for (b, a) in (before["nodes"].as_array().into_iter().flatten())
        .zip(after["nodes"].as_array().into_iter().flatten())
    {
        // The abort read every node's status again (and recorded when), and changed no trust.
        for key in ["phase", "trusted", "issuer"] {
            assert_eq!(
                b["ca"][key], a["ca"][key],
                "a refused abort changed {}",
                b["node"]
            );
        }
    }
    session.close().await
}

#[tokio::test]
async fn a_downgrade_is_refused_naming_allow_downgrade_unless_it_is_given() -> Result<()> {
    let session = Session::start().await?;
    let refused = session
        .call("upgrade_preview", json!({"to": "v1.36.0"}))
        .await?;
    let said = text(&refused);
    assert_eq!(refused.is_error, Some(true), "{said}");
    // The override named as the way through, not as the fault.
    assert!(!said.starts_with("allow_downgrade"), "{said}");
    for part in [
        "v1.36.0",
        "cp-0 at v1.37.2",
        "refused without allow_downgrade",
    ] {
        assert!(said.contains(part), "{part:?} not in {said}");
    }
    let (preview, _token) = session
        .preview(json!({"to": "v1.36.0", "allow_downgrade": true}))
        .await?;
    assert!(preview.to_string().contains("v1.36.0"), "{preview}");
    session.close().await.map_err(|e| anyhow!("{e}"))
}

/// Issue 30, item 4, over MCP as on the command line: a target that is no kubelet version, and
/// a version source no selected node reports, are refused by the preview (no token, nothing
/// written), naming the argument and the nodes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_target_or_version_source_the_nodes_cannot_be_judged_by_is_refused_naming_it()
-> Result<()> {
    let session = Session::start().await?;
    let cases = [
        (
            json!({"to": "banana"}),
            vec!["to: ", "\"banana\"", "vMAJOR.MINOR.PATCH"],
        ),
        (json!({"to": "v1.40"}), vec!["to: ", "\"v1.40\""]),
        (
            json!({"to": TARGET, "version_from": "label=example.com/os"}),
            vec![
                "version_from: ",
                "report no version in the label example.com/os",
                "cp-0",
            ],
        ),
    ];
    for (arguments, parts) in cases {
        let refused = session.call("upgrade_preview", arguments.clone()).await?;
        let said = text(&refused);
        assert_eq!(refused.is_error, Some(true), "{arguments}: {said}");
        for part in parts {
            assert!(said.contains(part), "{arguments}: {part:?} not in {said}");
        }
    }
    session.close().await.map_err(|e| anyhow!("{e}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_upgrade_names_its_retry_as_the_tools_arguments_narrowed_to_the_failed_node()
-> Result<()> {
    let session = Session::start().await?;
    // The health check fails on the first node (the simulated host exits 1), which ends the
    // roll with a failure budget of 1.
    // Workers only, their control plane still at the version they leave: past the version
    // skew policy, as asked (and kept in the retry).
    let arguments = json!({
        "to": TARGET,
        "selector": "topology.kubernetes.io/zone=zone-a",
        "binary": "/opt/stratum",
        "health_check": ["/bin/check", "nodejob-test:exit=1"],
        "allow_skew": true,
    });
    let (_, token) = session.preview(arguments.clone()).await?;
    let mut with_token = arguments.clone();
    with_token["preview_token"] = json!(token);
    let result = session.call("upgrade", with_token).await?;
    assert_eq!(result.is_error, Some(true), "{}", text(&result));
    let narrowed = json!({
        "to": TARGET,
        "nodes": ["worker-a-0"],
        "binary": "/opt/stratum",
        "health_check": ["/bin/check", "nodejob-test:exit=1"],
        "allow_skew": true,
    });
    let report = result.structured_content.clone().context("no report")?;
    assert_eq!(
        report["retry"],
        json!({"tool": "upgrade_preview", "arguments": narrowed}),
        "{report}"
    );
    let answer = text(&result);
    assert!(
        answer.contains(&format!(
            "retry: call upgrade_preview with {narrowed}, then upgrade"
        )),
        "{answer}"
    );
    assert!(
        !answer.contains("nodejob upgrade"),
        "no command line: {answer}"
    );
    session.close().await
}

#[test]
fn a_line_that_is_not_json_is_answered_with_a_parse_error_and_the_session_goes_on() {
    use std::io::{BufRead, BufReader, Write};
    use std::process::{Command, Stdio};

    // The raw protocol, as a client that wrote a broken line sees it: JSON-RPC 2.0's parse
    // error (-32700, id null) at once, then the session answers as before.
    let mut child = Command::new(env!("CARGO_BIN_EXE_nodejob"))
        .args(["mcp", "--simulate", "3"])
        .env_remove("KUBECONFIG")
        .env("NODEJOB_SIMULATE_START", SIMULATE_START)
        .env("RUST_LOG", "error")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut answer = || {
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        serde_json::from_str::<Value>(&line).unwrap_or_else(|e| panic!("{e}: {line:?}"))
    };

    stdin
        .write_all(b"{\"jsonrpc\": \"2.0\", \"id\": 1, \n")
        .unwrap();
    let parse_error = answer();
    assert_eq!(parse_error["id"], Value::Null, "{parse_error}");
    assert_eq!(parse_error["error"]["code"], -32700, "{parse_error}");

    let initialize = json!({
        "jsonrpc": "2.0", "id": 2, "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": { "name": "raw", "version": "0" },
        },
    });
    stdin
        .write_all(format!("{initialize}\n").as_bytes())
        .unwrap();
    let initialized = answer();
    assert_eq!(initialized["id"], 2, "{initialized}");
    assert_eq!(
        initialized["result"]["serverInfo"]["name"], "nodejob",
        "{initialized}"
    );

    drop(stdin);
    assert!(child.wait().unwrap().success());
}

// ---- issue 22: long rolls ----

#[tokio::test]
async fn a_roll_past_the_version_skew_policy_is_refused_naming_allow_skew_unless_it_is_given()
-> Result<()> {
    let session = Session::start().await?;
    let workers = json!({"to": TARGET, "nodes": ["worker-a-0", "worker-b-0"]});
    let refused = session.call("upgrade_preview", workers.clone()).await?;
    let said = text(&refused);
    assert_eq!(refused.is_error, Some(true), "{said}");
    assert!(!said.starts_with("allow_skew"), "{said}");
    for part in [
        "version-skew-policy",
        "worker-a-0, worker-b-0: v1.38.0 would be newer than the apiserver (v1.37.2)",
        "refused without allow_skew",
    ] {
        assert!(said.contains(part), "{part:?} not in {said}");
    }
    let mut allowed = workers;
    allowed["allow_skew"] = json!(true);
    let (preview, _token) = session.preview(allowed).await?;
    assert!(
        preview["preview"]["skew"][0]
            .as_str()
            .is_some_and(|s| s.contains("allowed past the version skew policy: worker-a-0")),
        "{preview}"
    );
    session.close().await.map_err(|e| anyhow!("{e}"))
}

/// The pause switch through the tools: each of `pause` and `resume` only with the token its
/// preview returned for the same arguments on the switch as it still is; `status` shows it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pause_and_resume_each_with_its_token_and_status_shows_the_switch() -> Result<()> {
    let session = Session::start().await?;
    let ask = json!({"reason": "the storage team is failing over", "by": "alice"});
    let preview = session.call("pause_preview", ask.clone()).await?;
    ensure!(preview.is_error == Some(false), "{}", text(&preview));
    ensure!(text(&preview).contains("not paused"), "{}", text(&preview));
    let content = preview
        .structured_content
        .context("pause_preview: no structure")?;
    assert_eq!(content["for"], "pause");
    assert_eq!(content["paused"], Value::Null);
    let token = content["preview_token"]
        .as_str()
        .context("no token")?
        .to_string();

    // Refused, nothing set: no token, a foreign one, other arguments, the other operation.
    let with = |mut args: Value, token: &str| {
        args["preview_token"] = json!(token);
        args
    };
    let refused = [
        ("pause", ask.clone(), "preview_token: required"),
        (
            "pause",
            with(ask.clone(), "sha256:00"),
            "pause_preview again",
        ),
        (
            "pause",
            with(json!({"reason": "another", "by": "alice"}), &token),
            "pause_preview again",
        ),
        ("resume", with(json!({}), &token), "resume: true"),
    ];
    for (tool, arguments, why) in refused {
        let result = session.call(tool, arguments.clone()).await?;
        assert_eq!(
            result.is_error,
            Some(true),
            "{tool} {arguments}: {}",
            text(&result)
        );
        assert!(
            text(&result).contains(why),
            "{tool} {arguments}: {}",
            text(&result)
        );
    }
    assert_eq!(session.status().await?["lease"]["paused"], Value::Null);

    let paused = session.call("pause", with(ask.clone(), &token)).await?;
    assert_eq!(paused.is_error, Some(false), "{}", text(&paused));
    assert!(
        text(&paused).contains("paused by alice at ")
            && text(&paused).contains(": the storage team is failing over"),
        "{}",
        text(&paused)
    );
    let status = session.status().await?;
    assert_eq!(status["lease"]["paused"]["by"], "alice", "{status}");
    assert_eq!(
        status["lease"]["paused"]["reason"],
        "the storage team is failing over"
    );
    // A preview while paused says so (who, when, why) and what a run now would do.
    let said = session
        .call("upgrade_preview", json!({"to": TARGET}))
        .await?;
    assert!(
        text(&said).contains("not now: paused by alice at ")
            && text(&said).contains("until `nodejob resume`"),
        "{}",
        text(&said)
    );
    let not_now = &said.structured_content.context("no structure")?["preview"]["not_now"];
    assert_eq!(not_now[0]["why"], "paused", "{not_now}");
    assert_eq!(not_now[0]["by"], "alice", "{not_now}");

    // The switch moved: the pause's token is stale now, and a resume needs its own preview.
    let again = session.call("pause", with(ask.clone(), &token)).await?;
    assert_eq!(again.is_error, Some(true), "{}", text(&again));
    let bad = session
        .call("pause_preview", json!({"resume": true, "reason": "x"}))
        .await?;
    assert_eq!(bad.is_error, Some(true), "{}", text(&bad));
    assert!(text(&bad).contains("not with resume"), "{}", text(&bad));
    let preview = session
        .call("pause_preview", json!({"resume": true}))
        .await?;
    assert!(
        text(&preview).contains("paused by alice") && text(&preview).contains("would lift it"),
        "{}",
        text(&preview)
    );
    let content = preview.structured_content.context("no structure")?;
    assert_eq!(content["for"], "resume");
    let resume_token = content["preview_token"].as_str().context("no token")?;
    let resumed = session
        .call("resume", json!({"preview_token": resume_token}))
        .await?;
    assert_eq!(resumed.is_error, Some(false), "{}", text(&resumed));
    assert!(text(&resumed).starts_with("resumed"), "{}", text(&resumed));
    assert_eq!(session.status().await?["lease"]["paused"], Value::Null);
    session.close().await
}

/// What the long-roll tests run on: `worker-a-0` runs a Pod that only it can run, behind a
/// budget that never allows a disruption (its drain is blocked); the virtual clock runs as fast
/// as it can, as nobody watches.
const UNDRAINABLE: [&str; 4] = ["--simulate-undrainable", "worker-a-0", "--speed", "max"];

/// The virtual clock as fast as it can run.
const SPEED_MAX: [&str; 2] = ["--speed", "max"];

/// `upgrade_preview` says each long-roll argument given, as the plan acts on it (none of them
/// when left out), and its token covers them: an `upgrade` saying another value is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_preview_says_the_long_roll_arguments_given_and_its_token_covers_them() -> Result<()> {
    let session = Session::start_with(&UNDRAINABLE).await?;
    let (plain, _) = session.preview(json!({"to": TARGET})).await?;
    let plain = &plain["preview"];
    for key in ["on_undrainable", "max_blocked", "soak_ms", "on_failure"] {
        assert!(plain.get(key).is_none(), "{key}, a default, said: {plain}");
    }
    let then = |p: &Value| {
        p["would_block"][0]["then"]
            .as_str()
            .unwrap_or("")
            .to_string()
    };
    assert_eq!(plain["would_block"][0]["node"], "worker-a-0", "{plain}");
    assert!(
        then(plain).ends_with("the node fails and the roll stops"),
        "{plain}"
    );

    let long = json!({
        "to": TARGET,
        "on_undrainable": "skip",
        "max_blocked": 3,
        "soak": "10m",
        "on_failure": "rollback",
    });
    let result = session.call("upgrade_preview", long.clone()).await?;
    let said = text(&result);
    assert_eq!(result.is_error, Some(false), "{said}");
    let content = result.structured_content.context("no structure")?;
    let preview = &content["preview"];
    assert_eq!(preview["on_undrainable"], "skip", "{preview}");
    assert_eq!(preview["max_blocked"], 3, "{preview}");
    assert_eq!(preview["soak_ms"], 600_000, "{preview}");
    assert_eq!(preview["on_failure"], "rollback", "{preview}");
    assert!(
        then(preview).contains("the node is skipped (uncordoned if we cordoned it)"),
        "{preview}"
    );
    for line in [
        "at most 3 blocked node(s), past that the roll stops as a failure does",
        "would be blocked (on undrainable: skip): worker-a-0 by budget(s) default/pinned",
        "soak: each node, back in service, stays Ready on the same boot for 10m",
        "on failure: a node whose host upgrade fails, or that comes back at another version or \
         fails its health check or soak, is rolled back (stratum rollback)",
    ] {
        assert!(said.contains(line), "{line:?} not in {said}");
    }

    // The token is for these arguments: each said otherwise is refused.
    let token = content["preview_token"].as_str().context("no token")?;
    let otherwise = |key: &str, value: Value| {
        let mut arguments = with_token(long.clone(), token);
        arguments[key] = value;
        arguments
    };
    let before = session.status().await?;
    for arguments in [
        otherwise("on_undrainable", json!("quarantine")),
        otherwise("max_blocked", json!(2)),
        otherwise("soak", json!("20m")),
        otherwise("on_failure", json!("stop")),
    ] {
        let refused = session.call("upgrade", arguments.clone()).await?;
        let said = text(&refused);
        assert_eq!(refused.is_error, Some(true), "{arguments}: {said}");
        assert!(
            said.contains("upgrade_preview again"),
            "{arguments}: {said}"
        );
    }
    assert_eq!(writes(&session.status().await?), writes(&before));
    session.close().await
}

/// `on_undrainable: "skip"`: the node a budget blocks past `drain_timeout` is skipped (back in
/// service, at its version) and named, its budget with it; every other node is upgraded. The
/// roll stops short of it with nothing failed, not on it (as it would under the default,
/// `fail`, before worker-b-0 started).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_on_undrainable_skip_the_blocked_node_is_named_and_the_others_are_upgraded()
-> Result<()> {
    let session = Session::start_with(&UNDRAINABLE).await?;
    let arguments = json!({"to": TARGET, "on_undrainable": "skip", "drain_timeout": "2m"});
    let (_, token) = session.preview(arguments.clone()).await?;
    let result = session
        .call("upgrade", with_token(arguments, &token))
        .await?;
    let said = text(&result);
    assert_eq!(result.is_error, Some(false), "nothing failed: {said}");
    let report = result.structured_content.context("no report")?;
    assert_eq!(report["outcome"]["outcome"], "stopped", "{report}");
    assert!(
        (report["outcome"]["why"].as_str()).is_some_and(|w| w.contains("worker-a-0 (skipped)")),
        "{report}"
    );
    assert_eq!(report["totals"]["upgraded"], 4, "{report}");
    let blocked = &entry(&report["nodes"], "name", "worker-a-0")?["result"];
    assert_eq!(blocked["result"], "blocked", "{report}");
    assert_eq!(blocked["policy"], "skip", "{report}");
    assert_eq!(blocked["budgets"], json!(["default/pinned"]), "{report}");
    assert!(said.contains("node worker-a-0 blocked: skipped"), "{said}");

    let status = session.status().await?;
    for node in NODES {
        let (reported, now) = (
            &entry(&report["nodes"], "name", node)?["result"],
            entry(&status["nodes"], "node", node)?,
        );
        if node == "worker-a-0" {
            assert_eq!(now["version"], "v1.37.2", "{now}");
            assert_eq!(now["cordoned"], false, "skipped, back in service: {now}");
        } else {
            assert_eq!(reported["result"], "upgraded", "{node}: {report}");
            assert_eq!(now["version"], TARGET, "{now}");
        }
    }
    session.close().await
}

/// `max_blocked`: quarantining worker-a-0 (left cordoned) leaves worker-b-0 the only place for
/// the web replicas, so its drain is blocked too. Two blocked nodes: `max_blocked: 2` lets the
/// roll go past both, where the default, 1, would stop it as a failure at the second (as
/// `upgrade_undrainable_past_max_blocked` pins for the command).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_blocked_lets_the_roll_go_on_past_that_many_blocked_nodes() -> Result<()> {
    let session = Session::start_with(&UNDRAINABLE).await?;
    let arguments = json!({
        "to": TARGET,
        "on_undrainable": "quarantine",
        "max_blocked": 2,
        "drain_timeout": "2m",
    });
    let (_, token) = session.preview(arguments.clone()).await?;
    let result = session
        .call("upgrade", with_token(arguments, &token))
        .await?;
    assert_eq!(result.is_error, Some(false), "{}", text(&result));
    let report = result.structured_content.context("no report")?;
    assert_eq!(report["outcome"]["outcome"], "stopped", "{report}");
    assert_eq!(report["totals"]["upgraded"], 3, "{report}");
    let status = session.status().await?;
    for node in ["worker-a-0", "worker-b-0"] {
        let result = &entry(&report["nodes"], "name", node)?["result"];
        assert_eq!(result["result"], "blocked", "{node}: {report}");
        assert_eq!(result["policy"], "quarantine", "{node}: {report}");
        let now = entry(&status["nodes"], "node", node)?;
        assert_eq!(now["cordoned"], true, "quarantined, left cordoned: {now}");
        assert_eq!(now["version"], "v1.37.2", "{now}");
    }
    session.close().await
}

/// `soak`: each upgraded node stays Ready on its boot for the soak, told counting down, before
/// the next node starts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_soak_each_node_soaks_before_the_next_starts() -> Result<()> {
    let mut session = Session::start_with(&SPEED_MAX).await?;
    let arguments = json!({"to": TARGET, "nodes": ["cp-0", "cp-1"], "soak": "3m"});
    let (_, token) = session.preview(arguments.clone()).await?;
    let (result, progress_token) = session
        .run("upgrade", with_token(arguments, &token))
        .await?;
    let report = result.structured_content.clone().context("no report")?;
    assert_eq!(report["outcome"]["outcome"], "done", "{}", text(&result));
    let (_, progress, _) = session.finished("upgrade", &progress_token).await?;
    // Each message at its place among the call's progress notifications, which count up.
    let at = |start: &str| -> Result<f64> {
        (progress.iter())
            .find(|p| p.message.as_deref().is_some_and(|m| m.starts_with(start)))
            .map(|p| p.progress)
            .with_context(|| format!("no progress {start:?}"))
    };
    for node in ["cp-0", "cp-1"] {
        at(&format!("{node}: soaking, 3m left"))?;
        at(&format!("{node}: soaking, 30s left"))?;
        at(&format!("{node}: Soak done in 3m"))?;
    }
    assert!(
        at("cp-0: Soak done in")? < at("cp-1: Cordon...")?,
        "cp-1 started before cp-0 soaked: {progress:?}"
    );
    session.close().await
}

/// `on_failure: "rollback"`: a node that fails its health check after its host upgrade is
/// rolled back to the version it ran, still a failure (where the default, `stop`, leaves it at
/// the target).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_on_failure_rollback_a_node_failing_its_health_check_is_rolled_back() -> Result<()> {
    let session = Session::start_with(&SPEED_MAX).await?;
    let arguments = json!({
        "to": TARGET,
        "nodes": ["cp-0"],
        "health_check": ["/bin/check", "nodejob-test:exit=1"],
        "on_failure": "rollback",
    });
    let (_, token) = session.preview(arguments.clone()).await?;
    let result = session
        .call("upgrade", with_token(arguments, &token))
        .await?;
    assert_eq!(result.is_error, Some(true), "{}", text(&result));
    let report = result.structured_content.context("no report")?;
    assert_eq!(report["outcome"]["outcome"], "failed", "{report}");
    assert_eq!(report["totals"]["rolled_back"], 1, "{report}");
    let rolled = &entry(&report["nodes"], "name", "cp-0")?["result"];
    assert_eq!(rolled["result"], "rolled_back", "{report}");
    assert_eq!(rolled["version"], "v1.37.2", "{report}");
    assert_eq!(rolled["failure"]["step"], "Health", "{report}");
    let status = session.status().await?;
    assert_eq!(
        entry(&status["nodes"], "node", "cp-0")?["version"],
        "v1.37.2",
        "{status}"
    );
    session.close().await
}

/// `new_ca` given the PEM text itself rather than a file's path: no answer, preview or
/// refusal repeats the text; the CA is said by its fingerprint and subject (issue 33: MCP
/// echoed a whole PEM back).
#[tokio::test]
async fn pem_text_given_as_new_ca_is_never_echoed_back() -> Result<()> {
    let pem = include_str!("fixtures/new-ca.pem");
    let body = (pem.lines())
        .find(|l| !l.starts_with("-----") && l.len() > 40)
        .context("a base64 line")?
        .to_string();
    let session = Session::start().await?;
    for (tool, arguments) in [
        ("rotate_ca_preview", json!({"new_ca": pem})),
        ("rotate_ca", json!({"new_ca": pem, "preview_token": "x"})),
        (
            "rotate_ca_preview",
            json!({"new_ca": pem.replace("CERTIFICATE", "PRIVATE KEY")}),
        ),
    ] {
        let answer = session.call(tool, arguments).await?;
        let said = format!(
            "{}\n{}",
            text(&answer),
            answer.structured_content.clone().unwrap_or_default()
        );
        ensure!(!said.contains(&body), "{tool} echoed the PEM: {said}");
        ensure!(!said.contains("BEGIN"), "{tool} echoed the PEM: {said}");
    }
    let answer = session
        .call("rotate_ca_preview", json!({"new_ca": pem}))
        .await?;
    let said = text(&answer);
    ensure!(said.contains("sha256:"), "{said}");
    ensure!(said.contains("CN="), "{said}");
    session.client.cancel().await?;
    Ok(())
}
