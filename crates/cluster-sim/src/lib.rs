//! The call-scheduling paper's cluster experiment (its section VIII: the same burst on 4, 3 and
//! 2 nodes of 18 cores, baseline against Fair-Choice) and the same at 100 nodes of 32 cores, as
//! a discrete-event simulation in virtual time; `mote bench cluster --simulate` runs it.
//!
//! The decisions are mote's own code, not models of it: every node places calls with the real
//! [`mote_cluster::Placement`] over the real [`mote_cluster::Membership`], and the ranking
//! policies order calls with the real [`mote_sched::CallQueue`], expected times coming from
//! each node's own history as in a node. What is modelled: a call's processing time is its
//! function's idle response time as measured on mote ([`SUITE`]); `baseline` is ideal processor
//! sharing (what Linux gives the real baseline's threads, without its switching costs); the
//! ranking policies preempt as `mote up --preempt on` does, with its quantum and epoch tick
//! ([`PreemptSpec`]), unless asked not to;
//! forwarding costs a fixed time; the store carries reports instantly. Not modelled: network
//! queueing, cold starts and memory, and the variation of processing times under load.
//!
//! - `workload`: the paper's burst ([`schedule`], [`load_scale`], [`PaperLoad`]), which
//!   `mote bench burst` sends to a real node too.
//! - `distribution`: averages and percentiles ([`Distribution`]).
//! - `suite`: the simulated functions and their idle times ([`SUITE`]).
//! - `local`: how one node runs the calls placed on it (queue or processor sharing).
//! - `preempt`: a node that preempts, as `mote up --preempt on` does ([`PreemptSpec`]).
//! - `engine`: one run, the event loop ([`ClusterSpec`], [`run_once`]), with late correction.
//! - `experiment`: what is asked for ([`SimOptions`]), the set-ups, and their aggregation
//!   ([`run`]).
//! - `report`: what was found ([`SimReport`]) and its tables.
//! - `bound`: the least p99 any schedule could give a burst on a cluster, beside the measured.
//!
//! It is its own crate, not a part of `mote-cluster`, because a node links `mote-cluster`: the
//! simulator drives that crate's decisions from outside, as a node does, and ships in no node.

mod bound;
mod distribution;
mod engine;
mod experiment;
mod local;
mod preempt;
mod report;
mod suite;
mod workload;

/// A call, by its index in the run's schedule.
pub(crate) type CallId = usize;

pub use distribution::Distribution;
pub use engine::{Balancer, CallOutcome, ClusterSpec, RunOutcome, run as run_once};
pub use experiment::{SET_UPS, SimOptions, run};
pub use preempt::PreemptSpec;
pub use report::{SimRatio, SimReport, SimRow};
pub use suite::{INTENSITIES, SUITE, SimFunction};
pub use workload::{PAPER_MEAN_IDLE, PaperLoad, load_scale, schedule};
