//! `--register N`: the agent registers N Nodes of its own, as N kubelets would (and as
//! kubemark's hollow nodes do), then plays them as any Node labelled
//! `nodejob.test/agent=true`.
//!
//! Each registration is the kubelet's (`registerWithAPIServer` and `tryRegisterWithAPIServer`
//! in `pkg/kubelet/kubelet_node_status.go`, v1.37.2): a `POST` of the Node, tried again after
//! 100 ms, doubling up to 7 s, until it passes; a Node of that name that exists already is
//! read and taken over, its default labels (`updateDefaultLabels`: hostname, zone, os, arch)
//! and the agent's label set as this registration has them. The Node is created without a
//! status: the node worker posts it once the agent's watch brings the Node.
//!
//! The Node `PREFIX-0000`, `PREFIX-0001`, … carries the kubelet's default labels
//! (`kubernetes.io/hostname`, `kubernetes.io/os`, `kubernetes.io/arch`, from `initialNode`), the
//! agent's label, `--node-labels` (the kubelet's flag), and with `--zones` the zone of its
//! index among them, round robin (`topology.kubernetes.io/zone`, a cloud provider's label,
//! which the kubelet also counts among the default ones).

use std::collections::BTreeMap;
use std::future::Future;
use std::time::Duration;

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use tokio::time::sleep;

use crate::writer::WriteError;

/// The label that hands a Node to the agent, as key and value.
pub(crate) const AGENT_LABEL: (&str, &str) = ("nodejob.test/agent", "true");
/// `v1.LabelHostname`.
const HOSTNAME_LABEL: &str = "kubernetes.io/hostname";
/// `v1.LabelTopologyZone`.
const ZONE_LABEL: &str = "topology.kubernetes.io/zone";
/// `v1.LabelOSStable`, `v1.LabelArchStable`, with what the agent's nodes report.
const OS_LABELS: [(&str, &str); 2] = [
    ("kubernetes.io/os", "linux"),
    ("kubernetes.io/arch", "amd64"),
];
/// The first pause of a registration tried again; it doubles up to [`MAX_STEP`].
const FIRST_STEP: Duration = Duration::from_millis(100);
const MAX_STEP: Duration = Duration::from_secs(7);
/// Registrations in flight at once: as many kubelets starting together.
const CONCURRENCY: usize = 16;

/// What `--register` and its companions ask for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Registration {
    /// How many nodes.
    pub(crate) count: usize,
    /// Their names' prefix.
    pub(crate) prefix: String,
    /// `--node-labels`.
    pub(crate) labels: BTreeMap<String, String>,
    /// `--zones`, round robin; empty: no zone label.
    pub(crate) zones: Vec<String>,
}

impl Registration {
    /// The name of the `i`th node: the prefix, a dash, `i` in at least four digits.
    pub(crate) fn name(&self, i: usize) -> String {
        let width = self.count.saturating_sub(1).to_string().len().max(4);
        format!("{}-{i:0width$}", self.prefix)
    }

    /// The `i`th node as registered.
    pub(crate) fn node(&self, i: usize) -> Node {
        let name = self.name(i);
        let mut labels = self.defaults(&name, i);
        labels.insert(AGENT_LABEL.0.to_string(), AGENT_LABEL.1.to_string());
        for (k, v) in &self.labels {
            labels.insert(k.clone(), v.clone());
        }
        Node {
            metadata: ObjectMeta {
                name: Some(name),
                labels: Some(labels),
                ..ObjectMeta::default()
            },
            ..Node::default()
        }
    }

    /// The kubelet's default labels of the `i`th node, `name`.
    fn defaults(&self, name: &str, i: usize) -> BTreeMap<String, String> {
        let mut labels: BTreeMap<String, String> = OS_LABELS
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        labels.insert(HOSTNAME_LABEL.to_string(), name.to_string());
        if !self.zones.is_empty() {
            labels.insert(
                ZONE_LABEL.to_string(),
                self.zones[i % self.zones.len()].clone(),
            );
        }
        labels
    }
}

