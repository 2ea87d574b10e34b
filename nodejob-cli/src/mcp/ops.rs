//! What each tool does: read its arguments (a refusal names the field, before any API call),
//! build the plan as the CLI does, then, on the backend, read or — for a mutating tool, once
//! its preview token matches the cluster as it is — run the driver, streaming its events.

use std::future::Future;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

use rmcp::RoleServer;
use rmcp::model::{CallToolResult, ContentBlock, JsonObject};
use rmcp::service::RequestContext;
use serde::Serialize;
use serde_json::{Value, json};
use tokio::sync::mpsc::UnboundedReceiver;
use upgrade_driver::Stop;

use super::params::{
    ArgumentError, JobArguments, JobsArgs, PauseArgs, PausePreviewArgs, ResumeArgs, RotateCaArgs,
    StatusArgs, UpgradeArgs, driver_said, parse,
};
use super::stream::{self, LevelFilter, Line, Notifier, events};
use super::token::{self, Operation, TokenError};
use super::tools::Name;
use crate::backend::{self, SessionError, Target};
use crate::commands::run;
use crate::exit::Exit;
use crate::inspect::ReadError;
use crate::inspect::jobs::{self as node_jobs, Unlisted};
use crate::inspect::status::{self as cluster_status, Simulated, lease_name};
use crate::present::{self, DriverError, Severity};
use nodejob_core::pause::{Pause, set_pause};

