//! Fault injection: a verb answers a given [`ApiError`] a number of times, always, or with a
//! seeded probability, before the call touches the store.

use nodejob_core::ApiError;

use crate::rng::Rng;
use crate::{Verb, Verbs};

/// How many times a fault fires.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Times {
    /// The next matching call only.
    Once,
    /// The next `n` matching calls.
    N(u32),
    /// Every matching call, until [`FakeCluster::clear_faults`](crate::FakeCluster::clear_faults).
    Always,
}

#[derive(Clone, Debug)]
enum Mode {
    Remaining(u32),
    Always,
    Probability(f64),
}

#[derive(Clone, Debug)]
struct Rule {
    verbs: Verbs,
    error: ApiError,
    mode: Mode,
}

/// The armed faults, consulted in the order they were armed; the first that fires answers.
#[derive(Debug)]
pub(crate) struct Faults {
    rules: Vec<Rule>,
    rng: Rng,
}

impl Faults {
    pub(crate) fn new(rng: Rng) -> Self {
        Faults {
            rules: Vec::new(),
            rng,
        }
    }

    pub(crate) fn arm(&mut self, verbs: Verbs, error: ApiError, times: Times) {
        let mode = match times {
            Times::Once => Mode::Remaining(1),
            Times::N(n) => Mode::Remaining(n),
            Times::Always => Mode::Always,
        };
        self.rules.push(Rule { verbs, error, mode });
    }

    pub(crate) fn arm_randomly(&mut self, verbs: Verbs, error: ApiError, probability: f64) {
        let mode = Mode::Probability(probability.clamp(0.0, 1.0));
        self.rules.push(Rule { verbs, error, mode });
    }

    pub(crate) fn clear(&mut self) {
        self.rules.clear();
    }

    /// The error `verb` answers this time, if a fault fires. Probabilistic rules draw from the
    /// fault stream of the seed only when consulted, so a given call sequence replays exactly.
    pub(crate) fn check(&mut self, verb: Verb) -> Option<ApiError> {
        let mut fired = None;
        for rule in self.rules.iter_mut().filter(|r| r.verbs.contains(verb)) {
            let fires = match &mut rule.mode {
                Mode::Remaining(0) => false,
                Mode::Remaining(n) => {
                    *n -= 1;
                    true
                }
                Mode::Always => true,
                Mode::Probability(p) => self.rng.unit() < *p,
            };
            if fires {
                fired = Some(rule.error.clone());
                break;
            }
        }
        self.rules.retain(|r| !matches!(r.mode, Mode::Remaining(0)));
        fired
    }
}
