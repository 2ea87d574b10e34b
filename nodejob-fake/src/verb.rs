//! [`Verb`]: the methods of the API traits (`JobApi`, `NodeApi`, `PodApi`, `LeaseApi`), as
//! faults, hooks and the call record name them.

pub use nodejob_core::Verb;

/// Which verbs a fault applies to: one, or all of them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Verbs {
    /// Every verb.
    All,
    /// This verb only.
    Only(Verb),
}

impl Verbs {
    /// Whether `verb` is one of these.
    pub fn contains(self, verb: Verb) -> bool {
        match self {
            Verbs::All => true,
            Verbs::Only(v) => v == verb,
        }
    }
}

impl From<Verb> for Verbs {
    fn from(verb: Verb) -> Self {
        Verbs::Only(verb)
    }
}
