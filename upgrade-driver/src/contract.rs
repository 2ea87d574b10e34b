//! The upgrade driver's contract: what a run does, node by node ([Expected flow](#expected-flow)),
//! what it guarantees whatever crashes or races it ([Guarantees](#guarantees)), what it takes for
//! granted ([Assumptions](#assumptions)) and how it fails ([Errors](#errors)).
//!
//! # Expected flow
//! 1. Select the nodes (label selector and/or names); none selected is an error. Acquire the
//!    fenced Lease (operation `upgrade`, the target), shared with the CA rotation, so the two
//!    never overlap. It is renewed every third of its duration for the whole run, a 30-minute
//!    host Job included.
//!    A kubelet upgrade ([`VersionSource::KubeletVersion`]) is judged against the apiserver's
//!    `GET /version` by the Kubernetes version skew policy ([`skew`]) before the Lease, and
//!    refused ([`Error::Plan`] on `skew`) unless the plan allows skew.
//! 2. Order them: control-plane nodes (`node-role.kubernetes.io/control-plane`) first, one at a
//!    time; then workers by zone (`topology.kubernetes.io/zone`), one zone at a time, zones
//!    and nodes in name order. Before each batch the nodes are read again: those at the target
//!    are skipped, and the batch is cut so that at most `max_unavailable` nodes of the plan are
//!    unavailable (NotReady, or cordoned by us) at once; then the version skew policy is judged
//!    again over the batch's nodes, the apiserver's version read again: a breach stops the roll
//!    (a worker waits for the control plane that carries the apiserver to go first).
//! 3. Per node ([`NodeMachine`]): skip it when it reports the target or carries the done record
//!    for it. Record that we started it (target, `bootID`, Lease epoch) and cordon it only if
//!    it is schedulable, saying so, in one write. Drain it. Right before the host Job, write
//!    our record again with the `bootID` read now, under the resourceVersion of the node as
//!    drained (Launch): a node that changed since (uncordoned by a person, rebooted) is cordoned
//!    again if need be and drained again first. Run the host upgrade Job
//!    ([`Plan::host_spec`], critical: the node is drained) and record its result on the node
//!    before deleting it. Wait until the node rebooted (a `bootID` other than the one read at
//!    Launch) and is Ready, and check that it reports the target. Run the health check, if any. Uncordon it only if we
//!    cordoned it, record it done and remove our records, in one write. When the plan soaks
//!    (`soak`), that write records the soak's start and boot instead of done
//!    ([`records::SOAK`]); the node must stay Ready on that boot for the soak (the health
//!    check passing again at its end) before it is recorded done, and the next batch waits;
//!    one that breaks it fails at `Soak`, left in service, why recorded (a rerun soaks it
//!    again); a rerun resumes a soak from its recorded start. Each step is an Event
//!    on the Node (reason `NodejobUpgrade<Step>`), so `kubectl describe node` shows the
//!    history.
//! 4. On a failure: no further node starts; nodes in flight finish; the failed node stays
//!    cordoned with its failed Job left for inspection; the [`Report`] names the node, the
//!    step, the exit code, the log's tail and the command to retry.
//!
//!    A drain that PodDisruptionBudgets hold (allowing no disruption past its timeout, or more
//!    than one covering a Pod) is such a failure unless the plan's `on_undrainable` says
//!    otherwise ([`Undrainable`]): `skip` uncordons the node if we cordoned it, records why on
//!    it ([`records::BLOCKED`]: the budgets, the Pods left) and goes on, trying every skipped
//!    node once more after the others; `quarantine` leaves it cordoned with the label
//!    [`records::QUARANTINED`] and goes on. Past `max_blocked` blocked nodes the roll stops as
//!    a failure does; a roll that ends with blocked nodes ends [`Outcome::Stopped`], naming
//!    them. A rerun reads the records: it leaves a quarantined node alone, and comes back to a
//!    skipped one last.
//!
//!    When the plan rolls back on failure (`on_failure`: [`OnFailure::Rollback`]), the version
//!    and boot a node reports right before its host upgrade are recorded in the Launch write
//!    ([`records::ROLLBACK`]); a failed host upgrade, a node back at another version, a failed
//!    health check or soak then rolls it back: the decision recorded (the node cordoned again
//!    if it was in service), a drain, the host's `stratum rollback --to V` Job once (created
//!    after a guarded write of the boot read then, kept until its result is recorded), a new
//!    boot Ready at V, uncordon if ours. It is reported [`NodeResult::RolledBack`], a failure
//!    for the budget; a rollback that fails fails the node at `Rollback`, left cordoned.
//! 5. Release the Lease.
//!
//! # Guarantees
//! - **Exactly once.** A crash of the driver at any instant, the host Job running included,
//!   never runs the upgrade twice on a node for one target: the host Job is kept after it
//!   succeeded until its result is recorded on the node; a resumed run adopts the Job it
//!   started ([`nodejob_core::runner::Policy::adopt`]) and takes its result. The evidence that
//!   the host operation ran is our Launch record (written before the Job is created) plus the
//!   Job or its recorded result, never a `bootID` change alone: a node that reboots by itself
//!   during the drain, with or without a crash of the driver, is drained and upgraded as any
//!   other, never failed as "the upgrade did not take".
//! - **The host operation starts only on a cordoned, drained node.** The Launch write carries
//!   the resourceVersion of the node as last read, cordoned and drained; a Conflict means it
//!   changed: a node someone uncordoned meanwhile is cordoned again (and, since we cordoned it
//!   then, uncordoned at the end) and drained again, as is a node that changed otherwise,
//!   before the next Launch; after [`DRAIN_ROUNDS`] such rounds the node fails at `Drain`,
//!   naming the field manager that last wrote it when its `managedFields` tell, with no host
//!   Job. (Re-cordoning, not failing at once: the person's uncordon was most likely aimed at a
//!   node they did not know was mid-upgrade, and a failed node stays cordoned anyway.) A node
//!   uncordoned after its host Job started is not drained again: its host operation runs.
//! - **A deleted node ends its step at once**: the reboot wait ends on the Node watch's
//!   deletion; a host Job whose node was deleted ends when the pod garbage collector fails its
//!   Pod (about 40 s later on a real cluster, and in the fake).
//! - **One host operation at a time, cluster-wide**: every write is fenced by the Lease
//!   ([`nodejob_core::lease::Held::check`]); once any step of the run has seen it lost, the
//!   whole run stops where it waits and writes nothing more (a drain in flight elsewhere
//!   evicts no further Pod), and each node in flight is reported interrupted at its step; a
//!   holder that stopped renewing is taken over after expiry, and the report says from whom.
//! - **Only what we cordoned is uncordoned**: a node someone else cordoned stays cordoned, and
//!   a node labelled quarantined ([`records::QUARANTINED`]) is never uncordoned by us while the
//!   label is there.
//! - **Never more than `max_unavailable`** nodes of the plan cordoned by us or NotReady, and
//!   control-plane nodes one at a time; at most `max_unavailable` nodes carry our in-progress
//!   record at once.
//! - **Done only on a read at the target**: the done record is a guarded write on the node as
//!   read at the target; a node that changed since is recorded done only if it still shows it.
//! - **A drain never outlasts its timeout**, and honours every PodDisruptionBudget (evictions,
//!   never deletes).
//! - **A node is upgraded only when it comes back**: a new boot, Ready, at the target; one that
//!   comes back at the old version is a failure.
//! - **A host Job lost to a reboot is asked of the node**: the kubelet ends the Pod of a
//!   program running when its node rebooted with containerd's unknown exit (255, `Unknown`),
//!   which the runner answers as [`nodejob_core::Error::LostInReboot`], never as an exit code.
//!   Recorded failed without an exit code, the node then says what happened once it is back
//!   on a new boot: at the target the upgrade took and is never run again; at the old version
//!   it did not, and the node fails at `Upgrade` for a rerun to retry it (or is rolled back).
//! - **Resumable**: the state lives in the cluster (annotations, what the nodes report, the
//!   Lease), never in a local file. A rerun skips finished nodes, carries on every node an
//!   earlier run left in flight (whether or not the selection still names it), retries a
//!   failed node (replacing exactly its failed Job; a host Job whose Pod was deleted before
//!   the host operation ended is recorded failed without an exit code, so it is retried too,
//!   not adopted again). A node upgraded out of band to the target before we launched ours is
//!   finished without a host run.
//!
//! These hold while people and controllers change the cluster mid-run: the seeded actor soak
//! (`tests/actors.rs`, 1,000 seeds in CI) checks them at every write.
//!
//! # Assumptions
//! - The host operation reboots the node, and the node's `bootID` changes with a reboot.
//! - Nobody deletes the driver's host Job while its result is unrecorded (a succeeded Job is
//!   kept, not deleted by TTL: the runner's Jobs set no `ttlSecondsAfterFinished`).
//! - The backend's wall clock is the cluster's within the Lease duration.
//!
//! # Errors
//! [`Error`]: the plan refused ([`Error::Plan`], before any API call); another holder has the
//! Lease ([`nodejob_core::Error::LeaseHeld`] inside [`Error::Core`]); the plan selects no node
//! (a selector that matches none, or none of the named nodes there: [`Selecting::NoneSelected`],
//! before the Lease, naming the selector and the nodes); a named node does not exist; the
//! nodes could not be listed. Everything after the Lease is acquired is in the
//! [`Report`]: node failures, a closed window, a stop request, the Lease lost (each node in
//! flight then reported interrupted at its step).

// The contract's links name the crate's items as the crate's own docs would: everything in scope.
#[allow(unused_imports)]
use crate::*;
