//! [`Spec`]: one privileged node Job, and where its progress goes.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::image::is_digest_pinned;
use crate::names::{is_dns1123_label, is_dns1123_subdomain, is_qualified_name};

/// How much a [`Note`] matters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Level {
    /// Progress: the Job was created, finished, deleted.
    Info,
    /// Something the operator should know: a stale Job replaced, a running one waited for.
    Warn,
}

/// One line of progress or a cleanup warning from a runner function.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Note {
    /// How much it matters.
    pub level: Level,
    /// The text, naming the Job.
    pub message: String,
}

/// Where a runner's [`Note`]s go. `None` in [`Spec::output`] prints them on stdout.
pub trait Sink: Send + Sync {
    /// Receives one note.
    fn note(&self, note: &Note);
}

impl<F: Fn(&Note) + Send + Sync> Sink for F {
    fn note(&self, note: &Note) {
        self(note)
    }
}

/// One privileged node Job.
///
/// The most an argv may hold, its arguments' bytes and one terminator each: 128 KiB. It is
/// stored in the Job and again in its Pod (etcd refuses an object over 1.5 MiB), and Linux's
/// `execve` refuses any one argument over 128 KiB (`MAX_ARG_STRLEN`).
pub const ARGV_LIMIT: usize = 128 * 1024;

/// `namespace`, `name`, `node`, `label_key`, `container`, `argv` (and `image`, `critical`)
/// define the pod; `active_deadline` and `poll_attempts` bound it; `kind` names it in error
/// messages so each caller keeps its own wording.
#[derive(Clone, Default)]
pub struct Spec {
    /// Namespace of the Job.
    pub namespace: String,
    /// Job name; use [`crate::trunc_name`] to respect the 63-character limit.
    pub name: String,
    /// The pod's `nodeName`, carried verbatim in [`crate::NODE_ANNOTATION`] and hashed into the
    /// `label_key` label when it does not fit a label value.
    pub node: String,
    /// Label whose value is [`crate::node_label_value`] of `node`, e.g. `stratum.ciq.com/upgrade`.
    pub label_key: String,
    /// Container name.
    pub container: String,
    /// The full shell-free command: `nsenter … -- <binary> …`. Becomes `command` verbatim.
    pub argv: Vec<String>,
    /// The Job's `activeDeadlineSeconds` (rounded up to whole seconds).
    pub active_deadline: Duration,
    /// How long to wait for the Job, in units of [`crate::POLL_INTERVAL`].
    pub poll_attempts: u32,
    /// Noun for messages, e.g. `per-node upgrade` or `carotate`.
    pub kind: String,
    /// Admit the pod as `system-node-critical`, as static pods are: under node pressure the
    /// kubelet refuses every other new pod. It may also evict workload pods past every PDB, so
    /// only a Job on a node that has already been drained should set it.
    pub critical: bool,
    /// Container image; `None` uses [`crate::IMAGE`]. Must be pinned by `@sha256:` digest.
    pub image: Option<String>,
    /// Receives progress and cleanup warnings; `None` prints them on stdout.
    pub output: Option<Arc<dyn Sink>>,
}

impl fmt::Debug for Spec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Spec")
            .field("namespace", &self.namespace)
            .field("name", &self.name)
            .field("node", &self.node)
            .field("label_key", &self.label_key)
            .field("container", &self.container)
            .field("argv", &self.argv)
            .field("active_deadline", &self.active_deadline)
            .field("poll_attempts", &self.poll_attempts)
            .field("kind", &self.kind)
            .field("critical", &self.critical)
            .field("image", &self.image)
            .field("output", &self.output.as_ref().map(|_| "<sink>"))
            .finish()
    }
}

impl Spec {
    /// The image the pod runs: `image`, or the pinned [`crate::IMAGE`].
    pub fn image(&self) -> &str {
        self.image.as_deref().unwrap_or(crate::IMAGE)
    }

    /// How long a runner waits for the Job: `poll_attempts` x [`crate::POLL_INTERVAL`].
    pub fn wait_bound(&self) -> Duration {
        crate::POLL_INTERVAL.saturating_mul(self.poll_attempts)
    }

