//! Hooks: a closure run once, synchronously, just before the next call of a verb is served,
//! so a test can let "another actor" write between two calls of the code under test.

use std::collections::{BTreeMap, VecDeque};
use std::fmt;

use crate::{FakeCluster, Verb};

/// A hook: runs once, with the lock released, so it may call any [`FakeCluster`] method.
pub(crate) type Hook = Box<dyn FnOnce(&FakeCluster) + Send>;

/// Hooks waiting for their verb, first armed first run.
#[derive(Default)]
pub(crate) struct Hooks(BTreeMap<Verb, VecDeque<Hook>>);

impl fmt::Debug for Hooks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let pending: Vec<(Verb, usize)> = self.0.iter().map(|(v, q)| (*v, q.len())).collect();
        f.debug_tuple("Hooks").field(&pending).finish()
    }
}

impl Hooks {
    pub(crate) fn push(&mut self, verb: Verb, hook: Hook) {
        self.0.entry(verb).or_default().push_back(hook);
    }

    pub(crate) fn pop(&mut self, verb: Verb) -> Option<Hook> {
        self.0.get_mut(&verb)?.pop_front()
    }
}
