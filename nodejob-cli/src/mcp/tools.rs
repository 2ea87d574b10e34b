//! The tools a session offers: name, title, what each does, its input schema (from the types in
//! [`super::params`]) and its annotations. Read-only tools only read the cluster; every tool
//! that changes it is destructive and takes the `preview_token` of its preview.

use std::sync::Arc;

use rmcp::model::{JsonObject, Tool, ToolAnnotations};

use super::params::{
    Extra, JobArguments, JobsArgs, PauseArgs, PausePreviewArgs, ResumeArgs, RotateCaArgs,
    StatusArgs, UpgradeArgs, schema,
};

/// A tool of the session.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Name {
    /// `status`.
    Status,
    /// `jobs`.
    Jobs,
    /// `render`.
    Render,
    /// `upgrade_preview`.
    UpgradePreview,
    /// `rotate_ca_preview`.
    RotateCaPreview,
    /// `upgrade`.
    Upgrade,
    /// `rotate_ca`.
    RotateCa,
    /// `rotate_ca_abort`.
    RotateCaAbort,
    /// `run`.
    Run,
    /// `pause_preview`.
    PausePreview,
    /// `pause`.
    Pause,
    /// `resume`.
    Resume,
}

impl Name {
    /// Every tool, in the order listed.
    pub(crate) const ALL: [Name; 12] = [
        Name::Status,
        Name::Jobs,
        Name::Render,
        Name::UpgradePreview,
        Name::RotateCaPreview,
        Name::PausePreview,
        Name::Upgrade,
        Name::RotateCa,
        Name::RotateCaAbort,
        Name::Run,
        Name::Pause,
        Name::Resume,
    ];

