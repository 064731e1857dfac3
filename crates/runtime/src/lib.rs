//! mote's WebAssembly runtime: compiles modules, keeps them ready to instantiate, and runs one call
//! in a fresh instance under limits the guest cannot escape. This is the only crate that imports
//! wasmtime; everything above it sees [`Runtime`], [`Function`] and typed errors.
//!
//! - [`Runtime`] (`engine`) owns the wasmtime `Engine` (pooling allocator with copy-on-write
//!   memory images, epoch interruption), the two `Linker`s with the host functions, the
//!   [`ArtifactCache`] of compiled modules on disk (checksummed, synced before use), and the
//!   [`EpochTicker`] thread that drives budgets: coarse ticks while only long budgets run, fine
//!   ticks (25 µs) after a call with a budget of microseconds starts.
//! - [`Function`] is a compiled, linked module ready to instantiate (`InstancePre`), with its
//!   detected [`GuestKind`](mote_types::GuestKind) and export handles resolved once at deploy.
//! - A [`Call`] runs through one entry path (`entry`) whatever the guest kind:
//!   [`Runtime::call_then`] blocks the calling thread (one of the node's executors); given a
//!   [`Preemption`] it asks at every epoch tick, and around a sleep, whether to suspend the call
//!   there (by blocking the thread) and give its core to another;
//!   [`Runtime::call_async`] is a future on a fiber, whose every wait and tick go through the
//!   node's [`PhaseGate`]: the calls of functions that declare microtasks (they import
//!   `mote.phase`, `mote.sleep_us` or an object storage function, whose object I/O runs on the
//!   node's [`HostIo`]), and calls run on the thread that read them.
//! - A `wasi:http` proxy component ([`Function::is_proxy`]) serves one HTTP request per call
//!   with [`Runtime::serve_http`] (`serve`): a fresh component instance from the same pool, the
//!   request's body and the response's streaming while the guest runs. `component` links it and
//!   holds what the request keeps in its `Store`; its outbound requests are sent through the
//!   node's [`Egress`] (`outbound`): resolved once, each address checked against the function's
//!   grants and the node's ceiling, connected to only if it passed.
//! - A job module (a Canary job's driver and tasks) runs on a [`JobEngine`] of its own, in
//!   instances that live as long as the partitions they hold (`job`: the engine and instance
//!   images; their `Store` data is `state::job`'s, their `mote_job` imports `host::job`'s).
//! - Every call hands back what its guest logged ([`GuestLog`]: `mote.log` lines, stderr)
//!   with its result, for the node to keep in the function's log (`guest_log`).
//! - `state` is what a call keeps in its `Store`; `host` registers the host functions guests may
//!   import; `gate` is what the node provides to microtask calls and to calls it may preempt;
//!   `error` holds the typed errors and how a guest's failure becomes one.
//!
//! Modules depend one way; each uses only those on the lines above it (`#[cfg(test)]` modules
//! aside, which may drive a module through [`Runtime`]):
//! - `error`, `guest_log`, `outbound`, `ticker`: nothing
//! - `artifact` -> error; `gate` -> outbound
//! - `state` -> gate, guest_log (`state::job` -> state)
//! - `host` -> state, gate, guest_log; `component` -> error, gate, outbound, state
//! - `function` -> component, error, host, state
//! - `entry` -> error, function, guest_log, state
//! - `engine` -> artifact, component, error, function, host, state, ticker
//! - `call` -> engine, entry, error, function, gate, guest_log, state
//! - `serve` -> call, component, engine, entry, error, function, gate, guest_log
//! - `job` -> error, host, state, ticker (`job::image` -> `job::engine`)
//!
//! Per call the guest gets: a linear memory capped by `memory_mb` (enforced by a
//! `ResourceLimiter`), a wall-clock deadline (epoch interruption plus a clock check in the epoch
//! callback, so the overshoot is bounded by one tick; `timeout_us` budgets go down to 100 µs),
//! WASI preview1 with no files, sockets, environment or arguments beyond the function's name,
//! and the `mote` host functions (`docs/abi.md`).

mod artifact;
mod call;
mod component;
mod engine;
mod entry;
mod error;
mod function;
mod gate;
mod guest_log;
mod host;
mod job;
mod outbound;
mod serve;
mod state;
mod ticker;

pub use artifact::ArtifactCache;
pub use call::Call;
pub use engine::{KEEP_RESIDENT_BYTES, Runtime, RuntimeConfig, TABLE_KEEP_RESIDENT_BYTES};
pub use entry::CallOutput;
pub use error::{CallError, CompileError, JobError, RuntimeError};
pub use function::Function;
pub use gate::{GateFuture, HostIo, PhaseGate, Preemption, Resumed};
pub use guest_log::{GuestLog, LogLine, LogStream, MAX_LINE_BYTES, MAX_LINES, cut_line};
pub use job::{
    CallInFlight, JobCores, JobEngine, JobInstance, JobModule, JobShare, MAX_JOB_SHARE,
    ShareOutOfRange, TaskBatch, TaskCall, TaskOutput,
};
pub use outbound::Egress;
pub use serve::{BodyError, ProxyAnswer, ProxyCall, ProxyResponse, ResponseBody};
pub use state::JobContext;
pub use ticker::{EpochTicker, Running, TickerPeriods};
