//! The local processes and servers that mote's end-to-end tests (`tests/e2e`) and its benchmarks
//! (`mote-bench`) run against, so both start and stop them the same way.
//!
//! - [`KilledOnDrop`]: a child process that is killed and reaped when its owner drops it, so a
//!   failing test or an interrupted benchmark leaves nothing running.
//! - [`free_ports`]: loopback ports that were free a moment ago, for servers that must be told
//!   their port up front.
//! - [`LocalS3`]: an S3-compatible server (s3s-fs) on a free loopback port, serving a temporary
//!   directory.
//!
//! It depends on no other mote crate (and on nothing heavier than `tempfile`), so any test or
//! benchmark may use it.

mod process;
mod s3;

pub use process::{KilledOnDrop, free_ports};
pub use s3::{LocalS3, LocalS3Error};
