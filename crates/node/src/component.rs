//! A request to a `wasi:http` component, served on the reader that read it
//! ([`crate::Node::serve_http`]), on a task of the reader's own: a fresh component instance,
//! which holds a core only while its guest computes (`cores::gated`: between polls, while it
//! waits on a body or an outbound response or has yielded at an epoch tick, the core goes to
//! what waits). The response head goes back as soon as the guest sets it, its body streams
//! while the guest runs, and the call is settled when the guest returns. At most
//! `MicrotaskConfig::max_alive` requests hold an instance at once; the wait for one is relayed,
//! since another reader (a confined thread) may end the request that frees it.

use crate::cores::{Cores, gated};
use crate::error::InvokeError;
use crate::metrics::Outcome;
use crate::registry::Deployed;
use crate::run::Runner;
use bytes::Bytes;
use mote_confine::Relay;
use mote_runtime::{
    CallError, CallOutput, Function, GuestLog, HostIo, JobCores, ProxyAnswer, ProxyCall,
    ProxyResponse,
};
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::{Semaphore, oneshot};

/// What requests to components are served with.
pub(crate) struct Components {
    pub(crate) cores: Arc<Cores>,
    pub(crate) runner: Arc<Runner>,
    pub(crate) relay: Arc<Relay>,
    pub(crate) job_cores: Arc<JobCores>,
    /// Requests that hold an instance now, at most `MicrotaskConfig::max_alive`.
    pub(crate) slots: Arc<Semaphore>,
    /// Where their outbound requests go.
    pub(crate) host: HostIo,
}

impl Components {
    /// Serves `request` to `function`, a component running `code`, that arrived at `arrival`:
    /// the response as soon as the guest sets it, or why there is none.
    pub(crate) async fn serve<B>(
        self: &Arc<Self>,
        function: Arc<Deployed>,
        code: Arc<Function>,
        request: http::Request<B>,
        arrival: Instant,
    ) -> Result<ProxyResponse, InvokeError>
    where
        B: http_body::Body<Data = Bytes> + Send + 'static,
        B::Error: std::error::Error + Send + Sync + 'static,
    {
        function.admit()?;
        let slot = self
            .relay
            .relayed(self.slots.clone().acquire_owned())
            .await
            .map_err(|_| InvokeError::ShuttingDown)?;
        function.admit()?;
        let (reply, response) = oneshot::channel();
        let components = self.clone();
        // On this reader's own runtime: the guest's body and the client's stay on this thread.
        drop(tokio::spawn(async move {
            let _slot = slot;
            let _in_flight = components.job_cores.call();
            components
                .serve_here(function, code, request, reply, arrival)
                .await;
        }));
        response.await.map_err(|_| InvokeError::ShuttingDown)?
    }

    /// Serves one request: replies with the response head as soon as the guest sets it, and
    /// settles the call when the guest returns.
    async fn serve_here<B>(
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
        let started = Instant::now();
        let ledger = self.runner.ledger();
        let call_id = ledger.call_id();
        let (respond, mut answer) = oneshot::channel::<ProxyAnswer>();
        let call = ProxyCall {
            function: &code,
            name: function.name(),
            limits: function.record().limits,
            started,
            http: function.http().clone(),
        };
        let serving = self
            .runner
            .runtime
            .serve_http(call, request, respond, &self.host);
        let serving = gated(&self.cores, function.key(), arrival, serving);
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
        ledger.keep_log(&function, call_id, outcome, error, log);
        let now = Instant::now();
        ledger.book(
            &function,
            outcome,
            now.saturating_duration_since(arrival),
            now.saturating_duration_since(started),
            Some(arrival),
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
