//! The call path: where each call runs.
//!
//! - [`Node::invoke_here`] (a reader, for the request it read): a lock-free lookup, the
//!   function's resident code (or a cold load on the I/O runtime), then, if a core is free,
//!   nothing waits and the reader runs no call of its own, the call right there as a future
//!   ([`crate::run`], `Entry::Reader`); otherwise the executors. Requests to components take
//!   [`Node::serve_http`], on the reader too, holding a core only while they compute.
//! - [`Node::invoke_on`] (a thread confined to run guest code, for a call it makes and waits
//!   for: a benchmark's dispatcher): the same, on that thread, as a blocking call that parks
//!   the thread while it is preempted (`Entry::Blocking`, as an executor's).
//! - [`Node::invoke`] and the like (any other async caller) and [`Node::submit`] (a caller
//!   that may block): the executors, or the microtask threads for a function with phases; the
//!   caller holds a [`PendingCall`] until the reply, which it is woken for through the relay
//!   (the thread that replies is confined).
//!
//! A function with phases always takes the microtask threads, a WASI command (and a function
//! whose call called WASI on a reader before) always the executors.

use super::{Caller, Node, Reader};
use crate::error::InvokeError;
use crate::ledger::Reply;
use crate::registry::Deployed;
use crate::resident::Code;
use crate::run::{CallRef, Entry, Ran};
use bytes::Bytes;
use mote_confine::{Relay, RelaySlot};
use mote_runtime::{CallError, CallInFlight, Function, ProxyResponse};
use mote_types::GuestKind;
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant};
use tokio::sync::oneshot::{self, error::TryRecvError};

/// A call that has been queued; [`PendingCall::wait`] or `.await` gives its reply.
#[derive(Debug)]
pub struct PendingCall {
    reply: oneshot::Receiver<Reply>,
    /// How an awaiting task is woken: through the relay, made at its first poll.
    woken: Option<RelaySlot>,
    relay: Arc<Relay>,
    cold_start: Option<Duration>,
    /// Code this call's cold start evicted: unmapped when the call is done, not while it starts.
    _evicted: Vec<Arc<Function>>,
    /// A call with phases: jobs' tasks give it a core until it is answered. (An executor's
    /// call lets its count go when it starts, on a core that counts itself.)
    _in_flight: Option<CallInFlight>,
}

impl PendingCall {
    /// Waits for the reply on this thread, for a synchronous caller that owns a core (a
    /// benchmark, a dispatcher thread): polls for up to `spin`, then blocks. Polling saves the
    /// futex wake-up that dominates a microsecond call.
    pub fn wait(self, spin: Duration) -> Result<Reply, InvokeError> {
        let Self {
            mut reply,
            cold_start,
            ..
        } = self;
        let until = Instant::now() + spin;
        let reply = loop {
            match reply.try_recv() {
                Ok(reply) => break reply,
                Err(TryRecvError::Closed) => return Err(dropped()),
                Err(TryRecvError::Empty) if Instant::now() < until => std::hint::spin_loop(),
                Err(TryRecvError::Empty) => break reply.blocking_recv().map_err(|_| dropped())?,
            }
        };
        Ok(complete(cold_start, reply))
    }
}

/// The executor's reply with what only the submitting side knows: the cold start.
fn complete(cold_start: Option<Duration>, reply: Reply) -> Reply {
    Reply {
        cold_start,
        ..reply
    }
}

impl std::future::Future for PendingCall {
    type Output = Result<Reply, InvokeError>;

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> Poll<Self::Output> {
        let this = &mut *self;
        let woken = this.woken.get_or_insert_with(|| this.relay.slot());
        let reply = &mut this.reply;
        woken
            .poll(cx, |cx| std::pin::Pin::new(reply).poll(cx))
            .map(|r| {
                r.map(|reply| complete(this.cold_start, reply))
                    .map_err(|_| dropped())
            })
    }
}

impl Node {
    /// Runs `name` with `input` as the request body and returns the response body.
    pub async fn invoke(&self, name: &str, input: Bytes) -> Result<Vec<u8>, InvokeError> {
        self.invoke_traced(name, input).await?.result
    }

    /// Like [`Node::invoke`], and also says how long the call waited and ran. If the function is
    /// not resident its code is loaded first on the I/O runtime's blocking pool (a cold
    /// start), never on the caller's own thread.
    pub async fn invoke_traced(&self, name: &str, input: Bytes) -> Result<Reply, InvokeError> {
        self.call(None, name, input, false).await
    }