/// Why a tool call ended without its result: the text of the tool error the client gets.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ToolError {
    /// The arguments were refused, before any API call.
    #[error(transparent)]
    Arguments(#[from] ArgumentError),
    /// The cluster could not be reached, or the work ended abnormally.
    #[error(transparent)]
    Session(#[from] SessionError),
    /// What the tool (or its token) reads could not be read (for `jobs`: the Jobs' Pods too,
    /// since it answers no rows rather than rows without their exit codes).
    #[error(transparent)]
    Reading(#[from] ReadError),
    /// The token could not be made, or the one presented is stale.
    #[error(transparent)]
    Token(#[from] TokenError),
    /// `jobs` listed nothing: the selector refused, or the list failed.
    #[error("{}", unlisted_said(selector, unlisted))]
    Unlisted {
        /// The selector given.
        selector: String,
        /// Why.
        unlisted: Unlisted,
    },
    /// The Job did not render as YAML.
    #[error("rendering the job: {0}")]
    Rendering(serde_saphyr::SerializeError),
    /// The driver refused or failed the operation, said as the tools say it.
    #[error("{}", driver_said(.0))]
    Driver(DriverError),
    /// Another mutating operation holds the session.
    #[error(
        "another operation is running in this session ({}); nothing was changed: wait for it \
         to end, or cancel it, then preview again",
        running.as_deref().unwrap_or("?")
    )]
    Busy {
        /// What runs, as its call named it.
        running: Option<String>,
    },
    /// `run` refused as `nodejob run` refuses it, before any Job (a node the cluster does not
    /// have, a roll under way on it): the command's message.
    #[error("{}", .0.message)]
    RunRefused(Exit),
    /// Core's error, naming the operation and object: setting the pause switch, running the
    /// node Job.
    #[error(transparent)]
    Core(nodejob_core::Error),
}

/// `jobs`'s refusal, as the tool says it: a selector refused names it.
fn unlisted_said(selector: &str, unlisted: &Unlisted) -> String {
    if unlisted.is_selector() {
        format!("selector: {selector:?}: {unlisted}")
    } else {
        unlisted.to_string()
    }
}

/// What a session keeps.
pub(crate) struct Session {
    /// Where the API calls go.
    pub(super) backend: backend::Session,
    /// The namespace of the Jobs, the Lease and the Events (the server's `--namespace`).
    pub(super) namespace: String,
    /// The least severity the client wants logged.
    pub(super) level: Arc<LevelFilter>,
    /// Held by the mutating operation in flight.
    pub(super) busy: Arc<tokio::sync::Mutex<()>>,
    /// The operation in flight: what it is, and how to stop it (an abort cannot be).
    pub(super) running: Mutex<Option<(String, Option<Stop>)>>,
    /// Whether the client went away.
    pub(super) gone: AtomicBool,
}

impl Session {
    /// A session on `backend`, in `namespace`.
    pub(super) fn new(backend: backend::Session, namespace: String) -> Self {
        Session {
            backend,
            namespace,
            level: Arc::new(LevelFilter::default()),
            busy: Arc::new(tokio::sync::Mutex::new(())),
            running: Mutex::new(None),
            gone: AtomicBool::new(false),
        }
    }
}

/// Runs the tool `name` with `arguments`: its result, or why it was refused (a tool error).
pub(crate) async fn call(
    s: &Session,
    name: Name,
    arguments: Option<JsonObject>,
    context: RequestContext<RoleServer>,
) -> Result<CallToolResult, ToolError> {
    let schema = name.tool().input_schema;
    match name {
        Name::Status => {
            let (StatusArgs {}, _) = parse(&schema, arguments)?;
            status(s).await
        }
        Name::Jobs => {
            let (args, _): (JobsArgs, _) = parse(&schema, arguments)?;
            jobs(s, args).await
        }
        Name::Render => {
            let (args, _): (JobArguments, _) = parse(&schema, arguments)?;
            render(s, args).await
        }
        Name::UpgradePreview => {
            let (args, _): (UpgradeArgs, _) = parse(&schema, arguments)?;
            upgrade_preview(s, args).await
        }
        Name::RotateCaPreview => {
            let (args, extras) = parse(&schema, arguments)?;
            let operation = if extras.abort {
                Operation::RotateCaAbort
            } else {
                Operation::RotateCa
            };
            rotate_ca_preview(s, args, operation).await
        }
        // `parse` refuses a mutating tool's call without its token.
        Name::Upgrade => {
            let sent = arguments.clone().unwrap_or_default();
            let (args, extras) = parse(&schema, arguments)?;
            let token = extras.preview_token.unwrap_or_default();
            upgrade(s, args, &sent, token, &context).await
        }
        Name::RotateCa | Name::RotateCaAbort => {
            let (args, extras) = parse(&schema, arguments)?;
            let operation = if name == Name::RotateCa {
                Operation::RotateCa
            } else {
                Operation::RotateCaAbort
            };
            let token = extras.preview_token.unwrap_or_default();
            rotate_ca(s, args, token, operation, &context).await
        }
        Name::Run => {
            let (args, extras) = parse(&schema, arguments)?;
            run(s, args, extras.preview_token.unwrap_or_default(), &context).await
        }
        Name::PausePreview => {
            let (args, _): (PausePreviewArgs, _) = parse(&schema, arguments)?;
            if args.resume && (args.reason.is_some() || args.by.is_some()) {
                return Err(ArgumentError::NotWithResume.into());
            }
            let by = default_by(s, args.by, args.resume).await;
            let switch = Switch::of(args.resume, args.reason, by);
            pause_preview(s, switch).await
        }
        Name::Pause => {
            let (args, extras): (PauseArgs, _) = parse(&schema, arguments)?;
            let by = default_by(s, args.by, false).await;
            let switch = Switch::of(false, args.reason, by);
            set_switch(s, switch, extras.preview_token.unwrap_or_default()).await
        }
        Name::Resume => {
            let (ResumeArgs {}, extras) = parse(&schema, arguments)?;
            let switch = Switch::of(true, None, None);
            set_switch(s, switch, extras.preview_token.unwrap_or_default()).await
        }
    }
}

/// What `pause` or `resume` is asked to do: the plan its token covers.
#[derive(Clone, Debug, Serialize)]
struct Switch {
    /// `pause` or `resume`.
    #[serde(skip)]
    operation: Operation,
    /// Who pauses (`pause` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    by: Option<String>,
    /// Why (`pause` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<String>,
}

/// Who pauses through MCP when `by` does not say: as `nodejob pause` says it (who the
/// apiserver takes the session's credentials for, else `$USER@host`), marked `(MCP)`; `None`
/// for a resume, which names nobody.
async fn default_by(s: &Session, by: Option<String>, resume: bool) -> Option<String> {
    if resume || by.is_some() {
        return by;
    }
    let who = (s
        .backend
        .run(|t| async move { crate::commands::pause::who(&t).await })
        .await)
        .unwrap_or_else(|_| crate::commands::pause::local_user());
    Some(format!("{who} (MCP)"))
}

impl Switch {
    /// The switch asked: `by` who, when pausing.
    fn of(resume: bool, reason: Option<String>, by: Option<String>) -> Switch {
        if resume {
            return Switch {
                operation: Operation::Resume,
                by: None,
                reason: None,
            };
        }
        Switch {
            operation: Operation::Pause,
            by,
            reason: Some(reason.unwrap_or_default()),
        }
    }

    /// The token's plan: the operation's arguments and the Lease it writes.
    fn plan(&self, namespace: &str, lease: &str) -> Value {
        json!({ "switch": self, "namespace": namespace, "lease": lease })
    }

    fn tool(&self) -> &'static str {
        match self.operation {
            Operation::Resume => "resume",
            _ => "pause",
        }
    }
}

