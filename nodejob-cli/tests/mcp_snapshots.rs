//! What an MCP client reads from `nodejob mcp --simulate 5`, pinned with insta: the server's
//! instructions, the tools (titles, descriptions, schemas, annotations), and one session's
//! transcript (each call's progress and logging notifications, in the order the server sent
//! them, then its answer): the read-only tools, the previews, an upgrade and a CA rotation
//! with their tokens, and refusals. The cluster is simulated (virtual time, a seeded cluster),
//! so the transcript is the same each time; the tokens, which bind this process's Lease
//! identity, and the instants, which move with the session's pace, are filtered.
//!
//! The client here speaks JSON-RPC lines itself, reading stdout in order, so that the
//! notifications are pinned in the order they were sent (rmcp's client handles each in a task
//! of its own).

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};

/// Where the simulated clock starts in these tests (by default it is the machine's time): fixed,
/// so that every simulated run prints the same lines.
const SIMULATE_START: &str = "2026-01-01T00:00:00Z";

/// How long any one answer may take before the test fails (a bound, not a pause).
const PATIENCE: Duration = Duration::from_secs(120);

/// A `nodejob mcp --simulate 5` process, spoken to line by line.
struct Server {
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<String>,
    next_id: u64,
}

impl Server {
    fn start() -> Result<Server> {
        let mut child = Command::new(env!("CARGO_BIN_EXE_nodejob"))
            .args(["mcp", "--simulate", "5"])
            .env_remove("KUBECONFIG")
            .env("NODEJOB_SIMULATE_START", SIMULATE_START)
            .env("RUST_LOG", "error")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .context("starting nodejob mcp")?;
        let stdin = child.stdin.take().context("stdin")?;
        let stdout = child.stdout.take().context("stdout")?;
        let (send, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if send.send(line).is_err() {
                    break;
                }
            }
        });
        Ok(Server {
            child,
            stdin,
            lines,
            next_id: 0,
        })
    }

    fn send(&mut self, message: &Value) -> Result<()> {
        writeln!(self.stdin, "{message}")?;
        self.stdin.flush()?;
        Ok(())
    }

    /// Sends `method` with `params`; its result, and the notifications sent before it.
    fn request(&mut self, method: &str, params: Value) -> Result<(Value, Vec<Value>)> {
        self.next_id += 1;
        let id = self.next_id;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))?;
        let mut notifications = Vec::new();
        loop {
            let line = self
                .lines
                .recv_timeout(PATIENCE)
                .with_context(|| format!("no answer to {method} in {PATIENCE:?}"))?;
            let message: Value = serde_json::from_str(&line).context("a line of the server")?;
            if message["id"] == json!(id) {
                if let Some(error) = message.get("error") {
                    bail!("{method}: {error}");
                }
                return Ok((message["result"].clone(), notifications));
            }
            notifications.push(message);
        }
    }

    /// Calls `tool` with `arguments` (progress asked for): its transcript, and its result.
    fn call(&mut self, tool: &str, arguments: Value) -> Result<(String, Value)> {
        let shown = arguments.to_string();
        let params = json!({
            "name": tool,
            "arguments": arguments,
            "_meta": {"progressToken": tool},
        });
        let (result, notifications) = self.request("tools/call", params)?;
        let mut out = format!(">>> {tool} {shown}\n");
        for n in &notifications {
            let p = &n["params"];
            match n["method"].as_str() {
                Some("notifications/progress") => out.push_str(&format!(
                    "progress {}: {}\n",
                    p["progress"],
                    p["message"].as_str().unwrap_or("")
                )),
                Some("notifications/message") => {
                    let data = &p["data"];
                    let what = match data["event"].as_str() {
                        Some("report") => format!(
                            "report ({} progress, {} logging notifications before it)",
                            data["progress_notifications"], data["logging_notifications"]
                        ),
                        _ => data["text"].as_str().unwrap_or("").to_string(),
                    };
                    out.push_str(&format!(
                        "log {}: {what}\n",
                        p["level"].as_str().unwrap_or("")
                    ));
                }
                other => out.push_str(&format!("notification {other:?}\n")),
            }
        }
        out.push_str(&format!("<<< is_error: {}\n", result["isError"]));
        for content in result["content"].as_array().into_iter().flatten() {
            out.push_str(content["text"].as_str().unwrap_or(""));
            out.push('\n');
        }
        Ok((out, result))
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The preview token a preview's result carries.
fn token(result: &Value) -> Result<String> {
    result["structuredContent"]["preview_token"]
        .as_str()
        .map(str::to_string)
        .context("no preview_token in the preview's result")
}

#[test]
fn the_session_as_a_client_reads_it() -> Result<()> {
    let mut server = Server::start()?;
    let (init, _) = server.request(
        "initialize",
        json!({
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "snapshots", "version": "0"},
        }),
    )?;
    server.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))?;
    insta::assert_snapshot!(
        "mcp_instructions",
        init["instructions"].as_str().unwrap_or("(none)")
    );
    let (tools, _) = server.request("tools/list", json!({}))?;
    insta::assert_snapshot!("mcp_tools", serde_json::to_string_pretty(&tools)?);

    let mut transcript = String::new();
    let mut step = |server: &mut Server, tool: &str, arguments: Value| -> Result<Value> {
        let (text, result) = server.call(tool, arguments)?;
        transcript.push_str(&text);
        transcript.push('\n');
        Ok(result)
    };
    step(&mut server, "status", json!({}))?;
    step(&mut server, "jobs", json!({}))?;
    let job = json!({"node": "cp-0", "argv": ["/usr/local/bin/stratum", "health"]});
    let rendered = step(&mut server, "render", job.clone())?;
    let mut run = job.clone();
    run["preview_token"] = json!(token(&rendered)?);
    step(&mut server, "run", run)?;
    let preview = step(&mut server, "upgrade_preview", json!({"to": "v1.38.0"}))?;
    step(
        &mut server,
        "upgrade",
        json!({"to": "v1.38.0", "preview_token": token(&preview)?}),
    )?;
    step(
        &mut server,
        "upgrade",
        json!({"to": "v1.38.0", "preview_token": token(&preview)?}),
    )?;
    let preview = step(&mut server, "rotate_ca_preview", json!({}))?;
    step(
        &mut server,
        "rotate_ca",
        json!({"preview_token": token(&preview)?}),
    )?;
    let preview = step(&mut server, "rotate_ca_preview", json!({"abort": true}))?;
    step(
        &mut server,
        "rotate_ca_abort",
        json!({"preview_token": token(&preview)?}),
    )?;
    step(
        &mut server,
        "upgrade_preview",
        json!({"to": "v1.39.0", "max_unavailable": 0}),
    )?;
    step(&mut server, "upgrade", json!({"to": "v1.39.0"}))?;
    step(&mut server, "status", json!({}))?;
    insta::with_settings!({
        filters => vec![
            (r"preview_token: sha256:[0-9a-f]{64}", "preview_token: [TOKEN]"),
            (r#""preview_token":"sha256:[0-9a-f]{64}""#, r#""preview_token":"[TOKEN]""#),
            // The simulation's clock runs on while the session waits for the next call (a
            // paused runtime advances when idle), so the instants depend on the test's pace;
            // durations within a call do not.
            (r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z", "[TIME]"),
            // The same instants as `kubectl describe node` says them (RFC 1123, numeric zone).
            (r"\w{3}, \d{2} \w{3} \d{4} \d{2}:\d{2}:\d{2} \+0000", "[RFC1123 TIME]  "),
        ],
    }, {
        insta::assert_snapshot!("mcp_session", transcript);
    });
    Ok(())
}
