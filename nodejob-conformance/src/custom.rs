//! Scenarios of the custom resource verbs ([`CustomApi`], through `nodejob-crd`'s typed
//! [`RollApi`]) on the declarative rolls' kinds: what the apiserver does with a custom resource
//! whose CRD has `/status`. Expanded into tests by [`conformance_custom!`](crate::conformance_custom).

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta, Time};
use nodejob_core::{ApiResult, Change, CustomApi, CustomKind, ErrorKind};
use nodejob_crd::{NodeUpgrade, NodeUpgradeSpec, NodeUpgradeStatus, Roll, RollApi, UpgradeCounts};

use crate::{Failure, ensure};

/// The name of every scenario of this module, in the order
/// [`conformance_custom!`](crate::conformance_custom) expands them (`tests/lists.rs` keeps them
/// equal).
pub const ALL: &[&str] = &[
    "a_roll_is_created_then_listed_and_watched_from_the_lists_version",
    "the_generation_follows_the_spec_and_the_status_is_written_apart",
    "a_status_apply_owns_its_fields_and_merges_conditions_by_type",
    "a_finalizer_holds_a_deleted_roll_until_it_is_removed",
    "a_kind_not_installed_is_not_found",
];

/// A backend for these scenarios: the two kinds installed, an API allowed every verb on them.
pub trait Customs: Send + Sync + 'static {
    /// The API.
    type Api: CustomApi + 'static;
    /// The API, as the scenarios use it.
    fn api(&self) -> Arc<Self::Api>;
    /// A prefix of this scenario's own for the names of its objects (they are
    /// cluster-scoped: scenarios on one cluster must not meet).
    fn prefix(&self) -> String;
}

/// A `NodeUpgrade` named `name` to `target`.
fn upgrade(name: &str, target: &str) -> NodeUpgrade {
    let mut roll = NodeUpgrade::new(
        name,
        NodeUpgradeSpec {
            target: target.into(),
            version_from: "kubelet".into(),
            selector: None,
            nodes: vec!["a-node".into()],
            max_unavailable: k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(1),
            drain_timeout: None,
            delete_empty_dir_data: false,
            force: false,
            on_undrainable: Default::default(),
            max_blocked: None,
            deadline: None,
            reboot_timeout: None,
            window: None,
            failure_budget: None,
            on_failure: Default::default(),
            soak: None,
            health_check: Vec::new(),
            allow_downgrade: false,
            allow_skew: false,
            paused: false,
        },
    );
    roll.metadata = ObjectMeta {
        name: Some(name.into()),
        ..ObjectMeta::default()
    };
    roll
}

fn condition(type_: &str, status: &str, reason: &str) -> Condition {
    Condition {
        type_: type_.into(),
        status: status.into(),
        reason: reason.into(),
        message: format!("{type_} is {status}"),
        last_transition_time: Time(
            k8s_openapi::jiff::Timestamp::from_second(1_790_000_000).unwrap(),
        ),
        observed_generation: Some(1),
    }
}

/// Watches the NodeUpgrades from `from` until a change matches `wanted` (`Ok`), or 30 s pass
/// (`Err` with every change seen). Other scenarios on the same cluster write the same kind at
/// the same time, so a watch's first event need not be this scenario's.
async fn watch_for<A: CustomApi + ?Sized>(
    api: &A,
    from: &str,
    wanted: impl Fn(&Change<NodeUpgrade>) -> bool,
) -> ApiResult<Result<(), Vec<Change<NodeUpgrade>>>> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let mut from = from.to_owned();
    let mut seen = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        if left.is_zero() {
            return Ok(Err(seen));
        }
        let changes = api.wait_rolls::<NodeUpgrade>(&from, left).await?;
        if changes.changes.iter().any(&wanted) {
            return Ok(Ok(()));
        }
        seen.extend(changes.changes);
        from = changes.resource_version;
    }
}

fn generation(roll: &NodeUpgrade) -> i64 {
    roll.metadata.generation.unwrap_or_default()
}