/// A result: `text` for people, `structured` for programs.
fn answer(text: String, structured: Value, is_error: bool) -> CallToolResult {
    let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
    result.structured_content = Some(structured);
    result.is_error = Some(is_error);
    result
}

fn to_value<T: Serialize>(t: &T) -> Value {
    serde_json::to_value(t).unwrap_or(Value::Null)
}

// ---- read-only ----------------------------------------------------------------------------------

async fn status(s: &Session) -> Result<CallToolResult, ToolError> {
    let namespace = s.namespace.clone();
    let nodes = s.backend.simulated_nodes().map(|n| n.len());
    let status = s
        .backend
        .run(move |t| async move {
            let mut status = cluster_status::gather(&*t.api, &namespace).await?;
            if let (Some(fake), Some(nodes)) = (&t.fake, nodes) {
                status.simulated = Some(Simulated::of(fake, nodes));
            }
            Ok::<_, ToolError>(status)
        })
        .await??;
    Ok(answer(
        present::status::text(
            &status,
            present::status::Named::None,
            present::Columns::Narrow,
        ),
        to_value(&status),
        false,
    ))
}

async fn jobs(s: &Session, args: JobsArgs) -> Result<CallToolResult, ToolError> {
    let namespace = s.namespace.clone();
    let selector = args.selector.unwrap_or_default();
    let listed = s
        .backend
        .run({
            let namespace = namespace.clone();
            move |t| async move {
                node_jobs::gather(&*t.api, &namespace, &selector)
                    .await
                    .map_err(|unlisted| ToolError::Unlisted {
                        selector: selector.clone(),
                        unlisted,
                    })
            }
        })
        .await??;
    // Unlike `nodejob jobs`, which warns and shows no exit code, the tool answers nothing
    // rather than rows without their exit codes.
    if let Some(why) = listed.pods_unread {
        return Err(why.into());
    }
    let text = present::jobs::text(&listed.rows, &namespace, present::Columns::Narrow);
    Ok(answer(text, json!({ "jobs": listed.rows }), false))
}

async fn render(s: &Session, args: JobArguments) -> Result<CallToolResult, ToolError> {
    let spec = args.spec(&s.namespace)?;
    let job = nodejob_core::build(&spec);
    let yaml = serde_saphyr::to_string(&job).map_err(ToolError::Rendering)?;
    let plan = job.clone();
    let namespace = spec.namespace.clone();
    let name = spec.name.clone();
    // The token needs the cluster; the Job is shown even when it cannot be reached.
    let seen =
        s.backend
            .run(move |t| async move {
                token::seen(&*t.api, &namespace, &lease_name(), Some(&name)).await
            })
            .await
            .map_err(ToolError::from)
            .and_then(|seen| seen.map_err(ToolError::from));
    let (preview_token, token_error) = match seen {
        Ok(seen) => (Some(token::token(Operation::Run, &plan, &seen)?), None),
        Err(why) => (None, Some(format!("no preview_token: {why}"))),
    };
    let mut text = yaml.clone();
    match (&preview_token, &token_error) {
        (Some(t), _) => text.push_str(&format!(
            "\npreview_token: {t}\n(for `run` with the same arguments, once a person approved)\n"
        )),
        (None, Some(why)) => text.push_str(&format!("\n{why}\n")),
        (None, None) => {}
    }
    Ok(answer(
        text,
        json!({
            "job": to_value(&job),
            "yaml": yaml,
            "preview_token": preview_token,
            "token_error": token_error,
        }),
        false,
    ))
}

