//! What the fake models of Kubernetes, part by part, and what it does not: how it runs,
//! then [Time](#time), [Actors](#actors), the [Apiserver](#apiserver), the
//! [Job controller](#job-controller), [Workloads and disruption](#workloads-and-disruption),
//! the [Kubelet](#kubelet-and-the-argv-vocabulary), [the host model](#the-host-model-stratum),
//! [Faults, hooks, record](#faults-hooks-record) and what is [Not modelled](#not-modelled).
//!
//! # How it runs
//! ```text
//!   API call ──▶ record ─▶ hook ─▶ faults ─▶ apiserver store ──▶ watch history ──▶ wait_*
//!   (actor methods write here too) ─────────────▶  ▲      │
//!                     driver task (virtual time)   │      ▼ settle after every write
//!           timers: pod creation, container start/exit, stop, kill, deadline, terminal
//!                   condition, a workload's pod creation, a disrupted pod's expiry, a host
//!                   program's aftermath on its node (NotReady, a new boot, Ready)
//!           level-triggered: Job controller, workload controllers, scheduler, disruption
//!                   controller, kubelets (deletions), pod removal, garbage collector
//! ```
//!
//! A write wakes only the waits on the objects it changed, and each settle looks at what
//! changed: the store keeps an index with its writes (pods to place, pods and Jobs being
//! deleted, the Jobs written or whose pods were, each controller's live pods, the last write
//! of each kind), so a simulation of thousands of nodes costs about the same per node as one
//! of ten.
//!
//! The root ([`FakeCluster`]) owns a state that owns the parts (the store, the timer queue)
//! and the components, and lends each component the parts it works on; no component names
//! another, nor the root:
//!
//! ```text
//!   FakeCluster (cluster, api, actors) ─▶ State ─▶ Job controller, kubelets, workload and
//!       disruption controllers, scheduler, eviction and other registries
//!                                                 ─▶ store, timers, admission, selectors
//! ```
//!
//! # Time
//! Virtual time is tokio's paused time: run tests with `#[tokio::test(start_paused = true)]`.
//! [`Clock::now`] is the time since the cluster was made and [`Clock::sleep`] is
//! `tokio::time::sleep`. Timestamps written into objects (`creationTimestamp`,
//! `deletionTimestamp`, `startTime`, `completionTime`, condition and event times) are
//! 2026-01-01T00:00:00Z ([`EPOCH_SECONDS`]) plus the virtual time, in whole seconds.
//!
//! The modelled components run on one driver task spawned by [`FakeCluster::new`]: a step due
//! at virtual time `t` is applied when that task runs at `t`, so a test that sleeps until
//! exactly `t` may look before it. Wait for the change (`wait_job`, `wait_node`, `wait_pod`)
//! or sleep past `t`. Every step happens under one lock, and waiters are woken after each write.
//!
//! # Actors
//! [`schedule::ActorSchedule`] draws from a seed what people, nodes and other controllers do to
//! a shared cluster while a driver runs (cordons, labels, nodes deleted, added, rebooting,
//! flapping, reporting another version; budgets; Deployments; Pods deleted; the Lease stolen;
//! API fault windows) and arms it on the cluster's timers, so a drivers' soak replays a seed
//! exactly. Each act goes through the actor methods below.
//!
//! # Apiserver
//! - Namespaces `default` and `kube-system` exist; [`FakeCluster::add_namespace`] adds one
//!   (with the `kubernetes.io/metadata.name` label), [`FakeCluster::label_namespace`] labels
//!   one.
//! - One global resourceVersion counter (decimal), bumped by every write of any object
//!   (Events included); UIDs are version-4-shaped and drawn from the seed.
//! - `create_job`: 404 for a missing namespace; 422 (name a DNS-1123 subdomain, every label
//!   key and value valid, values at most 63 characters, which with the generated `job-name`
//!   label limits the name to 63; `restartPolicy` `Never` or `OnFailure`; a selector only with
//!   `manualSelector`); 409 AlreadyExists when the name is taken, also by a Job being deleted.
//!   With `manualSelector` unset the selector `batch.kubernetes.io/controller-uid=<uid>` is set
//!   and the pod template gets the labels `batch.kubernetes.io/controller-uid`,
//!   `batch.kubernetes.io/job-name`, `controller-uid` and `job-name`; `generateName` works.
//! - `delete_job` is foreground: preconditions are checked (UID first, then
//!   resourceVersion: 409 with the apiserver's `Precondition failed: ...` message), then the
//!   Job gets a `deletionTimestamp` and the `foregroundDeletion` finalizer; the garbage
//!   collector deletes its pods and removes the Job (a DELETED event) once none is left.
//! - `list_jobs`, `list_pods` and `list_nodes` parse the selector with core's parser
//!   (`nodejob_core::selector`, the apiserver's grammar: `k=v`, `k==v`, `k!=v`, `k`, `!k`,
//!   `k in (a,b)`, `k notin (a,b)`, `k>n`, `k<n`, comma-joined); one it cannot parse is a 400
//!   with the reason. `list_jobs` and `list_pods` answer in name order, objects
//!   being deleted included, and an empty list for a namespace that does not exist.
//! - `pod_log` (`LogLocation` in `pkg/registry/core/pod/strategy.go`): 404 for a missing pod;
//!   400 for an invalid container; an empty log (204 No Content) for a pod without `nodeName`;
//!   404 `pods "<node>" not found` (sic: the Node is read under the request's resource) for a
//!   missing node; a 500 (transient) `Get "https://<ip>:<port>/containerLogs/<ns>/<pod>/<c>?limitBytes=N":
//!   dial tcp <ip>:<port>: connect: connection refused` when the node's kubelet is scripted
//!   unreachable (the port from the Node's `daemonEndpoints`, 10250); 400 for a container not
//!   started; else the log cut to `limit_bytes`.
//! - `create_event` (core/v1 rules, `legacyValidateEvent` in
//!   `pkg/apis/core/validation/events.go`): 404 for a missing namespace; 422 (`Event "NAME" is
//!   invalid: ...`) when an Event without `eventTime` is not in its `involvedObject`'s
//!   namespace (`default` for one about a Node), when one with `eventTime` about a Node is
//!   outside `default` and `kube-system` or lacks `reportingComponent` (a qualified name),
//!   `reportingInstance`, `action` or `reason` (at most 128 bytes each; `message` at most
//!   1024), then for a missing name and `generateName` or a name that is no path segment
//!   (no kind or name of `involvedObject` is required, as on a real apiserver); 409 `events
//!   "NAME" already exists`. `generateName` draws 5 characters from the seed, as for Jobs. No
//!   aggregation (that is client-side); `list_events` finds the Event by
//!   `involvedObject.uid` (a Node's name, for [`nodejob_core::node_event`]'s).
//! - `wait_job` / `wait_node` / `wait_pod` replay a per-name history of ADDED/MODIFIED
//!   ([`Change::Applied`]) and DELETED ([`Change::Deleted`], last state) events: the first
//!   after `since` (after the call when `None`; `"0"` or `""` start with the current object),
//!   else [`Change::TimedOut`] after the timeout. An object deleted and recreated since is
//!   reported deleted first.
//! - Nodes: `get_node` (404 `nodes "NAME" not found`); `list_nodes` with the same selector
//!   syntax as `list_pods`, in name order; `patch_node` applies its [`NodeChange`]s to the node
//!   as stored unless its resourceVersion differs from the one given (409 `Operation cannot be
//!   fulfilled on nodes "NAME": the object has been modified; please apply your changes to the
//!   latest version and try again`), in one write that watchers see; a patch that changes
//!   nothing writes nothing. A node carries `kubernetes.io/hostname`, `kubernetes.io/os`, an
//!   `InternalIP`, and `status.nodeInfo` with `kubeletVersion`
//!   ([`DEFAULT_KUBELET_VERSION`] until [`FakeCluster::set_kubelet_version`]) and a `bootID`
//!   ([`FakeCluster::reboot_node`], or a `stratum upgrade`, draws a new one). [`FakeCluster::label_node`] sets labels
//!   such as [`labels::CONTROL_PLANE`] and [`labels::ZONE`].
//! - Pods: `list_node_pods` (every namespace, `(namespace, name)` order), `get_pod` (404 `pods
//!   "NAME" not found`). [`FakeCluster::create_pod_now`] creates one as an administrator would
//!   (422, 404 namespace, 403 admission, 409). Deletion (`pkg/registry/core/pod/strategy.go`
//!   `CheckGracefulDelete`, `rest.BeforeDelete`): the grace period is the one asked for, else
//!   the pod's `terminationGracePeriodSeconds` (30s), 0 for a pod ended or never bound;
//!   `deletionTimestamp` is the deletion time plus it; with 0 and no finalizer the pod goes at
//!   once; a pod already being deleted only takes a shorter grace period.
//! - PodSecurity admission per namespace (its `pod-security.kubernetes.io/enforce` label,
//!   [`labels::POD_SECURITY_ENFORCE`]): at `baseline` or `restricted` a pod that fails a check
//!   is refused with the plugin's message, e.g. `pods "NAME" is forbidden: violates
//!   PodSecurity "baseline:latest": host namespaces (hostNetwork=true, hostPID=true),
//!   privileged (container "run" must not set securityContext.privileged=true)`; a
//!   controller's creation becomes a `FailedCreate` Warning Event and a retry.
//!   [`NodeScript::refuse_pods`] still refuses every pod bound to one node, for any other
//!   admission plugin.
//! - `evict_pod` (`pkg/registry/core/pod/storage/eviction.go`): 404 is
//!   [`Eviction::Gone`]. A pod ended, Pending or being deleted is deleted without a look at
//!   budgets. Else the budgets of its namespace whose (non-empty) selector matches it: none,
//!   deleted; more than one, 500 `This pod has more than one PodDisruptionBudget, which the
//!   eviction subresource does not support.`; one not yet synced (`observedGeneration` behind),
//!   or with `disruptionsAllowed` 0, [`Eviction::Blocked`] with the message and its cause as
//!   one string (`Cannot evict pod as it would violate the pod's disruption budget. The
//!   disruption budget NAME needs 2 healthy pods and has 2 currently`); an unready pod is
//!   deleted without using the budget when the budget is healthy (`currentHealthy >=
//!   desiredHealthy > 0`) or its `unhealthyPodEvictionPolicy` is `AlwaysAllow`; else
//!   `disruptionsAllowed` is decremented and the pod recorded in `disruptedPods` (one budget
//!   write) and the pod deleted: a `DisruptionTarget` condition (`EvictionByEvictionAPI`),
//!   then a graceful delete with the eviction's grace period. The UID precondition is checked
//!   by that delete, last, so a budget decremented stays so (409 `Operation cannot be
//!   fulfilled on Pod "NAME": the UID in the precondition (X) does not match the UID in record
//!   (Y). The object might have been deleted and then recreated`; on a dry run, the storage
//!   precondition's `Operation cannot be fulfilled on pods "NAME": Precondition failed: UID in
//!   precondition: X, UID in object meta: Y`). [`DryRun::All`] answers the same and writes
//!   nothing.
//! - Leases (`coordination.k8s.io/v1`): `create_lease` (404 namespace, 422 name or spec, 409
//!   `leases.coordination.k8s.io "NAME" already exists`), `get_lease` (404), `replace_lease`:
//!   its resourceVersion must be given (422 `... metadata.resourceVersion: Invalid value: 0x0:
//!   must be specified for an update`) and current (409 `Operation cannot be fulfilled on
//!   leases.coordination.k8s.io "NAME": the object has been modified; please apply your
//!   changes to the latest version and try again`); the UID may not change; a PUT of a Lease
//!   that does not exist creates it (the Lease strategy's `AllowCreateOnUpdate`); an update
//!   that changes nothing writes nothing.
//!
//! # Job controller
//! Per Job, with the default [`Timing`] (all delays configurable):
//!
//! ```text
//!  t+0       created (apiserver)
//!  t+200ms   first sync: startTime; pod <job>-xxxxx created (labels from the template,
//!            controller ownerReference, finalizer batch.kubernetes.io/job-tracking); status
//!            active: 1 [refused by the node's script: FailedCreate Warning event, retry after
//!            10s, 20s, ... capped at 360s]
//!  +1s       kubelet: container running, pod Ready; status ready: 1
//!  +run      container exits: pod Succeeded (exit 0) / Failed; in one status update
//!            succeeded: 1 / failed: 1 and SuccessCriteriaMet (CompletionsReached) /
//!            FailureTarget (BackoffLimitExceeded); then the pod's tracking finalizer is removed
//!  +100ms    separate update: Complete (+ completionTime) / Failed, same reason and message
//! ```
//!
//! With `activeDeadlineSeconds`, when `startTime` + deadline passes before the Job finished
//! (`pkg/controller/job/job_controller.go`): in one sync `FailureTarget` `DeadlineExceeded`
//! (`Job was active longer than specified deadline`), its pods deleted, their tracking
//! finalizers removed and the pods counted at once (`failed: 1`, `terminating: 1`, `active`
//! unset) while they still run or terminate; once none terminates, `Failed` with the same
//! reason.
//!
//! While a Job is being deleted, the controller removes the tracking finalizer from all its
//! pods at once, running ones included (not counting those that have not ended), and keeps
//! writing its status: `active` drops and `terminating` rises as the garbage collector deletes
//! the pods, and `terminating` falls back to 0 as they end. A deleted pod that still carries
//! the finalizer counts as failed (`isPodFailed`, unless `podReplacementPolicy: Failed` or a
//! `podFailurePolicy` is set).
//!
//! # Workloads and disruption
//! Administrators' objects, created with actor methods ([`FakeCluster::create_deployment_now`],
//! [`FakeCluster::create_replica_set_now`], [`FakeCluster::create_daemon_set_now`],
//! [`FakeCluster::create_pod_now`], [`FakeCluster::create_budget_now`]):
//!
//! ```text
//!  t+0       Deployment created; its controller creates ReplicaSet <name>-<pod-template-hash>
//!  +200ms    the ReplicaSet creates its missing pods <rs>-xxxxx (controller ownerReference
//!            kind ReplicaSet); the scheduler binds each to the schedulable, Ready node matching
//!            its nodeSelector with the fewest of its siblings (among the share of nodes
//!            kube-scheduler searches in a cluster of 100 nodes or more)
//!  +1s       kubelet: Running, Ready; the budgets over them are recomputed
//!  evicted   deletionTimestamp: the ReplicaSet counts it gone and creates a replacement 200ms
//!            later on another node; the old container ends on SIGTERM; the budget recovers
//!            once the replacement is Ready
//! ```
//!
//! A DaemonSet keeps a pod bound to each node its `nodeSelector` matches, cordoned and NotReady
//! ones included. Bare Pods (no controller), mirror Pods (annotation
//! `kubernetes.io/config.mirror`) and Pods with `emptyDir` volumes are stored and run as given;
//! nothing replaces them. The disruption controller (`pkg/controller/disruption/disruption.go`)
//! writes each budget's `currentHealthy` (Ready, not being deleted, not in `disruptedPods`),
//! `desiredHealthy`, `expectedPods` (the pods matched for an integer `minAvailable`, else the
//! scale of their ReplicaSet or Deployment), `disruptionsAllowed`, `observedGeneration` and the
//! `DisruptionAllowed` condition whenever a pod or budget changes; `disruptedPods` entries
//! expire after 2 minutes; a budget over pods without a scale (a DaemonSet's, a Job's) fails to
//! sync (`SyncFailed`) and allows nothing.
//!
//! # Kubelet and the argv vocabulary
//! What a kubelet and a host do is `nodejob-host`'s, shared with the end-to-end node agent so
//! the two cannot drift: [`host`] (the argv vocabulary), [`termination`] (signals, grace
//! periods, termination messages) and [`stratum`] (the host model) are its modules.
//!
//! Each node's kubelet follows its [`NodeScript`] (exit code, log, run time, whether
//! containers start, a per-node admission refusal, whether logs are reachable, what SIGTERM
//! does), its host model ([`FakeCluster::set_host`]) and the directives in the container's
//! argv (`command` then `args`). A container plays a host program (it runs, prints and exits
//! on its own) when a Job controls its pod or its argv has an `exit`, `log` or `run`
//! directive; any other (a Deployment's, a DaemonSet's, a bare pod's) is a workload that runs,
//! Ready, until its pod is deleted ([`host::is_host_program`]). The directives:
//!
//! - `nodejob-test:exit=N`: exit status `N` (modulo 256);
//! - `nodejob-test:log=TEXT`: prints `TEXT` and a newline; one element per line;
//! - `nodejob-test:run=SECONDS`: runs that many whole seconds;
//! - `nodejob-test:sigterm=ignore`: traps SIGTERM and runs until the SIGKILL;
//! - any other element is ignored.
//!
//! What a host program does, decided as its container starts:
//! 1. an argv with an `exit`, `log` or `run` directive is scripted by hand: the directives
//!    where they speak, the node's script where they do not; the host model neither plays
//!    nor counts it (so `… stratum upgrade --to v2 nodejob-test:exit=0` reboots nothing);
//! 2. else an argv that execs `stratum` (the element after the first `--`, or the first
//!    element, whose file name is `stratum`) is played by the node's host model, which
//!    decides run time, exit status and log, and what happens to the node afterwards;
//! 3. else the node's script.
//!
//! [`host`] documents the vocabulary exactly and builds the elements ([`host::exit`],
//! [`host::log`], [`host::run`]); the end-to-end node agent reads argv the same way
//! ([`host::Directives::parse`]). A process prints its log when it exits on its own.
//!
//! A container that ends with a non-zero status under `terminationMessagePolicy:
//! FallbackToLogsOnError` gets the tail of its log as `state.terminated.message`: the last 80
//! lines, then their last 2048 bytes (`pkg/kubelet/kuberuntime/kuberuntime_container.go`); none
//! on exit 0 (no program writes its `terminationMessagePath` file).
//!
//! On a pod's deletion the kubelet sends its running container SIGTERM: a program that does not
//! trap it (the default, like the host programs the runner execs and most servers) ends
//! [`Timing::kill_delay`] later with exit 143, reason `Error`, having printed nothing. One that
//! ignores it ([`OnSigterm::Ignore`], by its node's script or its argv) runs until the SIGKILL
//! at the end of the grace period (the deletion's, else the pod's
//! `terminationGracePeriodSeconds`, else 30s; at least 1s): exit 137, reason `Error`. The pod
//! (phase `Failed`) goes [`Timing::pod_cleanup`] after its container ended.
//!
//! # The host model: stratum
//! Every node has a [`stratum::StratumHost`], from [`FakeCluster::add_node`] on: at the
//! node's kubelet version and boot ID, trusting and issuing from [`stratum::INITIAL_CA`], in
//! no CA rotation, with the default [`stratum::StratumTiming`] and no fault.
//! [`FakeCluster::set_host`] replaces it (the node then reports its version and boot ID),
//! [`FakeCluster::host`] and [`FakeCluster::host_state`] read it (executions are counted per
//! operation: a test checks that no phase ran twice); [`FakeCluster::set_kubelet_version`] and
//! [`FakeCluster::reboot_node`] change the host with the node. The [`stratum`] module
//! documents every command, its exit status, log and faults. In virtual time, with the
//! defaults:
//!
//! ```text
//!  upgrade --to V   t+1.2s  starts (200ms to the pod, 1s to start)
//!                   +20s    exits 0, log "stratum: upgrading v1.37.2 -> V" …; Job Complete
//!                   +5s     Ready False (the reboot)
//!                   +30s    a new bootID drawn from the seed, kubeletVersion V, Ready True
//!  carotate issue   +1s     exits 0; +1s Ready False (components restart); +5s Ready True
//!  other commands   +1s     exit (0, 1, 2 for a usage error, 3 for verify's "not yet")
//! ```
//!
//! The steps after the exit are timers of the node's kubelet (by the node's UID: a node
//! removed and added again is not touched). A program killed before it exits (its pod
//! deleted) changed the host's state as it started but its aftermath does not happen. The
//! Ready steps are the kubelet's [`FakeCluster::set_node_ready`]: while down, the node's
//! kubelet parks its steps as on any NotReady node.
//!
//! # Faults, hooks, record
//! Every call of the four API traits is recorded ([`FakeCluster::calls`],
//! [`FakeCluster::count`]), then runs the hook armed for its verb ([`FakeCluster::before`]),
//! then consults the faults ([`FakeCluster::fail`], [`FakeCluster::fail_randomly`]), then is
//! served. Actor methods (`*_now`, the node and namespace setters) write through the same
//! store logic and are neither recorded nor faulted.
//!
//! # Not modelled
//! - More than one pod per Job: `parallelism`/`completions` > 1, indexed Jobs, retries after a
//!   failed pod (every Job behaves as `backoffLimit: 0`), `podFailurePolicy`, `successPolicy`,
//!   `ttlSecondsAfterFinished`; `restartPolicy: OnFailure` behaves as `Never`.
//! - Defaulting of unset Job fields (`backoffLimit: 6`, `completions`, ...): they stay unset.
//! - The Job controller's batching of pod-triggered syncs (`syncJobBatchPeriod`, 1 s): here it
//!   reacts to a pod's change at once. So on a real cluster a Pod deleted alone (its
//!   container killed) is usually gone, removed by the kubelet's final delete, by the time its
//!   Job counts it failed, while here it is still listed, terminal and marked deleted, when the
//!   Job first reports it; a client must expect either (the runner does).
//! - Of the scheduler: resources, affinities other than `nodeSelector`, taints other than
//!   cordons and NotReady nodes, topology spread, preemption, its Events. Node pressure, the
//!   node lifecycle controller (pods on a NotReady node are neither marked NotReady nor
//!   evicted) and the pod garbage collector of pods bound to deleted nodes.
//! - Of workloads: scaling down, rollouts, `minReadySeconds`, StatefulSets and
//!   ReplicationControllers, adoption and orphaning; readiness probes (a workload is Ready as
//!   its container starts); the kubelet recreating a deleted mirror Pod; the `emptyDir` data.
//! - Of the disruption controller: its Events; of the eviction subresource: its retries on
//!   conflicts and the `Retry-After` of its 429s. Of PodSecurity: checks other than host
//!   namespaces, host ports, privileged, hostPath volumes (`baseline`) and
//!   allowPrivilegeEscalation, capabilities, volume types, runAsNonRoot, seccompProfile
//!   (`restricted`); exemptions; the `audit` and `warn` modes.
//! - Update verbs for Deployments, DaemonSets and budgets; deleting them.
//! - Containers other than a pod's first; container restarts; a program that traps SIGTERM and
//!   exits on its own terms (it either ends at once or ignores the signal); `preStop` hooks;
//!   logs of a running container; a `terminationMessagePath` file (a termination message comes
//!   only from the log, for `FallbackToLogsOnError`).
//! - The intermediate `uncountedTerminatedPods` write: a finished pod is counted in the same
//!   status update that records it.
//! - Of a host model's reboot: the pods of a node that is down stay Ready (the node lifecycle
//!   controller marks them NotReady after its grace period); only the kubelet's steps wait. A
//!   `Ready` of `Unknown` (the kubelet stopped posting): a node down reports `False`. A
//!   container of a pod restarted in place (`restartPolicy: Always`, a Deployment's) keeps
//!   running through a reboot, no restart counted: a real kubelet starts it again in a new
//!   sandbox. (A `Never` pod's running container is lost, exit 255 `Unknown`, by
//!   `nodejob-host`'s rules, as a real kubelet records it: `nodejob-e2e/tests/real_node.rs`.)
//! - Watch expiry (410 Gone): the whole history is kept; watches of Events.
//! - Event aggregation beyond identical events (`count` bumps); the `events.k8s.io` API.
//! - Update and patch verbs other than `patch_node`, `replace_lease` and the actor methods;
//!   resuming a suspended Job.

// The model's links name the crate's items as the crate's own docs would: everything in scope.
#[allow(unused_imports)]
use crate::*;