    /// As the protocol names it.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Name::Status => "status",
            Name::Jobs => "jobs",
            Name::Render => "render",
            Name::UpgradePreview => "upgrade_preview",
            Name::RotateCaPreview => "rotate_ca_preview",
            Name::Upgrade => "upgrade",
            Name::RotateCa => "rotate_ca",
            Name::RotateCaAbort => "rotate_ca_abort",
            Name::Run => "run",
            Name::PausePreview => "pause_preview",
            Name::Pause => "pause",
            Name::Resume => "resume",
        }
    }

    /// The tool named `name`.
    pub(crate) fn parse(name: &str) -> Option<Name> {
        Name::ALL.into_iter().find(|n| n.as_str() == name)
    }

    /// Whether it changes the cluster (and so takes a preview token).
    pub(crate) fn mutates(self) -> bool {
        matches!(
            self,
            Name::Upgrade
                | Name::RotateCa
                | Name::RotateCaAbort
                | Name::Run
                | Name::Pause
                | Name::Resume
        )
    }

    fn title(self) -> &'static str {
        match self {
            Name::Status => "Cluster status: the Lease and every node's state",
            Name::Jobs => "Node Jobs: node, status, exit code, age",
            Name::Render => "Render a node Job (and preview `run`)",
            Name::UpgradePreview => "Preview a rolling node upgrade",
            Name::RotateCaPreview => "Preview a cluster CA rotation (or its abort)",
            Name::Upgrade => "Roll nodes to a new version (reboots nodes)",
            Name::RotateCa => "Rotate the cluster CA node by node",
            Name::RotateCaAbort => "Undo a CA rotation that has not begun issue",
            Name::Run => "Run a privileged command on a node's host",
            Name::PausePreview => "Preview pausing (or resuming) every roll",
            Name::Pause => "Pause every roll: no step starts until resume",
            Name::Resume => "Resume the paused rolls",
        }
    }

    fn description(self) -> &'static str {
        match self {
            Name::Status => {
                "Who holds the nodejob Lease (operation, target, epoch, last renewal) and each \
                 node's state from the drivers' records: version, Ready, cordoned, upgrade \
                 records, CA phase as last read. On a simulated cluster also its API call and \
                 write counts. Reads only."
            }
            Name::Jobs => {
                "The node Jobs in the namespace: node, status, the container's exit code, age. \
                 Reads only."
            }
            Name::Render => {
                "The privileged, node-pinned Job `run` would create (YAML and JSON), and the \
                 preview_token `run` needs: a digest of that Job and of the cluster as read now \
                 (the nodes, the Lease, a Job of that name). Reads only."
            }
            Name::UpgradePreview => {
                "What `upgrade` would do with these arguments, changing nothing: the batches in \
                 order, the nodes at the target already, per node the Pods the drain would \
                 evict, leave, refuse or find blocked by a budget now, and the Lease's holder. \
                 Returns the preview_token `upgrade` needs: show the preview to a person before \
                 using it."
            }
            Name::RotateCaPreview => {
                "What `rotate_ca` (or, with abort: true, `rotate_ca_abort`) would do, changing \
                 nothing: what each node last reported, the next phase and where, who \
                 disagrees, the Lease. Returns the preview_token that operation needs."
            }
            Name::Upgrade => {
                "Rolling node upgrade: per node cordon, drain, the host upgrade (a privileged \
                 Job), reboot, health check, uncordon; control-plane nodes first, one at a time. \
                 Refused unless preview_token is the one upgrade_preview returned for the same \
                 arguments on the cluster as it still is. Streams progress; answers the \
                 driver's report. Cancelling the call stops starting nodes and finishes the \
                 step in flight (a later upgrade resumes)."
            }
            Name::RotateCa => {
                "CA rotation: stage the new CA beside the old, reissue every node's leaves from \
                 it, finalize; each phase gated on what every node reports. Refused unless \
                 preview_token is the one rotate_ca_preview returned for the same arguments on \
                 the cluster as it still is. Streams progress; answers the driver's report. \
                 Cancelling stops starting nodes and finishes the step in flight."
            }
            Name::RotateCaAbort => {
                "Removes the staged new CA from every node, restoring the old trust; refused \
                 once any node has begun issue (only forward is safe then). Needs the \
                 preview_token of rotate_ca_preview called with abort: true. It does not stop \
                 midway when cancelled."
            }
            Name::Run => {
                "Runs one privileged Job on a node (hostPID, hostNetwork, privileged) and \
                 answers its container's exit code and log. Refused unless preview_token is the \
                 one render returned for the same arguments on the cluster as it still is. A \
                 running host command is never killed: cancelling only stops waiting for it."
            }
            Name::PausePreview => {
                "The pause switch now (who paused, when, why: an annotation on the shared \
                 nodejob Lease) and what `pause` with these arguments (or, with resume: true, \
                 `resume`) would change, changing nothing. Returns the preview_token that \
                 operation needs; it covers the switch as read, so a roll renewing the Lease \
                 does not make it stale."
            }
            Name::Pause => {
                "Pulls the pause switch: every upgrade and CA rotation, in flight (here or \
                 elsewhere) or to come, finishes the step under way and starts no other until \
                 resume; a run still paused at its deadline ends paused. Kept in the cluster \
                 (the Lease's annotation), not in this session. Refused unless preview_token \
                 is the one pause_preview returned for the same arguments on the switch as it \
                 still is. A switch already pulled is left as it was."
            }
            Name::Resume => {
                "Lifts the pause switch, whoever pulled it: paused runs go on with their next \
                 step. Refused unless preview_token is the one pause_preview returned with \
                 resume: true on the switch as it still is."
            }
        }
    }

    fn schema(self) -> Arc<JsonObject> {
        let extras: &[Extra] = match self {
            _ if self.mutates() => &[Extra::PreviewToken],
            Name::RotateCaPreview => &[Extra::Abort],
            _ => &[],
        };
        match self {
            Name::Status => schema::<StatusArgs>(extras),
            Name::Jobs => schema::<JobsArgs>(extras),
            Name::Render | Name::Run => schema::<JobArguments>(extras),
            Name::UpgradePreview | Name::Upgrade => schema::<UpgradeArgs>(extras),
            Name::RotateCaPreview | Name::RotateCa | Name::RotateCaAbort => {
                schema::<RotateCaArgs>(extras)
            }
            Name::PausePreview => schema::<PausePreviewArgs>(extras),
            Name::Pause => schema::<PauseArgs>(extras),
            Name::Resume => schema::<ResumeArgs>(extras),
        }
    }

    /// The tool, as listed.
    pub(crate) fn tool(self) -> Tool {
        let annotations = if self.mutates() {
            ToolAnnotations::with_title(self.title())
                .read_only(false)
                .destructive(true)
                .idempotent(false)
                .open_world(false)
        } else {
            ToolAnnotations::with_title(self.title())
                .read_only(true)
                .destructive(false)
                .idempotent(true)
                .open_world(false)
        };
        Tool::new(self.as_str(), self.description(), self.schema())
            .with_title(self.title())
            .with_annotations(annotations)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_tool_is_listed_with_a_schema_and_its_annotations() {
        for name in Name::ALL {
            assert_eq!(Name::parse(name.as_str()), Some(name));
            let tool = name.tool();
            let schema = tool.schema_as_json_value();
            assert_eq!(schema["type"], "object", "{}", name.as_str());
            let gated =
                (schema["required"].as_array().into_iter().flatten()).any(|r| r == "preview_token");
            assert_eq!(gated, name.mutates(), "{}", name.as_str());
            let a = tool.annotations.unwrap_or_default();
            assert_eq!(a.read_only_hint, Some(!name.mutates()));
            assert_eq!(a.destructive_hint, Some(name.mutates()));
        }
        assert_eq!(Name::parse("nope"), None);
    }
}
