//! The result of ours, once it finished: its Pod (by the Job's UID), the container's exit code,
//! the log when asked, then ours deleted when it succeeded or left for inspection when it failed.
//! A Job that succeeded answers 0 with no Pod read, or, its log wanted, with the log of the Pod
//! named while it ran: the finish then costs the log's read and the delete, one after the
//! other (the log is read before the delete, as the contract says), no list before them; or
//! the delete alone, when the log was read as the Job reported its Pod succeeded, before its
//! terminal condition (`ours.rs`, `Await::Log`).
//!
//! ```text
//!  succeeded, its log read early ─────────────────▶ DeleteOurs ──▶ done (deleted)
//!  succeeded, its Pod named (or no log asked) ─▶ Log? ─▶ DeleteOurs ──▶ done (deleted)
//!  Pods ─┬─ exit ─────────────────▶ Log? ─┬─▶ DeleteOurs ──▶ done (succeeded: deleted)
//!        │                                └─▶ done (failed: left in place)
//!        ├ no exit, no pod, or its pod deleted ─▶ Recheck ─▶ done (why there is no answer)
//!        └ no exit, DeadlineExceeded ─▶ done
//! ```
//!
//! An exit is the host operation's answer only when the container ended on its own: not when
//! its Pod was deleted or disrupted ([`disruption`]), and not when the Job failed by its
//! deadline (the Job controller deletes the Pod then).

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;

use super::context::{Next, Retries, Run, exact, rv_of, uid_of};
use super::protocol::{Intent, Mode, Observation, Report};
use crate::LOG_LIMIT_BYTES;
use crate::error::{Action, Error, ObjectKind};
use crate::quote::quote;
use crate::spec::Level;
use crate::status::{
    JobConditionReason, container_exit_code, disruption, failed, failure_condition, is_pod_of_job,
    lost_in_reboot, pods_selector, succeeded,
};

/// Consecutive transient failures allowed once the Job has finished and only reading and
/// cleaning up remain (no wait bound applies there).
const POST_FINISH_RETRIES: u32 = 5;
/// Transient failures reading the log before it is reported unread.
const LOG_RETRIES: u32 = 2;
/// Precondition conflicts on our Job's own status churn before giving up on deleting it.
const CONFLICT_RETRIES: u32 = 3;

/// Reading the result of ours, which has finished.
#[derive(Debug)]
pub(super) struct Reading {
    uid: String,
    /// Its last resourceVersion: the delete's precondition.
    rv: Option<String>,
    /// Its finished state.
    job: Box<Job>,
    /// Whether it reported its Pod terminating by another actor's hand while it ran.
    pod_deleted: bool,
    at: At,
}

/// Where the reading is, with what that place needs.
#[derive(Debug)]
enum At {
    /// Listing its Pods.
    Pods,
    /// No exit answers (no Pod remains, or its Pod was deleted): re-reading ours, to tell
    /// whether another actor deleted it, before saying so.
    Recheck(NoAnswer),
    /// Ours stands and no Pod of it remains: reading its node, since the pod garbage collector
    /// deletes the Pods of a deleted node (then the deletion is the answer).
    NodeCheck(NoAnswer),
    /// Reading its log; the exit code is known.
    Log { exit_code: i32 },
    /// Deleting ours (succeeded) exactly.
    Deleting { report: Report, conflicts: u32 },
    /// Re-reading ours after a delete precondition conflict.
    Rereading { report: Report, conflicts: u32 },
}

/// Why a failed Job gives no exit status.
#[derive(Debug)]
enum NoAnswer {
    /// No container of ours terminated: the Job's failure condition says why.
    NoExit { reason: String, message: String },
    /// Our Pod was deleted or disrupted: whatever it exited with was the kill's.
    PodDeleted { pod: String, cause: String },
    /// The pod garbage collector failed our Pod because its Node was deleted.
    NodeDeleted,
    /// Our Pod's container was lost in a reboot of its node.
    Lost { pod: String },
}

/// How a missing Pod is named.
const GONE: &str = "(gone)";

