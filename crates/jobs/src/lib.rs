//! Canary jobs (paper `001`), written as state machines without I/O: the worker and controller
//! feed them what happened and act on what they answer, so tests and benchmarks step the same
//! code the nodes run.
//!
//! - [`Program`] is what a job's driver declares: datasets and stages, with loops and branches
//!   on signals, built call by call by a [`ProgramBuilder`]. Its [`Groups`] are the placement
//!   constraints: datasets that any stage touches together live on one worker, index by index.
//! - [`Cursor`] is a worker's position in its copy of the program: which stage comes next,
//!   waiting at a signal until its value is known.
//! - [`PartitionMap`] says which worker holds each partition, with a version per entry;
//!   [`Exchange`] applies the paper's rules to scatter data that reaches a worker under a map
//!   it does not share: hold it when the sender's entry is newer, forward it when older.
//! - [`TaskGraph`] is one worker's local scheduler: it spawns a task for each partition it
//!   holds as soon as a stage is declared, tracks the last stage to read and write each
//!   partition, and releases a task when its inputs are ready (section 4.3).
//!
//! - [`Handoffs`] and [`arrive`] move a partition between running workers (section 4.4).
//! - [`Supervisor`] is a job's controller after the job started: it takes the workers'
//!   reports and looks at the job with the time and the cluster's live nodes, and answers
//!   what to do (move partitions, complete and delete snapshots, restore, fail or end the
//!   job), for the controller to carry out ([`supervisor`]).
//!
//! The wire messages between workers and to the controller are in [`message`]; the images of
//! partitions' instances, which move between workers and into snapshots, in [`image`].

mod cursor;
mod graph;
mod handoff;
pub mod image;
mod map;
pub mod message;
mod program;
pub mod supervisor;

pub use cursor::{Cursor, Declared, Next};
pub use graph::{EarlyPieces, Input, TaskGraph, TaskKind, TaskRef, TaskView};
pub use handoff::{Arrival, Departure, Handoffs, PieceItem, arrive};
pub use map::{Delivery, Entry, Exchange, PartitionKey, PartitionMap, Routed, WorkerId};
pub use program::{
    DatasetId, DatasetInfo, GroupId, Groups, Op, Program, ProgramBuilder, ProgramError, Stage,
    StageId, StageKind,
};
pub use supervisor::Supervisor;

/// The value of job argument `key` among `args` (`--arg K=V`, in order): the last given wins.
pub fn arg<'a>(args: &'a [(String, String)], key: &str) -> Option<&'a str> {
    args.iter()
        .rev()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}