async fn upgrade_preview(s: &Session, args: UpgradeArgs) -> Result<CallToolResult, ToolError> {
    let plan = args.plan(&s.namespace)?;
    let (preview, preview_token) = s
        .backend
        .run(move |t| async move {
            let spec = plan.spec();
            let seen = token::seen(&*t.api, &spec.namespace, &spec.lease_name, None).await?;
            let preview = upgrade_driver::preview(&*t.api, &plan)
                .await
                .map_err(|e| ToolError::Driver(present::upgrade::error(&e)))?;
            Ok::<_, ToolError>((preview, token::token(Operation::Upgrade, spec, &seen)?))
        })
        .await??;
    let text = format!(
        "{}preview_token: {preview_token}\n(for `upgrade` with the same arguments, once a \
         person approved this preview)\n",
        present::upgrade::preview(&preview)
    );
    Ok(answer(
        text,
        json!({"preview_token": preview_token, "preview": to_value(&preview)}),
        false,
    ))
}

async fn rotate_ca_preview(
    s: &Session,
    args: RotateCaArgs,
    operation: Operation,
) -> Result<CallToolResult, ToolError> {
    let simulated = s.backend.simulated_nodes().is_some();
    let plan = args.plan(&s.namespace, simulated)?;
    let (preview, preview_token) = s
        .backend
        .run(move |t| async move {
            let spec = plan.spec();
            let seen = token::seen(&*t.api, &spec.namespace, &spec.lease_name, None).await?;
            let preview = certs_driver::preview(&*t.api, &plan)
                .await
                .map_err(|e| ToolError::Driver(present::rotation::error(&e)))?;
            Ok::<_, ToolError>((preview, token::token(operation, spec, &seen)?))
        })
        .await??;
    let tool = match operation {
        Operation::RotateCaAbort => "rotate_ca_abort",
        _ => "rotate_ca",
    };
    let text = format!(
        "{}preview_token: {preview_token}\n(for `{tool}` with the same arguments, once a \
         person approved this preview)\n",
        present::rotation::preview(&preview, operation == Operation::RotateCaAbort)
    );
    Ok(answer(
        text,
        json!({
            "preview_token": preview_token,
            "for": tool,
            "preview": to_value(&preview),
        }),
        false,
    ))
}

/// The pause switch now and what `pause`/`resume` would change, with the token it needs.
async fn pause_preview(s: &Session, switch: Switch) -> Result<CallToolResult, ToolError> {
    let namespace = s.namespace.clone();
    let lease = lease_name();
    let plan = switch.plan(&namespace, &lease);
    let operation = switch.operation;
    let (now, preview_token) = {
        let (namespace, lease) = (namespace.clone(), lease.clone());
        s.backend
            .run(move |t| async move {
                let (now, seen) = token::switch(&*t.api, &namespace, &lease).await?;
                Ok::<_, ToolError>((now, token::token(operation, &plan, &seen)?))
            })
            .await??
    };
    let state = match &now {
        Some(pause) => format!("{pause}"),
        None => "not paused".to_string(),
    };
    let would = match (switch.operation, &now) {
        (Operation::Resume, Some(_)) => {
            "`resume` would lift it: paused runs go on with their next step".to_string()
        }
        (Operation::Resume, None) => "`resume` would find nothing to lift".to_string(),
        (_, Some(_)) => "`pause` would leave it as it is (the first pause is kept)".to_string(),
        (_, None) => format!(
            "`pause` would set it, paused by {}{}: every roll, in flight or to come, finishes \
             the step under way and starts no other until `resume`",
            switch.by.as_deref().unwrap_or_default(),
            match switch.reason.as_deref() {
                Some(r) if !r.is_empty() => format!(": {r}"),
                _ => String::new(),
            }
        ),
    };
    let tool = switch.tool();
    let text = format!(
        "the switch (lease {namespace}/{lease}): {state}\n{would}\npreview_token: \
         {preview_token}\n(for `{tool}` with the same arguments, once a person approved this \
         preview)\n"
    );
    Ok(answer(
        text,
        json!({
            "preview_token": preview_token,
            "for": tool,
            "lease": format!("{namespace}/{lease}"),
            "paused": now.as_ref().map(|p| p.to_string()),
        }),
        false,
    ))
}

