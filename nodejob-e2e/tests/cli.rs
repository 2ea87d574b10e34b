//! The `nodejob` command on a real control plane, as a user runs it: the binary `e2e/run`
//! builds (`NODEJOB_E2E_CLI`), given `--kubeconfig` and `--context` of a kubeconfig file that
//! holds the apiserver's address, its CA and a token of the ServiceAccount of
//! `deploy/rbac.yaml`, and nothing else. On three nodes of the scenario's own (one
//! control-plane, two zones, quick `stratum` hosts; the node agent's or real ones,
//! [`Kubelets`]) running a Deployment behind a budget: `upgrade` rolls them (its drains
//! asserted, [`Drains`]), `run` answers with its container's exit code, `jobs` and `status`
//! show what is left, and `upgrade --preview` then skips every node. Run by `e2e/run`.

use std::path::Path;
use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, DeleteParams, PostParams};
use nodejob_conformance::{Failure, ensure};
use nodejob_e2e::{
    CONTEXT, Drains, KubeconfigFile, Kubelets, Ran, Rbac, SA_NAME, SA_NAMESPACE, ThreeNodes,
    Workers, admin, annotate_node, cli, deployment_available, namespace, nodejob, one_driver,
    sa_kubeconfig, unique,
};
use serde_json::{Value, json};
use upgrade_driver::VersionSource;
use upgrade_driver::records;

nodejob_e2e::on_kubelets! {
    source: include_str!("cli.rs");
    both: upgrade_run_jobs_and_status_through_a_kubeconfig_as_the_service_account;
    agent_only: ;
    no_nodes:
        an_unknown_context_is_bad_usage_naming_it =>
            "it reads no node: the command refuses the context before it reaches the cluster",
        run_on_a_node_the_cluster_lacks_is_bad_usage_and_creates_no_job =>
            "it names a node the cluster lacks: no node, agent or real, is read",
        pause_names_who_the_apiserver_takes_the_kubeconfig_for =>
            "it writes the pause switch on a Lease of a namespace of its own and reads no node";
}

/// The version the nodes are rolled to: not the agent's, nor `tests/upgrade.rs`'s.
const TARGET: &str = "v1.98.0";
/// The Deployment behind the budget.
const APP: &str = "web";
const REPLICAS: i32 = 3;
/// How long the workloads may take to settle, before and after the roll.
const SETTLE: Duration = Duration::from_secs(120);
/// The exit code the scripted `nodejob run` ends with.
const RUN_EXIT: i32 = 7;

/// Runs `nodejob upgrade --to TARGET --version-from (as the nodes say it) --nodes NODES
/// MORE...` in context [`CONTEXT`]: see [`nodejob`].
async fn upgrade_to_target(
    kubeconfig: &Path,
    kubelets: Kubelets,
    nodes: &str,
    more: &[&str],
) -> Result<Ran, Failure> {
    // The agent's kubelets go to a release the apiserver is not at: past the version skew
    // policy, as asked (the gate's refusal has its own test, `tests/long_rolls.rs`).
    let from = kubelets.version_from();
    let mut args = vec![
        "upgrade",
        "--to",
        TARGET,
        "--allow-skew",
        "--version-from",
        from,
    ];
    args.extend_from_slice(&["--nodes", nodes]);
    args.extend_from_slice(more);
    nodejob(kubeconfig, CONTEXT, &args).await
}

/// A row of `nodejob jobs`, from its table or its JSON.
#[derive(Debug)]
struct JobRow {
    name: String,
    node: String,
    status: String,
    /// The exit code as shown; `None`: none yet.
    exit: Option<String>,
}

/// The Job `nodejob run` creates on `node` (its default name: the scenario's node names are
/// short enough to keep whole).
fn run_job(node: &str) -> String {
    format!("nodejob-run-{node}")
}

