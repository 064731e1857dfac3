//! The call path: [`Node::invoke`] (async), [`Node::submit`] (for callers that may block) and
//! [`Node::serve_http`] (requests to components): a lock-free lookup, the function's resident
//! code or a cold load, then the call on this thread (run-to-completion, when a core is idle
//! and the policy would run it next anyway), the executors or the microtask threads; the
//! caller holds a [`PendingCall`] until the reply.

use super::Node;
use crate::error::InvokeError;
use crate::ledger::Reply;
use crate::registry::Deployed;
use crate::resident::Code;
use bytes::Bytes;
use mote_runtime::{CallError, CallInFlight, Function, ProxyResponse};
use mote_types::GuestKind;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::oneshot::{self, error::TryRecvError};

/// A call that has been queued, or has already run on the caller's thread; [`PendingCall::wait`]
/// or `.await` gives its reply.
#[derive(Debug)]
pub struct PendingCall {
    reply: Answer,
    cold_start: Option<Duration>,
    /// Code this call's cold start evicted: unmapped when the call is done, not while it starts.
    evicted: Vec<Arc<Function>>,
    /// A call with phases: jobs' tasks give it a core until it is answered. (An executor's
    /// call hands its count to the executors, which keep it until its executor is free.)
    _in_flight: Option<CallInFlight>,
}

/// Where a call's reply comes from.
#[derive(Debug)]
enum Answer {
    /// The call ran on the caller's thread; taken once.
    Ready(Option<Reply>),
    /// An executor or a microtask thread will send it.
    Waiting(oneshot::Receiver<Reply>),
}

impl PendingCall {
    /// Waits for the reply on this thread, for a synchronous caller that owns a core (a
    /// benchmark, a dispatcher thread): polls for up to `spin`, then blocks. Polling saves the
    /// futex wake-up that dominates a microsecond call.
    pub fn wait(self, spin: Duration) -> Result<Reply, InvokeError> {
        let Self {
            reply,
            cold_start,
            evicted: _evicted,
            _in_flight,
        } = self;
        let mut reply = match reply {
            Answer::Ready(reply) => {
                return reply
                    .map(|reply| Self::complete(cold_start, reply))
                    .ok_or_else(dropped);
            }
            Answer::Waiting(reply) => reply,
        };
        let until = Instant::now() + spin;
        let reply = loop {
            match reply.try_recv() {
                Ok(reply) => break reply,
                Err(TryRecvError::Closed) => return Err(dropped()),
                Err(TryRecvError::Empty) if Instant::now() < until => std::hint::spin_loop(),
                Err(TryRecvError::Empty) => break reply.blocking_recv().map_err(|_| dropped())?,
            }
        };
        Ok(Self::complete(cold_start, reply))
    }

    /// The executor's reply with what only the submitting side knows: the cold start.
    fn complete(cold_start: Option<Duration>, reply: Reply) -> Reply {
        Reply {
            cold_start,
            ..reply
        }
    }
}

impl std::future::Future for PendingCall {
    type Output = Result<Reply, InvokeError>;

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        let cold_start = self.cold_start;
        match &mut self.reply {
            Answer::Ready(reply) => std::task::Poll::Ready(
                reply
                    .take()
                    .map(|reply| Self::complete(cold_start, reply))
                    .ok_or_else(dropped),
            ),
            Answer::Waiting(reply) => std::pin::Pin::new(reply).poll(cx).map(|r| {
                r.map(|reply| Self::complete(cold_start, reply))
                    .map_err(|_| dropped())
            }),
        }
    }
}

impl Node {
    /// Runs `name` with `input` as the request body and returns the response body.
    pub async fn invoke(&self, name: &str, input: Bytes) -> Result<Vec<u8>, InvokeError> {
        self.invoke_traced(name, input).await?.result
    }

    /// Like [`Node::invoke`], and also says how long the call waited and ran. If the function is
    /// not resident its code is loaded first on the blocking pool of the async runtime this is
    /// polled on (a cold start), never on the caller's own thread.
    pub async fn invoke_traced(&self, name: &str, input: Bytes) -> Result<Reply, InvokeError> {
        self.invoke_queued(name, input, false).await
    }

    /// Like [`Node::invoke_traced`] for a caller that can forward the call: until it starts, the
    /// call may be handed to another node ([`Node::hand_over`]), and then this resolves to
    /// [`InvokeError::Moved`] naming that node, and the call did not run here.
    pub async fn invoke_movable(&self, name: &str, input: Bytes) -> Result<Reply, InvokeError> {
        let reply = self.invoke_queued(name, input, true).await?;
        match reply.result {
            Err(InvokeError::Moved { to }) => Err(InvokeError::Moved { to }),
            result => Ok(Reply { result, ..reply }),
        }
    }

    async fn invoke_queued(
        &self,
        name: &str,
        input: Bytes,
        movable: bool,
    ) -> Result<Reply, InvokeError> {
        let arrival = Instant::now();
        let function = self.lookup(name)?;
        let code = match self.registry.warm(&function, arrival) {
            Some(code) => Code {
                function: code,
                cold_start: None,
            },
            None => self.registry.load_aside(&function, arrival).await?,
        };
        self.queue(function, code, input, arrival, movable)?.await
    }

