//! `nodejob jobs`: the node Jobs in the namespace (node, status, exit code, age), as a table
//! or, as `kubectl get -o json` prints a list, one JSON `List` of them (`.items[]`).

use super::{Banner, say_simulated};
use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use nodejob_core::{JobApi, delete_exact_and_wait};

use crate::args::{DryRun, Format, Global, Jobs};
use crate::backend::{Backend, Prepare};
use crate::exit::Exit;
use crate::inspect::jobs::{Row, State, gather};
use crate::present::Columns;
use crate::present::jobs::text;

/// Runs `nodejob jobs`.
pub(crate) fn jobs(global: &Global, args: Jobs) -> Result<Exit, Exit> {
    let output = global.output.text_or_json("jobs")?;
    let columns = match output {
        Format::Wide => Columns::Wide,
        _ => Columns::Narrow,
    };
    let selector = args.selector.unwrap_or_default();
    // Every namespace's: the empty namespace, as the API's cluster-wide list.
    let ns = match args.all_namespaces {
        true => "",
        false => global.namespace.as_str(),
    };
    let backend = Backend::new(global, args.sim.simulate)
        .clocked(None, args.sim.start.simulate_start)
        .prepared(Prepare::History(global.namespace.clone()));
    backend.block_on(|t| async move {
        let listed = gather(&*t.api, ns, &selector).await.map_err(|e| {
            if e.is_selector() {
                Exit::usage(format!("--selector {selector:?}: {e}"))
            } else {
                Exit::failed(e.to_string())
            }
        })?;
        say_simulated(&t, Banner::Stderr);
        if let Some(why) = &listed.pods_unread {
            eprintln!("{why}; exit codes unknown");
        }
        let rows = &listed.rows;
        if args.delete_failed {
            let dry_run = args.dry_run.is_some_and(|d| d != DryRun::None);
            return delete_failed(&*t.api, rows, args.older_than, dry_run, output).await;
        }
        if output == Format::Json {
            print_list(rows);
        } else if rows.is_empty() {
            eprint!("{}", text(rows, ns, columns));
        } else {
            out!("{}", text(rows, ns, columns));
        }
        Ok(Exit::ok())
    })
}

/// `jobs --delete-failed`: deletes each failed node Job of `rows` (failed at least
/// `older_than` ago, by its creation), exactly the Job listed; says each as kubectl says a
/// delete (`job.batch/NAME deleted`), or with `dry_run` what would be, deleting nothing.
/// A Job replaced or changed since it was listed is left and said; any left fails the
/// command (exit 1), naming them.
async fn delete_failed<A: JobApi + ?Sized>(
    api: &A,
    rows: &[Row],
    older_than: Option<Duration>,
    dry_run: bool,
    output: Format,
) -> Result<Exit, Exit> {
    let old_enough = |r: &&Row| {
        let min = older_than.map_or(0, |d| d.as_secs());
        r.age_seconds
            .is_some_and(|age| u64::try_from(age).unwrap_or(0) >= min)
    };
    let failed: Vec<&Row> = (rows.iter())
        .filter(|r| r.status == State::Failed)
        .filter(old_enough)
        .collect();
    let mut deleted = Vec::new();
    let mut left = Vec::new();
    for row in failed {
        if !dry_run {
            let job = Job {
                metadata: ObjectMeta {
                    name: Some(row.name.clone()),
                    namespace: Some(row.namespace.clone()),
                    uid: row.uid.clone(),
                    resource_version: row.resource_version.clone(),
                    ..ObjectMeta::default()
                },
                ..Job::default()
            };
            if let Err(e) = delete_exact_and_wait(api, &job).await {
                left.push(format!("job.batch/{}: {e}", row.name));
                continue;
            }
        }
        if output != Format::Json {
            let said = match row.exit_code {
                Some(code) => format!("node {}, exit {code}", row.node),
                None => format!("node {}", row.node),
            };
            let dry = if dry_run { "dry run; " } else { "" };
            outln!("job.batch/{} deleted ({dry}{said})", row.name);
        }
        deleted.push(row);
    }
    if output == Format::Json {
        print_list(&deleted);
    } else if deleted.is_empty() && left.is_empty() {
        eprintln!("no failed node job to delete");
    }
    if left.is_empty() {
        return Ok(Exit::ok());
    }
    Err(Exit::failed(format!(
        "left (replaced or changed since listed: run it again to see them as they are now): {}",
        left.join("; ")
    )))
}

