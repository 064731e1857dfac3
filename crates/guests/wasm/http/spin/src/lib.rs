//! `http-spin`: a `wasi:http/proxy` component written with the Spin SDK (`spin-sdk` 5.2, the last
//! of WASIp2), answering `Hello from Spin: <METHOD> <path-and-query>\n`. It shows that components
//! built by another toolchain than the `wasip2` bindings run on mote too.
//!
//! Built for `wasm32-wasip1`; `crates/guests/build.rs` makes the module a component with the proxy
//! adapter. It exports `wasi:http/incoming-handler@0.2.0`, which hosts of later 0.2 versions match.

use spin_sdk::http::{Request, Response};
use spin_sdk::http_component;

#[http_component]
fn hello(request: Request) -> Response {
    let path = request.path_and_query().unwrap_or("/");
    Response::builder()
        .status(200)
        .header("content-type", "text/plain")
        .body(format!("Hello from Spin: {} {path}\n", request.method()))
        .build()
}