/// What `jobs` must show of the scenario's nodes (`rows`) after the upgrade, a failed run on
/// `failed_on` and a succeeded run on `succeeded_on`: the failed run's Job, Failed with
/// [`RUN_EXIT`], kept for inspection; the succeeded run's Job at most as Deleting (`nodejob
/// run` asks for its foreground deletion and returns; the garbage collector removes it once
/// its Pod is gone, seconds later); and nothing else: the upgrade deletes its Jobs before it
/// ends.
fn left_jobs(rows: &[JobRow], failed_on: &str, succeeded_on: &str) -> Result<(), Failure> {
    let failed: Vec<&JobRow> = rows.iter().filter(|r| r.node == failed_on).collect();
    let want_exit = RUN_EXIT.to_string();
    ensure!(
        failed.len() == 1
            && failed[0].name == run_job(failed_on)
            && failed[0].status == "Failed"
            && failed[0].exit.as_deref() == Some(want_exit.as_str()),
        "want the run's Job on {failed_on}, Failed with exit {RUN_EXIT}, and no other: {rows:?}"
    );
    ensure!(
        (rows.iter())
            .filter(|r| r.node == succeeded_on)
            .all(|r| r.name == run_job(succeeded_on) && r.status == "Deleting"),
        "want no Job on {succeeded_on} but the succeeded run's, being deleted: {rows:?}"
    );
    let others: Vec<&JobRow> = (rows.iter())
        .filter(|r| r.node != failed_on && r.node != succeeded_on)
        .collect();
    ensure!(
        others.is_empty(),
        "want no Job on the other nodes: {others:?}"
    );
    Ok(())
}

