//! `deploy/rbac.yaml` is the least privilege the runner needs: with any one of its verbs taken
//! away, some check fails with Forbidden. (That it is enough is proven by `tests/e2e.rs`, the
//! whole conformance suite acting as that ServiceAccount.)

use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use nodejob_conformance::{Backend, Failure};
use nodejob_core::lease::{Claim, LeaseConfig, acquire};
use nodejob_core::{
    Action, Clock, DryRun, Error, EventType, JobApi, NodeApi, NodeChange, Note, ObjectKind,
    Operation, PodApi, Spec, node_event, run_exit_code_logs, wait_pod_gone, wait_ready,
};
use nodejob_e2e::{KubeBackend, Rbac, SA_NAMESPACE, unique};

/// A spec for a quick Job that succeeds with a log line.
fn spec(b: &KubeBackend, namespace: &str, notes: Arc<Mutex<Vec<Note>>>) -> Spec {
    Spec {
        namespace: namespace.into(),
        name: "probe".into(),
        node: b.node(),
        label_key: "stratum.ciq.com/rbac".into(),
        container: "host".into(),
        argv: vec![
            "nsenter".into(),
            "--".into(),
            "stratum".into(),
            "nodejob-test:log=probe".into(),
        ],
        active_deadline: Duration::from_secs(120),
        poll_attempts: 6,
        kind: "rbac probe".into(),
        output: Some(Arc::new(move |n: &Note| {
            notes.lock().unwrap().push(n.clone())
        })),
        ..Spec::default()
    }
}

fn api_error(op: Operation, cause: nodejob_core::ApiError) -> Error {
    Error::Api { op, cause }
}

fn lease(namespace: &str) -> LeaseConfig {
    LeaseConfig {
        namespace: namespace.into(),
        name: "probe".into(),
        identity: "rbac-probe".into(),
        duration: Duration::from_secs(60),
    }
}

fn forbidden(e: &Error) -> bool {
    e.api_error().is_some_and(|a| a.code == 403) || e.to_string().contains("forbidden")
}

