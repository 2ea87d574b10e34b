//! A simulated rolling upgrade of three nodes on the in-memory cluster, in virtual time: node by
//! node, wait for it to be Ready, run the privileged upgrade Job, gate on its exit code and log.
//! An earlier run left a finished Job behind on node-b; the guard replaces it exactly.
//!
//! Run: `cargo run -p nodejob-core --example simulated_rolling`

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use nodejob_core::{Clock, Level, Note, Spec, build, run_exit_code_logs, trunc_name, wait_ready};
use nodejob_fake::{FakeCluster, host};

fn spec(c: &FakeCluster, node: &str, host: &[String]) -> Spec {
    let clock = c.clone();
    let mut argv: Vec<String> = ["nsenter", "-t", "1", "-m", "-u", "-i", "-n", "-p", "--"]
        .map(String::from)
        .into();
    argv.extend(["stratum".into(), "upgrade".into(), "--to=9.6".into()]);
    argv.extend(host.iter().cloned());
    Spec {
        namespace: "kube-system".into(),
        name: trunc_name(&format!("stratum-upgrade-{node}")),
        node: node.into(),
        label_key: "stratum.ciq.com/upgrade".into(),
        container: "upgrade".into(),
        argv,
        active_deadline: Duration::from_secs(1800),
        poll_attempts: 360,
        kind: "per-node upgrade".into(),
        critical: true,
        image: None,
        output: Some(Arc::new(move |n: &Note| {
            let tag = if n.level == Level::Warn {
                "warn"
            } else {
                "info"
            };
            println!("[{:>7.1}s] {tag}: {}", clock.now().as_secs_f64(), n.message);
        })),
    }
}

#[tokio::main(flavor = "current_thread", start_paused = true)]
async fn main() -> ExitCode {
    let cluster = FakeCluster::with_seed(42);
    let nodes = ["node-a", "node-b", "node-c"];
    for node in nodes {
        cluster.add_node(node).expect("add node");
    }
    // An earlier, interrupted run left a finished Job on node-b.
    let stale = spec(
        &cluster,
        "node-b",
        &[host::log("9.5 -> 9.6: done"), host::exit(0)],
    );
    cluster.create_job_now(&build(&stale)).expect("stale job");
    tokio::time::sleep(Duration::from_secs(60)).await;

    for node in nodes {
        let host = [
            host::log(format!("{node}: staging 9.6")),
            host::run(Duration::from_secs(90)),
            host::log(format!("{node}: upgraded, reboot pending")),
            host::exit(0),
        ];
        let spec = spec(&cluster, node, &host);
        if let Err(e) = wait_ready(&cluster, node, 60).await {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
        match run_exit_code_logs(&cluster, &spec).await {
            Ok((0, log)) => {
                for line in log.lines() {
                    println!("          {node} | {line}");
                }
            }
            Ok((code, log)) => {
                eprintln!("error: {node} upgrade exited with {code}; stopping the roll\n{log}");
                return ExitCode::FAILURE;
            }
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    println!(
        "rolled {} nodes in {:.0}s of virtual time, {} API calls",
        nodes.len(),
        cluster.now().as_secs_f64(),
        cluster.calls().len()
    );
    ExitCode::SUCCESS
}