/// Three nodes (one control-plane, two workers in two zones) running a Deployment behind a
/// budget allowing one disruption, driven by the `nodejob` binary as the ServiceAccount of
/// `deploy/rbac.yaml`, through a kubeconfig and a named context:
/// - `upgrade --to` rolls all three (exit 0, each `upgraded` in the summary), and the cluster
///   agrees: each reports the target (where [`Kubelets::version_from`] reads it), Ready and
///   schedulable; each Pod was evicted once before its node's host Job, the budget never
///   broken; the Deployment is whole again;
/// - `run` exits with its container's exit code and prints its log; `--exit-code-only` prints
///   nothing;
/// - `jobs` (text and JSON) shows the failed run's Job on its node with its exit code, no Job
///   of the upgrade and the succeeded run's at most as being deleted ([`left_jobs`]);
/// - `status` (text and JSON) shows the three nodes at the target, upgraded, and the Lease free
///   after the upgrade;
/// - `upgrade --preview` (text and JSON) then skips all three and changes nothing.
async fn upgrade_run_jobs_and_status_through_a_kubeconfig_as_the_service_account(
    kubelets: Kubelets,
) -> Result<(), Failure> {
    cli()?;
    // The default Lease of the namespace, which the other backend's run takes too.
    let _one = one_driver().await;
    let trio = ThreeNodes::of(kubelets, Workers::InTwoZones).await?;
    trio.deployment_behind_budget(APP, REPLICAS, SETTLE).await?;
    let (admin, names, namespace) = (&trio.admin, &trio.names, &trio.namespace);
    let source = match kubelets {
        Kubelets::Agent => VersionSource::KubeletVersion,
        Kubelets::Real => VersionSource::OsImage,
    };
    let [control, zone_a, zone_b] = [&names[0], &names[1], &names[2]];

    let kubeconfig = sa_kubeconfig(admin, SA_NAME).await?;
    let kc = kubeconfig.path.as_path();
    let nodes = names.join(",");

    // The roll: bounds well above what the quick hosts take, so a stuck step fails in minutes.
    let drains = Drains::watch(admin, namespace, APP).await?;
    let upgrade = upgrade_to_target(
        kc,
        kubelets,
        &nodes,
        &[
            "--drain-timeout",
            "60s",
            "--reboot-timeout",
            "60s",
            "--deadline",
            "2m",
        ],
    )
    .await?;
    upgrade.exited(0)?;
    let drained = drains.check(
        names,
        REPLICAS - 1,
        &format!("system:serviceaccount:{SA_NAMESPACE}:{SA_NAME}"),
    )?;
    eprintln!("cli ({kubelets:?}): drained {drained:?}");
    let summary = upgrade.table("NODE")?;
    for name in names {
        let row = summary.iter().find(|r| r.first() == Some(&name.as_str()));
        ensure!(
            row.is_some_and(|r| r.get(1) != Some(&TARGET)
                && r.get(2) == Some(&TARGET)
                && r.get(3) == Some(&"upgraded")),
            "node {name} is not upgraded from another version to {TARGET} in the summary: \
             {row:?}\n{}",
            upgrade.stdout
        );
    }
    let totals = summary.last().map(|r| r.join(" ")).unwrap_or_default();
    ensure!(
        totals.starts_with("3 upgraded, 0 skipped, 0 failed, 0 stopped, 0 not started;")
            && totals.ends_with("; done"),
        "totals line {totals:?}"
    );
    let evicted: usize = (totals.split("; ").nth(1))
        .and_then(|t| t.strip_suffix(" pods evicted"))
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| Failure(format!("no pods evicted in the totals line {totals:?}")))?;
    ensure!(
        evicted >= REPLICAS as usize,
        "every replica must have been evicted once at least: {totals:?}"
    );
    // What the cluster says, as an administrator; and each node's kubelet's version, which
    // `status` shows.
    let node_api = Api::<Node>::all(admin.clone());
    let mut kubelet_versions = Vec::new();
    for name in names {
        let node = node_api
            .get(name)
            .await
            .map_err(|e| Failure(format!("reading node {name}: {e}")))?;
        let kubelet = upgrade_driver::version::version(&node, &VersionSource::KubeletVersion);
        kubelet_versions.push(kubelet.unwrap_or_default().to_string());
        let version = upgrade_driver::version::version(&node, &source);
        ensure!(
            version == Some(TARGET),
            "node {name} reports {version:?}, not {TARGET}"
        );
        ensure!(nodejob_core::ready(&node), "node {name} is not Ready");
        ensure!(
            !records::unschedulable(&node),
            "node {name} is left cordoned"
        );
    }
    deployment_available(admin, namespace, APP, REPLICAS, SETTLE, "after the roll").await?;

    // `run`: the node agent plays the argv's `nodejob-test:` directives: this log line, this
    // exit code; a real node runs the shell command beside them, which does the same.
    let said = format!("hello from {control}");
    let log = format!("nodejob-test:log={said}");
    let code = format!("nodejob-test:exit={RUN_EXIT}");
    let shell = format!("echo {said}; exit {RUN_EXIT}");
    let failing = nodejob(
        kc,
        CONTEXT,
        &[
            "run",
            "--node",
            control,
            "--deadline",
            "2m",
            "--",
            "/bin/sh",
            "-c",
            &shell,
            &log,
            &code,
        ],
    )
    .await?;
    failing.exited(RUN_EXIT)?;
    ensure!(
        failing.stdout.lines().any(|l| l == said),
        "`{}` must print its Pod's log {said:?}: {:?}",
        failing.line,
        failing.stdout
    );
    let succeeding = nodejob(
        kc,
        CONTEXT,
        &[
            "run",
            "--node",
            zone_a,
            "--exit-code-only",
            "--",
            // The Job image's shell (a real node's stand-in image has no `true`).
            "/bin/sh",
            "-c",
            "exit 0",
            "nodejob-test:exit=0",
            "nodejob-test:log=not shown",
        ],
    )
    .await?;
    succeeding.exited(0)?;
    ensure!(
        succeeding.stdout.is_empty(),
        "`{}` must print nothing: {:?}",
        succeeding.line,
        succeeding.stdout
    );

    // `jobs`, of the scenario's nodes: see `left_jobs`.
    let jobs = nodejob(kc, CONTEXT, &["jobs"]).await?;
    let rows: Vec<JobRow> = (jobs.exited(0)?.table("NAME")?.into_iter())
        .filter(|r| r.len() >= 4 && names.iter().any(|n| n == r[1]))
        .map(|r| JobRow {
            name: r[0].into(),
            node: r[1].into(),
            status: r[2].into(),
            exit: Some(r[3].into()).filter(|e| e != "-"),
        })
        .collect();
    left_jobs(&rows, control, zone_a).map_err(|Failure(e)| Failure(format!("jobs: {e}")))?;
    let jobs_json = nodejob(kc, CONTEXT, &["jobs", "--output", "json"]).await?;
    let objects: Vec<Value> = (jobs_json.exited(0)?.json_items()?.into_iter())
        .filter(|r| (r["node"].as_str()).is_some_and(|n| names.iter().any(|m| m == n)))
        .collect();
    let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
    let rows: Vec<JobRow> = (objects.iter())
        .map(|r| JobRow {
            name: text(&r["name"]),
            node: text(&r["node"]),
            status: text(&r["status"]),
            exit: r["exit_code"].as_i64().map(|c| c.to_string()),
        })
        .collect();
    left_jobs(&rows, control, zone_a)
        .map_err(|Failure(e)| Failure(format!("jobs --output json: {e}")))?;
    let failed = objects.iter().find(|r| r["node"] == json!(control));
    ensure!(
        failed.is_some_and(|r| r["namespace"] == json!(SA_NAMESPACE)
            && r["label"] == json!("stratum.ciq.com/run")
            && r["disrupted"] == json!(false)),
        "jobs --output json: the failed run's Job {failed:?}"
    );

    // `status`: the three nodes upgraded by us to the target, each at its kubelet's version
    // (the agent's moved to the target, a real one's did not), and the Lease released.
    let status = nodejob(kc, CONTEXT, &["status"]).await?;
    status.exited(0)?;
    let lease = status.stdout.lines().next().unwrap_or_default();
    let free = format!("lease {SA_NAMESPACE}/nodejob: free (last: upgrade {TARGET},");
    ensure!(lease.starts_with(&free), "status: lease line {lease:?}");
    let rows = status.table("NODE")?;
    for (name, kubelet) in names.iter().zip(&kubelet_versions) {
        let row = rows.iter().find(|r| r.first() == Some(&name.as_str()));
        // NODE VERSION READY CORDONED CA UPGRADE...
        let ok = row.is_some_and(|r| {
            r.get(1..4) == Some(&[kubelet.as_str(), "yes", "no"][..])
                && r.get(5..8) == Some(&["upgraded", "to", TARGET][..])
        });
        ensure!(
            ok,
            "status: node {name} must be at {kubelet}, Ready, uncordoned and upgraded to \
             {TARGET}: {row:?}\n{}",
            status.stdout
        );
    }
    let status_json = nodejob(kc, CONTEXT, &["status", "-o", "json"]).await?;
    let lines = status_json.exited(0)?.json_lines()?;
    ensure!(lines.len() == 1, "status -o json: {} lines", lines.len());
    let lease = &lines[0]["lease"];
    ensure!(
        lease["name"] == json!(format!("{SA_NAMESPACE}/nodejob"))
            && lease["holder"].is_null()
            && lease["operation"] == json!("upgrade")
            && lease["target"] == json!(TARGET),
        "status -o json: lease {lease}"
    );
    for (name, kubelet) in names.iter().zip(&kubelet_versions) {
        let node =
            (lines[0]["nodes"].as_array().into_iter().flatten()).find(|n| n["node"] == json!(name));
        let ok = node.is_some_and(|n| {
            n["version"] == json!(kubelet)
                && n["ready"] == json!(true)
                && n["cordoned"] == json!(false)
                && n["in_progress"].is_null()
                && n["upgrade_state"] == json!("upgraded")
                && n["done"]["version"] == json!(TARGET)
        });
        ensure!(ok, "status -o json: node {name}: {node:?}");
    }

    // `upgrade --preview` to the same target: every node skipped, nothing to do.
    let preview = upgrade_to_target(kc, kubelets, &nodes, &["--preview"]).await?;
    preview.exited(0)?;
    let lines: Vec<&str> = preview.stdout.lines().collect();
    ensure!(
        lines.contains(&"lease: free") && !lines.iter().any(|l| l.starts_with("batch ")),
        "preview: {:?}",
        preview.stdout
    );
    for name in names {
        let skip = format!("skip {name}: ");
        ensure!(
            lines.iter().any(|l| l.starts_with(&skip)),
            "preview must skip {name}: {:?}",
            preview.stdout
        );
    }
    let preview_json =
        upgrade_to_target(kc, kubelets, &nodes, &["--preview", "-o", "json"]).await?;
    let lines = preview_json.exited(0)?.json_lines()?;
    let p = lines.first().cloned().unwrap_or_default();
    let mut skipped: Vec<&str> = (p["skipped"].as_array().into_iter().flatten())
        .filter_map(|s| s[0].as_str())
        .collect();
    skipped.sort_unstable();
    let mut want: Vec<&str> = names.iter().map(String::as_str).collect();
    want.sort_unstable();
    ensure!(
        lines.len() == 1
            && skipped == want
            && p["nodes"] == json!([])
            && p["batches"] == json!([])
            && p["lease"].is_null(),
        "upgrade --preview -o json: {p}"
    );
    no_run_on_a_busy_node(kc, admin, zone_b).await?;
    a_kept_job_outlives_a_drain(kc, kubelets, admin, namespace, control).await?;
    a_refused_drain_leaves_the_node_untouched(kc, kubelets, admin, namespace, zone_a).await?;
    trio.remove().await
}

