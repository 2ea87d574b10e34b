//! `max_unavailable` admission over a [`NodeView`] of the fake cluster: what it asks of the
//! driver's fleet per node stays flat as the cluster grows (each batch looks at the nodes that
//! changed, not at every node), and a node that changes mid-roll is judged again.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::Node;
use nodejob_core::lease::{Claim, LeaseConfig};
use nodejob_fake::FakeCluster;
use nodejob_roll::{
    Cursor, DriverEvent, Engine, EventSink, Fence, FenceEvent, Fleet, Group, Limits,
    MaxUnavailable, NodeEnd, NodeView, RollEvent, Stop, Tally,
};

type TestResult = Result<(), Box<dyn std::error::Error>>;

#[derive(Clone, Debug, PartialEq, Eq)]
enum Event {
    Batch(Vec<String>),
    Other,
}

impl DriverEvent for Event {
    fn note(_: &str, _: String) -> Self {
        Event::Other
    }
    fn lease(_: &FenceEvent) -> Self {
        Event::Other
    }
}

impl RollEvent for Event {
    fn batch_started(_: usize, _: &str, nodes: &[String]) -> Option<Self> {
        Some(Event::Batch(nodes.to_vec()))
    }
    fn notice(_: String) -> Self {
        Event::Other
    }
}

struct Ended;

impl NodeEnd for Ended {
    fn failed(&self) -> bool {
        false
    }
}

const ROLE: &str = "role";

/// A driver's fleet over the run's view: selects the nodes labelled `role=worker`, keeps those
/// selected and there; counts every judgement it is asked for.
struct Counting<'c> {
    cluster: &'c FakeCluster,
    view: NodeView,
    asked: AtomicUsize,
    dropped: Mutex<Vec<String>>,
}

#[async_trait]
impl Fleet for Counting<'_> {
    async fn changed(&self, since: &mut Cursor) -> Result<Vec<String>, String> {
        (self.view.refresh(self.cluster).await).map_err(|e| e.to_string())?;
        Ok(self.view.changed_since(since))
    }
    fn node(&self, name: &str) -> Option<Node> {
        self.asked.fetch_add(1, Ordering::Relaxed);
        self.view.node(name)
    }
    fn selects(&self, node: &Node) -> bool {
        self.asked.fetch_add(1, Ordering::Relaxed);
        let labels = node.metadata.labels.as_ref();
        labels
            .and_then(|l| l.get(ROLE))
            .is_some_and(|r| r == "worker")
    }
    fn keep(&self, name: &str, node: Option<&Node>, selected: bool) -> bool {
        self.asked.fetch_add(1, Ordering::Relaxed);
        let keep = node.is_some() && selected;
        if !keep {
            self.dropped.lock().unwrap().push(name.to_string());
        }
        keep
    }
    fn held(&self, _: &Node) -> bool {
        self.asked.fetch_add(1, Ordering::Relaxed);
        false
    }
    fn resumable(&self, _: &Node) -> bool {
        self.asked.fetch_add(1, Ordering::Relaxed);
        false
    }
    async fn wait_ready(&self, _: &str) {}
}

struct Rolled {
    batches: Vec<Vec<String>>,
    asked: usize,
    dropped: Vec<String>,
}

/// Rolls `n` worker nodes one at a time; each node's step takes it NotReady and back (two
/// changes the view sees), and `during` acts on the cluster within the first node's step.
async fn roll(
    n: usize,
    during: impl Fn(&FakeCluster),
) -> Result<Rolled, Box<dyn std::error::Error>> {
    let cluster = FakeCluster::new();
    let names: Vec<String> = (0..n).map(|i| format!("w-{i:04}")).collect();
    for name in &names {
        cluster.add_node(name)?;
        cluster.label_node(name, ROLE, "worker")?;
    }
    let config = LeaseConfig {
        namespace: "kube-system".into(),
        name: "nodejob".into(),
        identity: "admission-test".into(),
        duration: Duration::from_secs(60),
    };
    let claim = Claim {
        operation: "test".into(),
        target: "t".into(),
    };
    let fence = Fence::acquire(&cluster, &config, &claim, Box::new(|_: &FenceEvent| {})).await?;
    let fleet = Counting {
        cluster: &cluster,
        view: NodeView::list(&cluster).await?,
        asked: AtomicUsize::new(0),
        dropped: Mutex::default(),
    };
    let events: Arc<Mutex<Vec<Event>>> = Arc::default();
    let seen = events.clone();
    let sink: Arc<dyn EventSink<Event>> = Arc::new(move |e: &Event| {
        seen.lock().unwrap().push(e.clone());
    });
    let limits = Limits::new(Stop::new());
    let engine = Engine {
        api: &cluster,
        fence: &fence,
        limits: &limits,
        progress: sink.clone(),
    };
    let groups = [Group {
        name: "workers".into(),
        width: 1,
        nodes: names.clone(),
    }];
    let mut admission = MaxUnavailable::new(&fleet, 1, &groups, sink);
    let first = names[0].clone();
    let end = engine
        .pass(&mut Tally::default(), &groups, &mut admission, |name| {
            let cluster = &cluster;
            let during = &during;
            let first = &first;
            async move {
                cluster.set_node_ready(&name, false).unwrap();
                if &name == first {
                    during(cluster);
                }
                cluster.set_node_ready(&name, true).unwrap();
                Ended
            }
        })
        .await;
    assert_eq!(end, nodejob_roll::End::Done);
    let batches = (events.lock().unwrap().iter())
        .filter_map(|e| match e {
            Event::Batch(b) => Some(b.clone()),
            Event::Other => None,
        })
        .collect();
    let dropped = fleet.dropped.lock().unwrap().clone();
    Ok(Rolled {
        batches,
        asked: fleet.asked.load(Ordering::Relaxed),
        dropped,
    })
}

#[tokio::test(start_paused = true)]
async fn judgements_per_node_stay_flat_from_10_to_200_nodes_one_at_a_time() -> TestResult {
    let mut per_node = BTreeMap::new();
    for n in [10, 200] {
        let rolled = roll(n, |_| {}).await?;
        assert_eq!(rolled.batches.len(), n, "one node a batch");
        assert!(rolled.batches.iter().all(|b| b.len() == 1));
        per_node.insert(n, rolled.asked as f64 / n as f64);
    }
    // A pass over every node before each batch asks about 20 times as much per node at 200
    // nodes as at 10; a look at what changed asks the same.
    assert!(
        per_node[&200] <= per_node[&10] * 1.25,
        "judgements per node: {per_node:?}"
    );
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn a_node_deleted_or_relabelled_mid_roll_is_judged_again_and_dropped() -> TestResult {
    let rolled = roll(6, |cluster| {
        cluster.remove_node("w-0003").unwrap();
        cluster.label_node("w-0005", ROLE, "database").unwrap();
    })
    .await?;
    let started: Vec<&str> = (rolled.batches.iter().flatten())
        .map(String::as_str)
        .collect();
    assert_eq!(started, ["w-0000", "w-0001", "w-0002", "w-0004"]);
    assert_eq!(rolled.dropped, ["w-0003", "w-0005"]);
    Ok(())
}
