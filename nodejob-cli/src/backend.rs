//! Where the API calls go: an in-memory cluster of N nodes (`--simulate N`, `nodejob-fake`, in
//! virtual time) or the kubeconfig's cluster (`nodejob-kube`). The one place that tells the two
//! apart: a command gets a [`Target`] from [`Backend::block_on`], the MCP server from
//! [`Session::run`], and neither knows which it has, but for what only a simulation has (its
//! pace, its call counters).
//!
//! ```text
//!  --simulate N ─▶ Backend::Simulated ─ block_on ─▶ paused one-thread runtime, FakeCluster ─┐
//!  (none)       ─▶ Backend::Cluster   ─ block_on ─▶ multi-thread runtime, connect (kube) ───┴▶ Target
//!                                     ─ session  ─▶ Session: the fake on a thread of its own,
//!                                                   or the cluster connected on first use
//! ```

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use nodejob_core::{Clock, CustomApi, JobApi, LeaseApi, NodeApi, PodApi};
use nodejob_fake::FakeCluster;
use nodejob_fake::stratum::Fault;
use nodejob_kube::{KubeApi, RateLimit, Reached};
use tokio::runtime::Handle;
use tokio::sync::OnceCell;

use crate::args::Global;
use crate::exit::{Exit, code};
use crate::present;
use crate::sim::{self, Pacer, Setup, Speed};

/// Every API the commands use, as one object.
pub(crate) trait Api: JobApi + NodeApi + PodApi + LeaseApi + CustomApi {}

impl<T: JobApi + NodeApi + PodApi + LeaseApi + CustomApi + ?Sized> Api for T {}

/// The clock lines are stamped with: the cluster's (virtual when simulated).
pub(crate) type WallClock = Arc<dyn Fn() -> Timestamp + Send + Sync>;

/// What a command's work gets: the API, and the simulated cluster itself when there is one.
#[derive(Clone)]
pub(crate) struct Target {
    /// The API.
    pub(crate) api: Arc<dyn Api>,
    /// The simulated cluster, under `--simulate`: to pace what is shown, to count its calls.
    pub(crate) fake: Option<Arc<FakeCluster>>,
    /// Under `--simulate`, what the simulation says of itself.
    pub(crate) simulated: Option<Setup>,
    /// On a real cluster, its client as such: for what only a real apiserver answers (who it
    /// takes this client for, [`Target::whoami`]).
    pub(crate) kube: Option<Arc<KubeApi>>,
}

impl Target {
    /// Who the apiserver takes this client for (`kubectl auth whoami`); `None` under
    /// `--simulate`, or when it cannot say (an apiserver older than 1.28).
    pub(crate) async fn whoami(&self) -> Option<String> {
        let kube = self.kube.as_ref()?;
        match kube.whoami().await {
            Ok(user) => Some(user),
            Err(e) => {
                tracing::info!("who this client is, by a SelfSubjectReview: {e}");
                None
            }
        }
    }

    /// The cluster's wall clock: the simulation's virtual one, or the machine's.
    pub(crate) fn clock(&self) -> WallClock {
        match &self.fake {
            Some(fake) => {
                let fake = fake.clone();
                Arc::new(move || fake.wall_time())
            }
            None => Arc::new(Timestamp::now),
        }
    }

    /// Under `--simulate`, the speed a run is shown at: `--speed`, else as
    /// [`Speed::resolve`] says for whether a person `watched`.
    pub(crate) fn speed(&self, watched: bool) -> Option<Speed> {
        (self.simulated.as_ref()).map(|s| Speed::resolve(s.speed, watched))
    }

    /// Under `--simulate`, a pacer that shows the virtual time at `speed`; none at
    /// [`Speed::Max`].
    pub(crate) fn pacer(&self, speed: Option<Speed>) -> Option<Pacer> {
        Pacer::new(self.fake.clone()?, speed?)
    }

    /// Under `--simulate`, the API calls the cluster has seen so far.
    pub(crate) fn calls(&self) -> Option<usize> {
        self.fake.as_ref().map(|f| f.calls().len())
    }

    /// Under `--simulate`, the writes among the calls from the `since`-th on.
    pub(crate) fn writes_since(&self, since: usize) -> Vec<String> {
        (self.fake.as_ref())
            .map(|f| sim::writes_since(f, since))
            .unwrap_or_default()
    }
}

