//! A command's flags written as the resource `nodejob controller` reconciles (`upgrade` as a
//! `NodeUpgrade`, `rotate-ca` as a `CARotation`): printed for Git (`-o yaml`), or applied
//! (`--apply`) as `kubectl apply` would: created, or its spec replaced.

use nodejob_crd::{CARotation, CARotationSpec, NodeUpgrade, NodeUpgradeSpec, Roll, RollApi};

use crate::exit::Exit;

/// A kind whose spec `--apply` replaces.
pub(crate) trait Declared: Roll {
    /// Its spec.
    type Spec: PartialEq + Clone;
    /// `nodeupgrade.nodejob.stratum.ciq.com`, as kubectl says what it applied.
    const SAID: &'static str;
    /// Its spec.
    fn spec(&mut self) -> &mut Self::Spec;
}

impl Declared for NodeUpgrade {
    type Spec = NodeUpgradeSpec;
    const SAID: &'static str = "nodeupgrade.nodejob.stratum.ciq.com";
    fn spec(&mut self) -> &mut NodeUpgradeSpec {
        &mut self.spec
    }
}

impl Declared for CARotation {
    type Spec = CARotationSpec;
    const SAID: &'static str = "carotation.nodejob.stratum.ciq.com";
    fn spec(&mut self) -> &mut CARotationSpec {
        &mut self.spec
    }
}

/// The name `--name` gives (refused unless a valid resource name), or `default`.
pub(crate) fn name(
    given: Option<&String>,
    default: impl FnOnce() -> String,
) -> Result<String, Exit> {
    match given {
        Some(name) if nodejob_core::is_dns1123_subdomain(name) => Ok(name.clone()),
        Some(name) => Err(Exit::usage(format!(
            "--name {name:?}: not a valid resource name (lowercase letters, digits, '-' and '.', \
             at most 253, a letter or digit at each end)"
        ))),
        None => Ok(default()),
    }
}

/// `object` named `name`, as its kind's constructor makes it with nothing else in its
/// metadata (kube's derive fills no more than the name; said here once for both kinds).
pub(crate) fn named<K: Roll>(mut object: K, name: String) -> K {
    *object.meta_mut() = k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
        name: Some(name),
        ..Default::default()
    };
    object
}

/// The resource as YAML, as `kubectl get -o yaml` prints one.
pub(crate) fn yaml<K: Roll>(roll: &K) -> Result<String, Exit> {
    serde_saphyr::to_string(roll).map_err(|e| Exit::failed(e.to_string()))
}

/// Creates the resource, or replaces the spec of the one of its name; says what it did as
/// `kubectl apply` does.
pub(crate) async fn apply<K: Declared>(
    api: &dyn crate::backend::Api,
    roll: &K,
) -> Result<String, Exit> {
    let name = roll.meta().name.clone().unwrap_or_default();
    let kind = K::KIND.kind;
    let failed = |e: nodejob_core::ApiError| {
        Exit::failed(format!(
            "{kind} {name}: {e} (are the CRDs applied? `nodejob render-crds | kubectl apply \
             --server-side -f -`)"
        ))
    };
    let said = K::SAID;
    match api.get_roll::<K>(&name).await {
        Ok(mut existing) => {
            let wanted = roll.clone().spec().clone();
            if *existing.spec() == wanted {
                return Ok(format!("{said}/{name} unchanged"));
            }
            *existing.spec() = wanted;
            api.replace_roll(&existing).await.map_err(failed)?;
            Ok(format!("{said}/{name} configured"))
        }
        // A 404 of the object, not of the kind (a CRD not installed says "could not find
        // the requested resource").
        Err(e) if e.is_not_found() && !e.message.contains("could not find the requested") => {
            api.create_roll(roll).await.map_err(failed)?;
            Ok(format!("{said}/{name} created"))
        }
        Err(e) => Err(failed(e)),
    }
}