/// Runs the check that needs `verb` on `resource`, as a ServiceAccount that lacks it; returns
/// what went wrong if it did not fail with Forbidden.
async fn probe(resource: &str, verb: &str) -> Result<(), Failure> {
    let sa = unique(&format!("minus-{}-{verb}", resource.replace('/', "-")));
    let b = KubeBackend::with_rbac(Rbac::committed().without(resource, verb), &sa).await?;
    let api = b.api();
    let notes = Arc::new(Mutex::new(Vec::new()));
    let ns = b.namespace();
    let outcome = match (resource, verb) {
        ("jobs", "create" | "get" | "watch" | "delete")
        | ("pods", "list")
        | ("pods/log", "get") => run_exit_code_logs(&*api, &spec(&b, &ns, notes.clone()))
            .await
            .map(drop),
        // A wait "from now" (and a watch that expired) starts from a LIST by name.
        ("jobs", "list") => match api
            .wait_job(&ns, "probe", None, Duration::from_secs(1))
            .await
        {
            Err(cause) => Err(api_error(
                Operation::named(Action::Watching, ObjectKind::Job, &ns, "probe")
                    .with_detail("from now"),
                cause,
            )),
            Ok(_) => Ok(()),
        },
        // Without events, a pod PodSecurity refuses is only noticed at the bound: the runner
        // says why in a warning, and the fast failure is lost.
        ("events", "list") => {
            let refusing = b.forbid_privileged_pods().await?;
            let mut s = spec(&b, &refusing, notes.clone());
            s.poll_attempts = 2;
            let outcome = run_exit_code_logs(&*api, &s).await;
            let warned = notes.lock().unwrap().iter().any(|n| {
                n.message.contains("cannot list events") && n.message.contains("forbidden")
            });
            if !warned || matches!(outcome, Err(Error::PodCreateRefused { .. })) {
                return Err(Failure(format!(
                    "events/list removed: warned {warned}, outcome {outcome:?}"
                )));
            }
            return Ok(());
        }
        // A driver's step Event on its Node, in the drivers' namespace.
        ("events", "create") => {
            let event = node_event(
                SA_NAMESPACE,
                &b.node(),
                EventType::Normal,
                "NodejobRbacProbe",
                "rbac probe",
                "nodejob-rbac-probe",
                api.wall_time(),
            );
            api.create_event(&event).await.map(drop).map_err(|cause| {
                api_error(
                    Operation::named(
                        Action::Creating,
                        ObjectKind::Event,
                        SA_NAMESPACE,
                        format!("{}.", b.node()),
                    ),
                    cause,
                )
            })
        }
        ("nodes", "get") => wait_ready(&*api, &b.node(), 2).await,
        ("nodes", "watch") => {
            b.set_node_ready(&b.node(), false).await?;
            wait_ready(&*api, &b.node(), 2).await
        }
        // A node that does not exist is waited for "from now": a LIST by name.
        ("nodes", "list") => wait_ready(&*api, "no-such-node.rbac.invalid", 1).await,
        ("nodes", "patch") => {
            let node = api.get_node(&b.node()).await?;
            let rv = node.metadata.resource_version.unwrap_or_default();
            api.patch_node(&b.node(), &rv, &[NodeChange::Cordon])
                .await
                .map(drop)
                .map_err(|cause| {
                    api_error(
                        Operation::named(Action::Patching, ObjectKind::Node, "", b.node()),
                        cause,
                    )
                })
        }
        // A driver's own condition on a node (issue 22).
        ("nodes/status", "patch") => {
            let condition = k8s_openapi::api::core::v1::NodeCondition {
                type_: "NodejobRbacProbe".into(),
                status: "True".into(),
                reason: Some("Probing".into()),
                ..Default::default()
            };
            api.patch_node_conditions(&b.node(), None, &[], &[condition])
                .await
                .map(drop)
                .map_err(|cause| {
                    api_error(
                        Operation::named(Action::Patching, ObjectKind::Node, "", b.node())
                            .with_detail("status"),
                        cause,
                    )
                })
        }
        ("pods", "get") => api.get_pod(&ns, "probe").await.map(drop).map_err(|cause| {
            api_error(
                Operation::named(Action::Reading, ObjectKind::Pod, &ns, "probe"),
                cause,
            )
        }),
        // A drain waits on each evicted pod by watching it.
        ("pods", "watch") => {
            let pod = Pod {
                metadata: ObjectMeta {
                    namespace: Some(ns.clone()),
                    name: Some("probe".into()),
                    uid: Some("probe-uid".into()),
                    resource_version: Some(
                        api.get_node(&b.node())
                            .await?
                            .metadata
                            .resource_version
                            .unwrap_or_default(),
                    ),
                    ..ObjectMeta::default()
                },
                ..Pod::default()
            };
            wait_pod_gone(&*api, &pod, Duration::from_secs(2))
                .await
                .map(drop)
        }
        ("pods/eviction", "create") => api
            .evict_pod(&ns, "probe", "probe-uid", None, DryRun::All)
            .await
            .map(drop)
            .map_err(|cause| {
                api_error(
                    Operation::named(Action::Evicting, ObjectKind::Pod, &ns, "probe")
                        .with_detail("uid probe-uid"),
                    cause,
                )
            }),
        ("leases", "get" | "create") => acquire(&*api, &lease(&ns), &Claim::default())
            .await
            .map(drop),
        // Every write after the creation is an update: here, the same holder resuming.
        ("leases", "update") => match acquire(&*api, &lease(&ns), &Claim::default()).await {
            Ok(_) => acquire(&*api, &lease(&ns), &Claim::default())
                .await
                .map(drop),
            Err(e) => Err(e),
        },
        _ => {
            return Err(Failure(format!(
                "no probe for {verb} {resource}: add one when granting it"
            )));
        }
    };
    match outcome {
        Err(e) if forbidden(&e) => Ok(()),
        other => Err(Failure(format!(
            "{verb} {resource} removed, yet: {other:?}"
        ))),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_granted_verb_is_needed() {
    let grants = Rbac::committed().grants();
    assert!(
        grants.len() >= 20,
        "deploy/rbac.yaml grants only {grants:?}"
    );
    let mut failures = Vec::new();
    for (resource, verb) in &grants {
        if let Err(f) = probe(resource, verb).await {
            failures.push(f.0);
        }
    }
    assert!(
        failures.is_empty(),
        "verbs whose removal went unnoticed:\n{}",
        failures.join("\n")
    );
}

/// `nodes/status` is granted `patch` and nothing more (issue 22): the drivers' condition is a
/// patch, and the ServiceAccount may neither read the status subresource nor replace it (an
/// update would carry the whole status, the kubelet's conditions with it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_status_is_granted_patch_and_nothing_more() {
    use k8s_openapi::api::core::v1::Node;
    use kube::api::{Api, PostParams};
    let b = KubeBackend::new()
        .await
        .expect("a backend acting as the ServiceAccount");
    let api = b.api();
    let nodes: Api<Node> = Api::all(api.client().clone());
    let node = api
        .get_node(&b.node())
        .await
        .expect("the node, read by the ServiceAccount");
    let forbidden = |what: &str, e: Result<Node, kube::Error>| match e {
        Err(kube::Error::Api(s)) if s.code == 403 => {}
        other => panic!("{what} of nodes/status must be Forbidden, got {other:?}"),
    };
    forbidden("a get", nodes.get_status(&b.node()).await);
    forbidden(
        "an update",
        nodes
            .replace_status(&b.node(), &PostParams::default(), &node)
            .await,
    );
    let condition = k8s_openapi::api::core::v1::NodeCondition {
        type_: "NodejobRbacProbe".into(),
        status: "True".into(),
        reason: Some("Probing".into()),
        ..Default::default()
    };
    api.patch_node_conditions(&b.node(), None, &[], &[condition])
        .await
        .expect("a patch of nodes/status is granted");
}