/// The version the second rolls of the scenario go to.
const TARGET2: &str = "v1.99.0";

/// Issue 33, item 13: `run` on a node an upgrade is in flight on (its in-progress record, as a
/// roll writes it) is refused, exit 3, naming the upgrade, with no Job created; `--force`
/// goes on.
async fn no_run_on_a_busy_node(kc: &Path, admin: &kube::Client, node: &str) -> Result<(), Failure> {
    let record =
        json!({"target": TARGET2, "bootID": "e2e", "epoch": 0, "cordoned": false}).to_string();
    annotate_node(admin, node, records::IN_PROGRESS, Some(&record)).await?;
    let argv = ["--", "/bin/sh", "-c", "exit 0", "nodejob-test:exit=0"];
    let refused = nodejob(kc, CONTEXT, &[&["run", "--node", node][..], &argv].concat()).await?;
    refused.exited(3)?;
    let said = format!("--node {node}: a roll is under way on it: an upgrade to {TARGET2} is in");
    ensure!(
        refused.stderr.contains(&said) && refused.stderr.contains("no Job was created"),
        "`{}`: {}",
        refused.line,
        refused.stderr
    );
    let jobs = Api::<Job>::namespaced(admin.clone(), SA_NAMESPACE);
    let created = (jobs.get_opt(&run_job(node)).await)
        .map_err(|e| Failure(format!("reading job {}: {e}", run_job(node))))?;
    ensure!(created.is_none(), "a refused run created {created:?}");
    let forced = [
        &["run", "--node", node, "--force", "--exit-code-only"][..],
        &argv,
    ]
    .concat();
    nodejob(kc, CONTEXT, &forced).await?.exited(0)?;
    annotate_node(admin, node, records::IN_PROGRESS, None).await
}