/// What a simulated cluster goes through before the command looks at it.
pub(crate) enum Prepare {
    /// Nothing: the cluster as built.
    Nothing,
    /// Its workloads started ([`sim::settle`]).
    Settle,
    /// Settled, then a Pod pinned to each of these nodes behind a budget that never allows a
    /// disruption, so that their drains are blocked ([`sim::undrainable`]).
    Undrainable(Vec<String>),
    /// Settled, then a rotation to this plan's CA stopped as `issue` begins ([`sim::stage`]).
    Stage(Box<certs_driver::Plan>),
    /// The simulated history in this namespace ([`sim::history`]), its faults armed.
    History(String),
}

/// The cluster the flags chose.
pub(crate) enum Backend {
    /// `--simulate N`.
    Simulated {
        /// N.
        nodes: usize,
        /// Faults armed on the nodes' hosts.
        faults: Vec<(String, Fault)>,
        /// What it goes through first.
        prepare: Prepare,
        /// `--speed`, if given.
        speed: Option<Speed>,
        /// `--simulate-start`, if given.
        start: Option<Timestamp>,
        /// `--qps` or `--burst`, when given: refused, as a simulated cluster takes no HTTP
        /// request to limit.
        rate_flag: Option<&'static str>,
    },
    /// The kubeconfig's cluster (`--kubeconfig`, `--context`).
    Cluster(Global),
}

impl Backend {
    /// `--simulate N` (a simulated cluster, as built) or the kubeconfig's cluster.
    pub(crate) fn new(global: &Global, simulate: Option<u16>) -> Backend {
        match simulate {
            Some(n) => Backend::Simulated {
                nodes: usize::from(n),
                faults: Vec::new(),
                prepare: Prepare::Nothing,
                speed: None,
                start: None,
                rate_flag: match (global.qps, global.burst) {
                    (Some(_), _) => Some("--qps"),
                    (None, Some(_)) => Some("--burst"),
                    (None, None) => None,
                },
            },
            None => Backend::Cluster(global.clone()),
        }
    }

    /// A simulated cluster goes through `prepare` first.
    pub(crate) fn prepared(mut self, then: Prepare) -> Backend {
        if let Backend::Simulated { prepare, .. } = &mut self {
            *prepare = then;
        }
        self
    }

    /// A simulated run is shown at `speed` (`--speed`) and its virtual clock starts at `start`
    /// (`--simulate-start`), where given.
    pub(crate) fn clocked(mut self, speed: Option<Speed>, start: Option<Timestamp>) -> Backend {
        if let Backend::Simulated {
            speed: s, start: t, ..
        } = &mut self
        {
            *s = speed;
            *t = start;
        }
        self
    }

    /// A simulated cluster has its workloads started and, when `undrainable` names nodes
    /// (`--simulate-undrainable NODES`), a Pod only each of them runs behind a budget that
    /// never allows a disruption ([`Prepare::Undrainable`]); refused naming the flag and every
    /// node the simulated cluster lacks.
    pub(crate) fn settled(self, undrainable: &[String]) -> Result<Backend, Exit> {
        let prepare = if undrainable.is_empty() {
            Prepare::Settle
        } else {
            self.has_nodes("--simulate-undrainable", undrainable)?;
            Prepare::Undrainable(undrainable.to_vec())
        };
        Ok(self.prepared(prepare))
    }

    /// A simulated cluster's `node` (when given: `--simulate-fail NODE`) fails with `fault`;
    /// refused naming the flag when there is no such simulated node.
    pub(crate) fn failing(mut self, node: Option<&str>, fault: Fault) -> Result<Backend, Exit> {
        if let Some(node) = node {
            self.has_node("--simulate-fail", node)?;
            if let Backend::Simulated { faults, .. } = &mut self {
                faults.push((node.to_string(), fault));
            }
        }
        Ok(self)
    }

    /// Refused, naming `flag`, when the cluster is simulated and has no node `node`.
    pub(crate) fn has_node(&self, flag: &str, node: &str) -> Result<(), Exit> {
        self.has_nodes(flag, &[node.to_string()])
    }

