//! `wasi:http` proxy components: what `wasmtime serve`, Spin and others run. One request is one
//! call: a fresh component instance from the pool, the request handed to its
//! `wasi:http/incoming-handler`, its response handed back as soon as the guest sets it, with the
//! body streaming both ways while the guest runs.
//!
//! The call is a future. Waits on a request body, a response body's room or an outbound
//! response suspend the guest's fiber, so the node can give its core to others meanwhile; the
//! function's budget covers the whole request, waits included (the epoch callback stops
//! compute, a timer stops waits). Outbound requests go through the node's [`Egress`]
//! (`outbound`: resolve, check every address against the function's grants and the node's
//! ceiling, connect to one that passed), with connect and response timeouts bounded by the
//! budget, and run on the node's I/O runtime, because the threads that poll guests are
//! confined by seccomp and hold no sockets.

use crate::error::{CallError, CompileError};
use crate::gate::HostIo;
use crate::guest_log::{GuestLog, LogStream};
use crate::outbound::{Egress, Waits};
use crate::state::{CallLimiter, Deadline};
use bytes::Bytes;
use http_body_util::BodyExt;
use http_body_util::combinators::UnsyncBoxBody;
use mote_types::{HttpSettings, Limits};
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::oneshot;
use wasmtime::component::{Component, Linker, ResourceTable};
use wasmtime::{Engine, Store};
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};
use wasmtime_wasi_http::p2::bindings::ProxyPre;
use wasmtime_wasi_http::p2::bindings::http::types::{ErrorCode, Scheme};
use wasmtime_wasi_http::{
    RequestOptions, WasiHttpCtx, WasiHttpCtxView, WasiHttpHooks, WasiHttpView,
};

/// The export that makes a component a proxy, without its version.
const INCOMING_HANDLER: &str = "wasi:http/incoming-handler@0.2";
/// The export of a WASIp3 HTTP component (spin-sdk 6 and later), which mote does not run yet.
const P3_HANDLER: &str = "wasi:http/handler@0.3";
/// How much of a component's stderr is kept, to quote the end of it when the call fails.
const STDERR_CAPACITY: usize = 64 << 10;
/// The longest an outbound connection may take to open, whatever the guest asks for.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How much of a response body the guest may write ahead of the client, as chunks of at most
/// [`BODY_CHUNK`] bytes. wasmtime's default (one chunk of 1 MiB) makes a guest that wrote its
/// whole small response wait for the gateway thread to take it before it can finish the body:
/// a round trip between threads on every request. Four chunks of 256 KiB let a response of up
/// to 1 MiB be written at once, and bound what a request in flight buffers to the same.
const BODY_CHUNKS: usize = 4;
const BODY_CHUNK: usize = 256 << 10;

/// A proxy component, linked and ready to instantiate.
pub(crate) struct ProxyCode {
    pub(crate) pre: ProxyPre<ProxyState>,
}

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
    pub function: &'a crate::Function,
    /// The name it is deployed as, for its log lines.
    pub name: &'a Arc<str>,
    /// What it may consume; the budget covers the whole request.
    pub limits: Limits,
    /// When the request began: the budget runs from here.
    pub started: Instant,
    /// Its route and allowed outbound hosts.
    pub http: Arc<HttpSettings>,
}

/// What a proxy call keeps in its `Store`.
pub(crate) struct ProxyState {
    wasi: WasiCtx,
    http: WasiHttpCtx,
    table: ResourceTable,
    outbound: Outbound,
    pub(crate) limiter: CallLimiter,
    pub(crate) deadline: Instant,
    pub(crate) timed_out: bool,
    stderr: MemoryOutputPipe,
}

impl Deadline for ProxyState {
    fn deadline(&self) -> Instant {
        self.deadline
    }

    fn time_out(&mut self) {
        self.timed_out = true;
    }
}

impl WasiView for ProxyState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl WasiHttpView for ProxyState {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        WasiHttpCtxView {
            ctx: &mut self.http,
            table: &mut self.table,
            hooks: &mut self.outbound,
        }
    }
}

