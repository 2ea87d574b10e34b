//! The least-privilege RBAC of `deploy/rbac.yaml`: applied for a ServiceAccount as committed
//! or with one verb taken away, and waited for until the apiserver's authorizer grants it.

use std::time::Duration;

use k8s_openapi::api::authorization::v1::SubjectAccessReview;
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use kube::Client;
use kube::api::{Api, PostParams};
use nodejob_conformance::Failure;
use serde_json::{Value, json};

use crate::admin::{create, fail, typed};
use crate::conventions::{SA_NAMESPACE, SETTLE};

/// The objects of `deploy/rbac.yaml`, to apply as they are or with one verb taken away.
#[derive(Clone, Debug)]
pub struct Rbac {
    docs: Vec<Value>,
}

impl Rbac {
    /// `deploy/rbac.yaml` as committed.
    pub fn committed() -> Self {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../deploy/rbac.yaml");
        let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {path}: {e}"));
        let docs = serde_saphyr::from_multiple::<Value>(&text)
            .unwrap_or_else(|e| panic!("parsing {path}: {e}"));
        Rbac { docs }
    }

    /// Every `(resource, verb)` the Role and ClusterRole grant.
    pub fn grants(&self) -> Vec<(String, String)> {
        (self.permissions().into_iter())
            .map(|p| (p.resource, p.verb))
            .collect()
    }

    /// Every verb on a resource the Role and ClusterRole grant, in the order of their rules:
    /// the one walk over the rules that [`Rbac::grants`] and [`Rbac::wait_effective`] read.
    fn permissions(&self) -> Vec<Permission> {
        let mut out = Vec::new();
        for doc in &self.docs {
            let scope = match doc["kind"].as_str() {
                Some("ClusterRole") => Scope::Cluster,
                Some("Role") => Scope::Namespace,
                _ => continue,
            };
            for rule in doc["rules"].as_array().into_iter().flatten() {
                let group = strings(&rule["apiGroups"])
                    .into_iter()
                    .next()
                    .unwrap_or_default();
                for resource in strings(&rule["resources"]) {
                    for verb in strings(&rule["verbs"]) {
                        out.push(Permission {
                            scope,
                            group: group.clone(),
                            resource: resource.clone(),
                            verb,
                        });
                    }
                }
            }
        }
        out
    }

    /// The same objects without `verb` on `resource`.
    pub fn without(&self, resource: &str, verb: &str) -> Self {
        let mut docs = self.docs.clone();
        for doc in &mut docs {
            if let Some(rules) = doc.get_mut("rules").and_then(Value::as_array_mut) {
                for rule in rules.iter_mut() {
                    if strings(&rule["resources"]).iter().any(|r| r == resource)
                        && let Some(verbs) = rule["verbs"].as_array_mut()
                    {
                        verbs.retain(|v| v.as_str() != Some(verb));
                    }
                }
                rules.retain(|rule| rule["verbs"].as_array().is_some_and(|v| !v.is_empty()));
            }
        }
        Rbac { docs }
    }

    fn of_kind(&self, kind: &str) -> Value {
        self.docs
            .iter()
            .find(|d| d["kind"] == kind)
            .cloned()
            .unwrap_or_else(|| panic!("no {kind} in deploy/rbac.yaml"))
    }

