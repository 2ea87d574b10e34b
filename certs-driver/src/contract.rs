//! The CA rotation's contract: its phases and gates at a glance, then what a run does
//! ([Expected flow](#expected-flow)), what it guarantees whatever crashes or races it
//! ([Guarantees](#guarantees)), what it takes for granted ([Assumptions](#assumptions)) and
//! how it fails ([Errors](#errors)).
//!
//! ```text
//!  our leftover Jobs settled ─▶ (a run began? status ─▶ gate start)
//!    ─▶ stage (unread: its mark first; + its status before and after)
//!    ─▶ (unread: gate start on the status before stage)
//!    ─▶ (whole cluster?) gate before issue ─▶ issue (+ its status and verify, + Ready,
//!       + status recorded) ─▶ (whole cluster?) gate before finalize (a verify Job only where
//!       no issue Job of this run answered it) ─▶ finalize (+ its status)
//!    ─▶ gate after finalize ─▶ done
//!  each phase: control-plane nodes one at a time, then workers `concurrency` at a time,
//!  only on the nodes that have not passed it; its Job answers the node's status in its own
//!  output: a rotation is 3 host Jobs a node (stage, issue, finalize), and a status read more
//!  on each node of a rotation a run had begun
//! ```
//!
//! # Expected flow
//! 1. Check that the new CA is valid by the cluster's clock. Select the nodes (label selector
//!    and/or names); none selected is an error. Acquire the fenced Lease (operation
//!    `rotate-ca`, the new CA's fingerprint), the one the upgrade driver holds. It is renewed
//!    every third of its duration for the whole run. Settle the host Jobs of ours an earlier
//!    run or abort left on the nodes (listed once; only a node with one is read), before
//!    anything is read or decided there: one of
//!    `stage`, `issue` or `finalize` still running or succeeded is adopted (waited for, never
//!    killed; its result is the step's); one of `abort` is waited out and deleted (its result
//!    a note). A failed one is left for inspection.
//! 2. Whether a run of this rotation has begun: a Job of ours of it on a node of the plan, or
//!    a node carrying a trace of it ([`ROTATING`], the mark written ahead of a stage Job; or
//!    a [`LAST_STATUS`] record that trusts the new CA or is issued by it), the nodes listed
//!    again for it after the Lease and our Jobs. If one has, read every node's `stratum
//!    carotate status` (a host Job read with [`nodejob_core::run_exit_code_logs`]): one JSON
//!    line,
//!    `{"phase": "…", "trusted": ["sha256:…"], "issuer": "sha256:…"}`, parsed strictly.
//!    Record it on the node ([`LAST_STATUS`], for [`preview`]). Check the start gate: every
//!    node's leaves chain to a CA it trusts, and the nodes agree on the old trust. If none
//!    has, no node is read before its stage (below).
//! 3. `stage` (`carotate stage --add <new>`) on every node that does not trust the new CA:
//!    control-plane nodes first, one at a time, then workers `concurrency` at a time. Each
//!    phase's Job begins its output with the node's status line as the phase started and
//!    ends it with the one after, as `carotate status` prints them (the host protocol:
//!    `nodejob_host::stratum`): the one after is what the node reports after the phase,
//!    recorded on it, and what the next gate reads of it; a node that passed the phase
//!    already is taken as it reported before. (An output that does not end so, a host that
//!    predates the protocol or a log that could not be read, is followed by a `carotate
//!    status` Job.) On nodes not read (no run had begun), the mark that the rotation may
//!    change the node from now on ([`ROTATING`]) is written before its stage Job, in the write
//!    of the step's condition (failing to fails the node, and no Job is created); then the
//!    start gate is checked on what each node reported as its stage began (its output's first
//!    line; a host that does not print it, on what it reports after, less the new CA). Gate:
//!    every node trusts the new CA.
//! 4. Before `issue` runs anywhere, list every node of the cluster (no selector): a node the
//!    plan leaves out stops the run there (see *Guarantees*). `issue` (`carotate issue --ca
//!    <new> --expect <new> --expect <old>…`: issue, then verify as below, in the one Job) on
//!    every node whose leaves the new CA does not issue, in the same order; after each, the
//!    node restarts its components and must be Ready again within `ready_timeout` (a node
//!    deleted meanwhile fails its step as the Node watch reports it, named as deleted), then
//!    the status its Job printed is recorded on it ([`LAST_STATUS`]) before its issue Job is
//!    deleted. Gate: every node's leaves chain to the new CA, and `carotate verify --expect
//!    <new> --expect <old>…` exits 0 on every node (3, "not yet", is a disagreement too: a
//!    rerun asks again): the verdict its issue Job printed, when it expected what the gate
//!    expects; else (a node issued by an earlier run) a `verify` Job, read with
//!    [`nodejob_core::run_exit_code`]. No finalize begins while an issue Job is still being
//!    deleted.
//! 5. Before `finalize` runs anywhere, the cluster is listed again, as before `issue`.
//!    `finalize` (`carotate finalize --keep <new>`) on every node that trusts more than the
//!    new CA. Gate: every node trusts exactly one CA, the new one,
//!    which issues its leaves. When finalize ran, the selection is listed once more (every
//!    node of the cluster; for a plan not `cluster_wide`, its selector's): a node that joined
//!    while the run went on has been through none of it, so the run fails naming it (a
//!    Warning Event on it), never Done; a rerun takes it through every phase. A run is not
//!    done while a Job of ours it deleted is still going.
//! 6. Each step is an Event on the Node (reason `NodejobCa<Step>`), a failure or a
//!    disagreement a Warning. Release the Lease. The [`Report`] has every node's steps with
//!    their durations, every gate with the fingerprints of every node side by side, and how
//!    it ended.
//!
//! A node that waited on the pause switch (`nodejob pause`) before its step is read again
//! once the switch is lifted: deleted, or replaced by a node of the same name (a new UID),
//! while the rolls were paused, it starts no step (no Job is created for it) and ends
//! interrupted, named as deleted (or replaced) during the pause; the run stops there, and a
//! rerun selects its nodes again.
//!
//! [`abort`]: the same Lease; our `stage` Jobs still running are waited out; then, unless
//! `issue` has begun on any node of the cluster, in the plan or not, `carotate abort
//! --remove <new>` on every node of the plan that trusts the new CA, and a last gate: no node
//! of the plan trusts it. `issue` has begun on a node when our issue Job of it exists (names
//! are deterministic; a failed one aside), when the status last recorded on a node outside
//! the plan says so, or when a node of the plan reports it: the new CA issues its leaves, or
//! it is `issued` / `finalized` while trusting the new CA ([`CaStatus::issue_begun`]).
//!
//! # Guarantees
//! - **No phase starts on any node before the previous phase succeeded on every node**, and
//!   its gate passed. The start gate is checked before `stage` where a run had begun (every
//!   node read first), and otherwise on what each node reported as its `stage` began, before
//!   `issue`: a cluster whose nodes disagree then stops with the new CA staged beside the old
//!   (a trust added, nothing else; [`abort`] removes it), never issued.
//! - **Issue and finalize cover the whole cluster**: a CA is cluster-wide, so a run whose plan
//!   leaves out nodes of the cluster is refused as it starts, before the Lease and any write
//!   ([`Error::Plan`] on `nodes` or `selector`, naming them); a node that joins while it runs
//!   is caught by the same check right before `issue` and `finalize`, and the run stops there
//!   ([`Outcome::Failed`]) naming it. A plan may opt out ([`PlanSpec::cluster_wide`]
//!   `false`) only for nodes that do not use this CA; abort looks at every node regardless.
//! - **Nothing is decided over a host Job in flight**: a Job of ours an earlier run or abort
//!   left (an abort's included) is waited for before any status is read; an abort waits out
//!   the run's `stage` Jobs.
//! - **A disagreement stops the rotation**: a gate that finds a node not where every node must
//!   be names each such node and what it reports, in the report and as a Warning Event.
//! - **Never a phase twice on a node that passed it, whatever crashed when**: the state of a
//!   rotation is what the nodes report, never a local file. A node that passed a phase (it
//!   trusts the new CA; the new CA issues its leaves; it trusts the new CA alone) is not run
//!   again; a phase's host Job is kept after it succeeded and deleted only once done with, so
//!   a rerun finding it (running, or succeeded) adopts it
//!   ([`nodejob_core::runner::Policy::adopt`]) and takes its result instead of running it
//!   again. A `stage` run on a node not read first follows the mark written ahead of it
//!   ([`ROTATING`]), so a rerun after any crash, or a run taking the Lease over from one still
//!   going, finds the mark (or the Job) and reads every node before any step. Should a
//!   node's records all be gone (its Node deleted and registered again, and no other trace of
//!   the run anywhere), `stage` on a host that trusts the new CA already changes nothing.
//! - **No private key anywhere**: the plan holds the new CA's public certificate, read as
//!   exactly one X.509 CA certificate (nothing after it, `basicConstraints` CA:TRUE), checked
//!   against its fingerprint and refused if it carries key material; hosts get the
//!   fingerprint only. No argv, Job, annotation, Event or log the driver writes holds a key.
//! - **Abort restores the old trust, or is refused**: until the first node of the cluster has
//!   begun `issue`, [`abort`] removes the staged CA from the plan's nodes; after, it is
//!   refused with [`Error::AbortRefused`], which names the nodes, says why and that only
//!   forward is safe, whatever the abort's plan selects. At every instant after `issue` began
//!   on a node, its issue Job or the status recorded on it shows it.
//! - **One host-mutating operation at a time, cluster-wide**: every write is fenced by the
//!   Lease the upgrade driver shares ([`nodejob_roll::Fence`]); a run that loses it
//!   stops before its next write.
//!
//! # Assumptions
//! - Each host has the new CA's certificate where `stratum` finds it by its fingerprint (the
//!   driver passes fingerprints only).
//! - `carotate` is idempotent per phase and changes the host as it starts; a failed `issue`
//!   changes nothing on the host.
//! - After `issue` a node that restarts its components goes NotReady within `restart_grace`
//!   (or not at all) and is Ready again within `ready_timeout`.
//! - Nobody deletes the driver's host Jobs while it runs (a succeeded Job is kept, not deleted
//!   by TTL: the runner's Jobs set no `ttlSecondsAfterFinished`).
//! - The backend's wall clock is the cluster's within the Lease duration.
//! - Only the rotation's own host Jobs change a host's trust and leaves while it runs (it
//!   holds the Lease): a gate reads what each node reported last, in the run's first read or
//!   in the output of its latest phase Job, not a read of its own.
//!
//! # Errors
//! [`Error`]: the plan refused ([`Error::Plan`], before any API call); another holder has the
//! Lease ([`nodejob_core::Error::LeaseHeld`] inside [`Error::Core`]); the new CA not valid by
//! the cluster's clock ([`Error::Plan`], when a run or a preview starts); a cluster-wide plan
//! that leaves out nodes of the cluster ([`Error::Plan`], when a run starts); the plan selects no
//! node ([`Selecting::NoneSelected`], before the Lease, naming the selector and the nodes); a
//! named node does not exist; the nodes could not be listed; an abort refused
//! ([`Error::AbortRefused`], issue begun anywhere in the cluster), or unable to tell (the
//! cluster's nodes or our issue Jobs unreadable: [`Error::Selecting`], [`Error::Reading`]).
//! Everything else after the Lease is acquired is in the [`Report`]: a status that is not the
//! one JSON line (quoted, with the node), a host Job that failed, a node not Ready again, a
//! gate's disagreements ([`Outcome::Failed`]); issue or finalize refused on a plan that leaves
//! out nodes of the cluster ([`Outcome::Failed`], naming them and saying that a rotation's
//! issue and finalize must cover every node); a stop request, the Lease lost, during a
//! `verify` too ([`Outcome::Stopped`]: no node is blamed).

// The contract's links name the crate's items as the crate's own docs would: everything in scope.
#[allow(unused_imports)]
use crate::*;
