//! Where every call that ran ends up, whichever path ran it (an executor, or the microtask
//! threads): its outcome and duration counted, its budget kill (or not) told to its function's
//! quarantine, its processing time added to the function's history (which the ranking policies
//! and `GET /v1/node` read), and its [`Reply`] built. One place, so the two paths cannot drift.

use crate::error::InvokeError;
use crate::metrics::Outcome;
use crate::pending::RunTimes;
use crate::registry::Deployed;
use mote_runtime::{CallError, CallOutput};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The reply to a call: its response body or why it failed, and where its time went.
#[derive(Debug)]
pub struct Reply {
    /// The response body, or why the call failed.
    pub result: Result<Vec<u8>, InvokeError>,
    /// Time from submission until the call started running.
    pub queued: Duration,
    /// Time it ran (instantiate and call, and for a microtask function its waits); zero if it
    /// never ran.
    pub processing: Duration,
    /// When the guest's entry point was called, if the call got that far and succeeded.
    pub entered: Option<Instant>,
    /// If the function was not resident: how long the call waited for its code before it was
    /// queued (a cold start).
    pub cold_start: Option<Duration>,
}

impl Reply {
    /// The reply to a call that was refused or dropped before it ran.
    pub(crate) fn unstarted(result: Result<Vec<u8>, InvokeError>) -> Self {
        Self {
            result,
            queued: Duration::ZERO,
            processing: Duration::ZERO,
            entered: None,
            cold_start: None,
        }
    }
}

/// Settles finished calls.
pub(crate) struct Ledger {
    run_times: Arc<dyn RunTimes>,
}

impl Ledger {
    /// A ledger that records processing times in `run_times`.
    pub(crate) fn new(run_times: Arc<dyn RunTimes>) -> Self {
        Self { run_times }
    }

    /// Settles a call of `function` that arrived at `arrival`, started at `started` and ended
    /// now with `result`, and returns its reply.
    #[inline]
    pub(crate) fn settle(
        &self,
        function: &Deployed,
        result: Result<CallOutput, CallError>,
        arrival: Instant,
        started: Instant,
    ) -> Reply {
        let now = Instant::now();
        let processing = now.saturating_duration_since(started);
        let (outcome, entered, result) = match result {
            Ok(out) => (Outcome::Ok, Some(out.entered), Ok(out.body)),
            Err(e) => (Outcome::of(&e), None, Err(InvokeError::Call(e))),
        };
        self.book(
            function,
            outcome,
            now.saturating_duration_since(arrival),
            processing,
        );
        Reply {
            result,
            queued: started.saturating_duration_since(arrival),
            processing,
            entered,
            cold_start: None,
        }
    }

    /// Settles a call that the host failed to run to its end (a bug in mote, not in the
    /// function), with `error` as its answer.
    pub(crate) fn settle_failure(
        &self,
        function: &Deployed,
        error: InvokeError,
        arrival: Instant,
        started: Instant,
    ) -> Reply {
        let now = Instant::now();
        let processing = now.saturating_duration_since(started);
        let response = now.saturating_duration_since(arrival);
        self.book(function, Outcome::Internal, response, processing);
        Reply {
            result: Err(error),
            queued: started.saturating_duration_since(arrival),
            processing,
            entered: None,
            cold_start: None,
        }
    }

    /// Counts a call that ended with `outcome`, `response` after it arrived and `processing`
    /// after it started, and tells its quarantine and history. A request to a component is
    /// settled here directly: its reply (the response) left before it ended.
    pub(crate) fn book(
        &self,
        function: &Deployed,
        outcome: Outcome,
        response: Duration,
        processing: Duration,
    ) {
        function.count(outcome);
        function.observe_duration(processing);
        function.call_stats().record(response, processing);
        if function.quarantine().record(outcome == Outcome::Timeout) {
            tracing::warn!(
                function = %function.name(),
                kills = function.quarantine().after(),
                "function quarantined: its calls keep running past their budget"
            );
        }
        function.set_expected(self.run_times.complete(function.key(), processing));
    }
}
