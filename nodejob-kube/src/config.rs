//! Loading the cluster configuration as kubectl does, with kube's own retry turned off.

use kube::config::{InferConfigError, KubeConfigOptions, KubeconfigError};

/// Why no client could be made.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectError {
    /// Neither a kubeconfig (`KUBECONFIG`, `~/.kube/config`) nor the in-cluster service account
    /// gave a configuration.
    #[error("loading the cluster configuration (kubeconfig, then in-cluster)")]
    Infer(#[source] InferConfigError),

    /// The kubeconfig has no usable context of that name.
    #[error("loading context {context:?} from the kubeconfig")]
    Context {
        /// The context asked for.
        context: String,
        /// What kube reported.
        #[source]
        source: KubeconfigError,
    },

    /// The configuration was loaded but no client could be built from it (TLS, proxy, auth).
    #[error("building a client for {cluster_url}")]
    Client {
        /// The apiserver's URL, as configured.
        cluster_url: String,
        /// What kube reported.
        #[source]
        source: kube::Error,
    },
}

/// Loads the configuration as kubectl does, with kube's built-in retry turned off.
///
/// Without a `context`: the current context of the kubeconfig (`KUBECONFIG`, a `:`-separated
/// list merged in order, else `~/.kube/config`); when there is none, the in-cluster service
/// account (`KUBERNETES_SERVICE_HOST`/`_PORT` and
/// `/var/run/secrets/kubernetes.io/serviceaccount/`). With a `context`: that context of the
/// kubeconfig, as `kubectl --context` (no in-cluster fallback).
///
/// `default_retry` is set to `false`: kube 5 otherwise wraps every client in a retry layer that
/// retries 429, 503 and 504 up to 15 times with exponential backoff up to 1000s, honouring
/// `Retry-After` (`RetryPolicy::server_retry`), which can hold one call for minutes. The runner
/// retries itself, inside its own wait bound.
pub async fn load_config(context: Option<&str>) -> Result<kube::Config, ConnectError> {
    let mut config = match context {
        None => kube::Config::infer().await.map_err(ConnectError::Infer)?,
        Some(context) => {
            let options = KubeConfigOptions {
                context: Some(context.to_string()),
                ..KubeConfigOptions::default()
            };
            kube::Config::from_kubeconfig(&options)
                .await
                .map_err(|source| ConnectError::Context {
                    context: context.to_string(),
                    source,
                })?
        }
    };
    config.default_retry = false;
    Ok(config)
}
