//! `nodejob jobs`: the node Jobs in the namespace (node, status, exit code, age), as a table
//! or, as `kubectl get -o json` prints a list, one JSON `List` of them (`.items[]`).

use super::{Banner, say_simulated};
use crate::args::{Format, Global, Jobs};
use crate::backend::{Backend, Prepare};
use crate::exit::Exit;
use crate::inspect::jobs::{Unlisted, gather};
use crate::present::jobs::text;

/// Runs `nodejob jobs`.
pub(crate) fn jobs(global: &Global, args: Jobs) -> Result<Exit, Exit> {
    let output = global.output.text_or_json("jobs")?;
    let selector = args.selector.unwrap_or_default();
    let ns = &global.namespace;
    let backend = Backend::new(global, args.sim.simulate)
        .clocked(None, args.sim.start.simulate_start)
        .prepared(Prepare::History(ns.clone()));
    backend.block_on(|t| async move {
        let listed = gather(&*t.api, ns, &selector).await.map_err(|e| match e {
            Unlisted::Selector(e) => Exit::usage(format!("--selector {selector:?}: {e}")),
            Unlisted::Failed(why) => Exit::failed(why),
        })?;
        say_simulated(&t, Banner::Stderr);
        if let Some(why) = &listed.pods_unread {
            eprintln!("{why}; exit codes unknown");
        }
        let rows = &listed.rows;
        if output == Format::Json {
            let list = List {
                api_version: "v1",
                kind: "List",
                items: rows,
            };
            outln!("{}", serde_json::to_string(&list).unwrap_or_default());
        } else if rows.is_empty() {
            eprint!("{}", text(rows, ns));
        } else {
            out!("{}", text(rows, ns));
        }
        Ok(Exit::ok())
    })
}

/// A list as kubectl prints one (`kubectl get -o json`), its items in their own order.
#[derive(serde::Serialize)]
struct List<'a, T> {
    #[serde(rename = "apiVersion")]
    api_version: &'static str,
    kind: &'static str,
    items: &'a [T],
}
