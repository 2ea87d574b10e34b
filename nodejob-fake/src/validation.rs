//! The apiserver's validation of the fields the fake accepts: object names and labels, with
//! the real messages (`k8s.io/apimachinery/pkg/util/validation`).

use std::collections::BTreeMap;

/// `IsDNS1123Subdomain`'s message.
const SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";

/// `IsValidLabelValue`'s message.
const LABEL_VALUE_MSG: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";

/// `IsQualifiedName`'s message for the name part of a key.
const QUALIFIED_NAME_MSG: &str = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";

fn is_label_part(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

fn is_dns1123_label(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
}

fn is_dns1123_subdomain(s: &str) -> bool {
    s.len() <= 253 && s.split('.').all(is_dns1123_label)
}

/// Errors of `metadata.name` (a Job name is a DNS-1123 subdomain; its 63-character limit comes
/// from the `job-name` label the apiserver adds, checked with the template labels).
pub(crate) fn name_errors(field: &str, name: &str) -> Vec<String> {
    if name.is_empty() {
        return vec![format!(
            "{field}: Required value: name or generateName is required"
        )];
    }
    let mut errs = Vec::new();
    if name.len() > 253 {
        errs.push(format!(
            "{field}: Invalid value: \"{name}\": must be no more than 253 characters"
        ));
    }
    if !is_dns1123_subdomain(name) {
        errs.push(format!(
            "{field}: Invalid value: \"{name}\": {SUBDOMAIN_MSG}"
        ));
    }
    errs
}

/// `IsQualifiedName`'s message for a value with more than one `/`.
const QUALIFIED_KEY_MSG: &str = "a valid label key must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')";

/// Whether `s` matches `IsDNS1123Subdomain`'s regular expression (its length aside).
fn matches_subdomain(s: &str) -> bool {
    s.split('.').all(|label| {
        let b = label.as_bytes();
        !b.is_empty()
            && b[0].is_ascii_alphanumeric()
            && b[b.len() - 1].is_ascii_alphanumeric()
            && b.iter()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
    })
}

/// Errors of a qualified name at `field` (`ValidateQualifiedName`, with
/// `content.IsLabelKey`'s messages as of Kubernetes v1.37): an optional DNS-subdomain prefix
/// and `/`, then a name part of at most 63 bytes of the label alphabet.
pub(crate) fn qualified_name_errors(field: &str, value: &str) -> Vec<String> {
    let invalid = |msg: &str| format!("{field}: Invalid value: \"{value}\": {msg}");
    let parts: Vec<&str> = value.split('/').collect();
    let (prefix, name) = match parts[..] {
        [name] => (None, name),
        [prefix, name] => (Some(prefix), name),
        _ => return vec![invalid(QUALIFIED_KEY_MSG)],
    };
    let mut errs = Vec::new();
    match prefix {
        Some("") => errs.push(invalid("prefix part must be non-empty")),
        Some(prefix) => {
            if prefix.len() > 253 {
                errs.push(invalid("prefix part must be no more than 253 characters"));
            }
            if !matches_subdomain(prefix) {
                errs.push(invalid(&format!("prefix part {SUBDOMAIN_MSG}")));
            }
        }
        None => {}
    }
    if name.is_empty() {
        errs.push(invalid("name part must be non-empty"));
    } else if name.len() > 63 {
        errs.push(invalid("name part must be no more than 63 bytes"));
    }
    if !is_label_part(name) {
        errs.push(invalid(QUALIFIED_NAME_MSG));
    }
    errs
}

/// Errors of a name that only has to be a safe path segment (`rest.validatePathSegment`, for
/// kinds such as Events whose names are not DNS subdomains); `prefix` for a `generateName`,
/// which may be `.` or `..`.
pub(crate) fn path_segment_errors(field: &str, value: &str, prefix: bool) -> Vec<String> {
    let invalid = |msg: &str| format!("{field}: Invalid value: \"{value}\": {msg}");
    if !prefix && (value == "." || value == "..") {
        return vec![invalid(&format!("may not be '{value}'"))];
    }
    ["/", "%"]
        .iter()
        .filter(|bad| value.contains(**bad))
        .map(|bad| invalid(&format!("may not contain '{bad}'")))
        .collect()
}

/// Errors of a label map at `field` (`ValidateLabels`): keys are qualified names, values at
/// most 63 characters of the label alphabet.
pub(crate) fn label_errors(field: &str, labels: Option<&BTreeMap<String, String>>) -> Vec<String> {
    let mut errs = Vec::new();
    for (key, value) in labels.into_iter().flatten() {
        let name = key.rsplit_once('/').map_or(key.as_str(), |(_, n)| n);
        let prefix_ok = key
            .rsplit_once('/')
            .is_none_or(|(p, _)| is_dns1123_subdomain(p));
        if !is_label_part(name) || name.len() > 63 || !prefix_ok {
            errs.push(format!(
                "{field}: Invalid value: \"{key}\": {QUALIFIED_NAME_MSG}"
            ));
        }
        if value.len() > 63 {
            errs.push(format!(
                "{field}: Invalid value: \"{value}\": must be no more than 63 characters"
            ));
        }
        if !value.is_empty() && !is_label_part(value) {
            errs.push(format!(
                "{field}: Invalid value: \"{value}\": {LABEL_VALUE_MSG}"
            ));
        }
    }
    errs
}

/// The apiserver's `Invalid` message for `errs` about `{kind} "{name}"`:
/// `Job.batch "x" is invalid: <err>` or, for several, `[<err>, <err>]`.
pub(crate) fn invalid_message(kind: &str, name: &str, errs: &[String]) -> String {
    match errs {
        [one] => format!("{kind} \"{name}\" is invalid: {one}"),
        many => format!("{kind} \"{name}\" is invalid: [{}]", many.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert!(name_errors("metadata.name", "up-node-1").is_empty());
        assert!(name_errors("metadata.name", "a.b").is_empty());
        assert_eq!(name_errors("metadata.name", "Up").len(), 1);
        assert_eq!(name_errors("metadata.name", "").len(), 1);
    }

    #[test]
    fn qualified_names() {
        let errs = |v: &str| qualified_name_errors("reportingComponent", v);
        assert!(errs("nodejob-upgrade").is_empty());
        assert!(errs("stratum.ciq.com/nodejob_upgrade.v2").is_empty());
        assert_eq!(
            errs(""),
            [
                "reportingComponent: Invalid value: \"\": name part must be non-empty".to_string(),
                format!("reportingComponent: Invalid value: \"\": {QUALIFIED_NAME_MSG}"),
            ]
        );
        assert_eq!(
            errs("Nodejob/x"),
            [format!(
                "reportingComponent: Invalid value: \"Nodejob/x\": prefix part {SUBDOMAIN_MSG}"
            )]
        );
        assert_eq!(
            errs("a/b/c"),
            [format!(
                "reportingComponent: Invalid value: \"a/b/c\": {QUALIFIED_KEY_MSG}"
            )]
        );
        assert_eq!(errs(&"x".repeat(64)).len(), 1);
    }

    #[test]
    fn path_segments() {
        assert!(path_segment_errors("metadata.name", "Node_A.1%", false).len() == 1);
        assert!(path_segment_errors("metadata.name", "node-a.x7k2p", false).is_empty());
        assert_eq!(
            path_segment_errors("metadata.name", "..", false),
            ["metadata.name: Invalid value: \"..\": may not be '..'"]
        );
        assert!(path_segment_errors("metadata.generateName", "..", true).is_empty());
        assert_eq!(path_segment_errors("metadata.name", "a/b%", false).len(), 2);
    }

    #[test]
    fn labels() {
        let ok = BTreeMap::from([("stratum.ciq.com/node".to_string(), "n-1_x.y".to_string())]);
        assert!(label_errors("metadata.labels", Some(&ok)).is_empty());
        let long = BTreeMap::from([("k".to_string(), "a".repeat(64))]);
        assert_eq!(
            label_errors("metadata.labels", Some(&long)),
            [format!(
                "metadata.labels: Invalid value: \"{}\": must be no more than 63 characters",
                "a".repeat(64)
            )]
        );
        let bad = BTreeMap::from([("-k".to_string(), "a/b".to_string())]);
        assert_eq!(label_errors("metadata.labels", Some(&bad)).len(), 2);
    }
}