/// A call's outbound requests, sent through the node's [`Egress`] from its I/O runtime, and
/// how its response body is buffered.
struct Outbound {
    function: Arc<str>,
    http: Arc<HttpSettings>,
    egress: Arc<Egress>,
    io: tokio::runtime::Handle,
    deadline: Instant,
}

type Sent = wasmtime_wasi_http::Result<crate::outbound::Sent>;

impl WasiHttpHooks for Outbound {
    fn p2_outgoing_body_buffer_chunks(&mut self) -> usize {
        BODY_CHUNKS
    }

    fn p2_outgoing_body_chunk_size(&mut self) -> usize {
        BODY_CHUNK
    }

    fn send_request(
        &mut self,
        request: http::Request<wasmtime_wasi_http::WasiBody>,
        options: Option<RequestOptions>,
        _sent: Box<dyn Future<Output = wasmtime_wasi_http::Result<()>> + Send>,
    ) -> Box<dyn Future<Output = Sent> + Send> {
        // No wait of an outbound request may outlast the call's budget.
        let left = self.deadline.saturating_duration_since(Instant::now());
        let bound = |asked: Option<Duration>, most: Duration| asked.unwrap_or(most).min(most);
        let waits = Waits {
            connect: bound(
                options.and_then(|o| o.connect_timeout),
                CONNECT_TIMEOUT.min(left),
            ),
            first_byte: bound(options.and_then(|o| o.first_byte_timeout), left),
            between_bytes: bound(options.and_then(|o| o.between_bytes_timeout), left),
        };
        let (function, http, egress) = (
            self.function.clone(),
            self.http.clone(),
            self.egress.clone(),
        );
        let io = self.io.clone();
        Box::new(async move {
            let send = io.spawn(async move {
                egress
                    .send(&function, &http.allow_outbound, request, waits)
                    .await
            });
            let lost = |e: tokio::task::JoinError| {
                wasmtime_wasi_http::Error::InternalError(Some(format!(
                    "the outbound request's task ended: {e}"
                )))
            };
            let (response, connection) = send.await.map_err(lost)??;
            // The connection reads and writes its socket, so it runs where sockets are allowed.
            let connection = io.spawn(Box::into_pin(connection));
            let connection: Box<dyn Future<Output = wasmtime_wasi_http::Result<()>> + Send> =
                Box::new(async move { connection.await.map_err(lost)? });
            Ok((response, connection))
        })
    }
}

/// Adds what proxy components may import: `wasi:http` (types and the outgoing handler) and the
/// rest of WASI 0.2, with nothing granted (no preopened directories, no sockets, no
/// environment), so components built for `wasmtime serve -Scli` or with toolchains that import
/// more than the proxy world (componentize-py) link too.
pub(crate) fn linker(engine: &Engine) -> wasmtime::Result<Linker<ProxyState>> {
    let mut linker = Linker::new(engine);
    wasmtime_wasi::p2::add_to_linker_async(&mut linker)?;
    wasmtime_wasi_http::p2::add_only_http_to_linker_async(&mut linker)?;
    Ok(linker)
}

/// Compiles `wasm`, a component, for `engine`.
pub(crate) fn compile(engine: &Engine, wasm: &[u8]) -> Result<Component, CompileError> {
    Component::from_binary(engine, wasm).map_err(|e| CompileError::Invalid(format!("{e:#}")))
}

/// Checks that `component` is a proxy and links it.
pub(crate) fn link(
    linker: &Linker<ProxyState>,
    component: &Component,
) -> Result<ProxyCode, CompileError> {
    let engine = linker.engine();
    let ty = component.component_type();
    let exports: Vec<&str> = ty.exports(engine).map(|(name, _)| name).collect();
    if !exports.iter().any(|e| e.starts_with(INCOMING_HANDLER)) {
        return Err(CompileError::NotProxy {
            exports: exports.join(", "),
            p3: exports.iter().any(|e| e.starts_with(P3_HANDLER)),
        });
    }
    let pre = linker.instantiate_pre(component).map_err(|e| {
        let msg = format!("{e:#}");
        match missing_import(&msg) {
            Some(name) => CompileError::UnknownComponentImport {
                name: name.to_owned(),
            },
            None => CompileError::Link(msg),
        }
    })?;
    let pre = ProxyPre::new(pre).map_err(|e| CompileError::Link(format!("{e:#}")))?;
    component
        .initialize_copy_on_write_image()
        .map_err(|e| CompileError::Link(format!("cannot build the memory image: {e:#}")))?;
    Ok(ProxyCode { pre })
}

