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
