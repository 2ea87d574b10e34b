//! The CA rotation of `certs-driver` on a real control plane: three nodes of the scenario's own
//! (the first labelled control-plane), played by `nodejob-node-agent` or real ([`Kubelets`]),
//! whose hosts run the `stratum` host model trusting and issuing from the model's initial CA
//! (on real nodes, the run's CA, their kubelets re-keyed for real: the new CA placed in each
//! host's keyring and the apiserver extended to it by the test, [`real_rotation`]),
//! are rotated to a new CA made here with rcgen by [`certs_driver::run`] acting as the
//! ServiceAccount of `deploy/rbac.yaml`. Every test here runs on both kinds of node, one at a
//! time ([`one_driver`]: a driver carries on the nodes another left in flight). Run by
//! `e2e/run`.
//!
//! What the hosts end up trusting is read independently of the driver: a `stratum carotate
//! status` and `verify` Job of the test's own on every node, as an administrator. What the
//! driver wrote (every Job it created, seen through a watch; its Events; the nodes'
//! annotations; its Lease) is searched for the new CA's private key, which the test keeps,
//! and its Jobs for the certificate, since hosts get the fingerprint only. Each node's
//! `NodejobCARotation` condition is read back as the watch saw it change and as `kubectl
//! describe node` shows it at the end.
//!
//! The pause switch on a rotation, through the built `nodejob` binary, is here too (as
//! `tests/pause.rs` has it for an upgrade), on the default Lease of the namespace.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use certs_driver::{
    CaStep, Fingerprint, Gate, NodeResult, Outcome, Plan, PlanSpec, Progress, ProgressSink,
};
use futures::future::try_join_all;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Event, Node};
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::{Api, ListParams};
use kube::runtime::watcher;
use nodejob_conformance::{Backend, Failure, ensure};
use nodejob_core::Spec;
use nodejob_e2e::pki::{self, Ca};
use nodejob_e2e::{
    CONTEXT, Kubelets, ProgressLog, SA_NAME, SA_NAMESPACE, ThreeNodes, Workers, cli,
    described_conditions, lease_released, nodejob, one_driver, record, sa_kubeconfig, unique,
    wait_for,
};
use nodejob_e2e::{ControlPlaneTrust, Keyring, KubeletPki, run_ca_fingerprint, serves, talker};
use nodejob_host::stratum::INITIAL_CA;
use nodejob_kube::KubeApi;
use nodejob_roll::condition::{CA_ROTATION, condition};

nodejob_e2e::on_kubelets! {
    source: include_str!("rotate.rs");
    both:
        three_nodes_rotate_to_a_new_ca_control_plane_first,
        a_rotation_paused_mid_way_starts_no_other_step_and_goes_on_when_resumed;
    agent_only: ;
    no_nodes: ;
}

/// The label key of the driver's host Jobs (certs-driver's `LABEL_KEY`).
const JOB_LABEL: &str = "stratum.ciq.com/carotate";
/// The on-host binary, as the driver execs it by default.
const STRATUM: &str = "/usr/local/bin/stratum";

fn fail(what: impl std::fmt::Display) -> impl FnOnce(kube::Error) -> Failure {
    move |e| Failure(format!("{what}: {e}"))
}

/// A new CA: its certificate (PEM, and the base64 of its DER) and fingerprint for the plan;
/// its private key, kept by the test to search for, as the aligned 32-character runs of the
/// base64 of its DER (so the key is found as DER base64 and in a PEM block alike); the CA
/// itself, which a real node's host issues from (placed in its keyring by [`real_rotation`]).
struct NewCa {
    pem: String,
    fingerprint: String,
    certificate_base64: String,
    key_runs: Vec<String>,
    ca: Ca,
}

/// `text` cut into runs of `n` characters (ASCII), the last one shorter.
fn runs(text: &str, n: usize) -> Vec<String> {
    (text.as_bytes().chunks(n))
        .map(|r| String::from_utf8_lossy(r).into_owned())
        .collect()
}

