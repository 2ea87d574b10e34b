//! Label selectors as `LIST ?labelSelector=` takes them, equality-based only.

use std::collections::BTreeMap;

use nodejob_core::ApiError;

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