/// `nodejob upgrade` of `node` alone to [`TARGET2`], its version read as `kubelets` report it.
fn roll_to_target2(kubelets: Kubelets, node: &str) -> [&str; 8] {
    [
        "upgrade",
        "--to",
        TARGET2,
        "--allow-skew",
        "--version-from",
        kubelets.version_from(),
        "--nodes",
        node,
    ]
}

/// Issue 33, item 14: the Job a failed `run` kept on `node` outlives a roll's drain of it:
/// the preview says the drain leaves its Pod, and after the roll `jobs` still shows it Failed
/// with its exit code (read from that Pod). The drain evicted the Deployment's Pods there
/// ([`Drains`]).
async fn a_kept_job_outlives_a_drain(
    kc: &Path,
    kubelets: Kubelets,
    admin: &kube::Client,
    namespace: &str,
    node: &str,
) -> Result<(), Failure> {
    let roll = roll_to_target2(kubelets, node);
    let preview = nodejob(kc, CONTEXT, &[&roll[..], &["--preview"]].concat()).await?;
    preview.exited(0)?;
    let leave = format!("  leave {SA_NAMESPACE}/{}-", run_job(node));
    ensure!(
        preview
            .stdout
            .lines()
            .any(|l| l.starts_with(&leave) && l.contains("kept for its exit code and log")),
        "preview: {}",
        preview.stdout
    );
    let bounds = ["--reboot-timeout", "60s", "--deadline", "2m"];
    let drains = Drains::watch(admin, namespace, APP).await?;
    nodejob(kc, CONTEXT, &[&roll[..], &bounds].concat())
        .await?
        .exited(0)?;
    let sa = format!("system:serviceaccount:{SA_NAMESPACE}:{SA_NAME}");
    let drained = drains.check(&[node.to_string()], REPLICAS - 1, &sa)?;
    eprintln!("cli ({kubelets:?}): the second roll drained {drained:?}");
    let jobs = nodejob(kc, CONTEXT, &["jobs", "--output", "json"]).await?;
    let kept =
        (jobs.exited(0)?.json_items()?.into_iter()).find(|r| r["name"] == json!(run_job(node)));
    ensure!(
        kept.as_ref()
            .is_some_and(|k| k["status"] == json!("Failed") && k["exit_code"] == json!(RUN_EXIT)),
        "the kept run's Job after the drain: {kept:?}"
    );
    Ok(())
}