fn new_ca() -> Result<NewCa, Failure> {
    let ca = Ca::generate("nodejob e2e cluster CA 2").map_err(Failure)?;
    // A host names a CA as the driver does.
    let driver_says = Fingerprint::of_der(ca.der()).to_string();
    ensure!(
        driver_says == ca.fingerprint(),
        "fingerprints differ: the driver's {driver_says}, a host's {}",
        ca.fingerprint()
    );
    let certificate_base64 = base64(ca.der());
    let mut key_runs = runs(&base64(&ca.key_der()), 32);
    key_runs.retain(|r| r.len() == 32);
    Ok(NewCa {
        pem: ca.certificate_pem(),
        fingerprint: ca.fingerprint(),
        certificate_base64,
        key_runs,
        ca,
    })
}

/// On real nodes, what an administrator does before the rotation: the new CA, its key with
/// it, placed in every host's keyring, and the apiserver extended to it for the rotation's
/// length ([`ControlPlaneTrust`]); nothing on the agent's.
async fn real_rotation(trio: &ThreeNodes, ca: &Ca) -> Result<Option<ControlPlaneTrust>, Failure> {
    if trio.kubelets() != Kubelets::Real {
        return Ok(None);
    }
    for node in trio.real_nodes() {
        Keyring::at(node.dir().join("host/ca"))
            .place(ca)
            .map_err(Failure)?;
    }
    Ok(Some(ControlPlaneTrust::extend(ca).await?))
}

/// After a rotation to `new` on real nodes: each kubelet trusts `new` alone and its client and
/// serving certificates are issued by it (by their issuer's name and key identifier).
fn rekeyed(trio: &ThreeNodes, new: &Ca) -> Result<(), Failure> {
    for node in trio.real_nodes() {
        let kubelet = KubeletPki::at(node.dir().join("pki"));
        let trusted: Vec<String> = (kubelet.trusted().map_err(Failure)?.iter())
            .map(|d| pki::fingerprint(d))
            .collect();
        let cas = [new.der().to_vec()];
        let client = pki::issuer_of(&kubelet.client().map_err(Failure)?, &cas).map_err(Failure)?;
        let serving =
            pki::issuer_of(&kubelet.serving().map_err(Failure)?, &cas).map_err(Failure)?;
        let fp = new.fingerprint();
        ensure!(
            trusted == [fp.clone()]
                && client.as_ref() == Some(&fp)
                && serving.as_ref() == Some(&fp),
            "node {}: its kubelet trusts {trusted:?}, its client certificate issued by {client:?},              its serving one by {serving:?}; not {fp} alone",
            node.name()
        );
    }
    Ok(())
}

/// Standard base64 with padding.
fn base64(der: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut text = String::new();
    for chunk in der.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                text.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                text.push('=');
            }
        }
    }
    text
}

impl NewCa {
    /// What in `text` would be key material: any PEM private key, or the new CA's key.
    fn key_in(&self, text: &str) -> Option<&'static str> {
        if text.contains("PRIVATE KEY") {
            Some("a PEM private key")
        } else if self.key_runs.iter().any(|r| text.contains(r.as_str())) {
            Some("the new CA's private key")
        } else {
            None
        }
    }
}

/// Runs `stratum carotate <args>` on `node` in a Job of the test's own in `namespace`, as an
/// administrator: its exit code and log.
async fn carotate(
    api: &KubeApi,
    namespace: &str,
    node: &str,
    args: &[&str],
) -> Result<(i32, String), Failure> {
    let mut argv: Vec<String> = certs_driver::NSENTER
        .iter()
        .map(|s| s.to_string())
        .collect();
    argv.extend(
        [STRATUM, "carotate"]
            .into_iter()
            .chain(args.iter().copied())
            .map(String::from),
    );
    let spec = Spec {
        namespace: namespace.into(),
        name: nodejob_core::trunc_name(&format!("check-{}-{node}", args[0])),
        node: node.into(),
        label_key: "nodejob.test/carotate-check".into(),
        container: "check".into(),
        argv,
        active_deadline: Duration::from_secs(60),
        poll_attempts: 12,
        kind: format!("carotate {} check", args[0]),
        output: Some(Arc::new(|_: &nodejob_core::Note| {})),
        ..Spec::default()
    };
    Ok(nodejob_core::run_exit_code_logs(api, &spec).await?)
}

