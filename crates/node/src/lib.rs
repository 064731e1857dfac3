//! A mote node: takes calls for deployed functions and runs each on one of its cores.
//!
//! The call path is [`Node::invoke_here`] (a reader, for the request it read) or
//! [`Node::invoke`] / [`Node::submit`] (any other caller) → [`Registry`] lookup (lock-free) →
//! the function's resident code, or a cold load on the I/O runtime → a core: on a reader, if
//! one is free and nothing waits, the call runs right there as a future (`run`, through
//! [`mote_runtime::Runtime::call_async`], preemptible at its epoch ticks); otherwise it waits in
//! `pending` by the policy and an executor runs it (`call_then`, preemptible by parking its
//! thread) → the `ledger` settles the call → the reply, sent before the instance is torn down
//! (through the relay, since the executor is confined). The control path is
//! `Node::deploy`/`Node::remove` → compile and check → write (module blob, compiled artefact) →
//! commit the record → publish to the registry.
//!
//! - `cores`: the one type that says "this runs on a core" (`OnCore`), and how a core passes
//!   between threads: to waiting work when its holder is done, to a spare executor with a call,
//!   back to a suspended call (a parked thread, or a task woken through the relay). At most one
//!   running call per core, whichever thread runs it. The decisions are
//!   [`mote_sched::CoreSet`]'s, checked with loom.
//! - `run`: the one function that runs a call on a core, for every thread that does; how calls
//!   differ (blocking or a future, how they are preempted, when they reply) is the entry it is
//!   given.
//! - [`Executors`]: threads, each confined before its first call, that park as spares until a
//!   core and a call are handed to them, `cores + max_suspended` under preemption, whose
//!   `preempt` module suspends a blocking call that a better-ranked one outranks after its
//!   quantum by parking its thread.
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
//! - `component`: a request to a `wasi:http` component, on the reader that read it, holding a
//!   core only while its guest computes.
//! - `schedule`: what `GET /v1/node` shows ([`ScheduleSnapshot`]); [`NodeMetrics`]: the
//!   Prometheus metrics; [`priority`]: how object I/O threads (and by default a job's) give way
//!   to calls by the kernel's priorities.
//!
//! The [`Node`] (`node`) ties these together: its call path (`node::call`), control path
//! (`node::control`) and what it reports (`node::status`); [`NodeConfig`] (`config`) sets it up.
//!
//! Modules depend one way; each uses only those on the lines above it (`#[cfg(test)]` modules
//! aside, which may drive a module through a [`Node`]):
//! - `activity`, `metrics`, `pending`, `quarantine`, `priority`: nothing
//! - `error`; `logs`, `resident` -> metrics
//! - `registry` -> activity, error, logs, metrics, quarantine, resident
//! - `ledger` -> error, logs, metrics, pending, registry
//! - `cores` (`seat`, `waiter` <- `mod`) and `run` -> activity, error, ledger, metrics,
//!   pending, registry, and each other's types; `executor` (`call` <- `preempt` <- `mod`) ->
//!   cores, run, and the rest of the above
//! - `microtask` (`config` <- `gate` <- `pool`) -> error, executor, ledger, metrics, priority,
//!   registry; `component` -> cores, error, ledger, metrics, registry
//! - `schedule` -> microtask, pending, registry; `config` -> executor, logs, microtask
//! - `node` (`mod` <- `call`, `control`, `status`) -> everything above

mod activity;
mod component;
mod config;
mod cores;
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
mod run;
mod schedule;

pub use activity::{BUCKETS, CallStats, ExecutorSample, LatencyCounts};
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
pub use node::{Caller, Followed, Node, NodeLoad, NotAReader, NotConfined, PendingCall, Reader};
pub use registry::{Deployed, RECORD_PREFIX, Registry};
pub use resident::ModuleSource;
pub use schedule::{FunctionSchedule, PreemptSnapshot, ScheduleSnapshot};