/// Issue 33, item 17: a bare Pod (no controller) on `node`: the preview says the node would
/// fail at its drain and exits 1; the run fails it untouched (not cordoned) and its retry names
/// `--force`.
async fn a_refused_drain_leaves_the_node_untouched(
    kc: &Path,
    kubelets: Kubelets,
    admin: &kube::Client,
    namespace: &str,
    node: &str,
) -> Result<(), Failure> {
    let pods = Api::<Pod>::namespaced(admin.clone(), namespace);
    let bare = nodejob_conformance::workloads::bare_pod(namespace, "scratch", node, 1);
    (pods.create(&PostParams::default(), &bare).await)
        .map_err(|e| Failure(format!("creating the bare pod on {node}: {e}")))?;
    let roll = roll_to_target2(kubelets, node);
    let preview = nodejob(kc, CONTEXT, &[&roll[..], &["--preview"]].concat()).await?;
    preview.exited(1)?;
    ensure!(
        preview.stdout.contains(&format!(
            "  {node} would FAIL at its drain, left untouched (not cordoned): --force"
        )),
        "preview: {}",
        preview.stdout
    );
    let ran = nodejob(kc, CONTEXT, &roll).await?;
    ran.exited(1)?;
    ensure!(
        ran.stderr.contains("to take the Pods the drain refused")
            && ran
                .stderr
                .lines()
                .last()
                .is_some_and(|l| l.ends_with(" --force")),
        "`{}`: {}",
        ran.line,
        ran.stderr
    );
    let read = (Api::<Node>::all(admin.clone()).get(node).await)
        .map_err(|e| Failure(format!("reading node {node}: {e}")))?;
    ensure!(
        !records::unschedulable(&read)
            && !(read.metadata.annotations.unwrap_or_default()).contains_key(records::IN_PROGRESS),
        "node {node} was touched by a roll whose drain would be refused"
    );
    (pods.delete("scratch", &DeleteParams::default()).await)
        .map(drop)
        .map_err(|e| Failure(format!("deleting the bare pod: {e}")))
}

