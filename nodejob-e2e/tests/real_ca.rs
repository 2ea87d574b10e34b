//! A real CA rotation on real nodes, phase by phase, as an administrator runs it: `stratum
//! carotate` re-keys a real kubelet (`src/bin/stratum.rs`, `src/pki.rs`), and after each phase
//! the node still serves ([`serves`]): it is Ready, its kubelet renewed its Lease since the
//! phase (it verifies the apiserver and the apiserver takes its client certificate, now), and
//! a Pod's log read through the apiserver, as `kubectl logs` reads it (apiserver -> kubelet,
//! the kubelet verifying the apiserver's client certificate against its bundle), reaches the
//! kubelet. After `finalize` the kubelet's certificates (the client certificate it holds, the
//! serving certificate it presents on its port, by `openssl`) chain to the new CA alone.
//!
//! And the order broken on purpose: on another node, the host operations of `issue` done
//! before any `stage` (by the test itself: the host's `stratum` and the driver's gates refuse
//! it), the kubelet presents a client certificate of a CA nobody trusts yet: the apiserver
//! refuses it, its Lease is no longer renewed, and the node lifecycle controller
//! ([`NodeLifecycle`], run for this test) turns it `Ready` `Unknown` ([`serves`] fails on it);
//! staging the new CA in the apiserver's trust brings it back.
//!
//! The new CA and its key are the test's: it places them in each host's keyring
//! ([`Keyring`]), as an administrator would, and extends the apiserver for the rotation
//! ([`ControlPlaneTrust`]); a phase's Job names the CA by its fingerprint alone.

use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::jiff::Timestamp;
use kube::api::Api;
use nodejob_conformance::{Failure, ensure};
use nodejob_core::Spec;
use nodejob_e2e::pki::{self, Ca};
use nodejob_e2e::{
    ControlPlaneTrust, Keyring, KubeletPki, NodeLifecycle, RealNode, RealNodes, serves, talker,
    wait_for,
};
use nodejob_kube::KubeApi;

/// The on-host binary, as the driver execs it.
const STRATUM: &str = "/usr/local/bin/stratum";

/// Runs `stratum carotate <args>` on `node` in a Job of the test's own, as an administrator:
/// its exit code and log.
async fn carotate(
    api: &KubeApi,
    namespace: &str,
    node: &str,
    args: &[&str],
) -> Result<(i32, String), Failure> {
    let argv: Vec<String> = (certs_driver::NSENTER.iter().copied())
        .chain([STRATUM, "carotate"])
        .chain(args.iter().copied())
        .map(String::from)
        .collect();
    let spec = Spec {
        namespace: namespace.into(),
        name: nodejob_core::trunc_name(&format!("ca-{}-{node}", args[0])),
        node: node.into(),
        label_key: "nodejob.test/real-ca".into(),
        container: "ca".into(),
        argv,
        active_deadline: Duration::from_secs(60),
        poll_attempts: 12,
        kind: format!("carotate {}", args[0]),
        output: Some(Arc::new(|_: &nodejob_core::Note| {})),
        ..Spec::default()
    };
    Ok(nodejob_core::run_exit_code_logs(api, &spec).await?)
}

/// Waits (at most 30 s) until `node`'s kubelet has started `count` times; the time after.
async fn kubelet_started(node: &RealNode, count: usize) -> Result<Timestamp, Failure> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let mut every = tokio::time::interval(Duration::from_millis(200));
    loop {
        every.tick().await;
        let starts = node.kubelet_starts()?;
        if starts >= count {
            return Ok(Timestamp::now());
        }
        ensure!(
            tokio::time::Instant::now() < deadline,
            "node {}: the kubelet started {starts} times, not {count}",
            node.name()
        );
    }
}

/// What `openssl s_client` says of the certificate the kubelet of `node` presents on its port,
/// verified against `ca_file` alone: its chain (PEM) and whether it verified.
async fn presented(node: &RealNode, ca_file: &Path) -> Result<(Vec<Vec<u8>>, bool), Failure> {
    let port = node.kubelet_port()?;
    let out = tokio::process::Command::new("openssl")
        .args([
            "s_client",
            "-connect",
            &format!("127.0.0.1:{port}"),
            "-showcerts",
        ])
        .arg("-CAfile")
        .arg(ca_file)
        .stdin(Stdio::null())
        .output()
        .await
        .map_err(|e| Failure(format!("openssl s_client: {e}")))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let chain = pki::certificates(&text).map_err(Failure)?;
    Ok((chain, text.contains("Verify return code: 0 (ok)")))
}

