//! Where the tools' API calls go: one in-memory cluster kept for the session (`--simulate N`),
//! or the cluster of the kubeconfig, connected on first use.
//!
//! The simulated cluster lives on a thread of its own, in a runtime whose clock is tokio's
//! paused virtual time (as `nodejob upgrade --simulate` runs it). The server's runtime reads
//! stdin on blocking threads, and a paused clock does not move while a blocking task is in
//! flight, so the two cannot share a runtime. Every future that touches the fake is spawned on
//! the simulation's runtime and awaited from the server's; such a future never awaits anything
//! from outside that runtime, so the virtual clock only moves when the cluster is idle.

use std::future::Future;
use std::sync::Arc;

use nodejob_core::{JobApi, LeaseApi, NodeApi, PodApi};
use nodejob_fake::FakeCluster;
use nodejob_kube::KubeApi;
use tokio::runtime::Handle;
use tokio::sync::OnceCell;

use crate::Exit;
use crate::args::Global;
use crate::commands::{connect, simulated_runtime};
use crate::sim;

/// Every API the tools use, as one object.
pub(crate) trait Api: JobApi + NodeApi + PodApi + LeaseApi {}

impl<T: JobApi + NodeApi + PodApi + LeaseApi + ?Sized> Api for T {}

/// What a tool's work gets: the API, and the simulated cluster itself when there is one (to pace
/// the progress and to count its calls).
#[derive(Clone)]
pub(crate) struct Target {
    /// The API.
    pub(crate) api: Arc<dyn Api>,
    /// The simulated cluster, under `--simulate`.
    pub(crate) fake: Option<Arc<FakeCluster>>,
}

/// The backend of a session.
pub(crate) enum Backend {
    /// `--simulate N`.
    Simulated(Simulation),
    /// The kubeconfig's cluster, connected on first use (a tool call before it is reachable
    /// says why, and the next call tries again).
    Cluster {
        /// The global flags: `--kubeconfig`, `--context`.
        global: Global,
        /// The connection, once made.
        api: OnceCell<Arc<KubeApi>>,
    },
}

/// A simulated cluster and the runtime it runs on.
pub(crate) struct Simulation {
    handle: Handle,
    fake: Arc<FakeCluster>,
    nodes: usize,
}

impl Simulation {
    /// Builds the cluster of `n` nodes (as `upgrade --simulate N` does) on a thread of its own,
    /// lets its workloads start, and keeps it until the process ends.
    pub(crate) fn start(n: usize) -> Result<Simulation, Exit> {
        let (ready, started) = std::sync::mpsc::channel();
        std::thread::Builder::new()
            .name("nodejob-simulation".into())
            .spawn(move || {
                let runtime = match simulated_runtime() {
                    Ok(runtime) => runtime,
                    Err(e) => {
                        let _ = ready.send(Err(e));
                        return;
                    }
                };
                runtime.block_on(async {
                    match sim::cluster(n, &[]) {
                        Ok(fake) => {
                            sim::settle(&fake).await;
                            let _ = ready.send(Ok((Handle::current(), fake)));
                            // Serve the futures spawned here for the life of the process.
                            std::future::pending::<()>().await;
                        }
                        Err(e) => {
                            let _ = ready.send(Err(Exit::failed(format!(
                                "building the simulated cluster: {e:#}"
                            ))));
                        }
                    }
                });
            })
            .map_err(|e| Exit::failed(format!("starting the simulation: {e}")))?;
        let (handle, fake) = started
            .recv()
            .map_err(|_| Exit::failed("the simulation ended before it started"))??;
        Ok(Simulation {
            handle,
            fake,
            nodes: n,
        })
    }
}

impl Backend {
    /// The backend the flags ask for.
    pub(crate) fn new(global: &Global, simulate: Option<u16>) -> Result<Backend, Exit> {
        Ok(match simulate {
            Some(n) => Backend::Simulated(Simulation::start(usize::from(n))?),
            None => Backend::Cluster {
                global: super::copy(global),
                api: OnceCell::new(),
            },
        })
    }

    /// The names of the simulated nodes, under `--simulate`.
    pub(crate) fn simulated_nodes(&self) -> Option<Vec<String>> {
        match self {
            Backend::Simulated(s) => Some(sim::node_names(s.nodes)),
            Backend::Cluster { .. } => None,
        }
    }

    /// Runs `work` against the backend: on the simulation's runtime, or as a task of the
    /// server's. It runs to its end even if the caller stops waiting for it.
    ///
    /// # Errors
    /// The cluster could not be reached (the kubeconfig's message), or `work` panicked.
    pub(crate) async fn run<W, F, R>(&self, work: W) -> Result<R, String>
    where
        W: FnOnce(Target) -> F,
        F: Future<Output = R> + Send + 'static,
        R: Send + 'static,
    {
        let task = match self {
            Backend::Simulated(s) => {
                let target = Target {
                    api: s.fake.clone(),
                    fake: Some(s.fake.clone()),
                };
                s.handle.spawn(work(target))
            }
            Backend::Cluster { global, api } => {
                let api = api
                    .get_or_try_init(|| async { connect(global).await.map(Arc::new) })
                    .await
                    .map_err(|e| e.message)?
                    .clone();
                tokio::spawn(work(Target { api, fake: None }))
            }
        };
        task.await
            .map_err(|e| format!("the operation ended abnormally: {e}"))
    }
}
