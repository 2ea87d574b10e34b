//! Label selectors: the string form `LIST ?labelSelector=` takes (core's parser, the
//! apiserver's grammar), and the structured `LabelSelector` of workloads and
//! PodDisruptionBudgets.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use nodejob_core::ApiError;
use nodejob_core::selector::LabelSelector as Parsed;

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

/// A `LIST ?labelSelector=` selector: core's parser ([`nodejob_core::selector`]), the
/// apiserver's grammar, so the fake accepts and matches exactly what a plan accepts and what
/// the apiserver serves.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Selector(Parsed);

impl Selector {
    /// Parses `k`, `!k`, `k=v`, `k==v`, `k!=v`, `k in (a,b)`, `k notin (a,b)`, `k>n`, `k<n`,
    /// comma-joined; the empty selector matches everything. A selector the apiserver cannot
    /// parse answers 400 BadRequest with its reason (`labels.Parse` fails in the list's
    /// conversion of its options).
    pub(crate) fn parse(selector: &str) -> Result<Selector, ApiError> {
        Parsed::parse(selector)
            .map(Selector)
            .map_err(|e| ApiError::bad_request(e.to_string()))
    }

    /// Whether `labels` satisfy every requirement.
    pub(crate) fn matches(&self, labels: Option<&BTreeMap<String, String>>) -> bool {
        self.0.matches(labels)
    }
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
    fn equality_and_sets() -> Result<(), ApiError> {
        let l = labels(&[("a", "1"), ("b", "2")]);
        assert!(Selector::parse("")?.matches(Some(&l)));
        assert!(Selector::parse("a=1,b==2")?.matches(Some(&l)));
        assert!(!Selector::parse("a=1,b=3")?.matches(Some(&l)));
        assert!(Selector::parse("a!=2,c!=1,a,!c")?.matches(Some(&l)));
        assert!(!Selector::parse("a")?.matches(None));
        // Set-based requirements, as a real apiserver serves them.
        assert!(Selector::parse("a in (1,2),b notin (1)")?.matches(Some(&l)));
        assert!(!Selector::parse("a in (2,3)")?.matches(Some(&l)));
        assert!(Selector::parse("c notin (1)")?.matches(Some(&l)));
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
    fn refuses_what_the_apiserver_cannot_parse_with_400() {
        for bad in ["a in 1", "a notin (1", "a=1=2", "=1", "a=b c", "!", "a=(x)"] {
            let err = Selector::parse(bad).unwrap_err();
            assert!(
                err.kind == nodejob_core::ErrorKind::BadRequest,
                "{bad}: {err}"
            );
        }
    }
}