/// wasmtime names an import the linker lacks as "component imports instance `NAME`, but a
/// matching implementation was not found in the linker" (or "function", "resource").
fn missing_import(msg: &str) -> Option<&str> {
    let rest = msg.split("component imports ").nth(1)?;
    rest.split('`').nth(1)
}

impl crate::Runtime {
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
    ) -> (Result<crate::CallOutput, CallError>, GuestLog)
    where
        B: http_body::Body<Data = Bytes> + Send + 'static,
        B::Error: std::error::Error + Send + Sync + 'static,
    {
        let Some(code) = call.function.proxy() else {
            return (Err(CallError::NotProxy), GuestLog::default());
        };
        let deadline = call.started + call.limits.timeout();
        let stderr = MemoryOutputPipe::new(STDERR_CAPACITY);
        let state = ProxyState {
            wasi: WasiCtx::builder().stderr(stderr.clone()).build(),
            http: WasiHttpCtx::new(),
            table: ResourceTable::new(),
            outbound: Outbound {
                function: call.name.clone(),
                http: call.http.clone(),
                egress: io.egress.clone(),
                io: io.io.clone(),
                deadline,
            },
            limiter: CallLimiter {
                memory_limit: call.limits.memory_bytes(),
                denied: None,
            },
            deadline,
            timed_out: false,
            stderr,
        };
        let mut store = Store::new(&self.engine, state);
        store.limiter(|s| &mut s.limiter);
        // The call is a future on threads many calls share: it yields at every tick.
        self.arm_deadline(&mut store, call.limits, true);
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
            Ok(Ok(Ok(entered))) => Ok(crate::CallOutput {
                body: Vec::new(),
                entered,
            }),
            Ok(Ok(Err(known))) => Err(known),
            Ok(Err(e)) => {
                let state = store.data();
                let stderr = state.stderr.contents();
                Err(crate::entry::explain(
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

#[cfg(test)]
mod tests {
    use crate::{CompileError, Runtime, RuntimeConfig};

    fn runtime() -> (Runtime, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        (
            Runtime::new(RuntimeConfig::new(dir.path(), 1)).unwrap(),
            dir,
        )
    }

    fn compile(rt: &Runtime, wat: &str) -> CompileError {
        rt.compile(&wat::parse_str(wat).unwrap()).unwrap_err()
    }

    #[test]
    fn a_component_that_is_not_a_proxy_is_named_by_its_exports() {
        let (rt, _dir) = runtime();
        let e = compile(&rt, "(component)");
        assert!(
            matches!(&e, CompileError::NotProxy { exports, p3: false } if exports.is_empty()),
            "{e}"
        );
        let e = compile(
            &rt,
            r#"(component (instance $h) (export "wasi:http/handler@0.3.0" (instance $h)))"#,
        );
        assert!(
            e.to_string().contains("WASIp3") && e.to_string().contains("spin-sdk 5.x"),
            "{e}"
        );
    }

    #[test]
    fn an_import_mote_does_not_provide_is_named() {
        let (rt, _dir) = runtime();
        let e = compile(
            &rt,
            r#"(component
                 (import "wasi:keyvalue/store@0.2.0" (instance (export "get" (func))))
                 (instance $h)
                 (export "wasi:http/incoming-handler@0.2.0" (instance $h)))"#,
        );
        assert!(
            matches!(&e, CompileError::UnknownComponentImport { name } if name == "wasi:keyvalue/store@0.2.0"),
            "{e}"
        );
        assert!(e.to_string().contains("docs/abi.md"), "{e}");
    }

    #[test]
    fn wasmtime_s_missing_import_message_is_parsed() {
        let msg = "component imports instance `wasi:x/y@1.0.0`, but a matching implementation was not found in the linker";
        assert_eq!(super::missing_import(msg), Some("wasi:x/y@1.0.0"));
        assert_eq!(super::missing_import("something else"), None);
    }
}