    /// Serves `request` with `name`, a `wasi:http` component: resolves to the response as soon
    /// as the guest sets it (its body streams while the guest runs) or to why there is none. A
    /// component that is not resident is loaded first on the blocking pool (a cold start).
    pub async fn serve_http<B>(
        &self,
        name: &str,
        request: http::Request<B>,
    ) -> Result<ProxyResponse, InvokeError>
    where
        B: http_body::Body<Data = Bytes> + Send + 'static,
        B::Error: std::error::Error + Send + Sync + 'static,
    {
        let arrival = Instant::now();
        let function = self.lookup(name)?;
        let code = match self.registry.warm(&function, arrival) {
            Some(code) => code,
            None => {
                let code = self.registry.load_aside(&function, arrival).await?.function;
                drop(self.registry.sweep(&function));
                code
            }
        };
        if !code.is_proxy() {
            return Err(InvokeError::Call(CallError::NotProxy));
        }
        let _in_flight = self.job_cores.call();
        let reply = self
            .microtasks
            .submit_http(function, code, request, arrival)?;
        reply.await.map_err(|_| InvokeError::ShuttingDown)?
    }

    /// The kind of the function deployed as `name`, if there is one; a lookup without locks.
    pub fn kind(&self, name: &str) -> Option<GuestKind> {
        self.registry.kind(name)
    }

    /// Whether `name` is deployed and may be called without a token; a lookup without locks.
    pub fn is_public(&self, name: &str) -> bool {
        self.registry.is_public(name)
    }

    /// The component mounted on the most specific route that serves `path`, if any.
    pub fn route(&self, path: &str) -> Option<Arc<Deployed>> {
        self.registry.route(path)
    }

    /// Queues a call of `name` with `input` as the request body, for a caller that may block:
    /// if the function is not resident its code is loaded first, on this thread (a cold start;
    /// a compile if its artefact is gone). Async callers use [`Node::invoke`].
    pub fn submit(&self, name: &str, input: Bytes) -> Result<PendingCall, InvokeError> {
        let arrival = Instant::now();
        let function = self.lookup(name)?;
        let code = match self.registry.warm(&function, arrival) {
            Some(code) => Code {
                function: code,
                cold_start: None,
            },
            None => self.registry.load_here(&function, arrival)?,
        };
        self.queue(function, code, input, arrival, false)
    }

    #[inline]
    fn lookup(&self, name: &str) -> Result<Arc<Deployed>, InvokeError> {
        self.registry
            .get(name)
            .ok_or_else(|| InvokeError::NotFound(name.to_owned()))
    }

    /// Hands a call of `function` running `code` to the path its kind takes.
    #[inline]
    fn queue(
        &self,
        function: Arc<Deployed>,
        code: Code,
        input: Bytes,
        arrival: Instant,
        movable: bool,
    ) -> Result<PendingCall, InvokeError> {
        // Only a cold load can push the resident set over budget; a warm call skips the clone.
        let loaded = code.cold_start.is_some().then(|| function.clone());
        // Counted from the moment it is queued, so that jobs' tasks have given its core up by
        // the time its thread wakes (`mote_runtime::JobCores`).
        let in_flight = self.job_cores.call();
        let (reply, in_flight) = match code.function.is_microtask() {
            true => {
                let reply = self
                    .microtasks
                    .submit(function, code.function, input, arrival)?;
                (Answer::Waiting(reply), Some(in_flight))
            }
            false => match self
                .executors
                .run_here(&function, &code.function, &input, arrival)
            {
                // It ran while `in_flight` counted its core; jobs' tasks may have it back.
                Some(reply) => (Answer::Ready(Some(reply?)), None),
                None => {
                    let reply = self.executors.submit(
                        function,
                        code.function,
                        input,
                        arrival,
                        in_flight,
                        movable,
                    )?;
                    (Answer::Waiting(reply), None)
                }
            },
        };
        let evicted = match loaded {
            Some(loaded) => self.registry.sweep(&loaded),
            None => Vec::new(),
        };
        Ok(PendingCall {
            reply,
            cold_start: code.cold_start,
            evicted,
            _in_flight: in_flight,
        })
    }

    /// Hands up to `most` of the waiting calls that may move ([`Node::invoke_movable`]) to node
    /// `to`, which has a core free: those that would start last here, as long as each would
    /// wait at least `min_wait` for the calls ranked ahead of it. Their callers forward them.
    /// Returns how many moved; none under `fifo` and `baseline` (see `Pending::release`).
    pub fn hand_over(&self, most: usize, min_wait: Duration, to: &Arc<str>) -> usize {
        self.executors.hand_over(most, min_wait, to)
    }

    /// Runs a call for a synchronous caller: [`Node::submit`], then [`PendingCall::wait`].
    pub fn invoke_blocking(
        &self,
        name: &str,
        input: Bytes,
        spin: Duration,
    ) -> Result<Reply, InvokeError> {
        self.submit(name, input)?.wait(spin)
    }
}

fn dropped() -> InvokeError {
    InvokeError::Internal("the executor dropped the call".into())
}
