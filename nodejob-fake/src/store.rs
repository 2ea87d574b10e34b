//! The object store and the apiserver semantics of the verbs the fake serves: one global
//! resourceVersion counter, deterministic UIDs, create / get / delete-with-preconditions of
//! Jobs, and the Pods, Nodes and Events the controllers write.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use k8s_openapi::api::batch::v1::{Job, JobStatus};
use k8s_openapi::api::core::v1::{Event, EventSource, Node, ObjectReference, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, Preconditions};
use nodejob_core::{ApiError, ApiResult, Change};

use crate::rng::Rng;
use crate::selector::Selector;
use crate::timing::{EPOCH_SECONDS, stamp};
use crate::validation::{invalid_message, label_errors, name_errors};
use crate::watch::History;

/// `(namespace, name)`; Nodes use an empty namespace.
pub(crate) type Key = (String, String);

/// The label the apiserver puts on a Job's pod template (and selector) with the Job's UID.
pub(crate) const CONTROLLER_UID: &str = "batch.kubernetes.io/controller-uid";
/// The label the apiserver puts on a Job's pod template with the Job's name.
pub(crate) const JOB_NAME: &str = "batch.kubernetes.io/job-name";
/// The legacy forms of those two labels, still added by the apiserver.
pub(crate) const LEGACY_CONTROLLER_UID: &str = "controller-uid";
pub(crate) const LEGACY_JOB_NAME: &str = "job-name";
/// The finalizer a foreground deletion adds.
pub(crate) const FOREGROUND_DELETION: &str = "foregroundDeletion";

/// The key of an object's metadata.
pub(crate) fn key_of(meta: &ObjectMeta) -> Key {
    (
        meta.namespace.clone().unwrap_or_default(),
        meta.name.clone().unwrap_or_default(),
    )
}

fn key(namespace: &str, name: &str) -> Key {
    (namespace.to_string(), name.to_string())
}

/// Every stored object, the resourceVersion counter and the watch histories.
#[derive(Debug)]
pub(crate) struct Store {
    rv: u64,
    namespaces: BTreeSet<String>,
    pub(crate) jobs: BTreeMap<Key, Job>,
    pub(crate) pods: BTreeMap<Key, Pod>,
    pub(crate) nodes: BTreeMap<String, Node>,
    pub(crate) events: BTreeMap<Key, Event>,
    pub(crate) job_history: History<Job>,
    pub(crate) node_history: History<Node>,
    ids: Rng,
}

impl Store {
    /// A store with the namespaces every cluster has, drawing UIDs and names from `ids`.
    pub(crate) fn new(ids: Rng) -> Self {
        Store {
            rv: 0,
            namespaces: ["default", "kube-system"].map(String::from).into(),
            jobs: BTreeMap::new(),
            pods: BTreeMap::new(),
            nodes: BTreeMap::new(),
            events: BTreeMap::new(),
            job_history: History::default(),
            node_history: History::default(),
            ids,
        }
    }

    /// The latest resourceVersion.
    pub(crate) fn rv(&self) -> u64 {
        self.rv
    }

    fn bump(&mut self) -> u64 {
        self.rv += 1;
        self.rv
    }

    pub(crate) fn add_namespace(&mut self, name: &str) {
        self.namespaces.insert(name.to_string());
    }

    pub(crate) fn uid(&mut self) -> String {
        self.ids.uuid()
    }

    /// `prefix` plus 5 generated characters, as `metadata.generateName` makes a name; the
    /// prefix is cut to 58 characters so the name fits 63 (`names.SimpleNameGenerator`).
    pub(crate) fn generate_name(&mut self, prefix: &str) -> String {
        let cut = prefix
            .char_indices()
            .nth(58)
            .map_or(prefix, |(i, _)| &prefix[..i]);
        format!("{cut}{}", self.ids.name_suffix(5))
    }

    pub(crate) fn hex(&mut self, bytes: usize) -> String {
        self.ids.hex(bytes)
    }

    /// Stores `job` (ADDED or MODIFIED) with the next resourceVersion.
    pub(crate) fn write_job(&mut self, mut job: Job) -> Job {
        let rv = self.bump();
        job.metadata.resource_version = Some(rv.to_string());
        let key = key_of(&job.metadata);
        self.job_history
            .record(key.clone(), rv, Change::Applied(job.clone()));
        self.jobs.insert(key, job.clone());
        job
    }

