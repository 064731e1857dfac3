//! Call scheduling on a node: which waiting call runs next when a core frees up.
//!
//! This crate is pure data structures and arithmetic, with no threads, locks or I/O: the node
//! owns a [`CallQueue`] behind its own lock and steps it (push on arrival, pop when a core is
//! free, [`CallQueue::complete`] when a call ends). That keeps every decision deterministic and
//! testable.
//!
//! - [`Policy`] names the orderings of the call-scheduling paper (its section IV): FIFO, SEPT,
//!   EECT, RECT, Fair-Choice, plus `baseline`, which orders like FIFO but tells the node to run
//!   calls as they arrive with more running calls than cores (OpenWhisk's default behaviour).
//! - [`PriorityPolicy`] is how a policy ranks one call when it arrives; [`Fifo`], [`Sept`],
//!   [`Eect`], [`Rect`] and [`FairChoice`] implement it. A call's priority is fixed on arrival.
//! - [`preempt`] makes any of them preemptive: a running call is ranked from the service it has
//!   attained ([`RankBasis`]) and gives its core up to a strictly better waiting call once it has
//!   run for its quantum ([`should_yield`]).
//! - [`FunctionHistory`] is what the policies know about a function: the mean of its last 10
//!   processing times on this node (0 before the first), when its previous call arrived, and how
//!   many calls arrived in the last `T` seconds.
//! - [`ShareClass`] and [`CoreSplit`] are the microtask paper's classes and core split: a phase
//!   of a call declares its share of a core, phases queue by share level, and cores are split
//!   across the levels from the work waiting in each (or statically, for experiments).
//!   [`ClassAdmission`] admits microtasks to the classes: a policy-ordered [`CallQueue`] per
//!   class, as many running in each as its cores hold, never more shares than the node's cores.
//!
//! - [`cores`]: the node's cores as calls hold them ([`CoreSet`]) and the protocol by which a
//!   core passes to waiting work, lock-free and checked with loom. It is the one place that
//!   decides whether a call may run where it is, or waits.
//!
//! Modules depend one way: `history` <- `policy` <- `preempt` <- `queue`; `split`;
//! `admission` (on `queue`, `preempt`, `split`); `cores`.

mod admission;
pub mod cores;
mod history;
mod policy;
pub mod preempt;
mod queue;
mod split;

pub use admission::ClassAdmission;
pub use cores::{CoreSet, Waiting};
pub use history::{FunctionHistory, FunctionKey, HISTORY_LEN, Histories};
pub use policy::{Eect, FairChoice, Fifo, Policy, PriorityPolicy, Rect, Sept, UnknownPolicy};
pub use preempt::{DEFAULT_AGING, RankBasis, remaining_ns, should_yield};
pub use queue::{CallQueue, Ranked};
pub use split::{
    CLASSES, CoreSplit, InvalidShare, SHARE_LEVELS, ShareClass, SplitMismatch, SplitMode,
    UnknownSplit,
};
