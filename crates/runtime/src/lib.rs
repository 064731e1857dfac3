//! mote's WebAssembly runtime: compiles modules, keeps them ready to instantiate, and runs one call
//! in a fresh instance under limits the guest cannot escape. This is the only crate that imports
//! wasmtime; everything above it sees [`Runtime`], [`Function`] and typed errors.
//!
//! - [`Runtime`] owns the wasmtime `Engine` (pooling allocator with copy-on-write memory images,
//!   epoch interruption), the `Linker` with the host functions, the [`ArtifactCache`] of compiled
//!   modules on disk, and the [`EpochTicker`] thread that drives budgets: coarse ticks while
//!   only long budgets run, fine ticks (25 µs) after a call with a budget of microseconds starts.
//! - [`Function`] is a compiled, linked module ready to instantiate (`InstancePre`), with its
//!   detected [`GuestKind`](mote_types::GuestKind) and export handles resolved once at deploy.
//! - [`Runtime::call`] runs one call: new `Store`, fresh instance, call, copy out the response.
//!   It blocks the calling thread, which is meant to be one of the node's executor threads.
//! - Functions that declare microtasks (they import `mote.phase`, `mote.sleep_us` or the
//!   object storage functions) are linked with asynchronous host functions:
//!   [`Runtime::call_microtask`] is a future, each phase change and wait goes through the
//!   node's [`PhaseGate`], and object I/O runs on the node's I/O runtime ([`HostIo`]). Every
//!   other function keeps the synchronous path and pays nothing for this.
//!
//! Per call the guest gets: a linear memory capped by `memory_mb` (enforced by a
//! `ResourceLimiter`), a wall-clock deadline (epoch interruption plus a clock check in the epoch
//! callback, so the overshoot is bounded by one tick; `timeout_us` budgets go down to 100 µs),
//! WASI preview1 with no files, sockets, environment or arguments beyond the function's name,
//! and the `mote` host functions (`docs/abi.md`).

mod artifact;
mod call;
mod engine;
mod error;
mod function;
mod microtask;
mod ticker;

pub use artifact::ArtifactCache;
pub use call::CallOutput;
pub use engine::{Runtime, RuntimeConfig};
pub use error::{CallError, CompileError, RuntimeError};
pub use function::Function;
pub use microtask::{GateFuture, HostIo, PhaseGate};
pub use ticker::{EpochTicker, TickerPeriods};