/// The built command, an admin client, and a kubeconfig of the committed RBAC's
/// ServiceAccount (its Role and bindings applied).
async fn as_the_service_account() -> Result<(kube::Client, KubeconfigFile), Failure> {
    cli()?;
    let admin = admin().await?;
    Rbac::committed()
        .apply(&admin, SA_NAME, &[SA_NAMESPACE])
        .await?;
    let kubeconfig = sa_kubeconfig(&admin, SA_NAME).await?;
    Ok((admin, kubeconfig))
}

/// A context the kubeconfig does not have: exit 2 (bad usage), naming the context.
async fn an_unknown_context_is_bad_usage_naming_it() -> Result<(), Failure> {
    let (_, kubeconfig) = as_the_service_account().await?;
    let missing = "nodejob-e2e-no-such-context";
    let ran = nodejob(&kubeconfig.path, missing, &["status"]).await?;
    ran.exited(2)?;
    ensure!(
        ran.stderr.contains(missing) && ran.stdout.is_empty(),
        "`{}` must name context {missing} on stderr: stdout {:?}, stderr {:?}",
        ran.line,
        ran.stdout,
        ran.stderr
    );
    Ok(())
}

/// `run --node` a node the cluster does not have: refused (exit 2) naming it, after reading
/// the node and before any Job is created (a Job pinned to it was left Failed).
async fn run_on_a_node_the_cluster_lacks_is_bad_usage_and_creates_no_job() -> Result<(), Failure> {
    let (admin, kubeconfig) = as_the_service_account().await?;
    let node = "nodejob-e2e-no-such-node";
    let ran = nodejob(
        &kubeconfig.path,
        CONTEXT,
        &["run", "--node", node, "--", "/bin/true"],
    )
    .await?;
    ran.exited(2)?;
    ensure!(
        ran.stderr.contains(&format!("--node {node}: no such node")) && ran.stdout.is_empty(),
        "`{}` must refuse node {node} on stderr: stdout {:?}, stderr {:?}",
        ran.line,
        ran.stdout,
        ran.stderr
    );
    let jobs: Api<k8s_openapi::api::batch::v1::Job> = Api::namespaced(admin, SA_NAMESPACE);
    let job = (jobs.get_opt(&run_job(node)).await)
        .map_err(|e| Failure(format!("reading job {}: {e}", run_job(node))))?;
    ensure!(
        job.is_none(),
        "`{}` created job {}",
        ran.line,
        run_job(node)
    );
    Ok(())
}

/// `pause` without `--by` records who the apiserver takes the kubeconfig's credentials for
/// (`kubectl auth whoami`: here the ServiceAccount), not `$USER@host`. In a namespace of its
/// own, so that no roll of the other tests meets the switch.
async fn pause_names_who_the_apiserver_takes_the_kubeconfig_for() -> Result<(), Failure> {
    cli()?;
    let admin = admin().await?;
    let ns = unique("nodejob-e2e-whoami");
    namespace(&admin, &ns, "privileged").await?;
    Rbac::committed().apply(&admin, SA_NAME, &[&ns]).await?;
    let kubeconfig = sa_kubeconfig(&admin, SA_NAME).await?;
    let paused = nodejob(
        &kubeconfig.path,
        CONTEXT,
        &["-n", &ns, "pause", "--reason", "whoami"],
    )
    .await?;
    paused.exited(0)?;
    let who = format!("system:serviceaccount:{SA_NAMESPACE}:{SA_NAME}");
    ensure!(
        paused.stdout.starts_with(&format!("paused by {who} at ")),
        "`{}` must name {who}: {}",
        paused.line,
        paused.stdout
    );
    let resumed = nodejob(&kubeconfig.path, CONTEXT, &["-n", &ns, "resume"]).await?;
    resumed.exited(0)?;
    Ok(())
}
