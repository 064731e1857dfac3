//! A mote node: takes calls for deployed functions and runs each on one of its executor cores.
//!
//! The call path is [`Node::invoke`] (or [`Node::submit`] for a caller that may block) →
//! [`Registry`] lookup (lock-free) → the function's resident code, or a cold load on a thread
//! that may block → on an idle core, with nothing waiting and a function known to be short,
//! [`mote_runtime::Runtime::call_then`] right on the caller's thread (run-to-completion);
//! otherwise [`Executors`] (the policy queue) → an executor thread → `call_then` → the
//! `ledger` settles the call → reply over a oneshot channel, sent before the instance is torn
//! down. The control path is
//! `Node::deploy`/`Node::remove` → compile and check → write (module blob, compiled artefact) →
//! commit the record → publish to the registry.
//!
//! - [`Executors`]: one thread per core, at most one running call each (no oversubscription),
//!   fed from the waiting calls of `pending` (lock-free under arrival order, a
//!   [`mote_sched::CallQueue`] heap under the ranking policies, which also keeps each
//!   function's run-time history). Under `--preempt on` its `preempt` module suspends a call
//!   that a better-ranked one outranks after its quantum, parking its thread, and passes the
//!   cores between threads. Its `inline` module lends an idle executor's core (`cores`) to the
//!   caller's thread for a call the policy would run next anyway.
//! - [`Microtasks`]: calls of functions that declare phases (`docs/abi.md`) skip the executors:
//!   they run as futures on their own per-core threads, admitted per share class by the
//!   `microtask` module's gate (the microtask paper), or task-based under `--microtasks off`.
//! - `ledger`: where every call that ran is settled, whichever path ran it: its outcome,
//!   duration, quarantine and run-time history, and its [`Reply`].
//! - [`Registry`]: deployed functions ([`Deployed`]), backed by a [`mote_state::StateStore`] so
//!   they survive restarts; each holds its `resident` slot (within a memory budget their code
//!   stays resident, the least recently called are evicted past it, cold starts map the
//!   checked artefact, one load per function at a time) and its `quarantine`.
//! - `activity`: what the dashboard reads of recent calls (response-time histograms and
//!   stretch per function, calls and busy time per executor), relaxed atomics on the call path.
//! - `logs`: each function's [`LogRing`] ([`FunctionLogs`]), bounded in bytes: the lines its
//!   calls wrote and why failing calls failed, each under its call's [`CallId`], written by the
//!   ledger when the call settles, read and followed by the gateway.
//! - `schedule`: what `GET /v1/node` shows ([`ScheduleSnapshot`]); [`NodeMetrics`]: the
//!   Prometheus metrics; [`confine`]: the seccomp allow-list executor threads run under;
//!   [`priority`]: how object I/O threads (and by default a job's) give way to calls
//!   by the kernel's priorities.
//!
//! The [`Node`] (`node`) ties these together: its call path (`node::call`), control path
//! (`node::control`) and what it reports (`node::status`); [`NodeConfig`] (`config`) sets it up.
//!
//! Modules depend one way; each uses only those on the lines above it (`#[cfg(test)]` modules
//! aside, which may drive a module through a [`Node`]):
//! - `activity`, `metrics`, `pending`, `quarantine`, `confine`, `priority`: nothing
//! - `error` -> confine; `logs`, `resident` -> metrics
//! - `registry` -> activity, error, logs, metrics, quarantine, resident
//! - `ledger` -> error, logs, metrics, pending, registry
//! - `executor` (`call` <- `preempt` <- `mod`) -> activity, confine, error, ledger, metrics,
//!   pending, registry
//! - `microtask` (`config` <- `gate` <- `pool` <- `http`) -> confine, error, executor, ledger,
//!   metrics, priority, registry
//! - `schedule` -> microtask, pending, registry; `config` -> executor, logs, microtask
//! - `node` (`mod` <- `call`, `control`, `status`) -> everything above

mod activity;
mod config;
pub mod confine;
mod error;
mod executor;
#[cfg(test)]
mod fixtures;
mod ledger;
mod logs;
mod metrics;
mod microtask;
mod node;
mod pending;
pub mod priority;
mod quarantine;
mod registry;
mod resident;
mod schedule;

pub use activity::{BUCKETS, CallStats, ExecutorSample, LatencyCounts, RunsOn};
pub use config::NodeConfig;
pub use error::{DeployError, InvokeError};
pub use executor::{Executors, ExecutorsConfig, PreemptConfig};
pub use ledger::Reply;
pub use logs::{
    CallId, DEFAULT_FUNCTION_LOG_BYTES, ENTRY_BYTES, EntryStream, FunctionLogs, LogEntry,
    LogFollower, LogRing, Writer,
};
pub use metrics::{NodeMetrics, Outcome};
pub use microtask::{ClassSnapshot, MicrotaskConfig, MicrotaskMode, Microtasks};
/// The share of the cores jobs keep (`NodeConfig::job_share`); the count calls and jobs take
/// cores from is `mote_runtime::JobCores`.
pub use mote_runtime::{JobShare, MAX_JOB_SHARE, ShareOutOfRange};
pub use node::{Followed, Node, NodeLoad, PendingCall};
pub use registry::{Deployed, RECORD_PREFIX, Registry};
pub use resident::ModuleSource;
pub use schedule::{FunctionSchedule, PreemptSnapshot, ScheduleSnapshot};