/// Whether `openssl verify` verifies `cert` against `ca_file` alone.
async fn verifies(cert: &Path, ca_file: &Path) -> Result<bool, Failure> {
    let status = tokio::process::Command::new("openssl")
        .arg("verify")
        .arg("-CAfile")
        .arg(ca_file)
        .arg(cert)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .await
        .map_err(|e| Failure(format!("openssl verify: {e}")))?;
    Ok(status.success())
}

/// `carotate status`'s trusted set and issuer on `node`.
async fn status(
    api: &KubeApi,
    namespace: &str,
    node: &str,
) -> Result<(Vec<String>, String), Failure> {
    let (code, log) = carotate(api, namespace, node, &["status"]).await?;
    ensure!(
        code == 0,
        "node {node}: `carotate status` exited {code}: {log}"
    );
    let line: serde_json::Value = serde_json::from_str(log.trim())
        .map_err(|e| Failure(format!("node {node}: status {log:?}: {e}")))?;
    let trusted = (line["trusted"].as_array().into_iter().flatten())
        .filter_map(|t| t.as_str().map(String::from))
        .collect();
    Ok((
        trusted,
        line["issuer"].as_str().unwrap_or_default().to_string(),
    ))
}

/// Node A rotated phase by phase, serving after each; node B's `issue` done before any
/// `stage`, and B falls out (see the module docs).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_kubelet_is_rekeyed_phase_by_phase_and_issue_before_stage_drops_it()
-> Result<(), Failure> {
    let scenario = RealNodes::start(2).await?;
    let (admin, namespace) = (scenario.admin.clone(), scenario.namespace.clone());
    let (a, b) = (&scenario.nodes[0], &scenario.nodes[1]);
    let api = KubeApi::new(admin.clone());
    let talkers =
        futures::future::try_join_all([a, b].map(|n| talker(&admin, &namespace, n.name()))).await?;
    let (pod_a, pod_b) = (&talkers[0], &talkers[1]);
    let run_ca = KubeletPki::at(a.dir().join("pki"))
        .trusted()
        .map_err(Failure)?;
    let old = run_ca
        .first()
        .map(|d| pki::fingerprint(d))
        .unwrap_or_default();
    let new_ca = Ca::generate("nodejob e2e real rotation CA").map_err(Failure)?;
    let new = new_ca.fingerprint();
    eprintln!(
        "real ca: nodes {} and {}; {old} -> {new}",
        a.name(),
        b.name()
    );
    let files = std::env::temp_dir().join(nodejob_e2e::unique("real-ca"));
    std::fs::create_dir_all(&files).map_err(|e| Failure(e.to_string()))?;
    let (new_file, old_file) = (files.join("new.crt"), files.join("old.crt"));
    pki::write(&new_file, &new_ca.certificate_pem()).map_err(Failure)?;
    pki::write(&old_file, &pki::certificate_pem(&run_ca[0])).map_err(Failure)?;

    let began = Timestamp::now();
    for (node, pod) in [(a, pod_a), (b, pod_b)] {
        serves(&admin, &namespace, node.name(), pod, began).await?;
        let (trusted, issuer) = status(&api, &namespace, node.name()).await?;
        ensure!(
            trusted == [old.clone()] && issuer == old,
            "node {}: before, trusting {trusted:?}, issued by {issuer}; not the run's CA {old}",
            node.name()
        );
    }
    // The node lifecycle controller, so that a kubelet locked out goes NotReady.
    let lifecycle = NodeLifecycle::start(
        &admin,
        b.name(),
        Duration::from_secs(20),
        Duration::from_secs(1),
        Duration::from_secs(60),
    )
    .await?;

    // The order broken: B's kubelet gets leaves of the new CA, which nothing trusts yet (not
    // B, not the apiserver), and restarts with them, as `issue` would.
    let b_pki = KubeletPki::at(b.dir().join("pki"));
    b_pki.issue(&new_ca).map_err(Failure)?;
    let starts = b.kubelet_starts()?;
    b.restart_kubelet()?;
    let restarted = kubelet_started(b, starts + 1).await?;
    let broken = serves(&admin, &namespace, b.name(), pod_b, restarted).await;
    eprintln!("real ca: issue before stage on {}: {broken:?}", b.name());
    ensure!(
        broken.is_err(),
        "node {} still serves with leaves of a CA nobody trusts",
        b.name()
    );
    let nodes = Api::<Node>::all(admin.clone());
    let unknown = |n: &Node| {
        (n.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .into_iter()
            .flatten())
        .any(|c| c.type_ == "Ready" && c.status == "Unknown")
    };
    wait_for(
        nodes.clone(),
        b.name(),
        "Ready Unknown",
        Duration::from_secs(90),
        unknown,
    )
    .await?;
    // The apiserver's answer, as the kubelet logs it ("failed to list *v1.Service:
    // Unauthorized"; not its configuration's `cacheUnauthorizedTTL`).
    let refused = std::fs::read_to_string(b.dir().join("log/kubelet.log"))
        .map_err(|e| Failure(e.to_string()))?
        .lines()
        .filter(|l| l.contains(": Unauthorized"))
        .count();
    ensure!(
        refused > 0,
        "node {}: its kubelet's log says no request was refused Unauthorized",
        b.name()
    );

    // The control plane first: the apiserver trusts the new CA and presents chains to it.
    // B comes back (its client certificate is trusted now).
    let control_plane = ControlPlaneTrust::extend(&new_ca).await?;
    wait_for(
        nodes.clone(),
        b.name(),
        "Ready again",
        Duration::from_secs(60),
        |n: &Node| nodejob_core::ready(n),
    )
    .await?;
    serves(&admin, &namespace, b.name(), pod_b, Timestamp::now()).await?;

    // A, in order, its host given the new CA out of band.
    Keyring::at(a.dir().join("host/ca"))
        .place(&new_ca)
        .map_err(Failure)?;
    let a_pki = KubeletPki::at(a.dir().join("pki"));
    let phases: [&[&str]; 3] = [
        &["stage", "--add", new.as_str()],
        &["issue", "--ca", new.as_str()],
        &["finalize", "--keep", new.as_str()],
    ];
    for args in phases {
        let starts = a.kubelet_starts()?;
        let (code, log) = carotate(&api, &namespace, a.name(), args).await?;
        ensure!(
            code == 0,
            "node {}: `carotate {args:?}` exited {code}: {log}",
            a.name()
        );
        let since = if args[0] == "issue" {
            kubelet_started(a, starts + 1).await?
        } else {
            Timestamp::now()
        };
        serves(&admin, &namespace, a.name(), pod_a, since).await?;
        let (trusted, issuer) = status(&api, &namespace, a.name()).await?;
        let bundle: Vec<String> = (a_pki.trusted().map_err(Failure)?.iter())
            .map(|d| pki::fingerprint(d))
            .collect();
        eprintln!(
            "real ca: {} after {}: trusting {trusted:?}, issued by {issuer}",
            a.name(),
            args[0]
        );
        let (want_trusted, want_issuer) = match args[0] {
            "stage" => (vec![old.clone(), new.clone()], &old),
            "issue" => (vec![old.clone(), new.clone()], &new),
            _ => (vec![new.clone()], &new),
        };
        let mut sorted = bundle.clone();
        sorted.sort();
        let mut want_sorted = want_trusted.clone();
        want_sorted.sort();
        ensure!(
            trusted == want_sorted && sorted == want_sorted && &issuer == want_issuer,
            "node {} after {}: trusting {trusted:?} (bundle {bundle:?}), issued by {issuer}",
            a.name(),
            args[0]
        );
    }
    // The kubelet's certificates chain to the new CA alone: the client certificate it holds,
    // the serving certificate it presents.
    let client = a_pki.client_path();
    ensure!(
        verifies(&client, &new_file).await? && !verifies(&client, &old_file).await?,
        "node {}: its client certificate does not chain to the new CA alone",
        a.name()
    );
    let (chain, by_new) = presented(a, &new_file).await?;
    let (_, by_old) = presented(a, &old_file).await?;
    let leaf = chain.first().cloned().unwrap_or_default();
    ensure!(
        by_new && !by_old && leaf == a_pki.serving().map_err(Failure)?,
        "node {}: it presents {} certificates, verified by the new CA {by_new}, by the old \
         {by_old}",
        a.name(),
        chain.len()
    );

    lifecycle.stop()?;
    scenario.stop()?;
    control_plane.restore()?;
    let _ = std::fs::remove_dir_all(&files);
    Ok(())
}
