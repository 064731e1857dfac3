//! Microtask scheduling (the microtask paper, `000_…`): calls of functions that declare phases
//! are admitted per share class, with the node's cores split across the classes.
//!
//! - [`ClassGate`](gate::ClassGate): per share class (1000, 500, 250, 100 permille of a core) a count of the
//!   microtasks running in it and a queue of those waiting, ordered by the node's policy (each
//!   class keeps the histories of how long its microtasks held their share, so SEPT inside a
//!   class ranks by expected microtask time). A class given `n` cores runs up to
//!   `n × 1000 / share` microtasks. Whenever a microtask enters or leaves a class, the cores
//!   are split again ([`mote_sched::CoreSplit`]: greedy from waiting and running microtasks ×
//!   share, or static) and waiting microtasks are admitted where there is room. A class that
//!   lost cores is not preempted: it drains to its new size. These decisions are
//!   [`mote_sched::ClassAdmission`]'s, without I/O; the gate keeps it under one lock and
//!   delivers each admission to the call waiting for it.
//! - Under `--preempt on`, inside a class the executors' rule holds: a microtask that has held
//!   its share for a quantum while a better-ranked one waits in the same class gives the share
//!   up at the next epoch tick and queues again, ranked from the time it has held it
//!   (`mote_sched::preempt`); it waits without running until it is admitted again. Its slices
//!   add up to one microtask in the class's history.
//! - [`CallGate`](gate::CallGate): one call's hold on the gate, handed to the runtime as its
//!   [`PhaseGate`](mote_runtime::PhaseGate): `phase` moves the call to another class's queue; waits on storage or timers
//!   give the share up and queue for it again afterwards. Dropping it (the call ended, trapped,
//!   timed out, or was cancelled while queued) gives back whatever it held.
//! - `--microtasks off` is task-based scheduling for comparison: one class of whole cores, a
//!   call holds its core from start to end, waits included, and phases change nothing.
//! - [`Microtasks`]: the threads that poll these calls, one per core (a Tokio runtime with its
//!   timer and no I/O driver, confined like the executors). Many calls share a
//!   thread: each runs until it waits, and yields at every epoch tick. Instance slots bound how
//!   many calls are alive at once.
//! - The object I/O threads also carry components' outbound requests (`crate::component`);
//!   what a confined thread starts there goes through the relay.
//! - Object I/O runs on threads of its own at a lower CPU priority (nice
//!   `pool::OBJECT_IO_NICE`). The gate grants shares of the cores to guests, but a call waiting on
//!   storage holds no share while its transfer is received, hashed and copied; at normal
//!   priority that work takes CPU from a phase that was granted a whole core. Measured with the
//!   sort (docs/benchmarks/microtasks.md), that made one sort call up to 22% slower once
//!   admitted; lowered, transfers use what the granted phases leave.
//!
//! Modules, each using only those before it: `config` (the mode and its settings), `gate`
//! (the admission and each call's hold on it), `pool` ([`Microtasks`]: the threads, slots and
//! object I/O).

mod config;
mod gate;
mod pool;

pub use config::{MicrotaskConfig, MicrotaskMode};
pub use gate::ClassSnapshot;
pub use pool::Microtasks;
