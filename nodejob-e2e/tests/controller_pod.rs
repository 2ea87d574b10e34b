//! `nodejob controller` in the cluster as `deploy/controller/` runs it: a Pod of the
//! Deployment's template, from the image the project builds (`nodejob-image`: the binary
//! under test and the libraries it loads, an OCI image layout), on a real node (kubelet,
//! containerd, runc) that imported it with no registry, as the ServiceAccount the controller's
//! RBAC binds, with the in-cluster configuration the kubelet mounts. A `NodeUpgrade` written
//! rolls three nodes of the scenario's own (the node agent's: the real node hosts the
//! controller, as an operator's controller runs on a node the roll does not take); the Pod's
//! own log says it led and the run completed. Run by `e2e/run`.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, LogParams, PostParams};
use nodejob_conformance::{Failure, ensure};
use nodejob_e2e::{
    Kubelets, RealNode, SA_NAMESPACE, ThreeNodes, Workers, cli, controller_account, free_port,
    one_driver, unique, upgrade_condition, wait_for, write_node_upgrade,
};
use serde_json::{Value, json};

/// The version the nodes are rolled to.
const TARGET: &str = "v1.96.0";
/// How long the roll may take.
const ROLL: Duration = Duration::from_secs(300);
/// How long the Pod may take to be Ready: its image is imported already, its binary starts
/// at once.
const STARTED: Duration = Duration::from_secs(120);
/// The image's name, in a registry that does not exist: the kubelet never pulls it.
const IMAGE: &str = "nodejob.invalid/e2e/nodejob:1";

const DEPLOYMENT: &str = include_str!("../../deploy/controller/deployment.yaml");

fn fail(what: impl std::fmt::Display) -> impl FnOnce(kube::Error) -> Failure {
    move |e| Failure(format!("{what}: {e}"))
}