/// What a host trusts, by its own `carotate status` line, read here (not by the driver's
/// parser): `(phase, trusted, issuer)`.
fn host_status(node: &str, log: &str) -> Result<(String, BTreeSet<String>, String), Failure> {
    let bad = |why: String| {
        Failure(format!(
            "node {node}: `carotate status` printed {log:?}: {why}"
        ))
    };
    let line: serde_json::Value =
        serde_json::from_str(log.trim()).map_err(|e| bad(e.to_string()))?;
    let text = |v: &serde_json::Value| v.as_str().map(String::from);
    let phase = text(&line["phase"]).ok_or_else(|| bad("no phase".into()))?;
    let issuer = text(&line["issuer"]).ok_or_else(|| bad("no issuer".into()))?;
    let trusted = (line["trusted"].as_array())
        .ok_or_else(|| bad("no trusted list".into()))?
        .iter()
        .map(|t| text(t).ok_or_else(|| bad("a trusted entry is not a string".into())))
        .collect::<Result<_, _>>()?;
    Ok((phase, trusted, issuer))
}

/// The node the driver's Job runs on, and the `carotate` subcommand it runs.
fn job_node_and_step(job: &Job) -> Option<(String, String)> {
    let pod = job.spec.as_ref()?.template.spec.as_ref()?;
    let node = pod.node_name.clone()?;
    let argv = pod.containers.first()?.command.as_ref()?;
    let at = argv.iter().position(|a| a == "carotate")?;
    Some((node, argv.get(at + 1)?.clone()))
}

/// The Events of the driver about `node`, as `(type, reason)`, read as an administrator.
async fn node_events(admin: &Client, node: &str) -> Result<Vec<Event>, Failure> {
    let events = Api::<Event>::namespaced(admin.clone(), SA_NAMESPACE)
        .list(&ListParams::default().fields(&format!("involvedObject.name={node}")))
        .await
        .map_err(fail(format!("listing the events of node {node}")))?;
    Ok(events
        .items
        .into_iter()
        .filter(|e| {
            e.source.as_ref().and_then(|s| s.component.as_deref()) == Some(certs_driver::COMPONENT)
        })
        .collect())
}

/// Whether `node`'s `NodejobCARotation` condition says `status` and `reason`.
fn rotation_says(node: &Node, status: &str, reason: &str) -> bool {
    condition(node, CA_ROTATION)
        .is_some_and(|c| c.status == status && c.reason.as_deref() == Some(reason))
}

/// `name`'s `NodejobCARotation` condition read back from the real apiserver. As the watch saw
/// it change (`seen`: every version of the scenario's nodes, in order; the watch may merge two
/// quick writes into one version, never reorder them), then as read now: each phase said as
/// it starts (`True`, the phase as the reason, the message naming the new CA and `by`, the
/// driver's identity), then the end (`False`, `Rotated`), in that order, each once; its
/// `lastTransitionTime` held while `True`, moved once, at the end, both within the run (from
/// `began` to now). As `kubectl describe node` shows it now: `False`, `Rotated`, the end's
/// message, beside the kubelet's `Ready`.
async fn rotation_condition_reads_back(
    admin: &Client,
    name: &str,
    seen: &[Node],
    new: &str,
    by: &str,
    began: Timestamp,
) -> Result<(), Failure> {
    let rotating = |what: &str| format!("rotating to CA {new}: {what} (by {by})");
    let end = format!("trusts the new CA {new} alone, which issues its leaves");
    let want = [
        ("True", "Stage", rotating("staging it beside the old")),
        (
            "True",
            "Issue",
            rotating("reissuing the node's leaves from it"),
        ),
        ("True", "Finalize", rotating("removing the old CA")),
        ("False", "Rotated", end.clone()),
    ];
    // The node as read now ends what the watch saw (stopped as the run returned, it may have
    // missed the last write).
    let (node, described) = described_conditions(admin, name).await?;
    eprintln!("rotate: node {name}:\n{described}");
    let mut said: Vec<(String, String, String)> = Vec::new();
    let mut since = Vec::new();
    let versions = (seen.iter())
        .filter(|n| n.metadata.name.as_deref() == Some(name))
        .chain([&node]);
    for node in versions {
        if let Some(c) = condition(node, CA_ROTATION) {
            let now = (
                c.status.clone(),
                c.reason.clone().unwrap_or_default(),
                c.message.clone().unwrap_or_default(),
            );
            if said.last() != Some(&now) {
                since.push(c.last_transition_time.clone().map(|t| t.0));
                said.push(now);
            }
        }
    }
    let said_as: Vec<(&str, &str, &str)> = (said.iter())
        .map(|(s, r, m)| (s.as_str(), r.as_str(), m.as_str()))
        .collect();
    let want_as: Vec<(&str, &str, &str)> = (want.iter())
        .map(|(s, r, m)| (*s, *r, m.as_str()))
        .collect();
    ensure!(
        said_as == want_as,
        "node {name}: {CA_ROTATION} said {said:#?}, not {want:#?}"
    );
    // The apiserver keeps whole seconds.
    let began = Timestamp::from_second(began.as_second())
        .map_err(|e| Failure(format!("the run's start: {e}")))?;
    let now = Timestamp::now();
    let [Some(stage), Some(issue), Some(finalize), Some(ended)] = since[..] else {
        return Err(Failure(format!("node {name}: transition times {since:?}")));
    };
    ensure!(
        stage == issue && stage == finalize && began <= stage && stage < ended && ended <= now,
        "node {name}: {CA_ROTATION}'s transition times {since:?}: held from the first phase, \
         moved at the end, within the run ({began} to {now})"
    );
    let line = |t: &str| (described.lines()).find(|l| l.trim_start().starts_with(&format!("{t} ")));
    let ours = line(CA_ROTATION).unwrap_or_default();
    let reason_and_message: Vec<&str> = (ours.rsplit("+0000").next().unwrap_or_default())
        .split_whitespace()
        .collect();
    let want_words: Vec<&str> = ["Rotated"]
        .into_iter()
        .chain(end.split_whitespace())
        .collect();
    ensure!(
        ours.split_whitespace().nth(1) == Some("False") && reason_and_message == want_words,
        "node {name}:\n{described}"
    );
    // The kubelet's Ready kept beside ours (the node as read, whether or not a kubectl showed it).
    ensure!(
        condition(&node, "Ready").is_some_and(|c| c.status == "True"),
        "node {name}: the kubelet's Ready kept:\n{described}"
    );
    Ok(())
}