    /// Applies these objects for ServiceAccount `sa` (in [`SA_NAMESPACE`]): its ClusterRole and
    /// binding, and its Role and RoleBinding in each of `namespaces`. Names carry `sa`, so
    /// variants live side by side.
    pub async fn apply(
        &self,
        admin: &Client,
        sa: &str,
        namespaces: &[&str],
    ) -> Result<(), Failure> {
        let subject = json!([{"kind": "ServiceAccount", "name": sa, "namespace": SA_NAMESPACE}]);
        let mut account: ServiceAccount = typed(self.of_kind("ServiceAccount"))?;
        account.metadata.name = Some(sa.into());
        create(&Api::namespaced(admin.clone(), SA_NAMESPACE), &account).await?;

        let mut cluster_role: ClusterRole = typed(self.of_kind("ClusterRole"))?;
        cluster_role.metadata.name = Some(format!("{sa}-nodes"));
        create(&Api::all(admin.clone()), &cluster_role).await?;
        let mut binding = self.of_kind("ClusterRoleBinding");
        binding["metadata"]["name"] = json!(format!("{sa}-nodes"));
        binding["roleRef"]["name"] = json!(format!("{sa}-nodes"));
        binding["subjects"] = subject.clone();
        create(
            &Api::<ClusterRoleBinding>::all(admin.clone()),
            &typed(binding)?,
        )
        .await?;

        for ns in namespaces {
            let mut role: Role = typed(self.of_kind("Role"))?;
            role.metadata.name = Some(format!("{sa}-runner"));
            role.metadata.namespace = Some(ns.to_string());
            create(&Api::namespaced(admin.clone(), ns), &role).await?;
            let mut binding = self.of_kind("RoleBinding");
            binding["metadata"] = json!({"name": format!("{sa}-runner"), "namespace": ns});
            binding["roleRef"]["name"] = json!(format!("{sa}-runner"));
            binding["subjects"] = subject.clone();
            create(
                &Api::<RoleBinding>::namespaced(admin.clone(), ns),
                &typed(binding)?,
            )
            .await?;
        }
        self.wait_effective(admin, sa, namespaces).await
    }

    /// Waits until the apiserver's authorizer grants `sa` every rule applied: RBAC authorizes
    /// from informer caches, so a binding just created may still be refused for a moment
    /// (`plugin/pkg/auth/authorizer/rbac` reads Roles and bindings through listers). Asked
    /// with a SubjectAccessReview per verb, resource and namespace.
    async fn wait_effective(
        &self,
        admin: &Client,
        sa: &str,
        namespaces: &[&str],
    ) -> Result<(), Failure> {
        let reviews = Api::<SubjectAccessReview>::all(admin.clone());
        let mut pending: Vec<(Option<String>, Value, String)> = Vec::new();
        for Permission {
            scope,
            group,
            resource,
            verb,
        } in self.permissions()
        {
            let scopes: Vec<Option<String>> = match scope {
                Scope::Cluster => vec![None],
                Scope::Namespace => namespaces.iter().map(|ns| Some(ns.to_string())).collect(),
            };
            let (resource, sub) = resource.split_once('/').unwrap_or((&resource, ""));
            for ns in scopes {
                let attributes = json!({
                    "namespace": ns, "verb": verb, "group": group,
                    "resource": resource, "subresource": sub,
                });
                pending.push((ns, attributes, format!("{verb} {resource}")));
            }
        }
        let user = format!("system:serviceaccount:{SA_NAMESPACE}:{sa}");
        let deadline = tokio::time::Instant::now() + SETTLE;
        while let Some((ns, attributes, what)) = pending.last().cloned() {
            let review: SubjectAccessReview = typed(json!({
                "spec": {
                    "user": user,
                    "groups": ["system:serviceaccounts",
                               format!("system:serviceaccounts:{SA_NAMESPACE}"),
                               "system:authenticated"],
                    "resourceAttributes": attributes,
                }
            }))?;
            let answer = reviews
                .create(&PostParams::default(), &review)
                .await
                .map_err(fail("creating a SubjectAccessReview"))?;
            if answer.status.is_some_and(|s| s.allowed) {
                pending.pop();
                continue;
            }
            if tokio::time::Instant::now() > deadline {
                return Err(Failure(format!(
                    "{user} still may not {what} in {} after {SETTLE:?}",
                    ns.as_deref().unwrap_or("the cluster")
                )));
            }
            // No watch reports an authorizer's cache: ask again shortly.
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Ok(())
    }
}

/// Where a rule applies: the ClusterRole's cluster-wide, the Role's in each namespace it is
/// applied in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Scope {
    Cluster,
    Namespace,
}

/// One verb on one resource (`pods/eviction`: a subresource) of an API group that a rule
/// grants.
#[derive(Clone, Debug)]
struct Permission {
    scope: Scope,
    group: String,
    resource: String,
    verb: String,
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s.as_str().map(String::from))
        .collect()
}
