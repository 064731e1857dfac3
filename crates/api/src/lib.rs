//! mote's public HTTP API as types, and a typed client of it.
//!
//! Each route's request and answer is one type here, which the server serializes and its
//! clients read, so that both agree by construction: functions ([`FunctionInfo`],
//! [`FunctionList`], [`DeployParams`], [`Released`]), the cluster ([`ClusterView`]), jobs
//! ([`RunRequest`], [`JobStatus`] and its parts), tokens ([`CreateToken`], [`TokenInfo`]), a
//! function's log ([`LogLine`]) and every error's body ([`ErrorBody`]). A value that may not be
//! known yet (a worker's rate before it reported twice) is an `Option`, never a number that
//! could be NaN.
//!
//! [`ApiClient`] speaks it: one async method per route, errors typed ([`ApiError`]).
//!
//! This crate sits just above `mote-types`: the crates that serve the API (`mote-gateway`,
//! `mote-peers`, `mote-job-service`) depend on it, never the other way.

mod client;
mod cluster;
mod error;
mod functions;
mod jobs;
mod logs;
mod tokens;

pub use client::{ApiClient, Invoked, LogStream, REQUEST_TIMEOUT, Upload};
pub use cluster::{ClusterView, MemberState, MemberView, StoreView};
pub use error::{ApiError, ErrorBody, ErrorStatus};
pub use functions::{DeployParams, FunctionInfo, FunctionList, Released};
pub use jobs::{
    JobState, JobStatus, MigrationStatus, RestoreStatus, RunRequest, SnapshotState, SnapshotStatus,
    WorkerChoice, WorkerStatus,
};
pub use logs::LogLine;
pub use tokens::{CreateToken, Revoked, TokenInfo, TokenList};

/// The HTTP types the client's answers hold.
pub use hyper::{HeaderMap, StatusCode};