    /// Refused, naming `flag` and each node the cluster lacks, when it is simulated and
    /// lacks any of `wanted`.
    pub(crate) fn has_nodes(&self, flag: &str, wanted: &[String]) -> Result<(), Exit> {
        match self {
            Backend::Simulated { nodes, .. } => {
                let names = sim::node_names(*nodes);
                let missing: Vec<&str> = (wanted.iter())
                    .filter(|w| !names.contains(w))
                    .map(String::as_str)
                    .collect();
                if missing.is_empty() {
                    Ok(())
                } else {
                    let what = match missing.len() {
                        1 => "no such node",
                        _ => "no such nodes",
                    };
                    Err(Exit::usage(format!(
                        "{flag} {}: {what} in the simulated cluster ({})",
                        missing.join(","),
                        names.join(", ")
                    )))
                }
            }
            Backend::Cluster(_) => Ok(()),
        }
    }

    /// Runs `work` against the cluster to its end, on a runtime of its own: the simulation's
    /// (one thread, tokio's paused virtual time), or a multi-threaded one for a real cluster.
    pub(crate) fn block_on<W, F, R>(self, work: W) -> Result<R, Exit>
    where
        W: FnOnce(Target) -> F,
        F: Future<Output = Result<R, Exit>>,
    {
        match self {
            Backend::Simulated {
                nodes,
                faults,
                prepare,
                speed,
                start,
                rate_flag,
            } => simulated_runtime()?.block_on(async {
                refuse_rate_flag(rate_flag)?;
                let start = start.unwrap_or_else(|| sim::default_start(Timestamp::now()));
                let fake = simulate(nodes, &faults, &prepare, start).await?;
                work(Target {
                    api: fake.clone(),
                    fake: Some(fake),
                    simulated: Some(Setup {
                        nodes,
                        start,
                        speed,
                    }),
                    kube: None,
                })
                .await
            }),
            Backend::Cluster(global) => real_runtime()?.block_on(async {
                let api = Arc::new(connect(&global).await?);
                work(Target {
                    api: api.clone(),
                    fake: None,
                    simulated: None,
                    kube: Some(api),
                })
                .await
            }),
        }
    }

    /// The backend of an MCP session: the simulated cluster built now on a thread of its own
    /// and kept until the process ends, or the kubeconfig's cluster, connected on first use.
    pub(crate) fn session(self) -> Result<Session, Exit> {
        if let Backend::Simulated { rate_flag, .. } = &self {
            refuse_rate_flag(*rate_flag)?;
        }
        Ok(match self {
            Backend::Simulated {
                nodes,
                faults,
                prepare,
                speed,
                start,
                rate_flag: _,
            } => Session::Simulated(Simulation::start(
                Setup {
                    nodes,
                    start: start.unwrap_or_else(|| sim::default_start(Timestamp::now())),
                    speed,
                },
                faults,
                prepare,
            )?),
            Backend::Cluster(global) => Session::Cluster {
                global,
                api: OnceCell::new(),
            },
        })
    }
}

/// `--qps` and `--burst` under `--simulate`: refused (exit 2), naming the flag, rather than
/// ignored, so nobody believes a simulated run paced by them. The simulated cluster answers in
/// virtual time and takes no HTTP request to limit.
fn refuse_rate_flag(flag: Option<&'static str>) -> Result<(), Exit> {
    match flag {
        Some(flag) => Err(Exit::usage(format!(
            "{flag}: limits the requests to a real cluster's apiserver; --simulate sends none"
        ))),
        None => Ok(()),
    }
}

/// The client-side rate limit of `--qps` and `--burst`, each defaulting to
/// [`RateLimit::DEFAULT`]'s.
fn rate_limit(global: &Global) -> Result<RateLimit, Exit> {
    let qps = global.qps.unwrap_or(RateLimit::DEFAULT.qps());
    let burst = global.burst.unwrap_or(RateLimit::DEFAULT.burst());
    RateLimit::new(qps, burst).map_err(|e| {
        let flag = match e {
            nodejob_kube::RateLimitError::Burst => "--burst",
            _ => "--qps",
        };
        Exit::usage(format!("{flag}: {e}"))
    })
}

