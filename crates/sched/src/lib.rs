//! Call queues: the order in which a node runs the calls waiting for a core.
//!
//! A [`CallQueue`] is a plain data structure with no I/O and no locking; the node owns one behind
//! its own synchronisation and decides when to push and pop. [`Policy`] names the orderings the
//! platform offers and builds the matching queue. Today that is [`Fifo`]; the history-based
//! policies of the call-scheduling paper (SEPT, EECT, RECT, Fair-Choice) are added as further
//! implementations of the same trait.

mod fifo;

pub use fifo::Fifo;

use std::fmt;
use std::str::FromStr;

/// An ordered collection of waiting calls.
pub trait CallQueue<T>: Send {
    /// Adds a call that has just arrived.
    fn push(&mut self, call: T);
    /// Takes the call that should run next, if any.
    fn pop(&mut self) -> Option<T>;
    /// How many calls are waiting.
    fn len(&self) -> usize;
    /// Whether no call is waiting.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The queue orderings a node can run with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Policy {
    /// First in, first out.
    #[default]
    Fifo,
}

impl Policy {
    /// Every policy, in the order the docs list them.
    pub const ALL: [Policy; 1] = [Policy::Fifo];

    /// The policy's name as used on the command line and in metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Fifo => "fifo",
        }
    }

    /// Builds an empty queue with this ordering.
    pub fn queue<T: Send + 'static>(self) -> Box<dyn CallQueue<T>> {
        match self {
            Self::Fifo => Box::new(Fifo::default()),
        }
    }
}

impl fmt::Display for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A policy name that is not one of [`Policy::ALL`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown scheduling policy {0:?}; choose one of: fifo")]
pub struct UnknownPolicy(pub String);

impl FromStr for Policy {
    type Err = UnknownPolicy;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|p| p.as_str() == s)
            .ok_or_else(|| UnknownPolicy(s.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policies_parse_by_name() {
        for p in Policy::ALL {
            assert_eq!(p.as_str().parse::<Policy>(), Ok(p));
        }
        assert!(
            "lifo"
                .parse::<Policy>()
                .unwrap_err()
                .to_string()
                .contains("fifo")
        );
    }
}
