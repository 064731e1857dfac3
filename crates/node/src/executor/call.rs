//! A call waiting in the queue, before an executor takes it.

use crate::error::InvokeError;
use crate::ledger::Reply;
use crate::registry::Deployed;
use bytes::Bytes;
use mote_runtime::{CallInFlight, Function};
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::oneshot;

/// A call waiting in the queue.
pub(crate) struct Call {
    pub(crate) function: Arc<Deployed>,
    /// The function's code, held by the call so an eviction cannot unmap it before it runs.
    pub(crate) code: Arc<Function>,
    pub(crate) input: Bytes,
    pub(crate) reply: oneshot::Sender<Reply>,
    pub(crate) arrival: Instant,
    /// Jobs' tasks give the call a core from the moment it is queued, so that the core is free
    /// by the time it starts; it is let go when it starts, on a core that counts itself.
    pub(crate) counted: CallInFlight,
    /// Whether another node may run it instead, if it has not started: its caller forwards it
    /// there when told so ([`InvokeError::Moved`]). A call that moved here may not.
    pub(crate) movable: bool,
}

impl Call {
    /// Answers the call, which never ran, with [`InvokeError::ShuttingDown`].
    pub(crate) fn shut_down(self) {
        let _ = self
            .reply
            .send(Reply::unstarted(Err(InvokeError::ShuttingDown)));
    }
}