/// The reason of the `DisruptionTarget` condition the pod garbage collector gives the Pods of
/// a deleted Node before it deletes them (`gcOrphaned` in `pkg/controller/podgc`).
const DELETION_BY_POD_GC: &str = "DeletionByPodGC";

/// Whether `pod` was failed by the pod garbage collector (its Node is gone).
fn collected_as_orphan(pod: &Pod) -> bool {
    pod.status
        .iter()
        .flat_map(|s| s.conditions.iter().flatten())
        .any(|c| c.type_ == "DisruptionTarget" && c.reason.as_deref() == Some(DELETION_BY_POD_GC))
}

impl Reading {
    /// Starts reading the result of the finished Job `uid`. A Job that succeeded answers 0
    /// (the Job controller counts it succeeded only once its one Pod did): no Pod is read
    /// unless its log is wanted, and then the Pod named while it ran (`pod`) has its log read
    /// at once, or taken as read before the end (`log`). Else its Pods are listed, for the exit code and what ended it.
    pub(super) fn start(
        run: &Run,
        uid: String,
        rv: Option<String>,
        job: Box<Job>,
        pod_deleted: bool,
        pod: Option<String>,
        log: Option<String>,
    ) -> Step {
        let reading = Reading {
            uid,
            rv,
            job,
            pod_deleted,
            at: At::Pods,
        };
        match (succeeded(&reading.job), &run.mode, pod, log) {
            // Its log read already, as it reported its Pod succeeded before the end.
            (true, Mode::ExitCodeLogs, Some(_), Some(log)) => {
                reading.on_log(run, 0, Observation::Log(log))
            }
            (true, Mode::ExitCodeLogs, Some(pod), None) => {
                reading.go(At::Log { exit_code: 0 }, Intent::ReadLog { pod })
            }
            (true, Mode::ExitCodeLogs, None, _) | (false, ..) => {
                let selector = pods_selector(&reading.uid);
                Next::stay(reading, Intent::ListPods { selector })
            }
            (true, ..) => reading.exit(run, 0, None),
        }
    }

    /// Takes the answer to the last intent.
    pub(super) fn step(mut self, run: &Run, obs: Observation) -> Step {
        match std::mem::replace(&mut self.at, At::Pods) {
            At::Pods => self.on_pods(run, obs),
            At::Recheck(no_answer) => self.on_recheck(run, no_answer, obs),
            At::NodeCheck(no_answer) => match obs {
                Observation::Failed(e) if e.is_not_found() => {
                    Next::fail(self.no_answer(run, NoAnswer::NodeDeleted))
                }
                // The node stands (or cannot be read): the missing Pod is another actor's doing.
                Observation::Node(_) | Observation::Failed(_) => {
                    Next::fail(self.no_answer(run, no_answer))
                }
                other => run.unexpected(other, Action::Reading, ObjectKind::Node),
            },
            At::Log { exit_code } => self.on_log(run, exit_code, obs),
            At::Deleting { report, conflicts } => self.on_delete(run, report, conflicts, obs),
            At::Rereading { report, conflicts } => self.on_reread(run, report, conflicts, obs),
        }
    }

    /// How a transient failure may be retried: a few times in a row.
    pub(super) fn retries(&self) -> Retries {
        match self.at {
            At::Log { .. } => Retries::Times(LOG_RETRIES),
            _ => Retries::Times(POST_FINISH_RETRIES),
        }
    }

    fn go(mut self, at: At, intent: Intent) -> Step {
        self.at = at;
        Next::stay(self, intent)
    }