/// Three nodes (one control-plane) trusting and issuing from the initial CA are rotated to a
/// new one, as the ServiceAccount of `deploy/rbac.yaml`: stage, issue (each node's components
/// restart: the agent's node is seen NotReady, a real node's kubelet starts again), verify,
/// finalize, each phase on every node once, the control-plane node first, behind its gate.
/// Every host then trusts exactly the new CA, which issues its leaves; nothing the driver
/// wrote holds the new CA's key, and its Jobs hold only the fingerprint; every node's
/// `NodejobCARotation` condition said each phase, then `Rotated`.
async fn three_nodes_rotate_to_a_new_ca_control_plane_first(
    kubelets: Kubelets,
) -> Result<(), Failure> {
    let _one = one_driver().await;
    let trio = ThreeNodes::of(kubelets, Workers::Unzoned).await?;
    let (backend, admin) = (&trio.backend, trio.admin.clone());
    let (names, namespace) = (trio.names.clone(), trio.namespace.clone());
    let (key, value) = trio.label.clone();
    let control = &names[0];
    let ca = new_ca()?;
    let new = ca.fingerprint.as_str();
    eprintln!("rotate: nodes {names:?}; the new CA {new}");
    let control_plane = real_rotation(&trio, &ca.ca).await?;
    // On real nodes, a Pod on each whose log is read through the apiserver after the rotation.
    let talkers = futures::future::try_join_all(
        (trio.real_nodes().into_iter()).map(|n| talker(&admin, &namespace, n.name())),
    )
    .await?;
    // What the hosts trust before: the model's initial CA on the agent's, the run's CA on
    // real nodes (their kubelets' own bundle).
    let old = match kubelets {
        Kubelets::Agent => INITIAL_CA.to_string(),
        Kubelets::Real => run_ca_fingerprint()?,
    };

    let mut spec = PlanSpec::new(ca.pem.clone(), ca.fingerprint.clone());
    spec.selector = Some(format!("{key}={value}"));
    // The scenario's three nodes are the trust domain: the shared control plane's other nodes
    // (other scenarios') do not use this CA.
    spec.cluster_wide = false;
    spec.namespace = SA_NAMESPACE.into();
    spec.lease_name = unique("rotate-e2e");
    spec.identity = unique("rotate-e2e-driver");
    spec.lease_duration = Duration::from_secs(15);
    spec.concurrency = 2;
    // Bounds well above what the quick hosts take, so a stuck step fails in a minute; the
    // grace covers the 500ms before `issue` restarts the components, and is waited out in
    // full only if the restart was over before the driver looked.
    spec.deadline = Duration::from_secs(60);
    spec.restart_grace = Duration::from_secs(5);
    spec.ready_timeout = Duration::from_secs(60);
    let plan = Plan::build(spec).map_err(|e| Failure(e.to_string()))?;

    // What the driver creates and what becomes of the nodes, as it happens.
    let jobs = Api::<Job>::namespaced(admin.clone(), SA_NAMESPACE);
    let jobs = record(jobs, watcher::Config::default().labels(JOB_LABEL)).await?;
    let scenario = watcher::Config::default().labels(&format!("{key}={value}"));
    let nodes = record(Api::<Node>::all(admin.clone()), scenario).await?;

    let log = ProgressLog::<Progress>::new("rotate");
    let progress: Arc<dyn ProgressSink> = Arc::new(log.sink());
    let began = Timestamp::now();
    let report = certs_driver::run(&*backend.api(), &plan, progress)
        .await
        .map_err(|e| Failure(format!("the rotation did not start: {e}")));
    let jobs = jobs.stop();
    let node_history = nodes.stop();
    let report = report?;
    let events = log.events();
    for n in &report.nodes {
        let steps: Vec<String> = (n.steps.iter())
            .map(|(step, ms)| format!("{step} {:.1}s", *ms as f64 / 1000.0))
            .collect();
        eprintln!(
            "rotate: node {} {:?}: {}",
            n.name,
            n.result,
            steps.join(", ")
        );
    }
    eprintln!(
        "rotate: totals {:?}; lease {:?}",
        report.totals, report.lease
    );

    // The driver's account: done, every node rotated, every gate passed, the Lease released.
    ensure!(report.outcome == Outcome::Done, "{report:#?}");
    ensure!(
        report.totals.rotated == names.len() && report.totals.failed == 0,
        "{:?}",
        report.totals
    );
    let gates: Vec<Gate> = report.own.gates.iter().map(|g| g.gate).collect();
    ensure!(
        gates
            == [
                Gate::Start,
                Gate::BeforeIssue,
                Gate::BeforeFinalize,
                Gate::AfterFinalize
            ]
            && report.own.gates.iter().all(|g| g.passed()),
        "{:#?}",
        report.own.gates
    );
    for n in &report.nodes {
        ensure!(
            n.result == Some(NodeResult::Rotated),
            "node {}: {:?}",
            n.name,
            n.result
        );
        let before = n.before.as_ref().map(|s| s.describe());
        let initial = format!("idle, trusting [{old}], issued by {old}");
        ensure!(
            before.as_deref() == Some(initial.as_str()),
            "node {} before: {before:?}",
            n.name
        );
    }
    let lease_name = &plan.spec().lease_name;
    let lease = lease_released(&admin, lease_name, &report.lease).await?;

    // The order: each phase on every node before the next starts anywhere; in each, the
    // control-plane node alone and first.
    let position = |want: &dyn Fn(&Progress) -> bool| events.iter().position(want);
    for pair in CaStep::PHASES.windows(2) {
        let (this, next) = (pair[0], pair[1]);
        let last_finished = (events.iter())
            .rposition(|e| matches!(e, Progress::StepFinished { step, .. } if *step == this));
        let next_started =
            position(&|e| matches!(e, Progress::StepStarted { step, .. } if *step == next));
        ensure!(
            last_finished.is_some() && next_started.is_some() && last_finished < next_started,
            "{this} must finish on every node before {next} starts: {last_finished:?}, \
             {next_started:?}"
        );
    }
    for phase in CaStep::PHASES {
        let control_finished = position(
            &|e| matches!(e, Progress::StepFinished { node, step, .. } if node == control && *step == phase),
        );
        let worker_started = position(
            &|e| matches!(e, Progress::StepStarted { node, step } if node != control && *step == phase),
        );
        ensure!(
            control_finished.is_some()
                && worker_started.is_some()
                && control_finished < worker_started,
            "{phase}: the control-plane node {control} must finish before a worker starts: \
             {control_finished:?}, {worker_started:?}"
        );
    }

    // What the hosts say, asked by the test itself (every node at once): exactly the new CA,
    // which issues.
    let api = KubeApi::new(admin.clone());
    let (api, namespace) = (&api, namespace.as_str());
    let asked = names.iter().map(|name| async move {
        let status = carotate(api, namespace, name, &["status"]).await?;
        let verify = carotate(api, namespace, name, &["verify", "--expect", new]).await?;
        Ok::<_, Failure>((name, status, verify))
    });
    for (name, (code, log), (verified, verify_log)) in try_join_all(asked).await? {
        ensure!(
            code == 0,
            "node {name}: `carotate status` exited {code}: {log}"
        );
        let (phase, trusted, issuer) = host_status(name, &log)?;
        ensure!(
            trusted == BTreeSet::from([new.to_string()]) && issuer == new && phase == "finalized",
            "node {name} reports {phase}, trusting {trusted:?}, issued by {issuer}; expected \
             finalized, trusting {new} alone, issued by it"
        );
        ensure!(
            verified == 0,
            "node {name}: `carotate verify --expect {new}` exited {verified}: {verify_log}"
        );
        eprintln!("rotate: node {name} says {}", verify_log.trim());
    }

    // Each node's components restarted after `issue`: the agent's node NotReady, seen by the
    // watch; a real node's kubelet started again, by the node's own record (its Node stays
    // Ready: no node lifecycle controller runs). Every node is Ready and schedulable now.
    match kubelets {
        Kubelets::Agent => {
            for name in &names {
                let went_down = node_history.iter().any(|n| {
                    n.metadata.name.as_deref() == Some(name.as_str()) && !nodejob_core::ready(n)
                });
                ensure!(
                    went_down,
                    "node {name} never went NotReady: its components did not restart"
                );
            }
        }
        Kubelets::Real => {
            // Each kubelet trusts the new CA alone and holds its leaves, and still serves: its
            // Lease renewed since the run ended, its Pod's log read through the apiserver
            // (which the kubelet takes by the apiserver's chain to the new CA).
            rekeyed(&trio, &ca.ca)?;
            let ended = Timestamp::now();
            for (node, pod) in trio.real_nodes().into_iter().zip(&talkers) {
                serves(&admin, namespace, node.name(), pod, ended).await?;
            }
            for node in trio.real_nodes() {
                let starts = node.kubelet_starts()?;
                ensure!(
                    starts == 2,
                    "node {}: the kubelet started {starts} times, not once at boot and once \
                     for `issue`",
                    node.name()
                );
            }
        }
    }
    for node in Api::<Node>::all(admin.clone())
        .list(&ListParams::default().labels(&format!("{key}={value}")))
        .await
        .map_err(fail("listing the nodes"))?
        .items
    {
        let name = node.metadata.name.clone().unwrap_or_default();
        ensure!(nodejob_core::ready(&node), "node {name} is not Ready");
        let cordoned = node.spec.as_ref().and_then(|s| s.unschedulable) == Some(true);
        ensure!(!cordoned, "node {name} is cordoned");
        let mark = (node.metadata.annotations.as_ref()).and_then(|a| a.get(certs_driver::ROTATING));
        ensure!(
            mark.is_some_and(|m| m.contains(new)),
            "node {name}: the mark ahead of its stage is {mark:?}"
        );
        let annotations = serde_json::to_string(&node.metadata.annotations).unwrap_or_default();
        if let Some(what) = ca.key_in(&annotations) {
            return Err(Failure(format!("node {name}'s annotations hold {what}")));
        }
    }
    // Each node's condition, as the watch saw it change and as `kubectl describe node` shows it.
    let by = &plan.spec().identity;
    for name in &names {
        rotation_condition_reads_back(&admin, name, &node_history, new, by, began).await?;
    }

    // Every Job the driver created: each phase once per node and no verify (answered by the
    // issue Job), the fingerprint only.
    let mut runs: BTreeMap<(String, String), BTreeSet<String>> = BTreeMap::new();
    for job in &jobs {
        let text = serde_json::to_string(job).unwrap_or_default();
        let name = job.metadata.name.clone().unwrap_or_default();
        if let Some(what) = ca.key_in(&text) {
            return Err(Failure(format!("job {name} holds {what}")));
        }
        ensure!(
            !text.contains(&ca.certificate_base64[..64]),
            "job {name} holds the new CA's certificate: hosts get its fingerprint only"
        );
        let Some((node, step)) = job_node_and_step(job) else {
            return Err(Failure(format!(
                "job {name} runs no `carotate` step: {job:?}"
            )));
        };
        if names.contains(&node) {
            let uid = job.metadata.uid.clone().unwrap_or_default();
            runs.entry((node, step)).or_default().insert(uid);
        }
    }
    for name in &names {
        let count = |step: &str| {
            runs.get(&(name.clone(), step.into()))
                .map_or(0, |u| u.len())
        };
        for step in ["stage", "issue", "finalize"] {
            ensure!(
                count(step) == 1,
                "node {name}: {} `carotate {step}` jobs: {runs:?}",
                count(step)
            );
        }
        // The gate before finalize reads `verify`'s answer from the issue Job's own output.
        ensure!(
            count("verify") == 0,
            "node {name}: {} `carotate verify` jobs: {runs:?}",
            count("verify")
        );
        // No run had begun: each node is read by its stage, whose output begins with where it
        // stood, behind the mark written ahead of it.
        ensure!(
            count("status") == 0,
            "node {name}: {} `carotate status` jobs: {runs:?}",
            count("status")
        );
    }
    let left = Api::<Job>::namespaced(admin.clone(), SA_NAMESPACE)
        .list(&ListParams::default().labels(JOB_LABEL))
        .await
        .map_err(fail("listing the driver's jobs"))?
        .items
        .into_iter()
        .filter(|j| job_node_and_step(j).is_some_and(|(n, _)| names.contains(&n)))
        .filter_map(|j| j.metadata.name)
        .collect::<Vec<_>>();
    ensure!(left.is_empty(), "the driver's jobs are left: {left:?}");

    // Each phase is one Normal Event on each node, and none holds the key.
    for name in &names {
        let events = node_events(&admin, name).await?;
        for e in &events {
            let text = serde_json::to_string(e).unwrap_or_default();
            if let Some(what) = ca.key_in(&text) {
                return Err(Failure(format!("an event on node {name} holds {what}")));
            }
        }
        let seen: Vec<(String, String)> = (events.iter())
            .map(|e| {
                (
                    e.type_.clone().unwrap_or_default(),
                    e.reason.clone().unwrap_or_default(),
                )
            })
            .collect();
        for phase in CaStep::PHASES {
            let reason = phase.reason();
            let count = seen
                .iter()
                .filter(|(t, r)| t == "Normal" && *r == reason)
                .count();
            ensure!(
                count == 1,
                "node {name}: {count} Normal events {reason}: {seen:?}"
            );
        }
        ensure!(
            seen.iter().all(|(t, _)| t == "Normal"),
            "node {name}: warnings {seen:?}"
        );
    }
    let lease_text = serde_json::to_string(&lease).unwrap_or_default();
    if let Some(what) = ca.key_in(&lease_text) {
        return Err(Failure(format!("lease {lease_name} holds {what}")));
    }
    if let Some(control_plane) = control_plane {
        control_plane.restore()?;
    }
    Ok(())
}

