//! [`ControlPlaneTrust`]: the run's apiserver made part of a real nodes' CA rotation, as its
//! administrator would before the nodes' own phases (the control plane is staged and issued
//! first), and taken back after.
//!
//! The apiserver (`e2e/cluster`) is shared by every test of the run, whose other real nodes
//! trust the run's CA alone, so it cannot be re-keyed: it is given what lets it talk to a
//! kubelet that trusts either CA, or the new one alone.
//! - its client trust (`--client-ca-file`, `pki/client-ca.crt`) gains the new CA, so a
//!   kubelet's client certificate from it authenticates. The apiserver reads the file again
//!   as it changes (`dynamiccertificates.NewDynamicCAContentFromFile`, an fsnotify watch,
//!   `k8s.io/apiserver/pkg/server/options/authentication.go` `GetClientCAContentProvider`);
//! - its serving chain (`--tls-cert-file`, reloaded the same way,
//!   `NewDynamicServingContentFromFiles` in `pkg/server/options/serving.go`) and the client
//!   chain it shows kubelets (`--kubelet-client-certificate`: `ReloadTLSFiles`,
//!   `pkg/kubelet/client/kubelet_client.go`, read again at a handshake at most a second
//!   after the last, client-go `transport.cachingCertificateLoader`) end with the run's CA
//!   cross-signed by the new one ([`Ca::cross_sign`]): its leaves, still the run CA's, chain
//!   to either root, so a kubelet that trusts the new CA alone (after `finalize`) verifies
//!   the apiserver (client-go reloads a kubeconfig's CA file every 5 minutes,
//!   `transport/ca_rotation.go`, feature `ClientsAllowCARotation`, on by default) and
//!   authenticates it (the kubelet's x509 authenticator takes the peer's intermediates,
//!   `k8s.io/apiserver/pkg/authentication/request/x509`).
//!
//! Not done: the apiserver's own leaves are not reissued by the new CA, and it never stops
//! trusting the run's CA.

use std::path::PathBuf;
use std::time::Duration;

use k8s_openapi::api::authentication::v1::SelfSubjectReview;
use kube::api::{Api, PostParams};
use kube::config::AuthInfo;
use nodejob_conformance::Failure;
use rcgen::{DnType, ExtendedKeyUsagePurpose, KeyPair};

use crate::admin::{client, config, lock_beside_kubeconfig};
use crate::pki::{self, Ca};

/// Who the probe of [`ControlPlaneTrust::extend`] authenticates as.
const PROBE: &str = "nodejob-e2e-ca-probe";
/// How long the apiserver may take to read its files again.
const RELOAD_LIMIT: Duration = Duration::from_secs(30);

fn pki_dir() -> PathBuf {
    std::env::var_os("NODEJOB_E2E_RUN")
        .map(|r| PathBuf::from(r).join("pki"))
        .expect("NODEJOB_E2E_RUN is not set: run the suite with e2e/run")
}

/// The fingerprint of the run's CA (`pki/ca.crt`), which every real node trusts and issues
/// from until a rotation.
pub fn run_ca_fingerprint() -> Result<String, Failure> {
    let path = pki_dir().join("ca.crt");
    let text = pki::read(&path).map_err(Failure)?;
    (pki::certificates(&text).map_err(Failure)?.first())
        .map(|d| pki::fingerprint(d))
        .ok_or_else(|| Failure(format!("{}: no certificate", path.display())))
}

/// The apiserver's files are changed by one test at a time (two rotations may run side by
/// side, each adding its own CA and taking it back, in one binary or in two that `e2e/run`
/// runs together): a mutex in the process, then [`lock_beside_kubeconfig`], held while a file
/// is read and written again.
fn files_turn() -> Result<(std::sync::MutexGuard<'static, ()>, std::fs::File), Failure> {
    static FILES: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let in_process = FILES.lock().unwrap_or_else(|e| e.into_inner());
    let file = lock_beside_kubeconfig(".apiserver-files.lock")?;
    Ok((in_process, file))
}