/// The Pod of `deploy/controller/deployment.yaml`'s template, as its ReplicaSet would make it,
/// but pinned to `node` (`spec.nodeName`: no scheduler choice) and adapted to a cluster whose
/// nodes share this machine's network: the host's network (the Service `kubernetes` has no
/// proxy to route it here, so the in-cluster address is the apiserver's own, through
/// `KUBERNETES_SERVICE_HOST`/`_PORT` as the kubelet would set them), its endpoints on ports of
/// their own, the image `IMAGE` never pulled, the ServiceAccount `sa`.
fn controller_pod(name: &str, node: &str, sa: &str, ports: (u16, u16)) -> Result<Pod, Failure> {
    let docs: Vec<Value> = serde_saphyr::from_multiple(DEPLOYMENT)
        .map_err(|e| Failure(format!("deploy/controller/deployment.yaml: {e}")))?;
    let deployment = (docs.iter())
        .find(|d| d["kind"] == "Deployment")
        .ok_or_else(|| Failure("deploy/controller/deployment.yaml: no Deployment".into()))?;
    let mut template = deployment["spec"]["template"].clone();
    template["metadata"]["name"] = json!(name);
    template["metadata"]["namespace"] = json!(SA_NAMESPACE);
    let spec = &mut template["spec"];
    spec["nodeName"] = json!(node);
    spec["serviceAccountName"] = json!(sa);
    spec["hostNetwork"] = json!(true);
    let server = std::env::var("NODEJOB_E2E_APISERVER")
        .map_err(|_| Failure("NODEJOB_E2E_APISERVER is not set (run e2e/run)".into()))?;
    let (host, port) = (server.trim_start_matches("https://"))
        .rsplit_once(':')
        .ok_or_else(|| Failure(format!("the apiserver's address {server:?}")))?;
    let container = &mut spec["containers"][0];
    container["image"] = json!(IMAGE);
    container["imagePullPolicy"] = json!("Never");
    let (metrics, probes) = ports;
    let args = (container["args"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter())
    .map(|a| match a.as_str() {
        Some(s) if s.starts_with("--metrics-bind-address=") => {
            json!(format!("--metrics-bind-address=:{metrics}"))
        }
        Some(s) if s.starts_with("--health-probe-bind-address=") => {
            json!(format!("--health-probe-bind-address=:{probes}"))
        }
        _ => a,
    })
    .collect::<Vec<_>>();
    container["args"] = json!(args);
    container["ports"] = json!([
        {"name": "metrics", "containerPort": metrics, "protocol": "TCP"},
        {"name": "probes", "containerPort": probes, "protocol": "TCP"},
    ]);
    let env = container["env"].as_array_mut();
    let env = env.ok_or_else(|| Failure("the controller's container has no env".into()))?;
    env.push(json!({"name": "KUBERNETES_SERVICE_HOST", "value": host}));
    env.push(json!({"name": "KUBERNETES_SERVICE_PORT", "value": port}));
    serde_json::from_value(template).map_err(|e| Failure(format!("the controller's Pod: {e}")))
}

fn pod_ready(pod: &Pod) -> bool {
    (pod.status.iter())
        .flat_map(|s| s.conditions.iter().flatten())
        .any(|c| c.type_ == "Ready" && c.status == "True")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_controller_runs_as_a_pod_of_the_built_image_on_a_real_node_and_rolls_the_nodes()
-> Result<(), Failure> {
    let _one = one_driver().await;
    let trio = ThreeNodes::of(Kubelets::Agent, Workers::InTwoZones).await?;
    let admin = trio.admin.clone();
    let sa = controller_account(&admin).await?;

    // The image, made from the binary under test, imported into the real node's containerd.
    let home = RealNode::start(&admin).await?;
    let binary = cli()?;
    let tar = home.dir().join("nodejob-image.tar");
    let libraries = nodejob_image::libraries(&binary)
        .map_err(|e| Failure(format!("the libraries of {}: {e}", binary.display())))?;
    let image = nodejob_image::write(&binary, &libraries, IMAGE, &tar)
        .map_err(|e| Failure(format!("making the image of {}: {e}", binary.display())))?;
    eprintln!(
        "controller_pod: image {} {} ({} files)",
        image.reference,
        image.digest,
        image.files.len()
    );
    home.import_image(&tar).await?;

    let pods = Api::<Pod>::namespaced(admin.clone(), SA_NAMESPACE);
    let pod_name = unique("nodejob-controller");
    let pod = controller_pod(&pod_name, home.name(), &sa, (free_port()?, free_port()?))?;
    pods.create(&PostParams::default(), &pod)
        .await
        .map_err(fail(format!("creating Pod {pod_name}")))?;
    let ready = wait_for(pods.clone(), &pod_name, "Ready", STARTED, pod_ready).await;
    if let Err(e) = ready {
        let now = pods.get(&pod_name).await.ok().and_then(|p| p.status);
        return Err(Failure(format!("{e}; the Pod's status: {now:#?}")));
    }

    let name = unique("nu");
    let rolls = write_node_upgrade(
        &admin,
        &name,
        TARGET,
        &trio.names,
        Kubelets::Agent.version_from(),
    )
    .await?;
    let done = wait_for(rolls.clone(), &name, "Ready", ROLL, |r| {
        upgrade_condition(r, "Ready").is_some_and(|(s, _)| s == "True")
    })
    .await?;
    let status = done.status.clone().unwrap_or_default();
    ensure!(
        upgrade_condition(&done, "Ready") == Some(("True".into(), "Completed".into()))
            && (status.counts.nodes, status.counts.up_to_date) == (3, 3),
        "{status:#?}"
    );
    for node in &trio.names {
        let host = trio.host(node).await?;
        ensure!(
            host.executions("upgrade") == 1,
            "{node}: the host upgrade ran {} times: {host:?}",
            host.executions("upgrade")
        );
    }

    // It was the Pod: its log (read through the apiserver from the real kubelet) says it led
    // and ran the resource to completion; its container ran the image's binary as the image's
    // user.
    let log = pods
        .logs(&pod_name, &LogParams::default())
        .await
        .map_err(fail(format!("reading the log of Pod {pod_name}")))?;
    let lines: Vec<Value> = (log.lines())
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    ensure!(
        lines.iter().any(|l| l["message"] == "leading")
            && lines.iter().any(|l| l["message"] == "run ended"
                && l["outcome"] == "completed"
                && l["name"] == name.as_str()),
        "the Pod's log:\n{log}"
    );
    let running = pods
        .get(&pod_name)
        .await
        .map_err(fail(format!("reading Pod {pod_name}")))?;
    let status = running.status.unwrap_or_default();
    let container = (status.container_statuses.iter().flatten()).next();
    let user = (container.and_then(|c| c.user.as_ref()))
        .and_then(|u| u.linux.as_ref())
        .map(|l| (l.uid, l.gid));
    ensure!(
        container.is_some_and(|c| c.restart_count == 0 && c.image_id == image.id)
            && user == Some((65532, 65532)),
        "the controller's container: {container:#?} (the image's ID {})",
        image.id
    );

    rolls
        .delete(&name, &DeleteParams::default())
        .await
        .map_err(fail(format!("deleting NodeUpgrade {name}")))?;
    pods.delete(&pod_name, &DeleteParams::default())
        .await
        .map_err(fail(format!("deleting Pod {pod_name}")))?;
    let uid = running.metadata.uid.unwrap_or_default();
    let gone = kube::runtime::wait::await_condition(
        pods.clone(),
        &pod_name,
        kube::runtime::wait::conditions::is_deleted(&uid),
    );
    tokio::time::timeout(Duration::from_secs(60), gone)
        .await
        .map_err(|_| Failure(format!("Pod {pod_name} not gone within 60 s")))?
        .map_err(|e| Failure(format!("waiting for Pod {pod_name} to go: {e}")))?;
    home.stop()?;
    Ok(())
}
