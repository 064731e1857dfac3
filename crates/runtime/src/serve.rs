//! Serving one HTTP request with a `wasi:http` proxy component ([`Runtime::serve_http`]): a
//! fresh component instance from the pool, the request handed to its
//! `wasi:http/incoming-handler`, its response handed back as soon as the guest sets it, with the
//! body streaming both ways while the guest runs.
//!
//! The call is a future. Waits on a request body, a response body's room or an outbound
//! response suspend the guest's fiber, so the node can give its core to others meanwhile; the
//! function's budget covers the whole request, waits included (the epoch callback stops
//! compute, a timer stops waits). What the request keeps in its `Store`, and how its outbound
//! requests leave, is `component`'s.

use crate::component::ProxyState;
use crate::engine::Runtime;
use crate::entry::CallOutput;
use crate::error::{CallError, explain};
use crate::function::Function;
use crate::gate::HostIo;
use crate::guest_log::{GuestLog, LogStream};
use bytes::Bytes;
use http_body_util::BodyExt;
use http_body_util::combinators::UnsyncBoxBody;
use mote_types::{HttpSettings, Limits};
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::oneshot;
use wasmtime::Store;
use wasmtime_wasi_http::WasiHttpView;
use wasmtime_wasi_http::p2::bindings::http::types::{ErrorCode, Scheme};

/// A response as the guest set it: the head, and a body that streams while the guest writes it.
pub type ProxyResponse = http::Response<ResponseBody>;

/// The body of a [`ProxyResponse`]. It ends with an error if the guest stopped before finishing
/// it (a trap, its budget).
pub type ResponseBody = UnsyncBoxBody<Bytes, BodyError>;

/// Why a response body ended early.
#[derive(Debug, thiserror::Error)]
#[error("the function's response body failed: {0}")]
pub struct BodyError(String);

/// What a guest answered for its response: the response, or the error code it set instead.
pub type ProxyAnswer = Result<ProxyResponse, String>;

/// One request to run: the function, its name, its limits, when it began, and the hosts its
/// outbound requests may reach.
pub struct ProxyCall<'a> {
    /// The compiled component.
    pub function: &'a Function,
    /// The name it is deployed as, for its log lines.
    pub name: &'a Arc<str>,
    /// What it may consume; the budget covers the whole request.
    pub limits: Limits,
    /// When the request began: the budget runs from here.
    pub started: Instant,
    /// Its route and allowed outbound hosts.
    pub http: Arc<HttpSettings>,
}

impl Runtime {
    /// Serves one request with `call`'s component in a fresh instance. The response goes to
    /// `respond` as soon as the guest sets it, so its body streams while the guest writes; the
    /// future resolves when the guest returns (or fails), with what the ledger settles and what
    /// the guest wrote to stderr. It must be polled on a Tokio runtime with its timer; dropping
    /// it stops the guest.
    pub async fn serve_http<B>(
        &self,
        call: ProxyCall<'_>,
        request: http::Request<B>,
        respond: oneshot::Sender<ProxyAnswer>,
        io: &HostIo,
    ) -> (Result<CallOutput, CallError>, GuestLog)
    where
        B: http_body::Body<Data = Bytes> + Send + 'static,
        B::Error: std::error::Error + Send + Sync + 'static,
    {
        let Some(code) = call.function.proxy() else {
            return (Err(CallError::NotProxy), GuestLog::default());
        };
        let deadline = call.started + call.limits.timeout();
        let state = ProxyState::new(call.name, &call.http, call.limits, deadline, io);
        let mut store = Store::new(&self.engine, state);
        store.limiter(|s| &mut s.limiter);
        // The call is a future on threads many calls share: it yields at every tick.
        let _running = self.arm_deadline(&mut store, call.limits, true);
        let request = request.map(|body| {
            body.map_err(|e| {
                wasmtime_wasi_http::Error::InternalError(Some(format!(
                    "reading the request body: {e}"
                )))
            })
        });
        let setup: wasmtime::Result<_> = (|| {
            let mut http = store.data_mut().http();
            let request = http.new_incoming_request(Scheme::Http, request)?;
            let out = http.new_response_outparam_from_callback(move |answer| {
                let answer = answer
                    .map(|response| {
                        response
                            .map(|body| body.map_err(|e| BodyError(e.to_string())).boxed_unsync())
                    })
                    .map_err(|code| describe(&code));
                let _ = respond.send(answer);
            })?;
            Ok((request, out))
        })();
        let (request, out) = match setup {
            Ok(setup) => setup,
            Err(e) => {
                let error = CallError::BadRequest(format!("{e:#}"));
                return (Err(error), GuestLog::default());
            }
        };
        let run = async {
            let proxy = match code.pre.instantiate_async(&mut store).await {
                Ok(proxy) => proxy,
                Err(e) if store.data().limiter.denied.is_some() => return Err(e),
                Err(e) => return Ok(Err(CallError::Instantiate(format!("{e:#}")))),
            };
            let entered = Instant::now();
            proxy
                .wasi_http_incoming_handler()
                .call_handle(&mut store, request, out)
                .await?;
            Ok(Ok(entered))
        };
        let result = tokio::time::timeout_at(tokio::time::Instant::from_std(deadline), run).await;
        let output = match result {
            Ok(Ok(Ok(entered))) => Ok(CallOutput {
                body: Vec::new(),
                entered,
            }),
            Ok(Ok(Err(known))) => Err(known),
            Ok(Err(e)) => {
                let state = store.data();
                let stderr = state.stderr.contents();
                Err(explain(
                    e,
                    state.timed_out,
                    state.limiter.denied,
                    call.limits,
                    &stderr,
                ))
            }
            // Waiting past the deadline: the guest holds no thread, so no epoch tick stops it.
            Err(_) => Err(CallError::Timeout {
                timeout_us: call.limits.timeout_us,
            }),
        };
        let mut log = GuestLog::default();
        log.push_output(
            call.name,
            LogStream::Stderr,
            &store.data().stderr.contents(),
        );
        (output, log)
    }
}

/// An error code a guest answered with, as the client reads it.
fn describe(code: &ErrorCode) -> String {
    format!("{code:?}")
}
