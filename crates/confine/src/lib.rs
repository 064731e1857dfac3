//! What a thread that runs guest code may do, and how it reaches the rest of the process.
//!
//! mote isolates functions by the language runtime, so an escaped guest (or a bug in a host
//! function) runs with the rights of the thread it runs on. Every thread that ever runs guest
//! code is confined by a seccomp allow-list before its first call, and the rest of the process
//! is reached only by memory and futexes:
//!
//! - [`Filter`] (`filter`): the allow-lists, one per [`Role`]. A [`Role::Guest`] thread
//!   (executors, microtask and job threads, the [`ConfinedPool`]) computes: memory, futexes,
//!   clocks, and writes to stdout and stderr; it holds no descriptor it could use. A
//!   [`Role::Reader`] thread (the per-core threads that read requests and run calls where they
//!   are read) may also receive and send on sockets and accept connections; it cannot open a
//!   file, create or connect a socket, execute, trace or start a process or a thread, and since
//!   it neither reads nor writes with `read`/`write`, it cannot touch a file it finds open.
//! - [`Relay`] (`relay`): an unconfined thread that wakes tasks and spawns futures for
//!   confined threads. Waking a task of an async runtime with an I/O driver writes to that
//!   runtime's eventfd, which a confined thread may not do; a wake-up that a confined thread
//!   may cause goes through the relay instead ([`Relay::relayed`] wraps the future that waits,
//!   [`Relay::spawn`] starts one on another runtime), which a confined thread reaches by
//!   pushing onto a lock-free queue and unparking the relay's thread (a futex).
//! - [`ConfinedPool`] (`pool`): a few confined threads that run blocking closures for async
//!   code, and answer through the relay: a job's driver and its modules' initializers.
//!
//! A thread knows what it was confined to ([`role`]); the node runs guest code only on a thread
//! that was confined, or on which the operator waived confinement (`mote up --seccomp off`,
//! [`waive`]).
//!
//! Modules: `filter`, `relay` and `wakers` (the eventfd a reader's own runtime wakes itself
//! through, the one descriptor a reader writes to besides its sockets and its logs) stand
//! alone; `pool` uses `filter` and `relay`.

mod filter;
mod pool;
mod relay;
mod wakers;

pub use filter::{ConfineError, Filter, Role, role, waive};
pub use pool::{ConfinedPool, PoolRun, PoolStopped};
pub use relay::{Lost, Relay, RelaySlot, Relayed, Spawned};
pub use wakers::own_wakers;
