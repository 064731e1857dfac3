//! The local processes and servers that mote's end-to-end tests (`tests/e2e`) and its benchmarks
//! (`mote-bench`) run against, so both start, watch and stop them the same way.
//!
//! - [`KilledOnDrop`]: a child process that is killed and reaped when its owner drops it, so a
//!   failing test or an interrupted benchmark leaves nothing running.
//! - [`free_ports`]: loopback ports below the ephemeral range, free a moment ago, for servers
//!   that must be told their port up front.
//! - [`Launch`]: a server started as a child process (`mote up`, `mote store`, `wasmtime
//!   serve`...) that says where it serves on a line of its output, waited for until it does, and
//!   handed back as a [`Served`] with its URL; [`last_lines`] of its log for error messages.
//! - [`LocalS3`]: an S3-compatible server (s3s-fs) on a free loopback port, serving a temporary
//!   directory.
//! - [`cpu`]: pinning the calling thread, a process about to start or a running one to a CPU.
//! - [`cpu_time`]: the CPU time of a process, of this process's reaped children and of the whole
//!   machine, read from `/proc` in the kernel's clock ticks.
//!
//! It depends on no other mote crate (and on nothing heavier than `tempfile` and `libc`), so any
//! test or benchmark may use it.

pub mod cpu;
pub mod cpu_time;
mod launch;
mod process;
mod s3;

pub use launch::{Announces, Launch, LaunchError, Served, last_lines};
pub use process::{KilledOnDrop, free_ports};
pub use s3::{LocalS3, LocalS3Error};
