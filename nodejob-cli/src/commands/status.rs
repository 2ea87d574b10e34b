//! `nodejob status`: who holds the Lease, and each node's state from the drivers' records.

use super::{Banner, say_simulated};
use crate::args::{Format, Global, Status};
use crate::backend::{Backend, Prepare};
use crate::exit::Exit;
use crate::inspect::status::gather;
use crate::present::Columns;
use crate::present::status::{Named, text};

/// Runs `nodejob status`.
pub(crate) fn status(global: &Global, args: Status) -> Result<Exit, Exit> {
    let ns = &global.namespace;
    let backend = Backend::new(global, args.sim.simulate)
        .clocked(None, args.sim.start.simulate_start)
        .prepared(Prepare::History(ns.clone()));
    let names = args.nodes;
    backend.block_on(|t| async move {
        let status = gather(&*t.api, ns).await?;
        say_simulated(&t, Banner::Stderr);
        let (status, named) = match names.as_slice() {
            [] => (status, Named::None),
            names => (status.only(names)?, Named::These),
        };
        match global.output {
            // Through a `Value`: its keys sorted, as `status -o json` has always printed them.
            Format::Json => outln!("{}", serde_json::to_value(&status).unwrap_or_default()),
            Format::Yaml => out!(
                "{}",
                serde_saphyr::to_string(&status).map_err(|e| Exit::failed(e.to_string()))?
            ),
            Format::Text => out!("{}", text(&status, named, Columns::Narrow)),
            Format::Wide => out!("{}", text(&status, named, Columns::Wide)),
        }
        Ok(Exit::ok())
    })
}
