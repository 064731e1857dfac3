//! `http-hello`: a `wasi:http/proxy` component (not a mote ABI module) whose routes exercise what a
//! host of HTTP components must get right: streamed bodies both ways, large responses, status
//! codes, traps, guests that never return, and outgoing requests.
//!
//! Built for `wasm32-wasip1` with the `wasip2` bindings; `crates/guests/build.rs` makes the module
//! a component with the proxy adapter, so it imports only `wasi:http/types`,
//! `wasi:http/outgoing-handler`, `wasi:io` and stdio, and exports `wasi:http/incoming-handler`.
//!
//! Routes, by the request's path (see [`text::route`]):
//! - `/echo`: headers `x-method`, `x-path` (with the query), `x-echo-<name>` for each request
//!   header `x-<name>…`, and the request's `content-type`; the body streamed back chunk by chunk.
//! - `/headers`: every request header the component was given, `name: value` per line (how
//!   tests see what reaches a guest, and what does not: the callers' credentials).
//! - `/status/NNN`: an empty response with status NNN (200 to 599), or 400.
//! - `/stream?bytes=N`: N bytes of `abcdefghijklmnopqrstuvwxyz0123456789\n` repeated, sent in
//!   64 KiB writes, for any N that fits a `u64`.
//! - `/sum`: reads the whole body, then answers `<bytes> <FNV-1a 64 hex>\n`; nothing is sent
//!   before the body has been read.
//! - `/trap`: panics (`asked to trap`), which traps as the guests build with `panic = "abort"`.
//! - `/spin`: computes forever.
//! - `/grow?mb=N`: allocates and touches N MiB, then answers `grew N MiB\n` (or traps at the
//!   function's memory limit).
//! - `/fetch?url=URL`: GETs URL (percent-decoded) through `wasi:http/outgoing-handler` and
//!   answers `upstream <status>\n` and the upstream body, or 502 with the `error-code`.
//! - anything else: `Hello from a wasi:http component\n`.

mod text;

use text::{Fnv1a, Pattern, Route, Url};
use wasip2::http::outgoing_handler;
use wasip2::http::types::{
    ErrorCode, Fields, IncomingBody, IncomingRequest, IncomingResponse, Method, OutgoingBody,
    OutgoingRequest, OutgoingResponse, ResponseOutparam, Scheme,
};
use wasip2::io::streams::{InputStream, OutputStream, StreamError};

/// The most the streaming routes read or write at a time.
const CHUNK: usize = 64 * 1024;

struct HttpHello;

wasip2::http::proxy::export!(HttpHello);

impl wasip2::exports::http::incoming_handler::Guest for HttpHello {
    fn handle(request: IncomingRequest, response_out: ResponseOutparam) {
        let path = request.path_with_query().unwrap_or_else(|| "/".to_owned());
        let answered = match text::route(&path) {
            Route::Hello => respond(response_out, 200, b"Hello from a wasi:http component\n"),
            Route::Echo => echo(request, &path, response_out),
            Route::Headers => {
                let mut text = Vec::new();
                for (name, value) in request.headers().entries() {
                    text.extend_from_slice(name.as_bytes());
                    text.extend_from_slice(b": ");
                    text.extend_from_slice(&value);
                    text.push(b'\n');
                }
                respond(response_out, 200, &text)
            }
            Route::Status(status) => match text::parse_status(status) {
                Some(status) => {
                    let (body, stream) = start(response_out, status, Fields::new());
                    finish(body, stream)
                }
                None => {
                    let message = format!("not a final HTTP status (200 to 599): {status:?}\n");
                    respond(response_out, 400, message.as_bytes())
                }
            },
            Route::Stream { query } => stream(query, response_out),
            Route::Sum => sum(request, response_out),
            Route::Trap => panic!("asked to trap"),
            Route::Spin => spin(),
            Route::Grow { query } => grow(query, response_out),
            Route::Fetch { query } => fetch(query, response_out),
        };
        // The response has begun, so the client cannot be told; the host's log can.
        if let Err(Broken(why)) = answered {
            eprintln!("http-hello: the response to {path} broke off: {why}");
        }
    }
}

/// A response that stopped part-way: a stream failed (the client went away, say) or the host
/// refused to finish the body.
struct Broken(String);

impl From<StreamError> for Broken {
    fn from(error: StreamError) -> Self {
        Broken(match error {
            StreamError::Closed => "the stream is closed".to_owned(),
            StreamError::LastOperationFailed(error) => error.to_debug_string(),
        })
    }
}

