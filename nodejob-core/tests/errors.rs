//! `Operation`'s `Display`, pinned: the head of every `Error::Api` message, lowercase, naming the
//! verb and the object as the messages did when they were free text.

use nodejob_core::{Action, ApiError, Error, JobRef, ObjectKind, Operation};

fn job() -> JobRef {
    JobRef {
        kind: "per-node upgrade".into(),
        namespace: "kube-system".into(),
        name: "upgrade-node-a".into(),
        node: "node-a".into(),
    }
}

#[test]
fn operations_display_as_the_messages_name_them() {
    let cases = [
        (
            Operation::named(
                Action::Deleting,
                ObjectKind::Job,
                "kube-system",
                "upgrade-a",
            )
            .with_detail("uid 1, resourceVersion 2"),
            "deleting job kube-system/upgrade-a (uid 1, resourceVersion 2)",
        ),
        (
            Operation::on_node(Action::Listing, ObjectKind::Pod, "n1"),
            "listing the pods on node n1",
        ),
        (
            Operation::named(Action::Evicting, ObjectKind::Pod, "ns", "p").with_detail("uid u"),
            "evicting pod ns/p (uid u)",
        ),
        (
            Operation::named(Action::Watching, ObjectKind::Node, "", "n1"),
            "watching node n1",
        ),
        (
            Operation::named(
                Action::Renewing,
                ObjectKind::Lease,
                "kube-system",
                "nodejob",
            ),
            "renewing lease kube-system/nodejob",
        ),
        (
            Operation::of_job(Action::Creating, ObjectKind::Job, job()),
            "creating per-node upgrade job kube-system/upgrade-node-a on node node-a",
        ),
        (
            Operation::of_job(Action::Listing, ObjectKind::Event, job()),
            "listing events of per-node upgrade job kube-system/upgrade-node-a on node node-a",
        ),
        (
            Operation::of_job(Action::Reading, ObjectKind::Node, job()),
            "reading the node of per-node upgrade job kube-system/upgrade-node-a on node node-a",
        ),
        (
            Operation::of_job(Action::Reading, ObjectKind::Log, job()).with_detail("pod p"),
            "reading the log of per-node upgrade job kube-system/upgrade-node-a on node node-a \
             (pod p)",
        ),
    ];
    for (op, text) in cases {
        assert_eq!(op.to_string(), text, "{op:?}");
    }
}

#[test]
fn an_api_error_answers_its_operation_and_its_cause() {
    let op = Operation::named(Action::Reading, ObjectKind::Pod, "ns", "p");
    let cause = ApiError::forbidden("pods \"p\" is forbidden");
    let e = Error::Api {
        op: op.clone(),
        cause: cause.clone(),
    };
    assert_eq!(
        e.to_string(),
        "reading pod ns/p: pods \"p\" is forbidden (403 Forbidden)"
    );
    assert_eq!(e.operation(), Some(&op));
    assert_eq!(e.api_error(), Some(&cause));
    let other = Error::InvalidSpec {
        field: "name",
        rule: "empty".into(),
    };
    assert_eq!(other.operation(), None);
}
