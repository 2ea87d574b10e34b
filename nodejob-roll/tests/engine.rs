//! The engine on the fake cluster: the order, the limits (budget, stop, window; a sleep cut
//! short by a stop), a fixed-width pass, the failure budget carried from pass to pass, and a
//! pass that ends when the Lease is lost mid-batch.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use jiff::civil::{Time, Weekday};
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use nodejob_core::Clock;
use nodejob_core::lease::{Claim, LeaseConfig};
use nodejob_fake::FakeCluster;
use nodejob_roll::{
    CONTROL_PLANE_LABEL, DriverEvent, End, Engine, EventSink, Fence, FenceEvent, FixedWidth, Group,
    Limits, NodeEnd, Order, RollEvent, Slept, Stop, Tally, Window, ZONE_LABEL, batches,
};

type TestResult = Result<(), Box<dyn std::error::Error>>;

#[derive(Clone, Debug, PartialEq, Eq)]
enum Event {
    Batch(usize, String, Vec<String>),
    Notice(String),
    Note(String, String),
    Lease,
}

impl DriverEvent for Event {
    fn note(node: &str, message: String) -> Self {
        Event::Note(node.into(), message)
    }
    fn lease(_: &FenceEvent) -> Self {
        Event::Lease
    }
}

impl RollEvent for Event {
    fn batch_started(index: usize, group: &str, nodes: &[String]) -> Option<Self> {
        Some(Event::Batch(index, group.into(), nodes.to_vec()))
    }
    fn notice(message: String) -> Self {
        Event::Notice(message)
    }
}

struct Ended(bool);

impl NodeEnd for Ended {
    fn failed(&self) -> bool {
        self.0
    }
}

fn node(name: &str, labels: &[(&str, &str)]) -> Node {
    Node {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some(
                (labels.iter())
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect::<BTreeMap<_, _>>(),
            ),
            ..ObjectMeta::default()
        },
        ..Node::default()
    }
}

fn names(g: &Group) -> Vec<&str> {
    g.nodes.iter().map(String::as_str).collect()
}

#[test]
fn the_order_is_carried_on_then_control_plane_one_at_a_time_then_workers() {
    let nodes = [
        node("w2", &[(ZONE_LABEL, "b")]),
        node("cp2", &[(CONTROL_PLANE_LABEL, "")]),
        node("w1", &[(ZONE_LABEL, "a")]),
        node("w3", &[]),
        node("cp1", &[(CONTROL_PLANE_LABEL, "")]),
        node("w0", &[(ZONE_LABEL, "b")]),
    ];
    let refs: Vec<&Node> = nodes.iter().collect();
    let carried = |n: &Node| n.metadata.name.as_deref() == Some("w3");

    let plain = Order::Workers.groups(&refs, 2, carried);
    let summary: Vec<(&str, usize, Vec<&str>)> = (plain.iter())
        .map(|g| (g.name.as_str(), g.width, names(g)))
        .collect();
    assert_eq!(
        summary,
        vec![
            ("carried on", 2, vec!["w3"]),
            ("control-plane", 1, vec!["cp1", "cp2"]),
            ("workers", 2, vec!["w0", "w1", "w2"]),
        ]
    );
    let zoned = Order::ByZone.groups(&refs, 2, |_| false);
    let summary: Vec<(&str, Vec<&str>)> = (zoned.iter())
        .map(|g| (g.name.as_str(), names(g)))
        .collect();
    assert_eq!(
        summary,
        vec![
            ("control-plane", vec!["cp1", "cp2"]),
            ("zone a", vec!["w1"]),
            ("zone b", vec!["w0", "w2"]),
            ("no zone", vec!["w3"]),
        ]
    );
    let at_full_width: Vec<Vec<String>> = batches(&plain).into_iter().map(|(_, b)| b).collect();
    assert_eq!(
        at_full_width,
        vec![
            vec!["w3".to_string()],
            vec!["cp1".into()],
            vec!["cp2".into()],
            vec!["w0".into(), "w1".into()],
            vec!["w2".into()],
        ]
    );
}