// ---- mutating -----------------------------------------------------------------------------------

/// `pause` or `resume`, once its token matches the switch as it still is. Not behind the
/// session's busy mark: a pause is what one sends to a roll in flight.
async fn set_switch(
    s: &Session,
    switch: Switch,
    presented: String,
) -> Result<CallToolResult, ToolError> {
    let namespace = s.namespace.clone();
    let lease = lease_name();
    let plan = switch.plan(&namespace, &lease);
    let operation = switch.operation;
    let to = switch
        .by
        .clone()
        .map(|by| (by, switch.reason.clone().unwrap_or_default()));
    let (before, set) = {
        let (namespace, lease) = (namespace.clone(), lease.clone());
        s.backend
            .run(move |t| async move {
                let (_, seen) = token::switch(&*t.api, &namespace, &lease).await?;
                let current = token::token(operation, &plan, &seen)?;
                token::check(operation, &presented, &current)?;
                let pause = to.map(|(by, reason)| Pause {
                    by,
                    at: Some(t.clock()()),
                    reason,
                });
                let before = set_pause(&*t.api, &namespace, &lease, pause.as_ref())
                    .await
                    .map_err(ToolError::Core)?;
                Ok::<_, ToolError>((before, pause))
            })
            .await??
    };
    let text = match (&set, &before) {
        (Some(_), Some(was)) => format!(
            "already paused (lease {namespace}/{lease}): {was}; left as it was (`resume` lifts it)"
        ),
        (Some(pause), None) => format!(
            "{pause} (lease {namespace}/{lease}): every roll, in flight or to come, finishes the \
             step under way and starts no other until `resume`"
        ),
        (None, Some(was)) => format!(
            "resumed (lease {namespace}/{lease}; it was {was}): paused runs go on with their \
             next step"
        ),
        (None, None) => format!("not paused (lease {namespace}/{lease}): nothing to resume"),
    };
    Ok(answer(
        text,
        json!({
            "lease": format!("{namespace}/{lease}"),
            "before": before.as_ref().map(|p| p.to_string()),
            "paused": match (&set, &before) {
                (Some(_), Some(was)) => Some(was.to_string()),
                (Some(now), None) => Some(now.to_string()),
                (None, _) => None,
            },
        }),
        false,
    ))
}

/// Marks the session busy with `what` until dropped; refused when another operation runs.
struct Busy<'s> {
    session: &'s Session,
    _guard: tokio::sync::OwnedMutexGuard<()>,
}

impl<'s> Busy<'s> {
    fn take(session: &'s Session, what: String, stop: Option<Stop>) -> Result<Self, ToolError> {
        let mut running = session.running.lock().unwrap_or_else(|e| e.into_inner());
        let guard = session
            .busy
            .clone()
            .try_lock_owned()
            .map_err(|_| ToolError::Busy {
                running: running.as_ref().map(|(what, _)| what.clone()),
            })?;
        *running = Some((what, stop));
        Ok(Busy {
            session,
            _guard: guard,
        })
    }
}

impl Drop for Busy<'_> {
    fn drop(&mut self) {
        *self
            .session
            .running
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = None;
    }
}

