//! Watch history: every ADDED / MODIFIED / DELETED of a watched object, with its
//! resourceVersion, kept per name so a wait can resume from any `since`.
//!
//! The fake keeps the whole history, so a watch never expires: the 410 Gone a real apiserver
//! answers for a resourceVersion older than its watch cache is not modelled (the trait's
//! backends resume it anyway).

use std::collections::BTreeMap;

use nodejob_core::{ApiError, Change};

/// Where a wait starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Since {
    /// The first event after resourceVersion `rv`.
    After(u64),
    /// `resourceVersion` `""` or `"0"`: apiserver semantics "start at any / most recent": the
    /// current object as a synthetic ADDED if it exists, else the next event.
    Any,
}

impl Since {
    /// Parses `since`; `None` starts after `current`, the latest resourceVersion.
    pub(crate) fn parse(since: Option<&str>, current: u64) -> Result<Since, ApiError> {
        match since {
            None => Ok(Since::After(current)),
            Some("" | "0") => Ok(Since::Any),
            Some(rv) => rv.parse::<u64>().map(Since::After).map_err(|e| {
                // apiserver: APIObjectVersioner.ParseResourceVersion refuses a non-decimal
                // resourceVersion as an invalid field.
                ApiError::bad_request(format!(
                    "resourceVersion: Invalid value: \"{rv}\": strconv.ParseUint: parsing \"{rv}\": {e}"
                ))
            }),
        }
    }
}

/// The events of one object name: each change with its resourceVersion, oldest first.
type Events<K> = Vec<(u64, Change<K>)>;

/// The events of one kind of object, by `(namespace, name)`.
#[derive(Debug)]
pub(crate) struct History<K> {
    by_name: BTreeMap<(String, String), Events<K>>,
}

impl<K> Default for History<K> {
    fn default() -> Self {
        History {
            by_name: BTreeMap::new(),
        }
    }
}

impl<K: Clone> History<K> {
    /// Records that `key` changed at `rv`: `Change::Applied` for ADDED/MODIFIED, `Change::Deleted`
    /// with the last state for DELETED.
    pub(crate) fn record(&mut self, key: (String, String), rv: u64, change: Change<K>) {
        self.by_name.entry(key).or_default().push((rv, change));
    }

    /// The first event of `key` with a resourceVersion greater than `since`: what a watch on
    /// that name started at `since` reports first. If the object was deleted and recreated
    /// since, that is the deletion, as a real watch would deliver it.
    pub(crate) fn first_after(&self, key: &(String, String), since: u64) -> Option<Change<K>> {
        let events = self.by_name.get(key)?;
        events
            .iter()
            .find(|(rv, _)| *rv > since)
            .map(|(_, change)| change.clone())
    }
}