#[test]
fn the_limits_name_the_budget_then_a_stop_then_the_window() -> TestResult {
    let stop = Stop::new();
    let window = Window {
        days: vec![Weekday::Monday],
        start: Time::constant(2, 0, 0, 0),
        end: Time::constant(4, 0, 0, 0),
        time_zone: "UTC".into(),
    };
    let tz = window.validate()?;
    let limits = Limits {
        failure_budget: 2,
        window: Some((window, tz)),
        ..Limits::new(stop.clone())
    };
    // Monday 2026-11-30 03:00 UTC: inside; 05:00: outside.
    let inside: jiff::Timestamp = "2026-11-30T03:00:00Z".parse()?;
    let outside: jiff::Timestamp = "2026-11-30T05:00:00Z".parse()?;
    assert_eq!(limits.why_not(1, inside), None);
    let closed = limits
        .why_not(1, outside)
        .ok_or("the window is closed at 05:00")?;
    assert!(
        closed == "outside the maintenance window; it next opens at 2026-12-07 02:00 UTC",
        "{closed}"
    );
    stop.request();
    assert_eq!(
        limits.why_not(1, outside).as_deref(),
        Some("as asked; the nodes in flight finished their step")
    );
    assert_eq!(
        limits.why_not(2, outside).as_deref(),
        Some("2 node(s) failed: the failure budget (2) is spent")
    );
    Ok(())
}

#[test]
fn a_window_is_refused_with_the_field_that_is_wrong() {
    let window = |days: Vec<Weekday>, end: i8, tz: &str| Window {
        days,
        start: Time::constant(2, 0, 0, 0),
        end: Time::constant(end, 0, 0, 0),
        time_zone: tz.into(),
    };
    let field = |w: Window| w.validate().err().map(|e| e.field);
    assert_eq!(field(window(vec![], 4, "UTC")), Some("window.days"));
    assert_eq!(
        field(window(vec![Weekday::Friday], 2, "UTC")),
        Some("window.end")
    );
    assert_eq!(
        field(window(vec![Weekday::Friday], 4, "Mars/Olympus")),
        Some("window.time_zone")
    );
    assert_eq!(field(window(vec![Weekday::Friday], 4, "+02:00")), None);
}

#[tokio::test(start_paused = true)]
async fn a_stop_cuts_a_sleep_of_the_limits_short() {
    let cluster = FakeCluster::new();
    let limits = Limits::new(Stop::new());
    let started = cluster.now();
    let asker = limits.stop.clone();
    let clock = cluster.clone();
    let (slept, ()) =
        futures::future::join(limits.sleep(&cluster, Duration::from_secs(3600)), async {
            clock.sleep(Duration::from_secs(5)).await;
            asker.request();
        })
        .await;
    assert_eq!(slept, Slept::Stopped);
    let took = cluster.now() - started;
    assert!(took < Duration::from_secs(60), "the sleep took {took:?}");
    // A stop asked already ends the next sleep at once; without one, a sleep elapses.
    assert_eq!(
        limits.sleep(&cluster, Duration::from_secs(3600)).await,
        Slept::Stopped
    );
    let free = Limits::new(Stop::new());
    assert_eq!(
        free.sleep(&cluster, Duration::from_secs(1)).await,
        Slept::Elapsed
    );
}

struct Run {
    cluster: FakeCluster,
    fence: Fence,
    events: Arc<Mutex<Vec<Event>>>,
}

async fn run() -> Result<Run, Box<dyn std::error::Error>> {
    let cluster = FakeCluster::new();
    let config = LeaseConfig {
        namespace: "kube-system".into(),
        name: "nodejob".into(),
        identity: "engine-test".into(),
        duration: Duration::from_secs(60),
    };
    let claim = Claim {
        operation: "test".into(),
        target: "t".into(),
    };
    let fence = Fence::acquire(&cluster, &config, &claim, Box::new(|_: &FenceEvent| {})).await?;
    Ok(Run {
        cluster,
        fence,
        events: Arc::default(),
    })
}

impl Run {
    fn engine<'a>(&'a self, limits: &'a Limits) -> Engine<'a, FakeCluster, Event> {
        let events = self.events.clone();
        let sink: Arc<dyn EventSink<Event>> = Arc::new(move |e: &Event| {
            events.lock().unwrap().push(e.clone());
        });
        Engine {
            api: &self.cluster,
            fence: &self.fence,
            limits,
            progress: sink,
        }
    }

    fn events(&self) -> Vec<Event> {
        self.events.lock().unwrap().clone()
    }
}

fn group(name: &str, width: usize, nodes: &[&str]) -> Group {
    Group {
        name: name.into(),
        width,
        nodes: nodes.iter().map(|n| n.to_string()).collect(),
    }
}