/// The labels of `wanted` (a node as registered) that `existing` (the node of that name found)
/// lacks or has otherwise, among those a registration takes over: the default ones and the
/// agent's. `None` when it has them all.
pub(crate) fn labels_to_set(wanted: &Node, existing: &Node) -> Option<BTreeMap<String, String>> {
    let wanted = wanted.metadata.labels.as_ref()?;
    let existing = existing.metadata.labels.clone().unwrap_or_default();
    let reconciled = [
        HOSTNAME_LABEL,
        ZONE_LABEL,
        OS_LABELS[0].0,
        OS_LABELS[1].0,
        AGENT_LABEL.0,
    ];
    let set: BTreeMap<String, String> = reconciled
        .iter()
        .filter_map(|k| Some((*k, wanted.get(*k)?)))
        .filter(|(k, v)| existing.get(*k) != Some(*v))
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect();
    (!set.is_empty()).then_some(set)
}

/// How a create ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Created {
    /// The Node is new.
    New,
    /// A Node of that name exists (409 AlreadyExists).
    Exists,
}

/// The calls a registration makes, over kube in `apiserver.rs`, a recorder in the tests.
pub(crate) trait NodeRegistrar: Send + Sync + 'static {
    /// `POST` `node`.
    fn create(&self, node: &Node) -> impl Future<Output = Result<Created, WriteError>> + Send;
    /// `GET` the Node `name`.
    fn get(&self, name: &str) -> impl Future<Output = Result<Node, WriteError>> + Send;
    /// `PATCH` the Node `name`'s labels: `labels` set, the others kept.
    fn set_labels(
        &self,
        name: &str,
        labels: &BTreeMap<String, String>,
    ) -> impl Future<Output = Result<(), WriteError>> + Send;
}

/// One try (`tryRegisterWithAPIServer`): `Ok` once the node is registered.
async fn try_register<R: NodeRegistrar>(registrar: &R, node: &Node) -> Result<Created, String> {
    let name = node.metadata.name.as_deref().unwrap_or_default();
    let error = |e: WriteError| match e {
        WriteError::Gone => "gone meanwhile".to_string(),
        WriteError::Refused(e) | WriteError::Failed(e) => e,
    };
    match registrar.create(node).await.map_err(error)? {
        Created::New => Ok(Created::New),
        Created::Exists => {
            let existing = registrar.get(name).await.map_err(error)?;
            if let Some(labels) = labels_to_set(node, &existing) {
                registrar.set_labels(name, &labels).await.map_err(error)?;
            }
            Ok(Created::Exists)
        }
    }
}

/// Registers `node` (`registerWithAPIServer`): a pause of 100 ms before the first try, doubled
/// before each next one up to 7 s, until a try passes.
pub(crate) async fn register<R: NodeRegistrar>(registrar: &R, node: &Node) -> Created {
    let name = node.metadata.name.as_deref().unwrap_or_default();
    let mut step = FIRST_STEP;
    loop {
        sleep(step).await;
        step = (step * 2).min(MAX_STEP);
        match try_register(registrar, node).await {
            Ok(created) => return created,
            Err(e) => say!("node {name}: registering: {e}; again in {step:?}"),
        }
    }
}