/// The pause switch on a rotation, through the built `nodejob` binary as the ServiceAccount of
/// `deploy/rbac.yaml`: the scenario's two workers, one at a time, are paused (`nodejob pause`)
/// as the first one's `issue` starts. That issue finishes (its status recorded); the second's
/// does not start while paused, for longer than the run takes to read the Lease again
/// (`nodejob_roll::pause::PAUSE_POLL`), where it would start at once; `nodejob resume` lets
/// the rotation go on to the end, both nodes rotated, its progress having said who paused it,
/// when and why, and that it resumed. The switch is on the default Lease of the namespace.
async fn a_rotation_paused_mid_way_starts_no_other_step_and_goes_on_when_resumed(
    kubelets: Kubelets,
) -> Result<(), Failure> {
    cli()?;
    let _one = one_driver().await;
    let trio = ThreeNodes::of(kubelets, Workers::Unzoned).await?;
    let (first, second) = (trio.names[1].clone(), trio.names[2].clone());
    let ca = new_ca()?;
    let new = ca.fingerprint.clone();
    let control_plane = real_rotation(&trio, &ca.ca).await?;
    let ca_file = std::env::temp_dir().join(unique("rotate-pause-ca.pem"));
    std::fs::write(&ca_file, &ca.pem)
        .map_err(|e| Failure(format!("writing {}: {e}", ca_file.display())))?;
    let kubeconfig = sa_kubeconfig(&trio.admin, SA_NAME).await?;
    let kc = kubeconfig.path.clone();
    let nodes: Api<Node> = Api::all(trio.admin.clone());
    let jobs = Api::<Job>::namespaced(trio.admin.clone(), SA_NAMESPACE);
    let jobs = record(jobs, watcher::Config::default().labels(JOB_LABEL)).await?;
    let rotation = {
        let (kc, file) = (kc.clone(), ca_file.display().to_string());
        let nodes = format!("{first},{second}");
        tokio::spawn(async move {
            let args = [
                "rotate-ca",
                "--new-ca",
                &file,
                "--nodes",
                &nodes,
                "--trust-domain",
                "selected",
                "--concurrency",
                "1",
                "--deadline",
                "60s",
                "--restart-grace",
                "5s",
                "--ready-timeout",
                "60s",
            ];
            nodejob(&kc, CONTEXT, &args).await
        })
    };
    // The first worker's issue started (its condition says so as the step starts, before its
    // Job): pause there.
    wait_for(
        nodes.clone(),
        &first,
        "its issue started",
        Duration::from_secs(120),
        |n| rotation_says(n, "True", "Issue"),
    )
    .await?;
    let paused = nodejob(
        &kc,
        CONTEXT,
        &["pause", "--by", "e2e", "--reason", "mid-rotation"],
    )
    .await?;
    paused.exited(0)?;
    // The issue in flight finishes: the new CA issues the node's leaves, as the driver records
    // it right after the step.
    let issued = {
        let (first, new) = (first.clone(), new.clone());
        move |n: &Node| {
            certs_driver::last_reported(n, &first)
                .is_ok_and(|r| r.is_some_and(|(s, _)| s.issuer.as_str() == new))
        }
    };
    wait_for(
        nodes.clone(),
        &first,
        "its issue recorded",
        Duration::from_secs(60),
        issued,
    )
    .await?;
    // While paused, the second worker's issue does not start.
    let window = nodejob_roll::pause::PAUSE_POLL + Duration::from_secs(2);
    let started = wait_for(
        nodes.clone(),
        &second,
        "its issue started while paused",
        window,
        |n| rotation_says(n, "True", "Issue"),
    )
    .await;
    ensure!(
        started.is_err(),
        "node {second}'s issue started while paused: {started:?}"
    );
    let resumed_at = Timestamp::now();
    let resumed = nodejob(&kc, CONTEXT, &["resume"]).await?;
    resumed.exited(0)?;
    let ran = rotation
        .await
        .map_err(|e| Failure(format!("the rotation's task: {e}")))??;
    let jobs = jobs.stop();
    let _ = std::fs::remove_file(&ca_file);
    ran.exited(0)?;
    ensure!(
        ran.stdout.contains(&format!("{second}: paused by e2e at "))
            && ran.stdout.contains(": mid-rotation; waiting before Issue")
            && ran.stdout.contains(&format!("{second}: resumed after "))
            && ran.stdout.contains("paused; Issue starts"),
        "the rotation's progress must say it waited and resumed:\n{}",
        ran.stdout
    );
    // The second's issue Job was created once, after the resume (the apiserver keeps whole
    // seconds).
    let issue_jobs: Vec<Timestamp> = (jobs.iter())
        .filter(|j| job_node_and_step(j) == Some((second.clone(), "issue".into())))
        .filter_map(|j| j.metadata.creation_timestamp.as_ref().map(|t| t.0))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let after = Timestamp::from_second(resumed_at.as_second())
        .map_err(|e| Failure(format!("the resume's time: {e}")))?;
    ensure!(
        matches!(issue_jobs[..], [t] if t >= after),
        "node {second}'s issue jobs created at {issue_jobs:?}, not once after the resume at \
         {resumed_at}"
    );
    for node in [&first, &second] {
        let n = nodes
            .get(node)
            .await
            .map_err(|e| Failure(format!("reading node {node}: {e}")))?;
        ensure!(
            rotation_says(&n, "False", "Rotated"),
            "node {node} not rotated: {:?}",
            condition(&n, CA_ROTATION)
        );
    }
    trio.remove().await?;
    if let Some(control_plane) = control_plane {
        control_plane.restore()?;
    }
    Ok(())
}
