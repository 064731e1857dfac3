//! A node's side of Canary jobs (paper `001`, `docs/jobs.md`).
//!
//! - [`JobService`] is what the gateway calls: it starts a job's [`Controller`] on this node
//!   (`POST /v1/jobs`), starts this node's [`Worker`] of a job when a controller asks (`PUT
//!   /v1/internal/jobs/{id}`), and passes workers' messages and reports to the right one.
//! - A [`Worker`] runs its own copy of the job's driver and the tasks of the partitions it
//!   holds, on threads of its own; it talks to other workers directly.
//! - The [`Controller`] chose the workers and the partition map, then carries out what
//!   `mote_jobs::Supervisor` decides from the workers' reports; it commits the job's output
//!   (`output`) when the job succeeds.
//! - [`Transport`] is the node-to-node traffic, over the node's internal HTTP service
//!   ([`HttpTransport`]).
//! - Errors are typed by kind of operation, finding and compiling a job's code ([`CodeError`]),
//!   starting a job ([`RunError`]) and a worker's ([`WorkerError`]), and convert into
//!   [`JobServiceError`], whose [`ErrorKind`] is what the gateway answers with.
//!
//! The decisions (program, groups, map versions, task graph) are `mote-jobs`' state machines;
//! the guest code runs in `mote-runtime`'s job engine.

mod controller;
mod env;
mod error;
pub mod input;
pub mod output;
mod record;
mod recorded;
mod request;
mod service;
mod threads;
mod transport;
mod worker;

pub use controller::{
    Controller, ControllerSetup, JobState, JobStatus, MigrationStatus, RestoreStatus,
    SnapshotState, SnapshotStatus, WorkerStatus,
};
pub use env::WorkerEnv;
pub use error::{CodeError, ErrorKind, JobServiceError, RunError};
pub use mote_api::{RunRequest, WorkerChoice};
pub use record::{JobRecord, JobRecords, RecordedWorker};
pub use request::{ClusterNodes, NodeInfo, snapshot_plan};
pub use service::JobService;
pub use threads::JobThreads;
pub use transport::{HttpTransport, INTERNAL_JOBS, Transport, TransportError};
pub use worker::{JobCode, Worker, WorkerError};