/// A created roll has generation 1 and no status (one sent is dropped); a list gives the
/// version a watch starts from, and that watch sees the change made after it.
pub async fn a_roll_is_created_then_listed_and_watched_from_the_lists_version<B: Customs>(
    backend: Arc<B>,
) -> Result<(), Failure> {
    let api = backend.api();
    let name = format!("{}-created", backend.prefix());
    let at = api.list_rolls_at::<NodeUpgrade>().await?;
    let mut sent = upgrade(&name, "v1.38.0");
    sent.status = Some(NodeUpgradeStatus {
        observed_generation: Some(9),
        ..NodeUpgradeStatus::default()
    });
    let created = api.create_roll(&sent).await?;
    ensure!(generation(&created) == 1, "{:?}", created.metadata);
    ensure!(
        created.status.is_none(),
        "create keeps no status: {:?}",
        created.status
    );
    ensure!(created.metadata.uid.is_some(), "{:?}", created.metadata);
    match api.create_roll(&sent).await {
        Err(e) if e.kind == ErrorKind::AlreadyExists => {}
        other => {
            return Err(Failure(format!(
                "a second create must be AlreadyExists: {other:?}"
            )));
        }
    }
    let seen = watch_for(&*api, &at.resource_version, |c| {
        matches!(c, Change::Applied(r) if r.metadata.name.as_deref() == Some(&name)
            && r.metadata.uid == created.metadata.uid)
    })
    .await?;
    ensure!(
        seen.is_ok(),
        "the watch from the list's version sees the create: {seen:?}"
    );
    let listed = api.list_rolls_at::<NodeUpgrade>().await?;
    ensure!(
        listed
            .rolls
            .iter()
            .any(|r| r.metadata.name.as_deref() == Some(&name)),
        "listed: {:?}",
        listed
            .rolls
            .iter()
            .map(|r| &r.metadata.name)
            .collect::<Vec<_>>()
    );
    api.delete_roll::<NodeUpgrade>(&name, None).await?;
    Ok(())
}

/// A spec change bumps the generation, a label does not; an update keeps the stored status and
/// a status write keeps the spec; an update needs the stored resourceVersion.
pub async fn the_generation_follows_the_spec_and_the_status_is_written_apart<B: Customs>(
    backend: Arc<B>,
) -> Result<(), Failure> {
    let api = backend.api();
    let name = format!("{}-generation", backend.prefix());
    let created = api.create_roll(&upgrade(&name, "v1.38.0")).await?;

    let status = NodeUpgradeStatus {
        observed_generation: Some(1),
        counts: UpgradeCounts {
            nodes: 3,
            up_to_date: 1,
            ..UpgradeCounts::default()
        },
        ..NodeUpgradeStatus::default()
    };
    let written = api
        .apply_roll_status::<NodeUpgrade>(&name, "nodejob-controller", &status)
        .await?;
    ensure!(
        generation(&written) == 1,
        "a status write moves no generation"
    );
    ensure!(
        written.spec == created.spec,
        "a status write keeps the spec"
    );
    ensure!(
        written.status.as_ref().map(|s| s.counts.nodes) == Some(3),
        "{:?}",
        written.status
    );

    let mut labelled = written.clone();
    labelled.metadata.labels = Some([("team".to_string(), "platform".to_string())].into());
    labelled.status = None;
    let labelled = api.replace_roll(&labelled).await?;
    ensure!(generation(&labelled) == 1, "a label moves no generation");
    ensure!(
        labelled.status.as_ref().map(|s| s.counts.up_to_date) == Some(1),
        "an update keeps the stored status: {:?}",
        labelled.status
    );

    let mut retarget = labelled.clone();
    retarget.spec.target = "v1.39.0".into();
    let retargeted = api.replace_roll(&retarget).await?;
    ensure!(
        generation(&retargeted) == 2,
        "a spec change bumps the generation"
    );

    // The version read before the last write is stale now.
    match api.replace_roll(&retarget).await {
        Err(e) if e.kind == ErrorKind::Conflict => {}
        other => {
            return Err(Failure(format!(
                "a stale update must be a Conflict: {other:?}"
            )));
        }
    }
    let mut unversioned = retargeted.clone();
    unversioned.metadata.resource_version = None;
    match api.replace_roll(&unversioned).await {
        Err(e) if e.kind == ErrorKind::Invalid => {}
        other => {
            return Err(Failure(format!(
                "an update without a resourceVersion must be Invalid: {other:?}"
            )));
        }
    }
    api.delete_roll::<NodeUpgrade>(&name, None).await?;
    Ok(())
}

