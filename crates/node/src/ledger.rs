//! Where every call that ran ends up, whichever path ran it (an executor, or the microtask
//! threads): its outcome and duration counted, its budget kill (or not) told to its function's
//! quarantine, its processing time added to the function's history (which the ranking policies
//! and `GET /v1/node` read), what it logged kept in its function's log (`logs`), and its
//! [`Reply`] built. One place, so the two paths cannot drift.

use crate::error::InvokeError;
use crate::logs::CallId;
use crate::metrics::Outcome;
use crate::pending::RunTimes;
use crate::registry::Deployed;
use mote_runtime::{CallError, CallOutput, GuestLog};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The reply to a call: its response body or why it failed, and where its time went.
#[derive(Debug)]
pub struct Reply {
    /// The response body, or why the call failed.
    pub result: Result<Vec<u8>, InvokeError>,
    /// The call's id, which its function's log entries carry, if it ran.
    pub call: Option<CallId>,
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
            call: None,
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
    /// The last call id given.
    calls: AtomicU64,
}

impl Ledger {
    /// A ledger that records processing times in `run_times`.
    pub(crate) fn new(run_times: Arc<dyn RunTimes>) -> Self {
        Self {
            run_times,
            calls: AtomicU64::new(0),
        }
    }

    /// A new call's id.
    #[inline]
    pub(crate) fn call_id(&self) -> CallId {
        CallId(self.calls.fetch_add(1, Ordering::Relaxed) + 1)
    }

    /// Settles a call of `function` that arrived at `arrival` (`here`: and started at once,
    /// never queued), started at `started` and ended now with `result`, having logged `log`,
    /// and returns its reply.
    #[inline]
    pub(crate) fn settle(
        &self,
        function: &Deployed,
        result: Result<CallOutput, CallError>,
        log: GuestLog,
        arrival: Instant,
        started: Instant,
        here: bool,
    ) -> Reply {
        let now = Instant::now();
        let processing = now.saturating_duration_since(started);
        let call = self.call_id();
        let (outcome, entered, result) = match result {
            Ok(out) => (Outcome::Ok, Some(out.entered), Ok(out.body)),
            Err(e) => (Outcome::of(&e), None, Err(InvokeError::Call(e))),
        };
        let error = result.as_ref().err().map(|e| e as &dyn std::fmt::Display);
        self.keep_log(function, call, outcome, error, log);
        let arrived = here.then_some(arrival);
        self.book(
            function,
            outcome,
            now.saturating_duration_since(arrival),
            processing,
            arrived,
        );
        Reply {
            result,
            call: Some(call),
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
        here: bool,
    ) -> Reply {
        let now = Instant::now();
        let processing = now.saturating_duration_since(started);
        let response = now.saturating_duration_since(arrival);
        let call = self.call_id();
        self.keep_log(
            function,
            call,
            Outcome::Internal,
            Some(&error),
            GuestLog::default(),
        );
        self.book(
            function,
            Outcome::Internal,
            response,
            processing,
            here.then_some(arrival),
        );
        Reply {
            result: Err(error),
            call: Some(call),
            queued: started.saturating_duration_since(arrival),
            processing,
            entered: None,
            cold_start: None,
        }
    }

    /// Keeps what call `call` of `function` logged in the function's log, with why it failed
    /// (`error`); a call that succeeded without a line costs nothing here.
    #[inline]
    pub(crate) fn keep_log(
        &self,
        function: &Deployed,
        call: CallId,
        outcome: Outcome,
        error: Option<&dyn std::fmt::Display>,
        log: GuestLog,
    ) {
        if error.is_none() && log.is_empty() {
            return;
        }
        let error = error.map(ToString::to_string);
        function.logs().record(call, outcome, error, log);
    }

    /// Counts a call that ended with `outcome`, `response` after it arrived and `processing`
    /// after it started (and arrived at `arrived` if it was never queued), and tells its
    /// quarantine and history. A request to a component is settled here directly: its reply
    /// (the response) left before it ended.
    pub(crate) fn book(
        &self,
        function: &Deployed,
        outcome: Outcome,
        response: Duration,
        processing: Duration,
        arrived: Option<Instant>,
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
        let expected = self.run_times.complete(function.key(), processing, arrived);
        function.set_expected(expected);
    }
}
