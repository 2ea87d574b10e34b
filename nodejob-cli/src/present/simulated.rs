//! What a simulated run says of itself first, so that no one takes it for a real cluster: the
//! cluster's shape, that its host programs are simulated, when its virtual clock starts and
//! how fast it is shown.

use serde::Serialize;

use crate::sim::{Setup, Shape, Speed};

/// The banner's lines: the cluster, then its clock.
///
/// `speed` is the pace of a run (`None` for what is not paced: a preview, `run`).
pub(crate) fn banner(setup: &Setup, speed: Option<Speed>) -> Vec<String> {
    let shape = Shape::of(setup.nodes);
    let mut parts = Vec::new();
    if shape.control_plane > 0 {
        parts.push(format!("{} control-plane", shape.control_plane));
    }
    if shape.workers > 0 {
        parts.push(format!(
            "{} worker{} in {}",
            shape.workers,
            if shape.workers == 1 { "" } else { "s" },
            shape.zones.join(" and ")
        ));
    }
    let clock = format!(
        "virtual clock from {}",
        setup.start.strftime("%a %Y-%m-%d %H:%M UTC")
    );
    vec![
        format!(
            "simulated cluster (--simulate {}): {} node{}, {}; its host programs are simulated",
            setup.nodes,
            setup.nodes,
            if setup.nodes == 1 { "" } else { "s" },
            parts.join(", ")
        ),
        match speed {
            None => clock,
            Some(Speed::Max) => format!("{clock}, shown as fast as it runs (--speed max)"),
            Some(Speed::Times(t)) => format!("{clock}, shown at {t}x real time (--speed {t})"),
        },
    ]
}

/// The banner as the first event of a JSON stream: `{"event": "simulated", ...}`.
#[derive(Debug, Serialize)]
pub(crate) struct SimulatedEvent {
    /// Always `simulated`.
    event: &'static str,
    /// N, of `--simulate N`.
    nodes: usize,
    /// Control-plane nodes.
    control_plane: usize,
    /// Workers.
    workers: usize,
    /// The workers' zones.
    zones: Vec<String>,
    /// When the virtual clock started, RFC 3339.
    clock_start: String,
    /// Virtual seconds per real second, or `max`.
    speed: String,
    /// Always `simulated`: no host program runs.
    host_programs: &'static str,
}

/// The JSON stream's first event of a run at `speed`.
pub(crate) fn event(setup: &Setup, speed: Speed) -> SimulatedEvent {
    let shape = Shape::of(setup.nodes);
    SimulatedEvent {
        event: "simulated",
        nodes: setup.nodes,
        control_plane: shape.control_plane,
        workers: shape.workers,
        zones: shape.zones,
        clock_start: setup.start.to_string(),
        speed: match speed {
            Speed::Max => "max".into(),
            Speed::Times(t) => t.to_string(),
        },
        host_programs: "simulated",
    }
}