    /// Sends a note to `output`, or prints it on stdout.
    pub fn emit(&self, level: Level, message: impl Into<String>) {
        let note = Note {
            level,
            message: message.into(),
        };
        match &self.output {
            Some(sink) => sink.note(&note),
            None => match level {
                Level::Warn => println!("warning: {}", note.message),
                _ => println!("{}", note.message),
            },
        }
    }

    /// The Job this spec names, for error messages.
    pub fn job_ref(&self) -> Box<crate::JobRef> {
        Box::new(crate::JobRef {
            kind: self.kind.clone(),
            namespace: self.namespace.clone(),
            name: self.name.clone(),
            node: self.node.clone(),
        })
    }

    /// Refuses a spec that cannot make a valid, safe Job, naming the field and the rule. Every
    /// runner function calls this before any API call.
    pub fn validate(&self) -> Result<()> {
        const LABEL: &str = "must be a DNS-1123 label (lowercase alphanumerics and '-', \
                             starting and ending with an alphanumeric, at most 63 characters)";
        let invalid = |field: &'static str, rule: String| Error::InvalidSpec { field, rule };

        if !is_dns1123_label(&self.name) {
            return Err(invalid(
                "name",
                format!("{LABEL}, got {:?}; trunc_name derives one", self.name),
            ));
        }
        if !is_dns1123_label(&self.namespace) {
            return Err(invalid(
                "namespace",
                format!("{LABEL}, got {:?}", self.namespace),
            ));
        }
        if !is_dns1123_subdomain(&self.node) {
            return Err(invalid(
                "node",
                format!(
                    "must be a DNS-1123 subdomain (lowercase alphanumerics, '-' and '.', each \
                     '.'-separated part starting and ending with an alphanumeric, at most 253 \
                     characters), got {:?}",
                    self.node
                ),
            ));
        }
        if !is_qualified_name(&self.label_key) {
            return Err(invalid(
                "label_key",
                format!(
                    "must be a qualified name (an optional DNS-1123 subdomain prefix of at most \
                     253 characters and '/', then a name of at most 63 alphanumerics, '-', '_' \
                     and '.', starting and ending with an alphanumeric), got {:?}",
                    self.label_key
                ),
            ));
        }
        if !is_dns1123_label(&self.container) {
            return Err(invalid(
                "container",
                format!("{LABEL}, got {:?}", self.container),
            ));
        }
        if self.argv.is_empty() {
            return Err(invalid(
                "argv",
                "must not be empty (it is the container's whole command), got []".to_owned(),
            ));
        }
        if self.argv[0].trim().is_empty() {
            return Err(invalid(
                "argv",
                format!(
                    "the program, argv[0], must not be empty, got {:?}",
                    self.argv[0]
                ),
            ));
        }
        let size: usize = self.argv.iter().map(|a| a.len() + 1).sum();
        if size > ARGV_LIMIT {
            return Err(invalid(
                "argv",
                format!(
                    "must be at most {ARGV_LIMIT} bytes in all (it is stored in the Job and its \
                     Pod, and the kernel's exec takes no single argument over 128 KiB), got \
                     {size} bytes in {} arguments",
                    self.argv.len()
                ),
            ));
        }
        if let Some((i, arg)) = self.argv.iter().enumerate().find(|(_, a)| a.contains('\0')) {
            return Err(invalid(
                "argv",
                format!("must not contain NUL (an exec argument cannot), got argv[{i}] = {arg:?}"),
            ));
        }
        if self.active_deadline.is_zero() {
            return Err(invalid(
                "active_deadline",
                format!("must be positive, got {:?}", self.active_deadline),
            ));
        }
        if self.poll_attempts == 0 {
            return Err(invalid(
                "poll_attempts",
                format!("must be at least 1, got {}", self.poll_attempts),
            ));
        }
        if let Some(image) = &self.image
            && !is_digest_pinned(image)
        {
            return Err(invalid(
                "image",
                format!(
                    "must be pinned by digest (a reference ending in '@sha256:' and 64 \
                     lowercase hex digits), got {image:?}"
                ),
            ));
        }
        Ok(())
    }
}