impl From<ErrorCode> for Broken {
    fn from(error: ErrorCode) -> Self {
        Broken(format!("{error:?}"))
    }
}

/// `/echo`: the request's method, path and `x-` headers as headers, then its body, streamed.
fn echo(
    request: IncomingRequest,
    path: &str,
    response_out: ResponseOutparam,
) -> Result<(), Broken> {
    let mut headers = vec![
        (
            "x-method".to_owned(),
            method_name(&request.method()).as_bytes().to_vec(),
        ),
        ("x-path".to_owned(), path.as_bytes().to_vec()),
    ];
    for (name, value) in request.headers().entries() {
        let name = name.to_ascii_lowercase();
        if name.starts_with("x-") {
            headers.push((format!("x-echo-{name}"), value));
        } else if name == "content-type" {
            headers.push((name, value));
        }
    }
    let headers = Fields::from_list(&headers).expect("names and values of a request are valid");
    let (incoming, input) = request_body(&request);
    let (body, output) = start(response_out, 200, headers);
    for_each_chunk(&input, |chunk| Ok(write_all(&output, chunk)?))?;
    // A stream is its body's child and goes first.
    drop(input);
    drop(incoming);
    finish(body, output)
}

/// `/stream?bytes=N`: N bytes of the pattern, a chunk at a time.
fn stream(query: &str, response_out: ResponseOutparam) -> Result<(), Broken> {
    let Some(total) = text::query_param(query, "bytes").and_then(|n| n.parse::<u64>().ok()) else {
        return respond(response_out, 400, b"/stream needs ?bytes=N\n");
    };
    let pattern = Pattern::new(CHUNK);
    let (body, output) = start(response_out, 200, text_plain());
    let mut sent = 0;
    while sent < total {
        // At most CHUNK, so the conversion cannot truncate.
        let len = (total - sent).min(CHUNK as u64) as usize;
        write_all(&output, pattern.at(sent, len))?;
        sent += len as u64;
    }
    finish(body, output)
}

/// `/sum`: the body's length and hash, answered only once the whole body has been read.
fn sum(request: IncomingRequest, response_out: ResponseOutparam) -> Result<(), Broken> {
    let (incoming, input) = request_body(&request);
    let mut bytes = 0u64;
    let mut hash = Fnv1a::default();
    for_each_chunk(&input, |chunk| {
        bytes += chunk.len() as u64;
        hash.update(chunk);
        Ok(())
    })?;
    drop(input);
    drop(incoming);
    let answer = format!("{bytes} {:016x}\n", hash.finish());
    respond(response_out, 200, answer.as_bytes())
}

/// `/spin`: a loop the optimiser must keep, since `black_box` hides what it computes.
fn spin() -> ! {
    let mut count = 0u64;
    loop {
        count = core::hint::black_box(count.wrapping_add(1));
    }
}

/// `/fetch?url=URL`: the upstream's status line and body, or 502 with why the request failed.
fn fetch(query: &str, response_out: ResponseOutparam) -> Result<(), Broken> {
    let Some(url) = text::query_param(query, "url").and_then(text::percent_decode) else {
        return respond(response_out, 400, b"/fetch needs ?url=URL\n");
    };
    let Some(parsed) = text::parse_url(&url) else {
        let message = format!("not an http or https URL: {url}\n");
        return respond(response_out, 400, message.as_bytes());
    };
    let upstream = match get(&parsed) {
        Ok(upstream) => upstream,
        Err(error) => {
            let message = format!("outbound request failed: {error:?}\n");
            return respond(response_out, 502, message.as_bytes());
        }
    };
    let incoming = upstream.consume().expect("a response's body is taken once");
    let input = incoming.stream().expect("a body's stream is taken once");
    let (body, output) = start(response_out, 200, text_plain());
    write_all(
        &output,
        format!("upstream {}\n", upstream.status()).as_bytes(),
    )?;
    for_each_chunk(&input, |chunk| Ok(write_all(&output, chunk)?))?;
    drop(input);
    drop(incoming);
    finish(body, output)
}

