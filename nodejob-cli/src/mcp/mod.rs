//! `nodejob mcp`: the operations of `nodejob` as Model Context Protocol tools, served over stdio
//! with `rmcp`, for assistants and automation.
//!
//! ```text
//!  client ──tools/call──▶ Server ──params: parse against the tool's schema (refusal names
//!                           │       the field), into crate::settings, the CLI's plan builder
//!                           │     ──ops ─▶ backend::Session::run ─▶ [simulation thread | kube]
//!                           │                                  ─▶ token check ─▶ the driver
//!  client ◀─progress, logging notifications── Notifier ◀── Events ◀── stream::Sink
//!  client ◀─result: the report (structured) and crate::present's text for it
//! ```
//!
//! - Read-only tools: `status`, `jobs`, `render`, `upgrade_preview`, `rotate_ca_preview`,
//!   `pause_preview`.
//! - Mutating tools: `upgrade`, `rotate_ca`, `rotate_ca_abort`, `run`, `pause`, `resume`: each
//!   needs the `preview_token` of its preview ([`token`]), checked against the cluster as it is
//!   before anything is written; the operations one at a time per session (the Lease fences
//!   other processes; a session's operations share its Lease identity, so the session fences
//!   its own), `pause` and `resume` beside them (a pause is sent to a roll in flight).
//! - A cancelled call is Ctrl-C once: no further node starts, the step in flight finishes. Its
//!   result is not sent (the protocol drops it), so the end of every mutating call is also a
//!   logging notification carrying the report. A client that goes away cancels the same way,
//!   and the server exits once the operation has stopped.
//! - Nothing but the protocol is written to stdout: every runner's notes go to the stream.
//!
//! The files: this one the server (the session's start and end, the protocol's handlers);
//! [`lines`] the stdio under it (a line that is not JSON answered -32700); [`tools`] the tool list; [`params`] the arguments; [`ops`] what each tool does; [`stream`]
//! the notifications; [`token`] the preview token.

mod lines;
mod ops;
mod params;
mod stream;
mod token;
mod tools;

use std::sync::Arc;
use std::sync::atomic::Ordering;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};

use self::ops::Session;
use self::tools::Name;
use crate::args::{Global, Mcp};
use crate::backend::{Backend, real_runtime};
use crate::exit::Exit;

/// Serves MCP on stdin/stdout until the client closes it, then waits for an operation still
/// running to stop (after its step in flight).
pub(crate) fn serve(global: &Global, args: Mcp) -> Result<Exit, Exit> {
    let backend = Backend::new(global, args.sim.simulate)
        .clocked(args.sim.speed, args.sim.start.simulate_start)
        .settled(&args.simulate_undrainable)?
        .session()?;
    let runtime = real_runtime()?;
    let server = Server(Arc::new(Session::new(backend, global.namespace.clone())));
    let exit = runtime.block_on(async {
        let gone = server.clone();
        let (stdin, stdout, flushed) = lines::stdio(move || gone.client_gone());
        let service = server
            .clone()
            .serve((stdin, stdout))
            .await
            .map_err(|e| Exit::failed(format!("starting the MCP session: {e}")))?;
        let _ = service.waiting().await;
        server.wind_down().await;
        // The session's transport is gone with it: what it wrote reaches stdout.
        flushed.await;
        Ok(Exit::ok())
    });
    // stdin is at its end: nothing is left to wait for.
    runtime.shutdown_timeout(std::time::Duration::from_secs(1));
    exit
}

/// The server of one session.
#[derive(Clone)]
pub(crate) struct Server(Arc<Session>);

impl Server {
    /// The client closed stdin: the operation in flight, if any, stops starting nodes (as
    /// Ctrl-C once), at once rather than when the session's end reaches its handler.
    fn client_gone(&self) {
        if self.0.gone.swap(true, Ordering::SeqCst) {
            return;
        }
        let running = self
            .0
            .running
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        if let Some((what, stop)) = running {
            eprintln!(
                "nodejob mcp: the client went away during {what}: no further node starts; \
                 waiting for the step in flight (run it again to resume)"
            );
            if let Some(stop) = stop {
                stop.request();
            }
        }
    }

    /// The session ended: waits for the operation in flight to stop.
    async fn wind_down(&self) {
        self.client_gone();
        let _ = self.0.busy.lock().await;
    }
}

impl ServerHandler for Server {
    #[allow(deprecated)] // MCP logging: deprecated in the SDK for a future protocol, current in ours
    fn get_info(&self) -> ServerConfig {
        let simulated = match self.0.backend.simulated_nodes() {
            Some(nodes) => format!(
                " This session runs against a simulated in-memory cluster of {} nodes ({}), \
                 kept for the session.",
                nodes.len(),
                nodes.join(", ")
            ),
            None => String::new(),
        };
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_logging()
                .enable_tools()
                .build(),
        )
        .with_server_info(Implementation::new("nodejob", env!("CARGO_PKG_VERSION")))
        .with_instructions(format!(
            "nodejob runs privileged, node-pinned Kubernetes Jobs: rolling node upgrades, \
             cluster CA rotations, one-off host commands. Look with `status` and `jobs`. Before \
             any change, call its preview (`upgrade_preview`, `rotate_ca_preview`, `render` \
             for `run`), show it to a person, and only with their approval call the operation \
             with the same arguments and the preview_token the preview returned; a token \
             refused means the arguments or the cluster changed: preview again. Operations \
             stream progress and logging notifications; cancelling one stops starting nodes \
             and finishes the step in flight.{simulated}"
        ))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(
            Name::ALL.into_iter().map(Name::tool).collect(),
        ))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let Some(name) = Name::parse(&request.name) else {
            return Err(ErrorData::invalid_params(
                format!(
                    "no tool {:?}; the tools are: {}",
                    request.name,
                    Name::ALL.map(Name::as_str).join(", ")
                ),
                None,
            ));
        };
        let result = ops::call(&self.0, name, request.arguments, context).await;
        Ok(result
            .unwrap_or_else(|refusal| {
                CallToolResult::error(vec![ContentBlock::text(refusal.to_string())])
            })
            .into())
    }

    #[allow(deprecated)] // as `get_info`
    async fn set_level(
        &self,
        request: rmcp::model::SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.0.level.set(stream::severity_of(request.level));
        Ok(())
    }
}