/// A manager's apply owns what it sets: a field it set before and leaves out is removed, the
/// conditions merge by type, and another manager's condition stays.
pub async fn a_status_apply_owns_its_fields_and_merges_conditions_by_type<B: Customs>(
    backend: Arc<B>,
) -> Result<(), Failure> {
    let api = backend.api();
    let name = format!("{}-apply", backend.prefix());
    api.create_roll(&upgrade(&name, "v1.38.0")).await?;
    let first = NodeUpgradeStatus {
        observed_generation: Some(1),
        lease_holder: Some("someone".into()),
        conditions: vec![condition("Ready", "False", "Progressing")],
        ..NodeUpgradeStatus::default()
    };
    api.apply_roll_status::<NodeUpgrade>(&name, "nodejob-controller", &first)
        .await?;
    // Another manager adds a condition of its own type.
    let other = serde_json::json!({"conditions": [condition("Audited", "True", "Checked")]});
    api.apply_custom_status(NodeUpgrade::KIND, &name, "auditor", &other)
        .await?;
    // The controller's next apply leaves out the Lease holder, and says Ready True.
    let second = NodeUpgradeStatus {
        observed_generation: Some(1),
        conditions: vec![condition("Ready", "True", "Completed")],
        ..NodeUpgradeStatus::default()
    };
    let after = api
        .apply_roll_status::<NodeUpgrade>(&name, "nodejob-controller", &second)
        .await?;
    let status = after.status.unwrap_or_default();
    ensure!(
        status.lease_holder.is_none(),
        "a field the manager left out is removed: {:?}",
        status.lease_holder
    );
    let mut types: Vec<(String, String)> = (status.conditions.iter())
        .map(|c| (c.type_.clone(), c.status.clone()))
        .collect();
    types.sort();
    ensure!(
        types
            == [
                ("Audited".to_string(), "True".to_string()),
                ("Ready".to_string(), "True".to_string())
            ],
        "the conditions merge by type, the other manager's kept: {types:?}"
    );
    api.delete_roll::<NodeUpgrade>(&name, None).await?;
    Ok(())
}

/// A roll with a finalizer, deleted, stays with its deletion time and a new generation; no
/// finalizer may be added then; the update that removes the last one deletes it, and the
/// watch sees it go.
pub async fn a_finalizer_holds_a_deleted_roll_until_it_is_removed<B: Customs>(
    backend: Arc<B>,
) -> Result<(), Failure> {
    let api = backend.api();
    let name = format!("{}-finalized", backend.prefix());
    let mut roll = upgrade(&name, "v1.38.0");
    roll.metadata.finalizers = Some(vec!["nodejob.stratum.ciq.com/nodes-released".into()]);
    api.create_roll(&roll).await?;
    let held = api
        .delete_roll::<NodeUpgrade>(&name, None)
        .await?
        .ok_or_else(|| Failure("a roll with a finalizer must stay after its delete".into()))?;
    ensure!(
        held.metadata.deletion_timestamp.is_some(),
        "{:?}",
        held.metadata
    );
    ensure!(
        generation(&held) == 2,
        "the delete bumps the generation: {:?}",
        held.metadata
    );
    let at = held.metadata.resource_version.clone().unwrap_or_default();

    let mut more = held.clone();
    more.metadata
        .finalizers
        .get_or_insert_default()
        .push("example.com/another".into());
    match api.replace_roll(&more).await {
        Err(e) if e.kind == ErrorKind::Invalid => {}
        other => {
            return Err(Failure(format!(
                "a finalizer added to a roll being deleted must be Invalid: {other:?}"
            )));
        }
    }
    let mut released = held.clone();
    released.metadata.finalizers = None;
    api.replace_roll(&released).await?;
    match api.get_roll::<NodeUpgrade>(&name).await {
        Err(e) if e.kind == ErrorKind::NotFound => {}
        other => return Err(Failure(format!("released, the roll is gone: {other:?}"))),
    }
    let gone = watch_for(
        &*api,
        &at,
        |c| matches!(c, Change::Deleted(r) if r.metadata.name.as_deref() == Some(&name)),
    )
    .await?;
    ensure!(gone.is_ok(), "the watch sees it deleted: {gone:?}");
    Ok(())
}

/// A kind whose CRD is not installed is NotFound, as a resource the apiserver does not serve.
pub async fn a_kind_not_installed_is_not_found<B: Customs>(backend: Arc<B>) -> Result<(), Failure> {
    let kind = CustomKind {
        group: "nodejob.stratum.ciq.com",
        version: "v1alpha1",
        kind: "NodeDowngrade",
        plural: "nodedowngrades",
    };
    match backend.api().get_custom(kind, &backend.prefix()).await {
        Err(e) if e.kind == ErrorKind::NotFound => Ok(()),
        other => Err(Failure(format!(
            "{}: must be NotFound: {other:?}",
            kind.path()
        ))),
    }
}