/// Follows `task` (an operation running on the backend) to its end: sends its events as they
/// come; on the client's cancellation, requests `stop` (none: says that it does not stop).
async fn follow<R>(
    s: &Session,
    context: &RequestContext<RoleServer>,
    tool: Name,
    mut events: UnboundedReceiver<Line>,
    stop: Option<&Stop>,
    task: impl Future<Output = Result<R, ToolError>>,
) -> (Notifier, Result<R, ToolError>) {
    let mut notifier = Notifier::new(
        context.peer.clone(),
        context.meta.get_progress_token(),
        tool.as_str(),
        s.level.clone(),
    );
    tokio::pin!(task);
    let mut cancelled = false;
    let result = loop {
        tokio::select! {
            biased;
            Some(line) = events.recv() => notifier.send(line).await,
            () = context.ct.cancelled(), if !cancelled => {
                cancelled = true;
                notifier.cancelled();
                let text = match stop {
                    Some(stop) => {
                        stop.request();
                        "cancelled: no further node starts; the step in flight finishes, then \
                         the report follows as a logging notification (a later call resumes)"
                    }
                    None => {
                        "cancelled: this operation does not stop midway; it runs to its end, \
                         and its result follows as a logging notification"
                    }
                };
                notifier
                    .send(Line {
                        severity: Severity::Notice,
                        text: text.into(),
                        event: json!({"event": "cancelled"}),
                    })
                    .await;
            }
            result = &mut task => break result,
        }
    };
    while let Ok(line) = events.try_recv() {
        notifier.send(line).await;
    }
    (notifier, result)
}

async fn upgrade(
    s: &Session,
    args: UpgradeArgs,
    sent: &JsonObject,
    presented: String,
    context: &RequestContext<RoleServer>,
) -> Result<CallToolResult, ToolError> {
    let plan = args.plan(&s.namespace)?;
    let stop = Stop::new();
    let _busy = Busy::take(
        s,
        format!("upgrade to {}", plan.spec().target),
        Some(stop.clone()),
    )?;
    let (sender, receiver) = events();
    let driver_stop = stop.clone();
    let work = move |t: Target| async move {
        let spec = plan.spec();
        let seen = token::seen(&*t.api, &spec.namespace, &spec.lease_name, None).await?;
        let current = token::token(Operation::Upgrade, spec, &seen)?;
        token::check(Operation::Upgrade, &presented, &current)?;
        // An assistant relays the progress to a person: paced as if watched, unless --speed.
        let sink = Arc::new(stream::Sink::new(sender, t.pacer(t.speed(true))));
        upgrade_driver::run_until(&*t.api, &plan, sink, &driver_stop)
            .await
            .map_err(|e| ToolError::Driver(present::upgrade::error(&e)))
    };
    let task = async { s.backend.run(work).await? };
    let (notifier, result) = follow(s, context, Name::Upgrade, receiver, Some(&stop), task).await;
    let report = match result {
        Ok(report) => report,
        Err(why) => {
            notifier.failed(&why.to_string()).await;
            return Err(why);
        }
    };
    let failed = present::upgrade::failed(&report);
    let text = present::upgrade::answer(&report, sent);
    let mut structured = to_value(&report);
    if let (upgrade_driver::Outcome::Failed { nodes, .. }, Value::Object(fields)) =
        (&report.outcome, &mut structured)
    {
        fields.insert(
            "retry".into(),
            json!({
                "tool": Name::UpgradePreview.as_str(),
                "arguments": present::retry::narrowed_arguments(sent, nodes),
            }),
        );
    }
    let severity = if failed {
        Severity::Error
    } else {
        Severity::Notice
    };
    notifier.finish(severity, &text, structured.clone()).await;
    Ok(answer(text, structured, failed))
}