#[tokio::test(start_paused = true)]
async fn a_fixed_width_pass_stops_once_the_failure_budget_is_spent_and_carries_it_on() -> TestResult
{
    let run = run().await?;
    let limits = Limits {
        failure_budget: 2,
        ..Limits::new(Stop::new())
    };
    let engine = run.engine(&limits);
    let groups = [
        group("control-plane", 1, &["cp1"]),
        group("workers", 2, &["w1", "w2", "w3", "w4"]),
    ];
    let stepped = Mutex::new(Vec::new());
    let mut tally = Tally::default();
    let end = engine
        .pass(&mut tally, &groups, &mut FixedWidth, |name| {
            stepped.lock().unwrap().push(name.clone());
            async move { Ended(name == "cp1" || name == "w2") }
        })
        .await;
    let why = "2 node(s) failed: the failure budget (2) is spent".to_string();
    assert_eq!(end, End::Stopping(why.clone()));
    assert_eq!(stepped.into_inner().unwrap(), ["cp1", "w1", "w2"]);
    assert_eq!(
        tally,
        Tally {
            failed: 2,
            batches: 2,
            blocked: 0
        }
    );
    assert_eq!(
        run.events(),
        vec![
            Event::Batch(0, "control-plane".into(), vec!["cp1".into()]),
            Event::Batch(1, "workers".into(), vec!["w1".into(), "w2".into()]),
        ]
    );
    // A later pass of the same run (a rotation's next phase) starts nothing.
    let end = engine
        .pass(&mut tally, &groups, &mut FixedWidth, |_| async {
            Ended(false)
        })
        .await;
    assert_eq!(end, End::Stopping(why));
    assert_eq!(tally.batches, 2);
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn a_pass_ends_after_the_batch_in_which_the_lease_was_lost() -> TestResult {
    let run = run().await?;
    let limits = Limits::new(Stop::new());
    let engine = run.engine(&limits);
    let groups = [group("workers", 2, &["w1", "w2", "w3", "w4"])];
    let mut tally = Tally::default();
    let end = engine
        .pass(&mut tally, &groups, &mut FixedWidth, |name| {
            let run = &run;
            async move {
                if name == "w2" {
                    run.cluster
                        .steal_lease("kube-system", "nodejob", "someone-else")
                        .expect("stealing the Lease");
                    assert!(
                        run.fence.check(&run.cluster).await.is_err(),
                        "the Lease is lost"
                    );
                }
                Ended(false)
            }
        })
        .await;
    let End::LeaseLost(lost) = end else {
        return Err(format!("the pass ended {end:?}").into());
    };
    assert!(!lost.why.is_empty(), "{lost:?}");
    assert_eq!(
        lost.to_string(),
        format!("the Lease was lost: {}", lost.why)
    );
    assert_eq!(
        tally.batches, 1,
        "no batch after the one in which the Lease was lost"
    );
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn a_stop_requested_during_a_batch_starts_no_other() -> TestResult {
    let run = run().await?;
    let stop = Stop::new();
    let limits = Limits::new(stop.clone());
    let engine = run.engine(&limits);
    let groups = [group("workers", 1, &["w1", "w2"])];
    let mut tally = Tally::default();
    let end = engine
        .pass(&mut tally, &groups, &mut FixedWidth, |_| {
            stop.request();
            async { Ended(false) }
        })
        .await;
    assert_eq!(
        end,
        End::Stopping("as asked; the nodes in flight finished their step".into())
    );
    assert_eq!(tally.batches, 1);
    Ok(())
}

/// A node cut short where a step would begin (by a stop), neither failed nor done.
struct Interrupted;

impl NodeEnd for Interrupted {
    fn failed(&self) -> bool {
        false
    }

    fn interrupted(&self) -> bool {
        true
    }
}

/// Found by the upgrade's exhaustive actor soak: a stop asked during the last batch, whose
/// node it cut short, ended the pass as done, though its queue was empty only because that
/// node had been taken from it. The pass ends stopping; with no node interrupted, done.
#[tokio::test(start_paused = true)]
async fn a_stop_that_cut_short_a_node_of_the_last_batch_ends_the_pass_stopping() -> TestResult {
    let run = run().await?;
    let stop = Stop::new();
    let limits = Limits::new(stop.clone());
    let engine = run.engine(&limits);
    let groups = [group("workers", 1, &["w1"])];
    let end = engine
        .pass(&mut Tally::default(), &groups, &mut FixedWidth, |_| {
            stop.request();
            async { Interrupted }
        })
        .await;
    assert_eq!(
        end,
        End::Stopping("as asked; the nodes in flight finished their step".into())
    );
    // Asked during the last batch, whose node finished its step and ended well: done.
    let stop = Stop::new();
    let limits = Limits::new(stop.clone());
    let engine = run.engine(&limits);
    let end = engine
        .pass(&mut Tally::default(), &groups, &mut FixedWidth, |_| {
            stop.request();
            async { Ended(false) }
        })
        .await;
    assert_eq!(end, End::Done);
    Ok(())
}

/// A node that was blocked (its drain held by budgets), neither failed nor done.
struct Blocked;

impl NodeEnd for Blocked {
    fn failed(&self) -> bool {
        false
    }

    fn blocked(&self) -> bool {
        true
    }
}

#[tokio::test(start_paused = true)]
async fn blocked_nodes_past_max_blocked_stop_the_pass_apart_from_the_failure_budget() -> TestResult
{
    let run = run().await?;
    let limits = Limits {
        max_blocked: 1,
        ..Limits::new(Stop::new())
    };
    let engine = run.engine(&limits);
    let groups = [group("workers", 1, &["w1", "w2", "w3", "w4"])];
    let stepped = Mutex::new(Vec::new());
    let mut tally = Tally::default();
    let end = engine
        .pass(&mut tally, &groups, &mut FixedWidth, |name| {
            stepped.lock().unwrap().push(name.clone());
            async { Blocked }
        })
        .await;
    // One blocked node is within max_blocked; the second is past it: no third starts.
    assert_eq!(
        end,
        End::Stopping(
            "2 node(s) blocked by budgets allowing no disruption: more than the plan allows (at most 1 \
             blocked)".into()
        )
    );
    assert_eq!(stepped.into_inner()?, ["w1", "w2"]);
    assert_eq!((tally.blocked, tally.failed), (2, 0));
    // A pass that starts past it (blocked nodes an earlier run left) starts nothing.
    let mut past = Tally {
        blocked: 2,
        ..Tally::default()
    };
    let end = engine
        .pass(&mut past, &groups, &mut FixedWidth, |_| async {
            Ended(false)
        })
        .await;
    assert!(matches!(end, End::Stopping(_)), "{end:?}");
    assert_eq!(past.batches, 0);
    Ok(())
}

/// Issue 30, item 1: an Event is a write, fenced as every other: once another identity took
/// the Lease, [`Context::event`] writes nothing, though no check of the run had seen it yet.
#[tokio::test(start_paused = true)]
async fn an_event_is_not_written_once_another_identity_took_the_lease() -> TestResult {
    let cluster = FakeCluster::new();
    cluster.add_node("w1")?;
    let placement = nodejob_roll::Placement::new("engine-test".into());
    let claim = Claim {
        operation: "test".into(),
        target: "t".into(),
    };
    let events: Arc<Mutex<Vec<Event>>> = Arc::default();
    let told = events.clone();
    let sink: Arc<dyn EventSink<Event>> =
        Arc::new(move |e: &Event| told.lock().unwrap().push(e.clone()));
    let ctx: nodejob_roll::Context<'_, FakeCluster, Event, ()> = nodejob_roll::Context::begin(
        &cluster,
        &placement,
        &claim,
        Limits::new(Stop::new()),
        sink,
        cluster.now(),
    )
    .await?;
    let ns = placement.namespace.as_str();
    let source = nodejob_roll::Source {
        namespace: ns,
        component: "engine-test",
    };
    ctx.event(
        nodejob_roll::EventFence::Read,
        source,
        "w1",
        nodejob_core::EventType::Normal,
        "Held",
        "ours",
    )
    .await;
    assert_eq!(cluster.events(ns).len(), 1, "the Event of the holder");
    cluster.steal_lease(ns, &placement.lease_name, "someone-else")?;
    assert_eq!(ctx.fence.lost(), None, "no check has seen the theft yet");
    ctx.event(
        nodejob_roll::EventFence::Read,
        source,
        "w1",
        nodejob_core::EventType::Normal,
        "Late",
        "not ours",
    )
    .await;
    let reasons: Vec<Option<String>> = (cluster.events(ns).into_iter()).map(|e| e.reason).collect();
    assert_eq!(
        reasons,
        [Some("Held".to_string())],
        "written after the theft"
    );
    assert!(
        ctx.fence.lost().is_some(),
        "the Event's check did not see the Lease lost"
    );
    Ok(())
}