    /// Like [`Node::invoke_traced`] for a caller that can forward the call: until it starts, the
    /// call may be handed to another node ([`Node::hand_over`]), and then this resolves to
    /// [`InvokeError::Moved`] naming that node, and the call did not run here.
    pub async fn invoke_movable(&self, name: &str, input: Bytes) -> Result<Reply, InvokeError> {
        self.call(None, name, input, true).await
    }

    /// Runs `name` with `input` for `reader`, the thread that read the request: right there
    /// if a core is free and nothing waits (see the module's doc), else queued; `movable` as
    /// for [`Node::invoke_movable`].
    pub async fn invoke_here(
        &self,
        reader: &Reader,
        name: &str,
        input: Bytes,
        movable: bool,
    ) -> Result<Reply, InvokeError> {
        self.call(Some(reader), name, input, movable).await
    }

    /// A call of `name` with `input`: on `reader` if it may run there, else queued.
    async fn call(
        &self,
        reader: Option<&Reader>,
        name: &str,
        input: Bytes,
        movable: bool,
    ) -> Result<Reply, InvokeError> {
        let arrival = Instant::now();
        let function = self.lookup(name)?;
        let code = self.code(&function, arrival).await?;
        if let Some(reader) = reader
            && let Some(reply) = self
                .run_here(reader, CallRef::of(&function, &code, &input, arrival))
                .await
        {
            return Ok(complete(code.cold_start, reply));
        }
        let reply = self.queue(function, code, input, arrival, movable)?.await?;
        match movable {
            true => moved(reply),
            false => Ok(reply),
        }
    }

    /// Runs the call on `reader` now, if it may (see the module's doc): its reply, or `None`
    /// if it must be queued (untouched).
    async fn run_here(&self, reader: &Reader, call: CallRef<'_>) -> Option<Reply> {
        let may = self.executors.runs_inline()
            && call.function.record().kind == GuestKind::MoteAbiV1
            && !call.code.is_microtask()
            && call.function.runs_on_readers()
            && mote_confine::role() == Some(mote_confine::Role::Reader);
        if !may {
            return None;
        }
        let _turn = reader.take_turn()?;
        let on = self.cores.take_if_idle()?;
        match self.run_taken(call, Entry::Reader { on }).await {
            (Ran::Answered(_), reply) => reply,
            (Ran::Elsewhere, _) => None,
        }
    }

    /// Runs `call`, which has taken a core, through `entry`: how it ended, and its reply.
    async fn run_taken(&self, call: CallRef<'_>, entry: Entry<'_>) -> (Ran, Option<Reply>) {
        let mut reply = None;
        let ran = self.runner.run(call, entry, |r| reply = Some(r)).await;
        (ran, reply)
    }

    /// Runs `name` with `input` for `caller`, a thread confined to run guest code: on this
    /// thread if a core is free and nothing waits (as [`Node::invoke_here`] does for a
    /// reader), else queued, waiting for the reply with a poll of up to `spin` first
    /// ([`PendingCall::wait`]). A function that is not resident is loaded on the I/O runtime
    /// meanwhile (this thread may not open files).
    pub fn invoke_on(
        &self,
        caller: &Caller,
        name: &str,
        input: Bytes,
        spin: Duration,
    ) -> Result<Reply, InvokeError> {
        let arrival = Instant::now();
        let function = self.lookup(name)?;
        let code = match self.registry.warm(&function, arrival) {
            Some(code) => Code {
                function: code,
                cold_start: None,
            },
            None => park_on(self.code(&function, arrival))?,
        };
        let call = CallRef::of(&function, &code, &input, arrival);
        if let Some(reply) = self.run_for(caller, call) {
            return Ok(complete(code.cold_start, reply));
        }
        self.queue(function, code, input, arrival, false)?
            .wait(spin)
    }

    /// Runs the call on `caller`'s thread now, if it may: its reply, or `None` if it must be
    /// queued (untouched).
    fn run_for(&self, caller: &Caller, call: CallRef<'_>) -> Option<Reply> {
        let may = self.executors.runs_inline()
            && !call.code.is_microtask()
            && mote_confine::role() == Some(mote_confine::Role::Guest);
        if !may {
            return None;
        }
        let on = self.cores.take_if_idle()?;
        // Ranked as if it had been queued and taken at once, so that it is preempted as an
        // executor's call would be.
        let basis = self
            .cores
            .pending()
            .basis_now(call.function.key(), call.arrival);
        let entry = Entry::Blocking {
            seat: &caller.seat,
            on,
            basis,
        };
        match crate::run::block_on(self.run_taken(call, entry)) {
            (Ran::Answered(Some(on)), reply) => {
                self.cores.release(on);
                reply
            }
            (Ran::Answered(None), reply) => reply,
            (Ran::Elsewhere, _) => unreachable!("only a call on a reader runs elsewhere"),
        }
    }