/// The apiserver trusting a rotation's new CA beside the run's, its chains cross-signed by
/// it, until [`ControlPlaneTrust::restore`] (or drop) takes out of its files what it added.
pub struct ControlPlaneTrust {
    added: Vec<(PathBuf, String)>,
}

impl ControlPlaneTrust {
    /// Extends the apiserver to `new` (its client trust, its serving and kubelet client chains,
    /// as this module's docs say) and returns once it
    /// answers a client that trusts `new` alone and shows a client certificate from it.
    pub async fn extend(new: &Ca) -> Result<ControlPlaneTrust, Failure> {
        let dir = pki_dir();
        let err = |e: String| {
            Failure(format!(
                "extending the apiserver to {}: {e}",
                new.fingerprint()
            ))
        };
        let run_ca = pki::certificates(&pki::read(&dir.join("ca.crt")).map_err(err)?)
            .map_err(err)?
            .into_iter()
            .next()
            .ok_or_else(|| err("no run CA".into()))?;
        let run_key = KeyPair::from_pem(&pki::read(&dir.join("ca.key")).map_err(err)?)
            .map_err(|e| err(format!("the run CA's key: {e}")))?;
        let cross = new.cross_sign(&run_ca, &run_key).map_err(err)?;
        let mut trust = ControlPlaneTrust { added: Vec::new() };
        {
            let _one = files_turn()?;
            for (file, added) in [
                ("client-ca.crt", new.certificate_pem()),
                ("kube-apiserver.crt", cross.clone()),
                ("kube-apiserver-kubelet-client.crt", cross),
            ] {
                let path = dir.join(file);
                let was = pki::read(&path).map_err(err)?;
                pki::write(&path, &format!("{was}{added}")).map_err(err)?;
                trust.added.push((path, added));
            }
        }
        // A client trusting the new CA alone, authenticated by a certificate from it.
        let (cert, key) = new
            .issue(
                &[(DnType::CommonName, PROBE)],
                ExtendedKeyUsagePurpose::ClientAuth,
                &[],
            )
            .map_err(err)?;
        let mut probe = config(None).await?;
        probe.root_cert = Some(vec![new.der().to_vec()]);
        probe.auth_info = AuthInfo {
            client_certificate_data: Some(pki::base64(cert.as_bytes())),
            client_key_data: Some(pki::base64(key.as_bytes()).into()),
            ..AuthInfo::default()
        };
        let reviews = Api::<SelfSubjectReview>::all(client(probe)?);
        let deadline = tokio::time::Instant::now() + RELOAD_LIMIT;
        loop {
            let answer = reviews
                .create(&PostParams::default(), &SelfSubjectReview::default())
                .await;
            let user = (answer.as_ref().ok())
                .and_then(|r| r.status.as_ref()?.user_info.as_ref()?.username.clone());
            if user.as_deref() == Some(PROBE) {
                return Ok(trust);
            }
            if tokio::time::Instant::now() > deadline {
                return Err(err(format!(
                    "the apiserver still refuses a client of the new CA after \
                     {RELOAD_LIMIT:?}: {answer:?}"
                )));
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// Takes what it added out of the apiserver's files.
    pub fn restore(mut self) -> Result<(), Failure> {
        self.put_back()
    }

    fn put_back(&mut self) -> Result<(), Failure> {
        let _one = files_turn()?;
        for (path, added) in self.added.drain(..) {
            let now = pki::read(&path).map_err(Failure)?;
            pki::write(&path, &now.replacen(&added, "", 1)).map_err(Failure)?;
        }
        Ok(())
    }
}

impl Drop for ControlPlaneTrust {
    fn drop(&mut self) {
        if let Err(e) = self.put_back() {
            eprintln!("{e}");
        }
    }
}