    fn on_pods(self, run: &Run, obs: Observation) -> Step {
        let pods = match obs {
            Observation::Pods(pods) => pods,
            other => return run.unexpected(other, Action::Listing, ObjectKind::Pod),
        };
        // The selector already names our UID; the one rule checks the owner as well, so that no
        // other Job's Pod can ever answer for ours.
        let ours: Vec<&Pod> = pods
            .iter()
            .filter(|p| is_pod_of_job(p, &self.uid))
            .collect();
        let terminated = ours
            .iter()
            .find_map(|p| container_exit_code(p, &run.container).map(|c| (*p, c)));
        let answering = terminated.map(|(p, _)| p).or(ours.first().copied());
        let pod_name = answering.and_then(|p| p.metadata.name.clone());

        if succeeded(&self.job) {
            return self.exit(run, 0, pod_name);
        }
        if !failed(&self.job) {
            return Next::fail(run.internal("finished neither succeeded nor failed"));
        }
        let cond = failure_condition(&self.job);
        // What another actor wrote (the Job controller, or whoever wrote the condition) is
        // quoted as host output is: bounded, whatever its size.
        let reason = cond
            .and_then(|c| c.reason.as_deref())
            .map_or_else(|| "Failed".to_string(), quote);
        let message = cond
            .and_then(|c| c.message.as_deref())
            .map(quote)
            .unwrap_or_default();

        if JobConditionReason::parse(&reason) == Some(JobConditionReason::DeadlineExceeded) {
            // The Job controller deletes a Pod still running at the deadline: whatever its
            // container ended with, the Job failed by its deadline and gives no answer. Say what
            // is known of the container, and only that.
            let message = match terminated {
                Some((pod, code)) if disruption(pod).is_some() => format!(
                    "{message} (its pod was deleted at the deadline; its container ended with \
                     exit code {code}, which is not taken as the host operation's answer)"
                ),
                Some((_, code)) => format!(
                    "{message} (its container exited on its own with code {code} as the \
                     deadline passed; a job failed by its deadline gives no answer)"
                ),
                None => message,
            };
            return Next::fail(self.failed_without_exit(run, reason, message));
        }

        let no_answer = match (answering, terminated) {
            (Some(pod), _) if collected_as_orphan(pod) => NoAnswer::NodeDeleted,
            (Some(pod), _) if disruption(pod).is_some() => NoAnswer::PodDeleted {
                pod: pod_name.unwrap_or_default(),
                cause: disruption(pod)
                    .map(|d| quote(&d.to_string()))
                    .unwrap_or_default(),
            },
            // The Job said its Pod was being deleted while it ran: whatever it exited with,
            // and whether or not it is still there to read, is the kill's.
            (pod, _) if self.pod_deleted => NoAnswer::PodDeleted {
                pod: pod.and(pod_name).unwrap_or_else(|| GONE.to_string()),
                cause: "the job reported it terminating while the host operation ran".to_string(),
            },
            // Lost, not ended: the node rebooted under it. Its 255 is the runtime's, not the
            // program's.
            (_, Some((pod, _))) if lost_in_reboot(pod, &run.container) => NoAnswer::Lost {
                pod: pod_name.unwrap_or_default(),
            },
            (_, Some((_, code))) => return self.exit(run, code, pod_name),
            // The Job controller never deletes the Pod of a Job that failed but by its
            // deadline: none left means another actor deleted it, and its exit status with it.
            (None, None) => NoAnswer::PodDeleted {
                pod: GONE.to_string(),
                cause: format!(
                    "no pod of the job remains, so another actor deleted it; the job failed with \
                     {reason}: {message}"
                ),
            },
            _ => NoAnswer::NoExit { reason, message },
        };
        // The Job controller never deletes the Pod of a failed Job: no Pod at all under our UID,
        // or ours deleted, means another actor deleted it, maybe with the Job itself (a Job
        // deleted in the foreground takes its Pods first). Re-read ours to tell which.
        if pods.is_empty() || matches!(no_answer, NoAnswer::PodDeleted { .. }) {
            return self.go(At::Recheck(no_answer), Intent::GetJob);
        }
        Next::fail(self.no_answer(run, no_answer))
    }