    /// Removes a Job (DELETED, with its last state at a new resourceVersion).
    pub(crate) fn remove_job(&mut self, key: &Key) -> Option<Job> {
        let mut job = self.jobs.remove(key)?;
        let rv = self.bump();
        job.metadata.resource_version = Some(rv.to_string());
        self.job_history
            .record(key.clone(), rv, Change::Deleted(job.clone()));
        Some(job)
    }

    pub(crate) fn write_pod(&mut self, mut pod: Pod) -> Pod {
        pod.metadata.resource_version = Some(self.bump().to_string());
        self.pods.insert(key_of(&pod.metadata), pod.clone());
        pod
    }

    pub(crate) fn remove_pod(&mut self, key: &Key) -> Option<Pod> {
        let pod = self.pods.remove(key)?;
        self.bump();
        Some(pod)
    }

    pub(crate) fn write_node(&mut self, mut node: Node) -> Node {
        let rv = self.bump();
        node.metadata.resource_version = Some(rv.to_string());
        let name = node.metadata.name.clone().unwrap_or_default();
        self.node_history
            .record(key("", &name), rv, Change::Applied(node.clone()));
        self.nodes.insert(name, node.clone());
        node
    }

    pub(crate) fn remove_node(&mut self, name: &str) -> Option<Node> {
        let mut node = self.nodes.remove(name)?;
        let rv = self.bump();
        node.metadata.resource_version = Some(rv.to_string());
        self.node_history
            .record(key("", name), rv, Change::Deleted(node.clone()));
        Some(node)
    }

    /// The Job `namespace/name` if it still has `uid`.
    pub(crate) fn job_with_uid(&self, namespace: &str, name: &str, uid: &str) -> Option<&Job> {
        let job = self.jobs.get(&key(namespace, name))?;
        (job.metadata.uid.as_deref() == Some(uid)).then_some(job)
    }

    /// The Pod with `uid`, by its key.
    pub(crate) fn pod_with_uid(&self, key: &Key, uid: &str) -> Option<&Pod> {
        self.pods
            .get(key)
            .filter(|p| p.metadata.uid.as_deref() == Some(uid))
    }

    /// The pods whose controller ownerReference is `owner_uid`, in name order.
    pub(crate) fn pods_owned_by(&self, owner_uid: &str) -> Vec<Pod> {
        self.pods
            .values()
            .filter(|p| owner_uid_of(p).is_some_and(|u| u == owner_uid))
            .cloned()
            .collect()
    }

    /// Records a core/v1 Event about `involved` the way client-go's event recorder does: an
    /// identical event (same object, type, reason, message) bumps `count` and
    /// `lastTimestamp` of the one stored (`EventCorrelator`); otherwise a new Event named
    /// `<object>.<hex unix nanos>`.
    pub(crate) fn record_event(
        &mut self,
        involved: &ObjectReference,
        type_: &str,
        reason: &str,
        message: &str,
        now: Duration,
    ) {
        let namespace = involved.namespace.clone().unwrap_or_default();
        let same = self.events.values().find(|e| {
            e.involved_object.uid == involved.uid
                && e.type_.as_deref() == Some(type_)
                && e.reason.as_deref() == Some(reason)
                && e.message.as_deref() == Some(message)
        });
        if let Some(same) = same {
            let mut event = same.clone();
            event.count = Some(event.count.unwrap_or(1) + 1);
            event.last_timestamp = Some(stamp(now));
            event.metadata.resource_version = Some(self.bump().to_string());
            self.events.insert(key_of(&event.metadata), event);
            return;
        }
        let object = involved.name.clone().unwrap_or_default();
        let mut nanos = (EPOCH_SECONDS as u128) * 1_000_000_000 + now.as_nanos();
        while self
            .events
            .contains_key(&key(&namespace, &format!("{object}.{nanos:x}")))
        {
            nanos += 1;
        }
        let uid = self.uid();
        let rv = self.bump();
        let event = Event {
            metadata: ObjectMeta {
                name: Some(format!("{object}.{nanos:x}")),
                namespace: Some(namespace),
                uid: Some(uid),
                resource_version: Some(rv.to_string()),
                creation_timestamp: Some(stamp(now)),
                ..ObjectMeta::default()
            },
            involved_object: involved.clone(),
            type_: Some(type_.to_string()),
            reason: Some(reason.to_string()),
            message: Some(message.to_string()),
            count: Some(1),
            first_timestamp: Some(stamp(now)),
            last_timestamp: Some(stamp(now)),
            source: Some(EventSource {
                component: Some("job-controller".to_string()),
                host: None,
            }),
            reporting_component: Some("job-controller".to_string()),
            reporting_instance: Some(String::new()),
            ..Event::default()
        };
        self.events.insert(key_of(&event.metadata), event);
    }

