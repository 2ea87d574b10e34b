//! Hooks: a closure run once, synchronously, just before the next call of a verb is served,
//! so a test can let "another actor" write between two calls of the code under test; and the
//! closures a test schedules at a virtual time. Generic over the closure type, which the root
//! defines, so this file names nothing above it.

use std::collections::{BTreeMap, VecDeque};
use std::fmt;

use crate::Verb;

/// What a test armed: hooks waiting for their verb (first armed, first run), and scheduled
/// closures waiting for their timer entry, by its ticket.
pub(crate) struct Hooks<H> {
    before: BTreeMap<Verb, VecDeque<H>>,
    scheduled: BTreeMap<u64, H>,
    tickets: u64,
}

impl<H> Default for Hooks<H> {
    fn default() -> Self {
        Hooks {
            before: BTreeMap::new(),
            scheduled: BTreeMap::new(),
            tickets: 0,
        }
    }
}

impl<H> fmt::Debug for Hooks<H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let pending: Vec<(Verb, usize)> = self.before.iter().map(|(v, q)| (*v, q.len())).collect();
        f.debug_struct("Hooks")
            .field("before", &pending)
            .field("scheduled", &self.scheduled.len())
            .finish()
    }
}

impl<H> Hooks<H> {
    /// Arms `hook` for the next call of `verb` that finds no earlier hook.
    pub(crate) fn push(&mut self, verb: Verb, hook: H) {
        self.before.entry(verb).or_default().push_back(hook);
    }

    /// The hook for a call of `verb`, if one is armed.
    pub(crate) fn pop(&mut self, verb: Verb) -> Option<H> {
        self.before.get_mut(&verb)?.pop_front()
    }

    /// Keeps `f` until its timer entry fires; answers the entry's ticket.
    pub(crate) fn schedule(&mut self, f: H) -> u64 {
        self.tickets += 1;
        self.scheduled.insert(self.tickets, f);
        self.tickets
    }

    /// The closure of the timer entry `ticket`.
    pub(crate) fn take_scheduled(&mut self, ticket: u64) -> Option<H> {
        self.scheduled.remove(&ticket)
    }
}
