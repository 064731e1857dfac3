//! A call waiting in the executors' queue, before an executor takes it.

use crate::ledger::Reply;
use crate::registry::Deployed;
use bytes::Bytes;
use mote_runtime::{CallInFlight, Function};
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::oneshot;

/// A call waiting in the queue.
pub(crate) struct Call {
    pub(super) function: Arc<Deployed>,
    /// The function's code, held by the call so an eviction cannot unmap it before it runs.
    pub(super) code: Arc<Function>,
    pub(super) input: Bytes,
    pub(super) reply: oneshot::Sender<Reply>,
    pub(super) arrival: Instant,
    /// Jobs' tasks give the call a core from the moment it is queued, so that the core is free
    /// by the time its executor wakes; the executor takes the count over (`run`).
    pub(super) counted: CallInFlight,
    /// Whether another node may run it instead, if it has not started: its caller forwards it
    /// there when told so ([`crate::InvokeError::Moved`]). A call that moved here may not.
    pub(super) movable: bool,
}