async fn rotate_ca(
    s: &Session,
    args: RotateCaArgs,
    presented: String,
    operation: Operation,
    context: &RequestContext<RoleServer>,
) -> Result<CallToolResult, ToolError> {
    let simulated = s.backend.simulated_nodes().is_some();
    let plan = args.plan(&s.namespace, simulated)?;
    let abort = operation == Operation::RotateCaAbort;
    let tool = if abort {
        Name::RotateCaAbort
    } else {
        Name::RotateCa
    };
    // An abort does not stop midway: it has no stop to request.
    let stop = (!abort).then(Stop::new);
    let what = format!(
        "{} {}",
        if abort {
            "rotate-ca abort of"
        } else {
            "rotate-ca to"
        },
        plan.spec().fingerprint
    );
    let _busy = Busy::take(s, what, stop.clone())?;
    let (sender, receiver) = events();
    let driver_stop = stop.clone().unwrap_or_else(Stop::new);
    let work = move |t: Target| async move {
        let spec = plan.spec();
        let seen = token::seen(&*t.api, &spec.namespace, &spec.lease_name, None).await?;
        let current = token::token(operation, spec, &seen)?;
        token::check(operation, &presented, &current)?;
        // An assistant relays the progress to a person: paced as if watched, unless --speed.
        let sink = Arc::new(stream::Sink::new(sender, t.pacer(t.speed(true))));
        let report = if abort {
            certs_driver::abort(&*t.api, &plan, sink).await
        } else {
            certs_driver::run_until(&*t.api, &plan, sink, &driver_stop).await
        };
        report.map_err(|e| ToolError::Driver(present::rotation::error(&e)))
    };
    let task = async { s.backend.run(work).await? };
    let (notifier, result) = follow(s, context, tool, receiver, stop.as_ref(), task).await;
    let report = match result {
        Ok(report) => report,
        Err(why) => {
            notifier.failed(&why.to_string()).await;
            return Err(why);
        }
    };
    let failed = present::rotation::failed(&report);
    let text = present::rotation::answer(&report, abort);
    let structured = to_value(&report);
    let severity = if failed {
        Severity::Error
    } else {
        Severity::Notice
    };
    notifier.finish(severity, &text, structured.clone()).await;
    Ok(answer(text, structured, failed))
}

async fn run(
    s: &Session,
    args: JobArguments,
    presented: String,
    context: &RequestContext<RoleServer>,
) -> Result<CallToolResult, ToolError> {
    let mut spec = args.spec(&s.namespace)?;
    let plan = nodejob_core::build(&spec);
    let _busy = Busy::take(s, format!("run on node {}", spec.node), None)?;
    let (sender, receiver) = events();
    spec.output = Some(Arc::new(stream::NoteSink(sender)));
    let (node, name) = (spec.node.clone(), spec.name.clone());
    let work = move |t: Target| async move {
        let seen = token::seen(&*t.api, &spec.namespace, &lease_name(), Some(&spec.name)).await?;
        let current = token::token(Operation::Run, &plan, &seen)?;
        token::check(Operation::Run, &presented, &current)?;
        // As the command: a node the cluster does not have, or one a roll is under way on,
        // is refused before any Job is created (no `force` here).
        let on = (run::node_exists(&*t.api, &spec.node).await).map_err(ToolError::RunRefused)?;
        (run::refuse_busy(&*t.api, &spec.namespace, &on).await).map_err(ToolError::RunRefused)?;
        nodejob_core::run_exit_code_logs(&*t.api, &spec)
            .await
            .map_err(ToolError::Core)
    };
    let task = async { s.backend.run(work).await? };
    let (notifier, result) = follow(s, context, Name::Run, receiver, None, task).await;
    let (exit_code, log) = match result {
        Ok(ended) => ended,
        Err(why) => {
            notifier.failed(&why.to_string()).await;
            return Err(why);
        }
    };
    let structured = json!({"node": node, "job": name, "exit_code": exit_code, "log": log});
    let text = format!("{name} on {node} exited {exit_code}\n{log}");
    let severity = if exit_code == 0 {
        Severity::Notice
    } else {
        Severity::Error
    };
    notifier.finish(severity, &text, structured.clone()).await;
    Ok(answer(text, structured, exit_code != 0))
}