/// Builds a simulated cluster of `nodes` nodes with `faults` armed, runs its clock to `start`,
/// and takes it through `prepare`.
async fn simulate(
    nodes: usize,
    faults: &[(String, Fault)],
    prepare: &Prepare,
    start: Timestamp,
) -> Result<Arc<FakeCluster>, Exit> {
    let mut armed: Vec<(&str, Fault)> = faults.iter().map(|(n, f)| (n.as_str(), *f)).collect();
    let names = sim::node_names(nodes);
    if let Prepare::History(_) = prepare {
        armed.extend(sim::history_faults(&names));
    }
    let fake = sim::cluster(nodes, &armed)?;
    sim::start_at(&fake, start).await;
    match prepare {
        Prepare::Nothing => {}
        Prepare::Settle => sim::settle(&fake).await,
        Prepare::Undrainable(nodes) => {
            sim::settle(&fake).await;
            sim::undrainable(&fake, nodes).await?;
        }
        Prepare::Stage(plan) => {
            sim::settle(&fake).await;
            sim::stage(&fake, plan, present::rotation::issue_begins).await?;
        }
        Prepare::History(namespace) => sim::history(&fake, nodes, namespace).await?,
    }
    Ok(fake)
}

/// The backend of an MCP session.
pub(crate) enum Session {
    /// `--simulate N`: one cluster for the session.
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
///
/// It lives on a thread of its own, in a runtime whose clock is tokio's paused virtual time.
/// The server's runtime reads stdin on blocking threads, and a paused clock does not move while
/// a blocking task is in flight, so the two cannot share a runtime. Every future that touches
/// the fake is spawned on the simulation's runtime and awaited from the server's; such a
/// future never awaits anything from outside that runtime, so the virtual clock only moves
/// when the cluster is idle.
pub(crate) struct Simulation {
    handle: Handle,
    fake: Arc<FakeCluster>,
    simulated: Setup,
}

impl Simulation {
    /// Builds the cluster on a thread of its own and keeps it until the process ends.
    fn start(
        simulated: Setup,
        faults: Vec<(String, Fault)>,
        prepare: Prepare,
    ) -> Result<Simulation, Exit> {
        let (nodes, start) = (simulated.nodes, simulated.start);
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
                    match simulate(nodes, &faults, &prepare, start).await {
                        Ok(fake) => {
                            let _ = ready.send(Ok((Handle::current(), fake)));
                            // Serve the futures spawned here for the life of the process.
                            std::future::pending::<()>().await;
                        }
                        Err(e) => {
                            let _ = ready.send(Err(Exit::failed(format!(
                                "building the simulated cluster: {}",
                                e.message
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
            simulated,
        })
    }
}

impl Session {
    /// The names of the simulated nodes, under `--simulate`.
    pub(crate) fn simulated_nodes(&self) -> Option<Vec<String>> {
        match self {
            Session::Simulated(s) => Some(sim::node_names(s.simulated.nodes)),
            Session::Cluster { .. } => None,
        }
    }

    /// Runs `work` against the cluster: on the simulation's runtime, or as a task of the
    /// caller's. It runs to its end even if the caller stops waiting for it.
    ///
    /// # Errors
    /// [`SessionError::Connecting`]: the cluster could not be reached (the kubeconfig's
    /// message); [`SessionError::Ended`]: `work` panicked.
    pub(crate) async fn run<W, F, R>(&self, work: W) -> Result<R, SessionError>
    where
        W: FnOnce(Target) -> F,
        F: Future<Output = R> + Send + 'static,
        R: Send + 'static,
    {
        let task = match self {
            Session::Simulated(s) => {
                let target = Target {
                    api: s.fake.clone(),
                    fake: Some(s.fake.clone()),
                    simulated: Some(s.simulated.clone()),
                    kube: None,
                };
                s.handle.spawn(work(target))
            }
            Session::Cluster { global, api } => {
                let api = api
                    .get_or_try_init(|| async { connect(global).await.map(Arc::new) })
                    .await
                    .map_err(SessionError::Connecting)?
                    .clone();
                tokio::spawn(work(Target {
                    api: api.clone(),
                    fake: None,
                    simulated: None,
                    kube: Some(api),
                }))
            }
        };
        task.await.map_err(SessionError::Ended)
    }
}

/// Why [`Session::run`] did not run its work to an end.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SessionError {
    /// The cluster could not be connected to or did not answer: what the connection said
    /// (the kubeconfig, the context, the apiserver unreachable), as the command says it.
    #[error("{}", .0.message)]
    Connecting(Exit),
    /// The work panicked (or its runtime went away) before it ended.
    #[error("the operation ended abnormally: {0}")]
    Ended(tokio::task::JoinError),
}

/// A runtime for a simulated cluster: one thread, paused virtual time.
fn simulated_runtime() -> Result<tokio::runtime::Runtime, Exit> {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .map_err(|e| Exit::failed(format!("starting the runtime: {e}")))
}

/// The stack of each worker thread of the real runtime: a driver's run is one deep future
/// (each node's machine, its steps, the API layers), and the MCP server polls it on a worker,
/// whose default, 2 MiB, an unoptimised build overran; 8 MiB, as a process's main thread.
const WORKER_STACK: usize = 8 << 20;

/// A runtime for a real cluster, and for the MCP server.
pub(crate) fn real_runtime() -> Result<tokio::runtime::Runtime, Exit> {
    tokio::runtime::Builder::new_multi_thread()
        .thread_stack_size(WORKER_STACK)
        .enable_all()
        .build()
        .map_err(|e| Exit::failed(format!("starting the runtime: {e}")))
}

/// How many times the apiserver is tried before the command gives up on it, and the pause
/// before each retry: an unreachable cluster is said within seconds, a blip is ridden out.
const REACH_PAUSES: [Duration; 2] = [Duration::from_secs(1), Duration::from_secs(2)];

/// The bound of one attempt to reach the apiserver (its connect and its answer).
const REACH_WITHIN: Duration = Duration::from_secs(3);

/// Connects as kubectl would: `--kubeconfig` (or `KUBECONFIG`), `--context`; then makes sure
/// the apiserver answers ([`reach`]) before any work starts.
async fn connect(global: &Global) -> Result<KubeApi, Exit> {
    use kube::config::{KubeConfigOptions, Kubeconfig};
    let options = KubeConfigOptions {
        context: global.context.clone(),
        ..KubeConfigOptions::default()
    };
    let (config, current, trusted) = match &global.kubeconfig {
        Some(path) => {
            let kc = read_kubeconfig(path)?;
            let current = kc.current_context.clone();
            let trusted = trusted_by(Some(&kc), global.context.as_deref());
            let config = kube::Config::from_custom_kubeconfig(kc, &options)
                .await
                .map_err(|e| context_error(global, e.to_string()))?;
            (config, current, trusted)
        }
        None => {
            let config = nodejob_kube::load_config(global.context.as_deref())
                .await
                .map_err(|e| context_error(global, format!("{e:#}")))?;
            let kc = Kubeconfig::read().ok();
            let trusted = trusted_by(kc.as_ref(), global.context.as_deref());
            (config, kc.and_then(|kc| kc.current_context), trusted)
        }
    };
    let context = match (&global.context, current) {
        (Some(context), _) => format!("context {context}"),
        (None, Some(current)) => format!("context {current}"),
        (None, None) => "the in-cluster service account".to_string(),
    };
    let server = config
        .cluster_url
        .to_string()
        .trim_end_matches('/')
        .to_string();
    let api = KubeApi::from_config_limited(config, rate_limit(global)?)
        .map_err(|e| Exit::failed(format!("connecting to {server}: {e:#}")))?;
    reach(&api, &server, &context, &trusted).await?;
    Ok(api)
}

/// What the client trusts the apiserver's certificate by, as the kubeconfig `kc` says it for
/// `context` (else its current context): its cluster's `certificate-authority` file, its
/// `certificate-authority-data`, or neither (the system's roots); the in-cluster service
/// account's CA when there is no kubeconfig.
fn trusted_by(kc: Option<&kube::config::Kubeconfig>, context: Option<&str>) -> String {
    let Some(kc) = kc else {
        return "the in-cluster service account's CA \
                (/var/run/secrets/kubernetes.io/serviceaccount/ca.crt)"
            .into();
    };
    let context = context.or(kc.current_context.as_deref());
    let cluster = (kc.contexts.iter())
        .find(|c| Some(c.name.as_str()) == context)
        .and_then(|c| c.context.as_ref())
        .and_then(|c| kc.clusters.iter().find(|n| n.name == c.cluster))
        .and_then(|n| n.cluster.as_ref().map(|c| (n.name.as_str(), c)));
    match cluster {
        Some((name, c)) => match (&c.certificate_authority, &c.certificate_authority_data) {
            (Some(file), _) => {
                format!("the certificate-authority of cluster {name} in the kubeconfig ({file})")
            }
            (None, Some(_)) => {
                format!("the certificate-authority-data of cluster {name} in the kubeconfig")
            }
            (None, None) => format!(
                "the system's root certificates (cluster {name} in the kubeconfig has no \
                 certificate-authority)"
            ),
        },
        None => "the kubeconfig's certificate-authority".into(),
    }
}

/// The kubeconfig files of `path` (a `:`-separated list, as `KUBECONFIG`), merged in order as
/// kubectl merges them. In a list, a file that does not exist is skipped, as kubectl skips it;
/// a single file must exist.
fn read_kubeconfig(path: &std::path::Path) -> Result<kube::config::Kubeconfig, Exit> {
    use kube::config::Kubeconfig;
    let files: Vec<_> = std::env::split_paths(path)
        .filter(|f| !f.as_os_str().is_empty())
        .collect();
    let listed = files.len() > 1;
    let mut merged: Option<Kubeconfig> = None;
    for file in &files {
        if !file.exists() {
            if listed {
                tracing::debug!("kubeconfig {}: no such file, skipped", file.display());
                continue;
            }
            return Err(Exit::usage(format!(
                "--kubeconfig {}: no such file",
                file.display()
            )));
        }
        let kc = Kubeconfig::read_from(file)
            .map_err(|e| Exit::usage(format!("--kubeconfig: reading {}: {e}", file.display())))?;
        merged = Some(match merged {
            None => kc,
            Some(m) => m
                .merge(kc)
                .map_err(|e| Exit::usage(format!("--kubeconfig: {e}")))?,
        });
    }
    merged.ok_or_else(|| {
        Exit::usage(format!(
            "--kubeconfig {}: none of its files exists",
            path.display()
        ))
    })
}

/// Tries the apiserver at `server` (of `context`) until it answers, at most
/// `REACH_PAUSES.len() + 1` times, each bounded by [`REACH_WITHIN`], saying each retry on
/// stderr; then gives up, naming the server and the context, with [`code::UNREACHABLE`]. A
/// certificate the client does not trust is said at once, as invalid input (exit 2): what
/// the client trusts it by (`trusted`, the kubeconfig's certificate-authority) must change;
/// so is a server that answers but not as an apiserver (a 404 to `GET /version`): the
/// kubeconfig's server must change.
async fn reach(api: &KubeApi, server: &str, context: &str, trusted: &str) -> Result<(), Exit> {
    let attempts = REACH_PAUSES.len() + 1;
    let mut pauses = REACH_PAUSES.iter();
    loop {
        let why = match api.reach(REACH_WITHIN).await {
            Ok(Reached::NotApiserver { status }) => {
                return Err(Exit::usage(format!(
                    "the server at {server} ({context} of the kubeconfig) does not answer as a \
                     Kubernetes apiserver (GET /version: {status}): is the kubeconfig's server \
                     right?"
                )));
            }
            Ok(_) => return Ok(()),
            Err(e) if e.is_untrusted() => {
                return Err(Exit::usage(format!(
                    "the apiserver {server} ({context} of the kubeconfig) presented a \
                     certificate this machine does not trust ({}): it was checked against \
                     {trusted}; give the cluster's CA there (`kubectl config view --minify \
                     --raw` shows it)",
                    cause(&e.message)
                )));
            }
            Err(e) => cause(&e.message),
        };
        let Some(pause) = pauses.next() else {
            return Err(Exit::with(
                code::UNREACHABLE,
                format!(
                    "cannot reach the apiserver {server} ({context} of the kubeconfig) after \
                     {attempts} attempts: {why}; is the cluster up and this machine allowed to \
                     reach it? (`kubectl get --raw /version` tries the same)"
                ),
            ));
        };
        let next = attempts - pauses.len();
        eprintln!(
            "cannot reach {server} ({why}); retrying {next}/{attempts} in {}s",
            pause.as_secs()
        );
        tokio::time::sleep(*pause).await;
    }
}

/// The innermost cause of a transport error's `: `-separated chain, which says what failed
/// (`tcp connect error: Connection refused (os error 111)`), without the layers above it.
fn cause(message: &str) -> String {
    let parts: Vec<&str> = message.split(": ").collect();
    match parts.as_slice() {
        [.., outer, inner] if outer.ends_with("error") => format!("{outer}: {inner}"),
        [.., inner] => inner.to_string(),
        [] => message.to_string(),
    }
}

fn context_error(global: &Global, e: String) -> Exit {
    match &global.context {
        Some(context) => Exit::usage(format!(
            "--context {context}: {e}; `kubectl config get-contexts` lists the contexts"
        )),
        None => Exit::usage(format!(
            "loading the kubeconfig: {e}; pass --kubeconfig or set KUBECONFIG, or try --simulate 5"
        )),
    }
}
