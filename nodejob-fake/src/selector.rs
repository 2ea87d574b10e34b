//! Label selectors: the string form `LIST ?labelSelector=` takes (equality-based only), and
//! the structured `LabelSelector` of workloads and PodDisruptionBudgets.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use nodejob_core::ApiError;

/// Matching with a structured `LabelSelector` (`metav1.LabelSelectorAsSelector`).
pub(crate) trait LabelSelectorExt {
    /// Whether `labels` satisfy every `matchLabels` pair and `matchExpressions` requirement
    /// (`In`, `NotIn`, `Exists`, `DoesNotExist`); the empty selector matches everything, an
    /// invalid one (an unknown operator) nothing.
    fn matches(&self, labels: Option<&BTreeMap<String, String>>) -> bool;

    /// Whether it has neither `matchLabels` nor `matchExpressions`.
    fn is_empty(&self) -> bool;

    /// [`matches`](Self::matches), except that the empty selector matches nothing (the
    /// eviction subresource's rule for a budget's selector).
    fn matches_non_empty(&self, labels: Option<&BTreeMap<String, String>>) -> bool {
        !self.is_empty() && self.matches(labels)
    }
}

impl LabelSelectorExt for LabelSelector {
    fn matches(&self, labels: Option<&BTreeMap<String, String>>) -> bool {
        let get = |k: &str| labels.and_then(|l| l.get(k));
        let pairs = (self.match_labels.iter().flatten()).all(|(k, v)| get(k) == Some(v));
        let expressions = (self.match_expressions.iter().flatten()).all(|e| {
            let values = e.values.as_deref().unwrap_or_default();
            let value = get(&e.key);
            match e.operator.as_str() {
                "In" => value.is_some_and(|v| values.contains(v)),
                "NotIn" => value.is_none_or(|v| !values.contains(v)),
                "Exists" => value.is_some(),
                "DoesNotExist" => value.is_none(),
                _ => false,
            }
        });
        pairs && expressions
    }

    fn is_empty(&self) -> bool {
        self.match_labels.as_ref().is_none_or(BTreeMap::is_empty)
            && self.match_expressions.as_ref().is_none_or(Vec::is_empty)
    }
}

/// One requirement of an equality-based selector.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Requirement {
    /// `k=v` or `k==v`.
    Equals(String, String),
    /// `k!=v` (also true when the label is absent, as in Kubernetes).
    NotEquals(String, String),
    /// `k`.
    Exists(String),
    /// `!k`.
    NotExists(String),
}

/// A parsed selector: every requirement must hold.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Selector(Vec<Requirement>);

impl Selector {
    /// Parses `k=v`, `k==v`, `k!=v`, `k`, `!k`, comma-separated; the empty selector matches
    /// everything. Set-based requirements (`k in (a,b)`, `k notin (a)`) are valid in
    /// Kubernetes but not modelled here: they answer 400 like a malformed selector.
    pub(crate) fn parse(selector: &str) -> Result<Selector, ApiError> {
        let mut reqs = Vec::new();
        for term in selector.split(',').map(str::trim).filter(|t| !t.is_empty()) {
            let req = if let Some((k, v)) = term.split_once("!=") {
                Requirement::NotEquals(k.trim().into(), v.trim().into())
            } else if let Some((k, v)) = term.split_once("==").or_else(|| term.split_once('=')) {
                Requirement::Equals(k.trim().into(), v.trim().into())
            } else if let Some(k) = term.strip_prefix('!') {
                Requirement::NotExists(k.trim().into())
            } else {
                Requirement::Exists(term.into())
            };
            let (key, value) = match &req {
                Requirement::Equals(k, v) | Requirement::NotEquals(k, v) => (k, Some(v)),
                Requirement::Exists(k) | Requirement::NotExists(k) => (k, None),
            };
            if !valid_token(key) || value.is_some_and(|v| !v.is_empty() && !valid_token(v)) {
                // apiserver: labels.Parse fails and the list answers 400 BadRequest.
                return Err(ApiError::bad_request(format!(
                    "unable to parse requirement: found '{term}', expected: ',', '=', '==', '!=' or end of string"
                )));
            }
            reqs.push(req);
        }
        Ok(Selector(reqs))
    }

    /// Whether `labels` satisfy every requirement.
    pub(crate) fn matches(&self, labels: Option<&BTreeMap<String, String>>) -> bool {
        let get = |k: &str| labels.and_then(|l| l.get(k));
        self.0.iter().all(|req| match req {
            Requirement::Equals(k, v) => get(k) == Some(v),
            Requirement::NotEquals(k, v) => get(k) != Some(v),
            Requirement::Exists(k) => get(k).is_some(),
            Requirement::NotExists(k) => get(k).is_none(),
        })
    }
}

fn valid_token(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn equality() -> Result<(), ApiError> {
        let l = labels(&[("a", "1"), ("b", "2")]);
        assert!(Selector::parse("")?.matches(Some(&l)));
        assert!(Selector::parse("a=1,b==2")?.matches(Some(&l)));
        assert!(!Selector::parse("a=1,b=3")?.matches(Some(&l)));
        assert!(Selector::parse("a!=2,c!=1,a,!c")?.matches(Some(&l)));
        assert!(!Selector::parse("a")?.matches(None));
        Ok(())
    }

    #[test]
    fn structured() {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;
        let l = labels(&[("app", "web"), ("tier", "front")]);
        let requirement = |key: &str, operator: &str, values: &[&str]| LabelSelectorRequirement {
            key: key.into(),
            operator: operator.into(),
            values: Some(values.iter().map(|v| v.to_string()).collect()),
        };
        let selector =
            |pairs: &[(&str, &str)], exprs: Vec<LabelSelectorRequirement>| LabelSelector {
                match_labels: Some(labels(pairs)),
                match_expressions: Some(exprs),
            };
        let empty = LabelSelector::default();
        assert!(empty.matches(Some(&l)) && !empty.matches_non_empty(Some(&l)));
        let table = [
            (selector(&[("app", "web")], vec![]), true),
            (selector(&[("app", "db")], vec![]), false),
            (
                selector(&[], vec![requirement("tier", "In", &["front", "x"])]),
                true,
            ),
            (
                selector(&[], vec![requirement("tier", "NotIn", &["front"])]),
                false,
            ),
            (
                selector(&[], vec![requirement("zone", "NotIn", &["a"])]),
                true,
            ),
            (selector(&[], vec![requirement("app", "Exists", &[])]), true),
            (
                selector(&[], vec![requirement("app", "DoesNotExist", &[])]),
                false,
            ),
            (selector(&[], vec![requirement("app", "Bogus", &[])]), false),
        ];
        for (selector, want) in table {
            assert_eq!(selector.matches_non_empty(Some(&l)), want, "{selector:?}");
        }
    }

    #[test]
    fn refuses_set_based_and_garbage() {
        for bad in ["a in (1,2)", "a notin (1)", "a=1=2", "=1", "a=b c"] {
            let err = Selector::parse(bad).unwrap_err();
            assert!(
                err.kind == nodejob_core::ErrorKind::BadRequest,
                "{bad}: {err}"
            );
        }
    }
}