/// GETs `url` through the host and waits for the response's head.
fn get(url: &Url) -> Result<IncomingResponse, ErrorCode> {
    let request = OutgoingRequest::new(Fields::new());
    let scheme = if url.https {
        Scheme::Https
    } else {
        Scheme::Http
    };
    let invalid = |()| ErrorCode::HttpRequestUriInvalid;
    request.set_scheme(Some(&scheme)).map_err(invalid)?;
    request
        .set_authority(Some(url.authority))
        .map_err(invalid)?;
    request
        .set_path_with_query(Some(&url.path_with_query))
        .map_err(invalid)?;
    let response = outgoing_handler::handle(request, None)?;
    loop {
        match response.get() {
            Some(result) => return result.expect("a response is taken once"),
            None => response.subscribe().block(),
        }
    }
}

/// A request's body and its stream. Drop the stream first: it is the body's child.
fn request_body(request: &IncomingRequest) -> (IncomingBody, InputStream) {
    let body = request.consume().expect("a request's body is taken once");
    let stream = body.stream().expect("a body's stream is taken once");
    (body, stream)
}

/// Reads `input` to its end a chunk at a time, handing each chunk to `use_chunk`.
fn for_each_chunk(
    input: &InputStream,
    mut use_chunk: impl FnMut(&[u8]) -> Result<(), Broken>,
) -> Result<(), Broken> {
    loop {
        match input.blocking_read(CHUNK as u64) {
            Ok(chunk) => use_chunk(&chunk)?,
            Err(StreamError::Closed) => return Ok(()),
            Err(error) => return Err(error.into()),
        }
    }
}

/// Writes all of `bytes` to `output` and flushes. The host takes at most what `check-write`
/// allows in one `write` (more traps), so this writes that much at a time and waits on the
/// stream's pollable while it allows nothing.
fn write_all(output: &OutputStream, mut bytes: &[u8]) -> Result<(), StreamError> {
    while !bytes.is_empty() {
        let allowed = output.check_write()?;
        if allowed == 0 {
            output.subscribe().block();
            continue;
        }
        let len = bytes
            .len()
            .min(usize::try_from(allowed).unwrap_or(usize::MAX));
        output.write(&bytes[..len])?;
        bytes = &bytes[len..];
    }
    output.blocking_flush()
}

/// Sends the response head; the body follows through the returned stream and ends with
/// [`finish`].
fn start(
    response_out: ResponseOutparam,
    status: u16,
    headers: Fields,
) -> (OutgoingBody, OutputStream) {
    let response = OutgoingResponse::new(headers);
    response
        .set_status_code(status)
        .expect("statuses are constants or checked by parse_status");
    let body = response.body().expect("a response's body is taken once");
    ResponseOutparam::set(response_out, Ok(response));
    let stream = body.write().expect("a body's stream is taken once");
    (body, stream)
}

/// Ends a body begun by [`start`].
fn finish(body: OutgoingBody, stream: OutputStream) -> Result<(), Broken> {
    // The stream is the body's child and must be gone before the body is finished.
    drop(stream);
    Ok(OutgoingBody::finish(body, None)?)
}

/// A whole `text/plain` response.
fn respond(response_out: ResponseOutparam, status: u16, body_text: &[u8]) -> Result<(), Broken> {
    let (body, stream) = start(response_out, status, text_plain());
    write_all(&stream, body_text)?;
    finish(body, stream)
}

fn text_plain() -> Fields {
    Fields::from_list(&[("content-type".to_owned(), b"text/plain".to_vec())])
        .expect("a valid header")
}

fn method_name(method: &Method) -> &str {
    match method {
        Method::Get => "GET",
        Method::Head => "HEAD",
        Method::Post => "POST",
        Method::Put => "PUT",
        Method::Delete => "DELETE",
        Method::Connect => "CONNECT",
        Method::Options => "OPTIONS",
        Method::Trace => "TRACE",
        Method::Patch => "PATCH",
        Method::Other(other) => other,
    }
}

/// Allocates and touches `mb` MiB, so the function's memory limit can be met on purpose.
fn grow(query: &str, response_out: ResponseOutparam) -> Result<(), Broken> {
    let Some(mb) = text::query_param(query, "mb").and_then(|n| n.parse::<usize>().ok()) else {
        return respond(response_out, 400, b"/grow needs ?mb=N\n");
    };
    let block = vec![1u8; mb << 20];
    let touched: usize = block.iter().step_by(4096).map(|&b| usize::from(b)).sum();
    let message = format!("grew {} MiB\n", (touched * 4096) >> 20);
    respond(response_out, 200, message.as_bytes())
}