/// `items` as one JSON `List` on stdout, as kubectl prints a list.
fn print_list<T: serde::Serialize>(items: &[T]) {
    let list = List {
        api_version: "v1",
        kind: "List",
        items,
    };
    outln!("{}", serde_json::to_string(&list).unwrap_or_default());
}

/// A list as kubectl prints one (`kubectl get -o json`), its items in their own order.
#[derive(serde::Serialize)]
struct List<'a, T> {
    #[serde(rename = "apiVersion")]
    api_version: &'static str,
    kind: &'static str,
    items: &'a [T],
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim;

    const NS: &str = "kube-system";

    /// `--delete-failed` deletes the failed node Jobs, exactly those, and leaves the running
    /// one; `--dry-run` deletes nothing; `--older-than` spares the younger ones.
    #[tokio::test(start_paused = true)]
    async fn delete_failed_deletes_the_failed_node_jobs_alone() {
        let names = sim::node_names(5);
        let faults = sim::history_faults(&names);
        let fake = sim::cluster(5, &faults).unwrap();
        sim::history(&fake, 5, NS).await.unwrap();
        let listed = || async { gather(&*fake, NS, "").await.unwrap().rows };
        let before = listed().await;
        let failed = |rows: &[Row]| rows.iter().filter(|r| r.status == State::Failed).count();
        assert_eq!(failed(&before), 2, "{before:?}");

        let dry = delete_failed(&*fake, &before, None, true, Format::Json).await;
        assert!(dry.is_ok());
        assert_eq!(listed().await.len(), before.len());

        let young = delete_failed(
            &*fake,
            &before,
            Some(Duration::from_secs(3600)),
            false,
            Format::Json,
        );
        assert!(young.await.is_ok());
        assert_eq!(listed().await.len(), before.len());

        delete_failed(&*fake, &before, None, false, Format::Json)
            .await
            .unwrap();
        let after = listed().await;
        assert_eq!(failed(&after), 0, "{after:?}");
        assert_eq!(after.len(), before.len() - 2, "{after:?}");
        assert!(
            after.iter().all(|r| r.status == State::Running),
            "{after:?}"
        );
    }

    /// `-A`: the empty namespace lists every namespace's node Jobs, each with its own.
    #[tokio::test(start_paused = true)]
    async fn every_namespace_is_listed_with_the_empty_one() {
        let names = sim::node_names(5);
        let faults = sim::history_faults(&names);
        let fake = sim::cluster(5, &faults).unwrap();
        sim::history(&fake, 5, NS).await.unwrap();
        sim::history(&fake, 5, "default").await.unwrap();
        let listed = |ns: &'static str| {
            let fake = fake.clone();
            async move { gather(&*fake, ns, "").await.unwrap().rows }
        };
        let (here, there, every) = (listed(NS).await, listed("default").await, listed("").await);
        assert!(!here.is_empty() && !there.is_empty());
        assert_eq!(every.len(), here.len() + there.len(), "{every:?}");
        for ns in [NS, "default"] {
            assert!(every.iter().any(|r| r.namespace == ns), "{every:?}");
        }
        // Their exit codes read as in one namespace: the Pods listed in every namespace too.
        let codes = |rows: &[Row]| rows.iter().filter(|r| r.exit_code.is_some()).count();
        assert_eq!(codes(&every), codes(&here) + codes(&there));
        let table = crate::present::jobs::text(&every, "", crate::present::Columns::Narrow);
        assert!(table.starts_with("NAMESPACE "), "{table}");
    }
}
