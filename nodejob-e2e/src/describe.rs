//! A node's conditions as `kubectl describe node` prints its `Conditions:` table
//! ([`kubectl_describe`]), read from the apiserver and, when a `kubectl` is installed, checked
//! against `kubectl`'s own table: how a driver's condition (`NodejobUpgrade`,
//! `NodejobCARotation`) is read back as a person would read it.

use k8s_openapi::api::core::v1::Node;
use kube::Client;
use kube::api::Api;
use nodejob_conformance::{Failure, ensure};
use nodejob_roll::condition::kubectl_describe;

use crate::admin::kubeconfig_path;

/// Node `name` as read now, and its conditions as `kubectl describe node` prints them. When
/// there is a `kubectl` to ask (as an administrator, with `TZ=UTC`), its own `Conditions:`
/// table of the node must be the same text; without one, ours stands alone (said on stderr).
pub async fn described_conditions(admin: &Client, name: &str) -> Result<(Node, String), Failure> {
    let node = Api::<Node>::all(admin.clone())
        .get(name)
        .await
        .map_err(|e| Failure(format!("reading node {name}: {e}")))?;
    let conditions = (node.status.as_ref())
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default();
    let described = kubectl_describe(&conditions);
    let kubectl = tokio::process::Command::new("kubectl")
        .env("TZ", "UTC")
        .arg("--kubeconfig")
        .arg(kubeconfig_path())
        .args(["describe", "node", name])
        .output()
        .await;
    match kubectl {
        Ok(out) if out.status.success() => {
            let text = String::from_utf8_lossy(&out.stdout);
            let table: String = (text.lines())
                .skip_while(|l| *l != "Conditions:")
                .take_while(|l| *l == "Conditions:" || l.starts_with("  "))
                .map(|l| format!("{}\n", l.trim_end()))
                .collect();
            ensure!(
                table == described,
                "kubectl describe node {name} shows\n{table}\nwe show\n{described}"
            );
        }
        Ok(out) => {
            return Err(Failure(format!(
                "kubectl describe node {name}: {}",
                String::from_utf8_lossy(&out.stderr)
            )));
        }
        Err(e) => eprintln!("no kubectl to compare with ({e}): our rendering checked alone"),
    }
    Ok((node, described))
}
