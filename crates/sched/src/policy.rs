//! The policies: how a call is ranked when it arrives (lower runs first).

use crate::FunctionHistory;
use std::fmt;
use std::str::FromStr;

/// Ranks a call on arrival. Lower priorities run first; ties run in arrival order.
pub trait PriorityPolicy: Send + fmt::Debug {
    /// The priority of a call of a function with history `f` arriving at `arrival_ns`, whose
    /// previous call arrived at `previous_arrival_ns`.
    fn priority(&self, arrival_ns: u64, previous_arrival_ns: u64, f: &FunctionHistory) -> u64;
}

/// First in, first out: priority is the arrival time.
#[derive(Debug, Clone, Copy, Default)]
pub struct Fifo;

/// Shortest Expected Processing Time: priority is the function's expected processing time.
#[derive(Debug, Clone, Copy, Default)]
pub struct Sept;

/// Earliest Expected Completion Time: arrival time plus expected processing time. Starvation
/// free: a call that arrives after another's expected completion runs after it.
#[derive(Debug, Clone, Copy, Default)]
pub struct Eect;

/// Recent Expected Completion Time: when the function's previous call arrived, plus the expected
/// processing time. Starvation free because that arrival time only grows.
#[derive(Debug, Clone, Copy, Default)]
pub struct Rect;

/// Fair-Choice: calls of the function in the last `T` seconds times its expected processing
/// time, i.e. the core time it has recently asked for. Rare functions go first.
#[derive(Debug, Clone, Copy, Default)]
pub struct FairChoice;

impl PriorityPolicy for Fifo {
    fn priority(&self, arrival_ns: u64, _previous: u64, _f: &FunctionHistory) -> u64 {
        arrival_ns
    }
}

impl PriorityPolicy for Sept {
    fn priority(&self, _arrival_ns: u64, _previous: u64, f: &FunctionHistory) -> u64 {
        f.expected_ns()
    }
}

impl PriorityPolicy for Eect {
    fn priority(&self, arrival_ns: u64, _previous: u64, f: &FunctionHistory) -> u64 {
        arrival_ns.saturating_add(f.expected_ns())
    }
}

impl PriorityPolicy for Rect {
    fn priority(&self, _arrival_ns: u64, previous: u64, f: &FunctionHistory) -> u64 {
        previous.saturating_add(f.expected_ns())
    }
}

impl PriorityPolicy for FairChoice {
    fn priority(&self, _arrival_ns: u64, _previous: u64, f: &FunctionHistory) -> u64 {
        (f.recent_calls() as u64).saturating_mul(f.expected_ns())
    }
}

/// The scheduling policies a node can run with; Fair-Choice unless told otherwise. The variants'
/// docs are `mote up --policy`'s help, so they carry no links.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum Policy {
    /// First in, first out.
    Fifo,
    /// Shortest expected processing time first.
    Sept,
    /// Earliest expected completion time first.
    Eect,
    /// Recent expected completion time first.
    Rect,
    /// Fair-Choice: the function that recently asked for the least core time first.
    #[default]
    Fc,
    /// OpenWhisk's default: calls start as they arrive, sharing cores through the OS, up to a
    /// cap on running calls; waiting calls (past the cap) are FIFO.
    Baseline,
}

impl Policy {
    /// Every policy, in the order the docs list them.
    pub const ALL: [Policy; 6] = [
        Self::Fifo,
        Self::Sept,
        Self::Eect,
        Self::Rect,
        Self::Fc,
        Self::Baseline,
    ];

    /// The name used on the command line, in metrics and in the API.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Fifo => "fifo",
            Self::Sept => "sept",
            Self::Eect => "eect",
            Self::Rect => "rect",
            Self::Fc => "fc",
            Self::Baseline => "baseline",
        }
    }

    /// Whether the node runs more calls at once than it has cores.
    pub fn oversubscribes(self) -> bool {
        self == Self::Baseline
    }

    /// Whether waiting calls run in arrival order, so they need no ranking (and no history at
    /// arrival) and can wait in a lock-free queue.
    pub fn arrival_order(self) -> bool {
        matches!(self, Self::Fifo | Self::Baseline)
    }

    /// The ranking this policy applies to waiting calls.
    pub fn ranking(self) -> Box<dyn PriorityPolicy> {
        match self {
            Self::Fifo | Self::Baseline => Box::new(Fifo),
            Self::Sept => Box::new(Sept),
            Self::Eect => Box::new(Eect),
            Self::Rect => Box::new(Rect),
            Self::Fc => Box::new(FairChoice),
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
#[error("unknown scheduling policy {0:?}; choose one of: fifo, sept, eect, rect, fc, baseline")]
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
                .contains("fc, baseline")
        );
    }

    #[test]
    fn arrival_order_policies_rank_every_call_by_arrival() {
        for policy in Policy::ALL.into_iter().filter(|p| p.arrival_order()) {
            let ranking = policy.ranking();
            let history = FunctionHistory::default();
            assert!(ranking.priority(5, 5, &history) < ranking.priority(6, 6, &history));
        }
    }

    #[test]
    fn only_the_baseline_oversubscribes() {
        assert_eq!(Policy::ALL.iter().filter(|p| p.oversubscribes()).count(), 1);
        assert!(Policy::Baseline.oversubscribes());
    }
}
