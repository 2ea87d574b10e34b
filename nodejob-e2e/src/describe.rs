//! A node's conditions as a person reads them, held to `kubectl`: `kubectl describe node`'s
//! `Conditions:` table, and the drivers' rows of it as `nodejob status NODE` shows them (the
//! command's rendering, `nodejob-cli/src/present/describe.rs`): how a driver's condition
//! (`NodejobUpgrade`, `NodejobCARotation`) is read back.

use k8s_openapi::api::core::v1::Node;
use kube::Client;
use kube::api::Api;
use nodejob_conformance::{Failure, ensure};

use crate::admin::kubeconfig_path;
use crate::command::nodejob;

/// The admin kubeconfig's context (`e2e/cluster` writes it).
const ADMIN_CONTEXT: &str = "nodejob-e2e";

/// The `Conditions:` table in `text` (its heading, then its indented lines), each line's
/// trailing blanks cut: as `kubectl describe node` prints it, and as `nodejob status NODE`
/// prints the drivers' rows of it.
fn conditions_table(text: &str) -> String {
    (text.lines())
        .skip_while(|l| *l != "Conditions:")
        .take_while(|l| *l == "Conditions:" || l.starts_with("  "))
        .map(|l| format!("{}\n", l.trim_end()))
        .collect()
}

/// A table's rows with each run of blanks one space: the cells as they read, whatever the
/// padding (a table's column widths depend on its other rows; the padding is the command's
/// unit test's).
fn cells(table: &str) -> Vec<String> {
    (table.lines())
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .filter(|l| !l.is_empty())
        .collect()
}

/// Node `name` as read now, and its drivers' conditions as `nodejob status NAME` shows them,
/// as `kubectl describe node` prints its `Conditions:` table. When there is a `kubectl` to ask
/// (as an administrator, with `TZ=UTC`), the command's rows must be rows of `kubectl`'s own
/// table, cell for cell under the same header, and that whole table is answered (the kubelet's
/// conditions too); without one, the command's table stands alone (said on stderr).
pub async fn described_conditions(admin: &Client, name: &str) -> Result<(Node, String), Failure> {
    let node = Api::<Node>::all(admin.clone())
        .get(name)
        .await
        .map_err(|e| Failure(format!("reading node {name}: {e}")))?;
    let status = nodejob(&kubeconfig_path(), ADMIN_CONTEXT, &["status", name]).await?;
    ensure!(
        status.code == Some(0),
        "{}: exit {:?}",
        status.line,
        status.code
    );
    let ours = conditions_table(&status.stdout);
    let ours_cells = cells(&ours);
    ensure!(
        ours_cells.len() > 3
            && (status.stdout)
                .contains("as `kubectl describe node` shows the drivers' conditions:\nConditions:"),
        "nodejob status {name} shows no conditions table:\n{}",
        status.stdout
    );
    let kubectl = tokio::process::Command::new("kubectl")
        .env("TZ", "UTC")
        .arg("--kubeconfig")
        .arg(kubeconfig_path())
        .args(["describe", "node", name])
        .output()
        .await;
    let out = match kubectl {
        Ok(out) => out,
        Err(e) => {
            eprintln!("no kubectl to compare with ({e}): the command's rendering checked alone");
            return Ok((node, ours));
        }
    };
    ensure!(
        out.status.success(),
        "kubectl describe node {name}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let table = conditions_table(&String::from_utf8_lossy(&out.stdout));
    let theirs = cells(&table);
    ensure!(
        ours_cells[..3] == theirs[..3.min(theirs.len())],
        "nodejob status {name} shows the table\n{ours}\nkubectl describe node shows\n{table}"
    );
    for row in &ours_cells[3..] {
        ensure!(
            theirs.contains(row),
            "nodejob status {name} shows the row\n  {row}\nwhich kubectl describe node does not:\n{table}"
        );
    }
    Ok((node, table))
}
