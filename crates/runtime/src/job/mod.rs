//! Job modules (`docs/jobs.md`): a Canary job's driver and tasks, run in long-lived instances.
//!
//! A function call gets a fresh instance and loses it at the end; a job's partitions must stay
//! resident between tasks, so a job runs on a [`JobEngine`] of its own: no pooling allocator
//! (an instance lives as long as its partitions, not a call) and its own epoch ticker. One
//! [`JobInstance`] holds the partitions of one index of one group of co-partitioned datasets in
//! its linear memory; a task is a call of `mote_job_task(func, index)` into it, under the
//! function's budget (per task) and memory limit (per instance).
//!
//! The driver runs once in a fresh instance ([`JobEngine::program`]): its `mote_job` calls build
//! a [`Program`](mote_jobs::Program) and nothing else. The host functions check which of the two the instance is
//! doing, so a task that declares a stage, or a driver that reads an input, traps with a message
//! that says so.
//!
//! - `engine`: [`JobEngine`] (its engine, linker and modules), [`JobModule`], [`JobInstance`]
//!   and running a task in one.
//! - `clock`: [`TaskClock`](clock::TaskClock), a task's budget in its thread's CPU time.
//! - `cores`: [`JobCores`], the node's cores as calls and tasks take them, and [`JobShare`].
//! - `image`: an instance's memory and globals as a `mote_jobs::image`, and back.
//!
//! The instances' `Store` data is `state::job`'s; the `mote_job` host functions are
//! `host::job`'s.

mod clock;
mod cores;
mod engine;
mod image;
#[cfg(test)]
mod tests;

pub(crate) use clock::TaskClock;
pub use cores::{CallInFlight, JobCores, JobShare, MAX_JOB_SHARE, ShareOutOfRange};
pub use engine::{JobEngine, JobInstance, JobModule, TaskBatch, TaskCall, TaskOutput};
