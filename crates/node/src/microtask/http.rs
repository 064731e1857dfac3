//! The HTTP serving path: a request to a `wasi:http` component runs on the microtask threads,
//! behind the same gate and instance slots as other calls. The call holds a whole core while
//! the guest computes and gives it up while it waits on a body or an outbound response
//! ([`gated`]); the response head goes back as soon as the guest sets it, its body streams
//! while the guest runs, and the call is settled when the guest returns.

use super::gate::gated;
use super::pool::{Microtasks, Shared};
use crate::error::InvokeError;
use crate::metrics::Outcome;
use crate::registry::Deployed;
use bytes::Bytes;
use mote_runtime::{
    CallError, CallOutput, Function, GuestLog, ProxyAnswer, ProxyCall, ProxyResponse,
};
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::oneshot;

impl Microtasks {
    /// Queues `request` to `function`, a `wasi:http` component running `code`, that arrived at
    /// `arrival`. The receiver gets the response as soon as the guest sets it (its body streams
    /// while the guest runs), or why there is none.
    pub(crate) fn submit_http<B>(
        &self,
        function: Arc<Deployed>,
        code: Arc<Function>,
        request: http::Request<B>,
        arrival: Instant,
    ) -> Result<oneshot::Receiver<Result<ProxyResponse, InvokeError>>, InvokeError>
    where
        B: http_body::Body<Data = Bytes> + Send + 'static,
        B::Error: std::error::Error + Send + Sync + 'static,
    {
        let (reply, rx) = oneshot::channel();
        self.enqueue(function, move |shared, function| async move {
            shared.serve(function, code, request, reply, arrival).await;
        })?;
        Ok(rx)
    }
}

impl Shared {
    /// Serves one request to a component: waits for a slot and a core like any microtask call,
    /// replies with the response head as soon as the guest sets it, and settles the call when
    /// the guest returns.
    async fn serve<B>(
        &self,
        function: Arc<Deployed>,
        code: Arc<Function>,
        request: http::Request<B>,
        mut reply: oneshot::Sender<Result<ProxyResponse, InvokeError>>,
        arrival: Instant,
    ) where
        B: http_body::Body<Data = Bytes> + Send + 'static,
        B::Error: std::error::Error + Send + Sync + 'static,
    {
        let (_slot, gate) = match self.admit(&function, arrival, &mut reply).await {
            Ok(admitted) => admitted,
            Err(Some(e)) => {
                let _ = reply.send(Err(e));
                return;
            }
            Err(None) => return,
        };
        let started = Instant::now();
        let call_id = self.ledger.call_id();
        let (respond, mut answer) = oneshot::channel::<ProxyAnswer>();
        let call = ProxyCall {
            function: &code,
            name: function.name(),
            limits: function.record().limits,
            started,
            http: function.http().clone(),
        };
        let serving = gated(
            gate,
            self.runtime.serve_http(call, request, respond, &self.host),
        );
        let mut serving = std::pin::pin!(serving);
        let first = tokio::select! {
            biased;
            answered = &mut answer => First::Answered(answered.ok()),
            result = &mut serving => First::Ended(result),
            () = reply.closed() => First::Gone,
        };
        let answered = |answer: ProxyAnswer| {
            answer
                .map(|mut response| {
                    response.extensions_mut().insert(call_id);
                    response
                })
                .map_err(|code| CallError::Answered(code).into())
        };
        let ((outcome, error), log) = match first {
            First::Answered(Some(answer)) => {
                // The head goes out now; the body streams while the guest goes on.
                let _ = reply.send(answered(answer));
                let (result, log) = serving.await;
                if let Err(e) = &result {
                    tracing::warn!(function = %function.name(), error = %e, "a component failed after it sent its response head; the client's body was cut short");
                }
                (outcome_of(&result), log)
            }
            // Dropped unset: the call is ending without a response.
            First::Answered(None) => {
                let (result, log) = serving.await;
                (unanswered(reply, result), log)
            }
            First::Ended((result, log)) => match answer.try_recv() {
                // It set its response and returned at once: the body is already whole.
                Ok(answer) => {
                    let _ = reply.send(answered(answer));
                    (outcome_of(&result), log)
                }
                Err(_) => (unanswered(reply, result), log),
            },
            First::Gone => {
                function.count(Outcome::Cancelled);
                return;
            }
        };
        let error = error.as_ref().map(|e| e as &dyn std::fmt::Display);
        self.ledger
            .keep_log(&function, call_id, outcome, error, log);
        let now = Instant::now();
        self.ledger.book(
            &function,
            outcome,
            now.saturating_duration_since(arrival),
            now.saturating_duration_since(started),
        );
    }
}

/// What a request to a component came to first.
enum First {
    /// The guest set its response (or dropped the outparam unset: `None`).
    Answered(Option<ProxyAnswer>),
    /// The guest returned or failed, having logged what it did.
    Ended((Result<CallOutput, CallError>, GuestLog)),
    /// The client left before the response head: the call is dropped, which stops the guest.
    Gone,
}

/// How a call ended, and why if it failed.
fn outcome_of(result: &Result<CallOutput, CallError>) -> (Outcome, Option<String>) {
    match result {
        Ok(_) => (Outcome::Ok, None),
        Err(e) => (Outcome::of(e), Some(e.to_string())),
    }
}

/// Replies to a request whose guest ended without a response with why, and returns how it ended
/// and why.
fn unanswered(
    reply: oneshot::Sender<Result<ProxyResponse, InvokeError>>,
    result: Result<CallOutput, CallError>,
) -> (Outcome, Option<String>) {
    let error = match result {
        Ok(_) => CallError::NoResponse,
        Err(e) => e,
    };
    let outcome = (Outcome::of(&error), Some(error.to_string()));
    let _ = reply.send(Err(error.into()));
    outcome
}
