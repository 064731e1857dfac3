//! `wasi:http` proxy components made ready to serve: what `wasmtime serve`, Spin and others run.
//! The export check and linking ([`link`]: a component must export
//! `wasi:http/incoming-handler@0.2`; an import mote does not provide is named), the linker
//! with WASI 0.2 and `wasi:http` ([`linker`]), and what a request keeps in its `Store`
//! ([`ProxyState`]), including how its outbound requests leave: through the node's [`Egress`]
//! (`outbound`: resolve, check every address against the function's grants and the node's
//! ceiling, connect to one that passed), with connect and response timeouts bounded by the
//! budget, on the node's I/O runtime, because the threads that poll guests are confined by
//! seccomp and hold no sockets. Serving a request is `serve`'s.

use crate::error::CompileError;
use crate::gate::HostIo;
use crate::outbound::{Egress, Waits};
use crate::state::{CallLimiter, Deadline};
use mote_types::{HttpSettings, Limits};
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};
use wasmtime::Engine;
use wasmtime::component::{Component, Linker, ResourceTable};
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};
use wasmtime_wasi_http::p2::bindings::ProxyPre;
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

/// What a proxy call keeps in its `Store`.
pub(crate) struct ProxyState {
    wasi: WasiCtx,
    http: WasiHttpCtx,
    table: ResourceTable,
    outbound: Outbound,
    pub(crate) limiter: CallLimiter,
    pub(crate) deadline: Instant,
    pub(crate) timed_out: bool,
    pub(crate) stderr: MemoryOutputPipe,
}

impl ProxyState {
    /// The state of a request to `function`, with `limits`, that must end by `deadline`; its
    /// outbound requests may reach what `http` allows, through `io`.
    pub(crate) fn new(
        function: &Arc<str>,
        http: &Arc<HttpSettings>,
        limits: Limits,
        deadline: Instant,
        io: &HostIo,
    ) -> Self {
        let stderr = MemoryOutputPipe::new(STDERR_CAPACITY);
        Self {
            wasi: WasiCtx::builder().stderr(stderr.clone()).build(),
            http: WasiHttpCtx::new(),
            table: ResourceTable::new(),
            outbound: Outbound {
                function: function.clone(),
                http: http.clone(),
                egress: io.egress.clone(),
                io: io.clone(),
                deadline,
            },
            limiter: CallLimiter {
                memory_limit: limits.memory_bytes(),
                denied: None,
            },
            deadline,
            timed_out: false,
            stderr,
        }
    }
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
    io: HostIo,
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
            let lost = |e: mote_confine::Lost| {
                wasmtime_wasi_http::Error::InternalError(Some(format!(
                    "the outbound request's task ended: {e}"
                )))
            };
            let (response, connection) = send.await.map_err(lost)??;
            // The connection reads and writes its socket, so it runs where sockets are allowed;
            // relayed, since the guest feeds and drains it from a confined thread.
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Compiles and links `wat`, a component, on an engine of its own.
    fn link_wat(wat: &str) -> Result<ProxyCode, CompileError> {
        let engine = Engine::default();
        let component = compile(&engine, &wat::parse_str(wat).unwrap())?;
        link(&linker(&engine).unwrap(), &component)
    }

    #[test]
    fn a_component_that_is_not_a_proxy_is_named_by_its_exports() {
        let e = link_wat("(component)").err().unwrap();
        assert!(
            matches!(&e, CompileError::NotProxy { exports, p3: false } if exports.is_empty()),
            "{e}"
        );
        let e = link_wat(
            r#"(component (instance $h) (export "wasi:http/handler@0.3.0" (instance $h)))"#,
        )
        .err()
        .unwrap();
        assert!(
            e.to_string().contains("WASIp3") && e.to_string().contains("spin-sdk 5.x"),
            "{e}"
        );
    }

    #[test]
    fn an_import_mote_does_not_provide_is_named() {
        let e = link_wat(
            r#"(component
                 (import "wasi:keyvalue/store@0.2.0" (instance (export "get" (func))))
                 (instance $h)
                 (export "wasi:http/incoming-handler@0.2.0" (instance $h)))"#,
        )
        .err()
        .unwrap();
        assert!(
            matches!(&e, CompileError::UnknownComponentImport { name } if name == "wasi:keyvalue/store@0.2.0"),
            "{e}"
        );
        assert!(e.to_string().contains("docs/abi.md"), "{e}");
    }

    #[test]
    fn wasmtime_s_missing_import_message_is_parsed() {
        let msg = "component imports instance `wasi:x/y@1.0.0`, but a matching implementation was not found in the linker";
        assert_eq!(missing_import(msg), Some("wasi:x/y@1.0.0"));
        assert_eq!(missing_import("something else"), None);
    }
}