    // ---- the apiserver verbs ----

    /// `POST .../jobs`: validation, `generateName`, the generated selector and pod labels
    /// (apiserver `jobStrategy.PrepareForCreate` with `manualSelector` unset), UID,
    /// resourceVersion, creationTimestamp, `generation: 1`, an empty status.
    pub(crate) fn create_job(&mut self, job: &Job, now: Duration) -> ApiResult<Job> {
        let mut job = job.clone();
        // The trait's create carries no namespace of its own: an object without one goes to
        // `default`, as kubectl would send it.
        let namespace = job
            .metadata
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into());
        if !self.namespaces.contains(&namespace) {
            return Err(ApiError::not_found(format!(
                "namespaces \"{namespace}\" not found"
            )));
        }
        if job
            .metadata
            .resource_version
            .as_deref()
            .is_some_and(|rv| !rv.is_empty())
        {
            // apiserver (etcd3 store Create): refused as an internal error, which a client
            // classifies with the other 500s.
            return Err(ApiError::transient(
                500,
                "resourceVersion should not be set on objects to be created",
            ));
        }
        let mut name = job.metadata.name.clone().unwrap_or_default();
        let prefix = job.metadata.generate_name.clone().filter(|p| !p.is_empty());
        if let Some(prefix) = prefix.filter(|_| name.is_empty()) {
            name = self.generate_name(&prefix);
        }
        let mut errs = name_errors("metadata.name", &name);
        errs.extend(label_errors(
            "metadata.labels",
            job.metadata.labels.as_ref(),
        ));
        let uid = self.uid();
        match job.spec.as_mut() {
            None => errs.push("spec.template.spec.containers: Required value".into()),
            Some(spec) => {
                // batch/v1 SetDefaults_Job runs first: a Job without labels shares its
                // template's label map (when there is one), so it also shows the labels
                // generated below.
                let share_labels = job.metadata.labels.as_ref().is_none_or(BTreeMap::is_empty)
                    && spec
                        .template
                        .metadata
                        .as_ref()
                        .is_some_and(|m| m.labels.is_some());
                let manual = spec.manual_selector == Some(true);
                if !manual {
                    if spec.selector.is_some() {
                        errs.push(
                            "spec.selector: Invalid value: \"set\": `selector` not auto-generated"
                                .into(),
                        );
                    }
                    spec.selector = Some(LabelSelector {
                        match_labels: Some([(CONTROLLER_UID.to_string(), uid.clone())].into()),
                        match_expressions: None,
                    });
                    let labels = spec.template.metadata.get_or_insert_default();
                    let labels = labels.labels.get_or_insert_default();
                    labels.insert(CONTROLLER_UID.into(), uid.clone());
                    labels.insert(JOB_NAME.into(), name.clone());
                    labels.insert(LEGACY_CONTROLLER_UID.into(), uid.clone());
                    labels.insert(LEGACY_JOB_NAME.into(), name.clone());
                }
                let template_labels = spec
                    .template
                    .metadata
                    .as_ref()
                    .and_then(|m| m.labels.as_ref());
                errs.extend(label_errors("spec.template.labels", template_labels));
                if share_labels {
                    job.metadata.labels = template_labels.cloned();
                }
                match spec.template.spec.as_ref() {
                    Some(pod) if !pod.containers.is_empty() => {
                        // The pod defaulting turns an empty restartPolicy into `Always`, which
                        // ValidateJobSpec refuses.
                        let policy = pod.restart_policy.as_deref().unwrap_or("Always");
                        if policy != "Never" && policy != "OnFailure" {
                            errs.push(format!(
                                "spec.template.spec.restartPolicy: Unsupported value: \"{policy}\": supported values: \"OnFailure\", \"Never\""
                            ));
                        }
                    }
                    _ => errs.push("spec.template.spec.containers: Required value".into()),
                }
            }
        }
        if !errs.is_empty() {
            return Err(ApiError::invalid(invalid_message(
                "Job.batch",
                &name,
                &errs,
            )));
        }
        if self.jobs.contains_key(&key(&namespace, &name)) {
            return Err(ApiError::already_exists(format!(
                "jobs.batch \"{name}\" already exists"
            )));
        }
        let meta = &mut job.metadata;
        meta.name = Some(name);
        meta.namespace = Some(namespace);
        meta.uid = Some(uid);
        meta.creation_timestamp = Some(stamp(now));
        meta.generation = Some(1);
        meta.deletion_timestamp = None;
        meta.deletion_grace_period_seconds = None;
        meta.managed_fields = None;
        job.status = Some(JobStatus::default());
        Ok(self.write_job(job))
    }

    /// `GET` one Job.
    pub(crate) fn get_job(&self, namespace: &str, name: &str) -> ApiResult<Job> {
        self.jobs
            .get(&key(namespace, name))
            .cloned()
            .ok_or_else(|| job_not_found(name))
    }

    /// `DELETE` one Job with `propagationPolicy: Foreground`: checks `preconditions` (UID, then
    /// resourceVersion, apiserver `storage.Preconditions.Check`), then sets
    /// `deletionTimestamp`, `deletionGracePeriodSeconds: 0`, the `foregroundDeletion` finalizer
    /// and bumps `generation` (`rest.BeforeDelete`). A Job already being deleted is answered as
    /// is, without a write. The garbage collector does the rest.
    pub(crate) fn delete_job(
        &mut self,
        namespace: &str,
        name: &str,
        preconditions: Option<&Preconditions>,
        now: Duration,
    ) -> ApiResult<Job> {
        let job = self
            .jobs
            .get(&key(namespace, name))
            .ok_or_else(|| job_not_found(name))?;
        if let Some(pre) = preconditions {
            let meta = &job.metadata;
            let conflict = |detail: String| {
                ApiError::conflict(format!(
                    "Operation cannot be fulfilled on jobs.batch \"{name}\": {detail}"
                ))
            };
            let uid = meta.uid.as_deref().unwrap_or_default();
            if let Some(want) = pre.uid.as_deref().filter(|want| *want != uid) {
                return Err(conflict(format!(
                    "Precondition failed: UID in precondition: {want}, UID in object meta: {uid}"
                )));
            }
            let rv = meta.resource_version.as_deref().unwrap_or_default();
            if let Some(want) = pre.resource_version.as_deref().filter(|want| *want != rv) {
                return Err(conflict(format!(
                    "Precondition failed: ResourceVersion in precondition: {want}, ResourceVersion in object meta: {rv}"
                )));
            }
        }
        if job.metadata.deletion_timestamp.is_some() {
            return Ok(job.clone());
        }
        let mut job = job.clone();
        let meta = &mut job.metadata;
        meta.deletion_timestamp = Some(stamp(now));
        meta.deletion_grace_period_seconds = Some(0);
        meta.generation = Some(meta.generation.unwrap_or(0) + 1);
        let finalizers = meta.finalizers.get_or_insert_default();
        if !finalizers.iter().any(|f| f == FOREGROUND_DELETION) {
            finalizers.push(FOREGROUND_DELETION.into());
        }
        Ok(self.write_job(job))
    }

    /// `LIST` Pods in `namespace` matching `selector`, in name order (a list in a namespace
    /// that does not exist is empty, as in Kubernetes).
    pub(crate) fn list_pods(&self, namespace: &str, selector: &str) -> ApiResult<Vec<Pod>> {
        let selector = Selector::parse(selector)?;
        Ok(self
            .pods
            .iter()
            .filter(|((ns, _), pod)| {
                ns == namespace && selector.matches(pod.metadata.labels.as_ref())
            })
            .map(|(_, pod)| pod.clone())
            .collect())
    }

    /// `LIST` Events in `namespace` with `fieldSelector=involvedObject.uid=<uid>`.
    pub(crate) fn list_events(&self, namespace: &str, involved_uid: &str) -> Vec<Event> {
        self.events
            .iter()
            .filter(|((ns, _), e)| {
                ns == namespace && e.involved_object.uid.as_deref() == Some(involved_uid)
            })
            .map(|(_, e)| e.clone())
            .collect()
    }

    /// `GET` one Node.
    pub(crate) fn get_node(&self, name: &str) -> ApiResult<Node> {
        self.nodes
            .get(name)
            .cloned()
            .ok_or_else(|| node_not_found(name))
    }
}

/// The UID of a pod's controller ownerReference.
pub(crate) fn owner_uid_of(pod: &Pod) -> Option<&str> {
    pod.metadata
        .owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true))
        .map(|o| o.uid.as_str())
}

pub(crate) fn job_not_found(name: &str) -> ApiError {
    ApiError::not_found(format!("jobs.batch \"{name}\" not found"))
}

pub(crate) fn node_not_found(name: &str) -> ApiError {
    ApiError::not_found(format!("nodes \"{name}\" not found"))
}
