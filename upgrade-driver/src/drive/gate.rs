//! The version-skew gate before each batch of the run ([`Gated`], an [`Admission`] around the
//! run's own; [`crate::skew`] judges, this reads). The gate before any write, the run's and the
//! preview's, is [`before_any_write`](crate::select::before_any_write). The apiserver's
//! version is read once for the run, and again before a batch only when the batch's decision
//! depends on it: the plan enforces the policy, and the answer may have moved or refuses the
//! batch ([`Gated::admit`]). A plan that allows skew admits every batch whatever the answer:
//! its breaches are said against the version as last read.

use std::collections::BTreeMap;

use async_trait::async_trait;
use nodejob_core::{JobApi, LeaseApi, NodeApi, PodApi};
use nodejob_roll::{Admission, Admit, Cursor, Group, NodeView, is_control_plane};

use super::Run;
use crate::progress::Progress;
use crate::records::at_target;
use crate::select::server;
use crate::skew::{Breach, Kubelet, Skew, Workers, applies, judge, refusal};

/// The apiserver's version as last read, and the control-plane nodes' kubelet versions the
/// run's view has (a control plane upgraded with its nodes, as a kubeadm cluster's, answers
/// another version once they moved), kept up to date from the view's changes
/// ([`NodeView::changed_since`]): what a batch costs is what changed, not every node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Read {
    /// The version as last read (`None`: never).
    server: Option<String>,
    /// A control-plane node moved since it was read: the apiserver may have moved with it.
    moved: bool,
    control_plane: BTreeMap<String, String>,
    cursor: Cursor,
}

impl Read {
    /// The control-plane nodes of `view` now, and `server` read beside them.
    pub(super) fn of(view: &NodeView, server: Option<String>) -> Read {
        let mut cursor = Cursor::default();
        view.changed_since(&mut cursor);
        let control_plane = view.read(|all| {
            all.filter(|n| is_control_plane(n))
                .map(|n| {
                    let Kubelet { node, version, .. } = Kubelet::of(n);
                    (node, version)
                })
                .collect()
        });
        Read {
            server,
            moved: false,
            control_plane,
            cursor,
        }
    }

    /// Takes in the view's changes since the last call: a control-plane node whose version
    /// moved (or that came or went) makes the version read stale.
    fn follow(&mut self, view: &NodeView) {
        for name in view.changed_since(&mut self.cursor) {
            let now = (view.node(&name))
                .filter(is_control_plane)
                .map(|n| Kubelet::of(&n).version);
            let moved = match now {
                Some(version) => self.control_plane.insert(name, version.clone()) != Some(version),
                None => self.control_plane.remove(&name).is_some(),
            };
            self.moved |= moved;
        }
    }
}

/// The run's admission, the gate before each batch: the batch admitted as `inner` decides,
/// then judged over its nodes as the run's view has them now against the apiserver's version
/// (no wait between the judgement and the batch's start). Under a plan that enforces the
/// policy, the version is read again only when the control-plane nodes' versions moved since
/// it was read (this run upgraded one, or someone else did), or when it refuses the batch: a
/// refusal is judged on a fresh read. Under one that allows skew, never: the batch is admitted
/// whatever the answer, and its breaches are said against the version as last read. The
/// view's watch is the read that replaces the others: where the apiserver runs on the
/// control-plane nodes it moves with their versions; where it does not (a managed control
/// plane) it moves only forward, ahead of its nodes, which makes no batch newer than it.
pub(super) struct Gated<'r, 'a, A: ?Sized, I> {
    pub(super) run: &'r Run<'a, A>,
    pub(super) inner: I,
    /// The version as last read ([`before_any_write`](crate::select::before_any_write)'s first).
    pub(super) read: Option<Read>,
}

impl<A, I> Gated<'_, '_, A, I>
where
    A: JobApi + NodeApi + PodApi + LeaseApi + ?Sized,
{
    /// The apiserver's version, and whether it was read just now: read again when `again`
    /// is asked, or when a control-plane node moved since the last read and `moved_matters`
    /// (the batch's decision depends on the answer).
    async fn server(
        &mut self,
        again: bool,
        moved_matters: bool,
    ) -> Result<(String, bool), nodejob_core::ApiError> {
        let view = &self.run.view;
        let read = self.read.get_or_insert_with(|| Read::of(view, None));
        read.follow(view);
        let stale = again || (moved_matters && read.moved);
        match &read.server {
            Some(server) if !stale => Ok((server.clone(), false)),
            _ => {
                let server = server(self.run.api).await?;
                read.server = Some(server.clone());
                read.moved = false;
                Ok((server, true))
            }
        }
    }
}

#[async_trait]
impl<A, I> Admission for Gated<'_, '_, A, I>
where
    A: JobApi + NodeApi + PodApi + LeaseApi + ?Sized,
    I: Admission,
{
    fn begin(&mut self, group: &Group) {
        self.inner.begin(group);
    }

    async fn admit(&mut self, group: &Group, queue: &mut Vec<String>) -> Admit {
        let plan = self.run.plan;
        if !applies(plan) {
            return self.inner.admit(group, queue).await;
        }
        let admit = self.inner.admit(group, queue).await;
        let Admit::Batch(batch) = &admit else {
            return admit;
        };
        let nodes: Vec<Kubelet> = (batch.iter())
            .filter_map(|name| self.run.view.node(name))
            .filter(|n| at_target(plan, n).is_none())
            .map(|n| Kubelet::of(&n))
            .collect();
        let unread = |e| {
            Admit::Refused(format!(
                "the apiserver's version, which the version skew policy judges each batch \
                 against, could not be read: {e}"
            ))
        };
        // Under a plan that allows skew the batch goes whatever the answer: what it says of
        // a breach is judged against the version as last read, not read again for it.
        let enforced = plan.spec().skew == Skew::Enforce;
        let (server, fresh) = match self.server(false, enforced).await {
            Ok(read) => read,
            Err(e) => return unread(e),
        };
        let mut breaches = judge(plan.target(), &server, &nodes, Workers::Now);
        // A refusal ends the roll: judged on the version as it is now, not as first read.
        if !breaches.is_empty() && plan.spec().skew == Skew::Enforce && !fresh {
            match self.server(true, true).await {
                Ok((server, _)) => breaches = judge(plan.target(), &server, &nodes, Workers::Now),
                Err(e) => return unread(e),
            }
        }
        if breaches.is_empty() {
            return admit;
        }
        match plan.spec().skew {
            Skew::Enforce => Admit::Refused(refusal(plan.target(), &breaches).rule),
            Skew::Allow => {
                self.run.skew_allowed(&breaches);
                admit
            }
        }
    }
}

impl<A> Run<'_, A>
where
    A: JobApi + NodeApi + PodApi + LeaseApi + ?Sized,
{
    /// Says each breach the plan allows, once per node and breach: a note, and the node's
    /// line of the report.
    pub(super) fn skew_allowed(&self, breaches: &[Breach]) {
        for breach in breaches {
            let said = breach.what();
            let mut new = false;
            self.ledger.update(&breach.node, |n| {
                if !n.skew.contains(&said) {
                    n.skew.push(said.clone());
                    new = true;
                }
            });
            if new {
                self.note(
                    &breach.node,
                    format!("past the version skew policy, as the plan allows: {said}"),
                );
            }
        }
    }

    /// Tells what the workers wait for, as the gate found it before any write.
    pub(super) fn skew_waiting(&self, waiting: Option<&String>) {
        if let Some(waiting) = waiting {
            (self.ctx.progress).event(&Progress::Note {
                node: None,
                message: waiting.clone(),
            });
        }
    }
}