/// Registers every node `registration` asks for, [`CONCURRENCY`] at a time.
pub(crate) async fn register_all<R: NodeRegistrar>(registrar: &R, registration: &Registration) {
    let (mut new, mut taken) = (0, 0);
    let mut done = futures::stream::iter(0..registration.count)
        .map(|i| {
            let node = registration.node(i);
            async move { register(registrar, &node).await }
        })
        .buffer_unordered(CONCURRENCY);
    while let Some(created) = done.next().await {
        match created {
            Created::New => new += 1,
            Created::Exists => taken += 1,
        }
    }
    say!(
        "registered {} nodes {}…: {new} new, {taken} found and taken over",
        registration.count,
        registration.name(0)
    );
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use tokio::time::Instant;

    use super::*;

    fn registration(count: usize, zones: &[&str]) -> Registration {
        Registration {
            count,
            prefix: "hollow".into(),
            labels: BTreeMap::from([("role".to_string(), "worker".to_string())]),
            zones: zones.iter().map(|z| z.to_string()).collect(),
        }
    }

    fn labels(node: &Node) -> Vec<(String, String)> {
        node.metadata
            .labels
            .clone()
            .unwrap_or_default()
            .into_iter()
            .collect()
    }

    fn pairs(p: &[(&str, &str)]) -> Vec<(String, String)> {
        p.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn names_are_numbered_in_at_least_four_digits() {
        assert_eq!(registration(500, &[]).name(7), "hollow-0007");
        assert_eq!(registration(500, &[]).name(499), "hollow-0499");
        assert_eq!(registration(10_001, &[]).name(3), "hollow-00003");
        assert_eq!(registration(10_000, &[]).name(9_999), "hollow-9999");
    }

    #[test]
    fn a_node_carries_the_kubelets_labels_the_agents_and_its_zone_round_robin() {
        let r = registration(5, &["zone-a", "zone-b"]);
        let node = r.node(3);
        assert_eq!(node.metadata.name.as_deref(), Some("hollow-0003"));
        assert_eq!(
            labels(&node),
            pairs(&[
                ("kubernetes.io/arch", "amd64"),
                ("kubernetes.io/hostname", "hollow-0003"),
                ("kubernetes.io/os", "linux"),
                ("nodejob.test/agent", "true"),
                ("role", "worker"),
                ("topology.kubernetes.io/zone", "zone-b"),
            ])
        );
        assert_eq!(r.node(4).metadata.labels.unwrap()[ZONE_LABEL], "zone-a");
        assert!(node.spec.is_none() && node.status.is_none());
        let unzoned = registration(5, &[]).node(3);
        assert!(!unzoned.metadata.labels.unwrap().contains_key(ZONE_LABEL));
    }

    #[test]
    fn an_existing_node_gets_the_default_labels_and_the_agents_not_the_others() {
        let r = registration(5, &["zone-a"]);
        let wanted = r.node(0);
        assert_eq!(labels_to_set(&wanted, &wanted), None);
        let mut existing = wanted.clone();
        let l = existing.metadata.labels.as_mut().unwrap();
        l.remove(AGENT_LABEL.0);
        l.insert(ZONE_LABEL.into(), "zone-z".into());
        // Not a default label: left as the node has it (the kubelet does not reconcile
        // --node-labels on a node that exists).
        l.insert("role".into(), "db".into());
        assert_eq!(
            labels_to_set(&wanted, &existing),
            Some(BTreeMap::from([
                (AGENT_LABEL.0.to_string(), "true".to_string()),
                (ZONE_LABEL.to_string(), "zone-a".to_string()),
            ]))
        );
    }

    /// A call at a millisecond of paused time.
    #[derive(Clone, Debug, PartialEq, Eq)]
    enum Call {
        Create(u64, String),
        Get(u64, String),
        SetLabels(u64, String, Vec<String>),
    }

    #[derive(Clone)]
    struct Apiserver {
        start: Instant,
        calls: Arc<Mutex<Vec<Call>>>,
        /// Nodes that exist, by name.
        nodes: Arc<Mutex<BTreeMap<String, Node>>>,
        /// The next creates that fail transiently.
        fail: Arc<Mutex<usize>>,
    }

    impl Apiserver {
        fn new() -> Self {
            Apiserver {
                start: Instant::now(),
                calls: Arc::default(),
                nodes: Arc::default(),
                fail: Arc::default(),
            }
        }

        fn ms(&self) -> u64 {
            u64::try_from(self.start.elapsed().as_millis()).unwrap()
        }

        fn calls(&self) -> Vec<Call> {
            self.calls.lock().unwrap().clone()
        }
    }

    impl NodeRegistrar for Apiserver {
        async fn create(&self, node: &Node) -> Result<Created, WriteError> {
            let name = node.metadata.name.clone().unwrap();
            self.calls
                .lock()
                .unwrap()
                .push(Call::Create(self.ms(), name.clone()));
            {
                let mut fail = self.fail.lock().unwrap();
                if *fail > 0 {
                    *fail -= 1;
                    return Err(WriteError::Failed("503 ServiceUnavailable".into()));
                }
            }
            let mut nodes = self.nodes.lock().unwrap();
            if nodes.contains_key(&name) {
                return Ok(Created::Exists);
            }
            nodes.insert(name, node.clone());
            Ok(Created::New)
        }

        async fn get(&self, name: &str) -> Result<Node, WriteError> {
            self.calls
                .lock()
                .unwrap()
                .push(Call::Get(self.ms(), name.into()));
            self.nodes
                .lock()
                .unwrap()
                .get(name)
                .cloned()
                .ok_or(WriteError::Gone)
        }

        async fn set_labels(
            &self,
            name: &str,
            labels: &BTreeMap<String, String>,
        ) -> Result<(), WriteError> {
            let keys = labels.keys().cloned().collect();
            self.calls
                .lock()
                .unwrap()
                .push(Call::SetLabels(self.ms(), name.into(), keys));
            let mut nodes = self.nodes.lock().unwrap();
            let node = nodes.get_mut(name).ok_or(WriteError::Gone)?;
            node.metadata
                .labels
                .get_or_insert_with(BTreeMap::new)
                .extend(labels.clone());
            Ok(())
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_failing_create_is_tried_again_after_the_kubelets_doubling_pauses() {
        let api = Apiserver::new();
        *api.fail.lock().unwrap() = 3;
        let node = registration(1, &[]).node(0);
        assert_eq!(register(&api, &node).await, Created::New);
        let name = "hollow-0000".to_string();
        assert_eq!(
            api.calls(),
            [
                Call::Create(100, name.clone()),
                Call::Create(300, name.clone()),
                Call::Create(700, name.clone()),
                Call::Create(1500, name),
            ]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_node_that_exists_is_read_and_taken_over() {
        let api = Apiserver::new();
        let r = registration(2, &["zone-a"]);
        // hollow-0001 exists, made by someone else without the agent's label.
        let mut other = r.node(1);
        other
            .metadata
            .labels
            .as_mut()
            .unwrap()
            .remove(AGENT_LABEL.0);
        api.nodes
            .lock()
            .unwrap()
            .insert("hollow-0001".into(), other);
        register_all(&api, &r).await;
        let mut calls = api.calls();
        calls.sort_by_key(|c| format!("{c:?}"));
        assert_eq!(
            calls,
            [
                Call::Create(100, "hollow-0000".into()),
                Call::Create(100, "hollow-0001".into()),
                Call::Get(100, "hollow-0001".into()),
                Call::SetLabels(100, "hollow-0001".into(), vec![AGENT_LABEL.0.into()]),
            ]
        );
        let nodes = api.nodes.lock().unwrap();
        assert!(
            nodes
                .values()
                .all(|n| n.metadata.labels.as_ref().unwrap()[AGENT_LABEL.0] == "true")
        );
        assert_eq!(nodes.len(), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn hundreds_register_sixteen_at_a_time() {
        let api = Apiserver::new();
        let r = registration(500, &["zone-a", "zone-b", "zone-c", "zone-d"]);
        register_all(&api, &r).await;
        assert_eq!(api.nodes.lock().unwrap().len(), 500);
        // Sixteen in flight at a time, each after its 100 ms pause: waves 100 ms apart.
        let mut waves: BTreeMap<u64, usize> = BTreeMap::new();
        for call in api.calls() {
            let Call::Create(ms, _) = call else {
                panic!("{call:?}")
            };
            *waves.entry(ms).or_default() += 1;
        }
        assert_eq!(waves.len(), 32);
        assert!(waves.values().all(|n| *n <= CONCURRENCY), "{waves:?}");
        assert_eq!(waves.keys().last(), Some(&3200));
        let zones: BTreeMap<String, usize> =
            api.nodes
                .lock()
                .unwrap()
                .values()
                .fold(BTreeMap::new(), |mut m, n| {
                    *m.entry(n.metadata.labels.as_ref().unwrap()[ZONE_LABEL].clone())
                        .or_default() += 1;
                    m
                });
        assert!(zones.values().all(|n| *n == 125), "{zones:?}");
    }
}