    /// Serves `request` with `name`, a `wasi:http` component, on `reader`: resolves to the
    /// response as soon as the guest sets it (its body streams while the guest runs) or to why
    /// there is none. The request holds a core only while its guest computes. A component that
    /// is not resident is loaded first on the I/O runtime (a cold start).
    pub async fn serve_http<B>(
        &self,
        reader: &Reader,
        name: &str,
        request: http::Request<B>,
    ) -> Result<ProxyResponse, InvokeError>
    where
        B: http_body::Body<Data = Bytes> + Send + 'static,
        B::Error: std::error::Error + Send + Sync + 'static,
    {
        let arrival = Instant::now();
        let function = self.lookup(name)?;
        let code = self.code(&function, arrival).await?.function;
        if !code.is_proxy() {
            return Err(InvokeError::Call(CallError::NotProxy));
        }
        if mote_confine::role() != Some(mote_confine::Role::Reader) {
            return Err(InvokeError::Internal(
                "a request to a component reached a thread that was not confined to run guest code; it was not run".into(),
            ));
        }
        let _ = reader;
        self.components
            .serve(function, code, request, arrival)
            .await
    }

    /// The code of `function`, resident or loaded for a call that arrived at `arrival` (a cold
    /// start, on the I/O runtime's blocking pool, reached through the relay: the caller may be
    /// a reader, which may not open files).
    async fn code(&self, function: &Arc<Deployed>, arrival: Instant) -> Result<Code, InvokeError> {
        if let Some(code) = self.registry.warm(function, arrival) {
            return Ok(Code {
                function: code,
                cold_start: None,
            });
        }
        let code = self
            .registry
            .load_aside(function, arrival, &self.relay, &self.io)
            .await?;
        // Only a cold load can push the resident set over budget.
        drop(self.registry.sweep(function));
        Ok(code)
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

    /// Queues a call of `function` running `code` on the path its kind takes.
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
        // the time it starts (`mote_runtime::JobCores`).
        let in_flight = self.job_cores.call();
        let (reply, in_flight) = match code.function.is_microtask() {
            true => {
                let reply = self
                    .microtasks
                    .submit(function, code.function, input, arrival)?;
                (reply, Some(in_flight))
            }
            false => {
                let reply = self.executors.submit(
                    function,
                    code.function,
                    input,
                    arrival,
                    in_flight,
                    movable,
                )?;
                (reply, None)
            }
        };
        let evicted = match loaded {
            Some(loaded) => self.registry.sweep(&loaded),
            None => Vec::new(),
        };
        Ok(PendingCall {
            reply,
            woken: None,
            relay: self.relay.clone(),
            cold_start: code.cold_start,
            _evicted: evicted,
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

impl<'a> CallRef<'a> {
    /// A call of `function` running `code` with `input`, which arrived at `arrival`.
    fn of(function: &'a Deployed, code: &'a Code, input: &'a [u8], arrival: Instant) -> Self {
        Self {
            function,
            code: &code.function,
            input,
            arrival,
        }
    }
}

/// Waits on this thread for `future`, whose wake-ups come from other threads (the relay):
/// parks between polls, which a confined thread may (a futex).
fn park_on<F: std::future::Future>(future: F) -> F::Output {
    struct Unpark(std::thread::Thread);
    impl std::task::Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = std::task::Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = std::task::Context::from_waker(&waker);
    let mut future = std::pin::pin!(future);
    loop {
        match future.as_mut().poll(&mut cx) {
            Poll::Ready(output) => return output,
            Poll::Pending => std::thread::park(),
        }
    }
}

/// A movable call's reply: [`InvokeError::Moved`] as the error if it was handed to a peer.
fn moved(reply: Reply) -> Result<Reply, InvokeError> {
    match reply.result {
        Err(InvokeError::Moved { to }) => Err(InvokeError::Moved { to }),
        result => Ok(Reply { result, ..reply }),
    }
}

fn dropped() -> InvokeError {
    InvokeError::Internal("the executor dropped the call".into())
}