    fn on_recheck(self, run: &Run, no_answer: NoAnswer, obs: Observation) -> Step {
        let deleted = "was deleted by another actor before its pod was read";
        match obs {
            Observation::Job(job) if uid_of(&job) != self.uid => Next::fail(run.vanished(
                &self.uid,
                format!(
                    "was deleted by another actor, and replaced by uid {}, before its pod was read",
                    uid_of(&job)
                ),
            )),
            Observation::Job(job) if job.metadata.deletion_timestamp.is_some() => {
                Next::fail(run.vanished(&self.uid, deleted.to_string()))
            }
            Observation::Failed(e) if e.is_not_found() => {
                Next::fail(run.vanished(&self.uid, deleted.to_string()))
            }
            // Ours stands and none of its Pods remains: was its node deleted (the pod garbage
            // collector then deleted the Pod)? One read tells.
            Observation::Job(_) if matches!(&no_answer, NoAnswer::PodDeleted { pod, .. } if pod == GONE) => {
                self.go(At::NodeCheck(no_answer), Intent::GetNode)
            }
            // Ours stands (or cannot be read): the Pod alone explains the missing answer.
            Observation::Job(_) | Observation::Failed(_) => {
                Next::fail(self.no_answer(run, no_answer))
            }
            other => run.unexpected(other, Action::Reading, ObjectKind::Job),
        }
    }

    /// The exit code is known: fetch the log when asked, then conclude.
    fn exit(self, run: &Run, exit_code: i32, pod: Option<String>) -> Step {
        match run.mode {
            Mode::Run if exit_code != 0 => Next::fail(Error::Failed {
                job: run.job.clone(),
                exit_code,
            }),
            Mode::ExitCodeLogs => match pod {
                Some(pod) => self.go(At::Log { exit_code }, Intent::ReadLog { pod }),
                None => {
                    let detail = format!("no pod of job uid {} remains", self.uid);
                    Next::fail(log_unread(run, exit_code, detail))
                }
            },
            _ => {
                let uid = self.uid.clone();
                let report = Report {
                    uid,
                    exit_code,
                    log: None,
                    resource_version: None,
                };
                self.conclude(run, report)
            }
        }
    }

    fn on_log(self, run: &Run, exit_code: i32, obs: Observation) -> Step {
        match obs {
            Observation::Log(log) => {
                let log = Some(within_limit(log, LOG_LIMIT_BYTES));
                let uid = self.uid.clone();
                self.conclude(
                    run,
                    Report {
                        uid,
                        exit_code,
                        log,
                        resource_version: None,
                    },
                )
            }
            Observation::Failed(e) => Next::fail(log_unread(run, exit_code, e.to_string())),
            other => run.unexpected(other, Action::Reading, ObjectKind::Log),
        }
    }

    /// The result is known: delete ours when it succeeded (unless the policy keeps it), leave it
    /// for inspection otherwise.
    fn conclude(self, run: &Run, report: Report) -> Step {
        if succeeded(&self.job) && run.policy.keep {
            let note = run.note(
                Level::Info,
                format!(
                    "{} succeeded; kept for the caller to record and delete",
                    run.job
                ),
            );
            // Where the caller's wait for its deletion starts, without a read first.
            let resource_version = self.rv.clone();
            let report = Report {
                resource_version,
                ..report
            };
            return Next::Finish(vec![note], Ok(report));
        }
        if succeeded(&self.job) {
            let delete = Intent::DeleteJob(exact(self.uid.clone(), self.rv.clone()));
            let at = At::Deleting {
                report,
                conflicts: 0,
            };
            return self.go(at, delete);
        }
        let note = run.note(
            Level::Info,
            format!(
                "{} failed with exit code {}; left in place for inspection",
                run.job, report.exit_code
            ),
        );
        Next::Finish(vec![note], Ok(report))
    }

    fn on_delete(self, run: &Run, report: Report, conflicts: u32, obs: Observation) -> Step {
        match obs {
            Observation::Deleted => {
                let note = run.note(Level::Info, format!("{} succeeded; deleted it", run.job));
                Next::Finish(vec![note], Ok(report))
            }
            Observation::Failed(e) if e.is_not_found() => Next::Finish(Vec::new(), Ok(report)),
            Observation::Failed(e) if e.is_conflict() => {
                let conflicts = conflicts + 1;
                if conflicts > CONFLICT_RETRIES {
                    return Next::fail(run.api_error(Action::Deleting, ObjectKind::Job, e));
                }
                self.go(At::Rereading { report, conflicts }, Intent::GetJob)
            }
            other => run.unexpected(other, Action::Deleting, ObjectKind::Job),
        }
    }

    fn on_reread(mut self, run: &Run, report: Report, conflicts: u32, obs: Observation) -> Step {
        match obs {
            Observation::Job(job) if uid_of(&job) == self.uid => {
                self.rv = rv_of(&job);
                let delete = Intent::DeleteJob(exact(self.uid.clone(), self.rv.clone()));
                self.go(At::Deleting { report, conflicts }, delete)
            }
            // Ours is gone; whatever holds the name now is not ours to delete.
            Observation::Job(_) => Next::Finish(Vec::new(), Ok(report)),
            Observation::Failed(e) if e.is_not_found() => Next::Finish(Vec::new(), Ok(report)),
            other => run.unexpected(other, Action::Reading, ObjectKind::Job),
        }
    }

    fn failed_without_exit(&self, run: &Run, reason: String, message: String) -> Error {
        Error::FailedWithoutExit {
            job: run.job.clone(),
            reason,
            message,
        }
    }

    fn no_answer(&self, run: &Run, no_answer: NoAnswer) -> Error {
        match no_answer {
            NoAnswer::NoExit { reason, message } => self.failed_without_exit(run, reason, message),
            NoAnswer::PodDeleted { pod, cause } => Error::PodDeleted {
                job: run.job.clone(),
                pod,
                cause,
            },
            NoAnswer::Lost { pod } => Error::LostInReboot {
                job: run.job.clone(),
                pod,
            },
            NoAnswer::NodeDeleted => Error::NodeDeleted {
                job: run.job.clone(),
                node: run.job.node.clone(),
                what: "to finish".to_string(),
            },
        }
    }
}

/// The reading's answer to an observation.
pub(super) type Step = Next<Reading, std::convert::Infallible>;

fn log_unread(run: &Run, exit_code: i32, detail: String) -> Error {
    Error::LogUnread {
        exit_code,
        job: run.job.clone(),
        detail,
    }
}

/// `log` cut to at most `limit` bytes, on a character boundary: a backend that cut the bytes
/// inside a character and decoded them lossily may answer a replacement character past the
/// limit.
pub(super) fn within_limit(mut log: String, limit: u64) -> String {
    let limit = usize::try_from(limit).unwrap_or(usize::MAX);
    if log.len() > limit {
        let mut cut = limit;
        while !log.is_char_boundary(cut) {
            cut -= 1;
        }
        log.truncate(cut);
    }
    log
}

/// The text of a log read as `bytes` with `limitBytes: limit`: at most `limit` bytes, cut on a
/// character boundary, never longer than the limit.
///
/// The kubelet may send a little more than the limit, and its cut may fall inside a multi-byte
/// UTF-8 character: the bytes past the limit, then an incomplete character at the end, are
/// dropped (not replaced); any other invalid sequence becomes U+FFFD, and the text is cut again
/// on a character boundary at or below the limit, since a replacement can be longer than what
/// it replaces. For backends: `JobApi::pod_log` answers text, and this is how to make it.
pub fn log_text(bytes: &[u8], limit: u64) -> String {
    let limit_len = usize::try_from(limit).unwrap_or(usize::MAX);
    let bytes = &bytes[..bytes.len().min(limit_len)];
    let complete = &bytes[..bytes.len() - incomplete_tail(bytes)];
    within_limit(String::from_utf8_lossy(complete).into_owned(), limit)
}

/// How many bytes at the end of `bytes` are the start of a UTF-8 character cut short.
fn incomplete_tail(bytes: &[u8]) -> usize {
    let is_continuation = |b: u8| b & 0b1100_0000 == 0b1000_0000;
    let len = bytes.len();
    for n in 1..=len.min(4) {
        let lead = bytes[len - n];
        if is_continuation(lead) {
            continue;
        }
        let width = match lead {
            0xC0..=0xDF => 2,
            0xE0..=0xEF => 3,
            0xF0..=0xF7 => 4,
            _ => return 0,
        };
        return if width > n { n } else { 0 };
    }
    0
}
