//! `wasi:http` components, as `wasmtime serve` and Spin run them: requests in and responses out
//! on `/v1/invoke/NAME/...` and on routes, bodies streaming both ways, the guarantees every
//! function has (budgets over waits, memory limits, quarantine, scheduling history), outbound
//! requests denied unless allowed, and components refused at deploy with the reason.

use crate::attacks::outbound::{LoopbackServer, SECRET};
use crate::platform::{Platform, wait};
use mote_api::{DeployParams, FunctionInfo};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// The Rust proxy component (`http-hello`), deployed as `name` with `params`.
fn hello(p: &Platform, name: &str, params: &DeployParams) -> FunctionInfo {
    p.deploy(name, mote_guests::HTTP_HELLO.wasm, params)
}

/// A request with any method, headers and body; the reply's headers too.
fn request(
    p: &Platform,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> (u16, ureq::http::HeaderMap, Vec<u8>) {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .allow_non_standard_methods(true)
        .timeout_global(Some(Duration::from_secs(60)))
        .build()
        .into();
    let mut builder = ureq::http::Request::builder()
        .method(method)
        .uri(format!("{}{path}", p.url));
    for (name, value) in headers {
        builder = builder.header(*name, *value);
    }
    let mut response = agent
        .run(builder.body(body.to_vec()).unwrap())
        .expect("the request reached the server");
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let body = response
        .body_mut()
        .with_config()
        .limit(1 << 30)
        .read_to_vec()
        .unwrap();
    (status, headers, body)
}

fn header<'h>(headers: &'h ureq::http::HeaderMap, name: &str) -> &'h str {
    headers
        .get(name)
        .unwrap_or_else(|| panic!("no `{name}` header in {headers:?}"))
        .to_str()
        .unwrap()
}

/// The loopback address of `p`, as `host:port`.
fn authority(p: &Platform) -> &str {
    p.url.strip_prefix("http://").unwrap()
}

#[test]
fn method_path_query_headers_status_and_body_round_trip() {
    let p = Platform::start(&[]);
    let d = hello(
        &p,
        "h",
        &DeployParams {
            timeout_ms: Some(2000),
            ..Default::default()
        },
    );
    assert_eq!(d.kind, "wasi-http");

    let (status, headers, body) = request(
        &p,
        "PUT",
        "/v1/invoke/h/echo?x=1&y=two%20words",
        &[
            ("x-trace-id", "abc123"),
            ("content-type", "application/json"),
        ],
        br#"{"hello":"world"}"#,
    );
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    assert_eq!(header(&headers, "x-method"), "PUT");
    assert_eq!(header(&headers, "x-path"), "/echo?x=1&y=two%20words");
    assert_eq!(header(&headers, "x-echo-x-trace-id"), "abc123");
    assert_eq!(header(&headers, "content-type"), "application/json");
    assert!(headers.contains_key("mote-node"), "{headers:?}");
    assert_eq!(body, br#"{"hello":"world"}"#);

    for (method, path, expected) in [
        ("GET", "/v1/invoke/h", 200),
        ("DELETE", "/v1/invoke/h/status/418", 418),
        ("POST", "/v1/invoke/h/status/204", 204),
        ("PATCH", "/v1/invoke/h/status/503", 503),
        ("GET", "/v1/invoke/h/status/99x", 400),
    ] {
        let (status, _, body) = request(&p, method, path, &[], b"");
        assert_eq!(
            status,
            expected,
            "{method} {path}: {}",
            String::from_utf8_lossy(&body)
        );
    }
    let (_, _, body) = request(&p, "GET", "/v1/invoke/h/", &[], b"");
    assert_eq!(body, b"Hello from a wasi:http component\n");
    // The component sees the path as sent, escapes and all (decoded, this would be a 423).
    assert_eq!(
        request(&p, "GET", "/v1/invoke/h/status/4%32%33", &[], b"").0,
        400
    );
    let (_, headers, _) = request(&p, "POST", "/v1/invoke/h/echo?q=a%20b", &[], b"");
    assert_eq!(header(&headers, "x-path"), "/echo?q=a%20b");

    // A function that is not a component keeps its POST-only call.
    p.deploy("echo", mote_guests::ECHO.wasm, &DeployParams::default());
    let (status, _, body) = request(&p, "GET", "/v1/invoke/echo", &[], b"");
    assert_eq!(status, 405, "{}", String::from_utf8_lossy(&body));
    assert_eq!(request(&p, "GET", "/v1/invoke/echo/x", &[], b"").0, 404);
    assert_eq!(request(&p, "GET", "/v1/invoke/nobody/x", &[], b"").0, 404);
    assert_eq!(p.invoke("echo", b"still").text(), "still");

    // Every request counted, and the function's run times feed the scheduler's history.
    let node = p.get("/v1/node").json();
    let schedule = node["functions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == "h")
        .expect("the component is in the schedule");
    assert!(
        schedule["recent_ms"].as_array().unwrap().len() >= 6,
        "{schedule}"
    );
    assert!(
        schedule["expected_ms"].as_f64().unwrap() > 0.0,
        "{schedule}"
    );
    let metrics = p.get("/metrics").text();
    assert!(
        metrics.contains(r#"mote_invocations_total{function="h",outcome="ok"} 9"#),
        "{metrics}"
    );
}

#[test]
fn routes_serve_paths_at_the_root_and_the_same_route_twice_is_a_conflict() {
    let p = Platform::start(&[]);
    hello(
        &p,
        "site",
        &DeployParams {
            route: Some("/...".into()),
            ..Default::default()
        },
    );
    hello(
        &p,
        "api",
        &DeployParams {
            route: Some("/api/...".into()),
            ..Default::default()
        },
    );
    hello(
        &p,
        "exact",
        &DeployParams {
            route: Some("/api/exact".into()),
            ..Default::default()
        },
    );

    // The most specific route serves a path; below a prefix the component sees the rest.
    let (_, headers, _) = request(&p, "POST", "/api/echo?v=2", &[], b"x");
    assert_eq!(header(&headers, "x-path"), "/echo?v=2");
    let (_, headers, _) = request(&p, "POST", "/echo?v=3", &[], b"x");
    assert_eq!(header(&headers, "x-path"), "/echo?v=3");
    let (status, _, body) = request(&p, "GET", "/api/exact", &[], b"");
    assert_eq!(
        (status, body.as_slice()),
        (200, &b"Hello from a wasi:http component\n"[..])
    );
    assert_eq!(request(&p, "GET", "/api/status/202", &[], b"").0, 202);
    assert_eq!(request(&p, "GET", "/status/201", &[], b"").0, 201);

    // mote's own API is never a route's.
    let r = p.get("/v1/nothing-here");
    assert_eq!(r.status, 404);
    assert!(r.error().contains("no such route"), "{}", r.error());
    assert_eq!(p.get("/healthz").text(), "ok\n");
    let r = p.put(
        "/v1/functions/x?route=/v1/...",
        mote_guests::HTTP_HELLO.wasm,
    );
    assert_eq!(r.status, 400);
    assert!(r.error().contains("mote's own API"), "{}", r.error());

    // The same route twice: 409 naming the owner; the owner may redeploy on it.
    let r = p.put(
        "/v1/functions/other?route=/api/...",
        mote_guests::HTTP_HELLO.wasm,
    );
    assert_eq!(r.status, 409, "{}", r.text());
    assert!(
        r.error().contains("taken by function `api`"),
        "{}",
        r.error()
    );
    hello(
        &p,
        "api",
        &DeployParams {
            route: Some("/api/...".into()),
            timeout_ms: Some(3000),
            ..Default::default()
        },
    );
    assert_eq!(
        wait(p.api().function("api")).route.as_deref(),
        Some("/api/...")
    );

    for (query, says) in [
        ("?route=api", "starts with `/`"),
        ("?route=/a//b", "empty segments"),
        ("?route=/ok&allow_outbound=http://x.com", "not a URL"),
    ] {
        let r = p.put(
            &format!("/v1/functions/bad{query}"),
            mote_guests::HTTP_HELLO.wasm,
        );
        assert_eq!(r.status, 400, "{query}: {}", r.text());
        assert!(r.error().contains(says), "{query}: {}", r.error());
    }
    let r = p.put("/v1/functions/abi?route=/abi", mote_guests::ECHO.wasm);
    assert_eq!(r.status, 400);
    assert!(
        r.error().contains("wasi:http components only") && r.error().contains("mote-abi-v1"),
        "{}",
        r.error()
    );

    // Removing a component frees its route: the site serves the path now, and sees all of it
    // (`/api/echo`, which is not its `/echo`).
    assert_eq!(p.delete("/v1/functions/api").status, 200);
    let (_, headers, body) = request(&p, "POST", "/api/echo", &[], b"x");
    assert!(!headers.contains_key("x-path"), "{headers:?}");
    assert_eq!(body, b"Hello from a wasi:http component\n");
    hello(
        &p,
        "other",
        &DeployParams {
            route: Some("/api/...".into()),
            ..Default::default()
        },
    );
    assert_eq!(p.function_names(), ["exact", "other", "site"]);
}

#[test]
fn spin_and_python_components_run_unchanged() {
    let p = Platform::start(&[]);
    p.deploy(
        "spin",
        mote_guests::HTTP_SPIN.wasm,
        &DeployParams {
            route: Some("/spin/...".into()),
            ..Default::default()
        },
    );
    let (status, _, body) = request(&p, "GET", "/v1/invoke/spin/some/path?a=1&b=2", &[], b"");
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    assert_eq!(body, b"Hello from Spin: GET /some/path?a=1&b=2\n");
    let (_, _, body) = request(&p, "POST", "/spin/x", &[], b"body");
    assert_eq!(body, b"Hello from Spin: POST /x\n");

    let path = std::env::var("MOTE_PY_COMPONENT").expect(
        "MOTE_PY_COMPONENT must name the Python component: run ./scripts/test, or ./scripts/python-component and export it",
    );
    let python = std::fs::read(&path).unwrap_or_else(|e| panic!("reading {path}: {e}"));
    p.deploy(
        "py",
        &python,
        &DeployParams {
            route: Some("/py/...".into()),
            ..Default::default()
        },
    );
    let (status, _, body) = request(&p, "DELETE", "/py/some/path?q=1", &[], b"");
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    assert_eq!(body, b"Hello from Python: DELETE /some/path?q=1\n");
    // Its second request is a warm one, in a fresh instance again.
    let (_, _, body) = request(&p, "GET", "/v1/invoke/py/", &[], b"");
    assert_eq!(body, b"Hello from Python: GET /\n");
}

/// `http-js`, which `scripts/js-component` builds with componentize-js: the SpiderMonkey engine
/// and a `fetch` event listener in one component, deployed as it is.
#[test]
fn a_javascript_component_runs_unchanged() {
    const PATTERN: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789\n";
    let path = std::env::var("MOTE_JS_COMPONENT").expect(
        "MOTE_JS_COMPONENT must name the JavaScript component: run ./scripts/test, or ./scripts/js-component and export it",
    );
    let js = std::fs::read(&path).unwrap_or_else(|e| panic!("reading {path}: {e}"));
    let p = Platform::start(&[]);
    let d = p.deploy(
        "js",
        &js,
        &DeployParams {
            route: Some("/js/...".into()),
            ..Default::default()
        },
    );
    assert_eq!(d.kind, "wasi-http");

    let (status, headers, body) = request(&p, "DELETE", "/js/some/path?q=1", &[], b"");
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    assert_eq!(header(&headers, "content-type"), "text/plain");
    assert_eq!(body, b"Hello from JavaScript: DELETE /some/path?q=1\n");
    // Its second request is a warm one, in a fresh instance again.
    let (_, _, body) = request(&p, "GET", "/v1/invoke/js/", &[], b"");
    assert_eq!(body, b"Hello from JavaScript: GET /\n");

    // The status the path chooses, with no body; one that is not a final status is refused.
    for code in [418, 204] {
        let route = format!("/v1/invoke/js/status/{code}");
        let (status, _, body) = request(&p, "GET", &route, &[], b"");
        assert_eq!((status, body.as_slice()), (code, &b""[..]), "{route}");
    }
    let (status, _, body) = request(&p, "GET", "/v1/invoke/js/status/99", &[], b"");
    assert_eq!(status, 400);
    assert_eq!(body, b"not a final HTTP status (200 to 599): 99\n");

    // Bodies stream both ways: 1 MiB up and back at once (read while it is sent), and 64 MiB
    // made by the guest as it is read.
    let (status, headers, body) = request(
        &p,
        "PUT",
        "/v1/invoke/js/echo",
        &[("content-type", "application/json")],
        br#"{"hello":"world"}"#,
    );
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    assert_eq!(header(&headers, "content-type"), "application/json");
    assert_eq!(body, br#"{"hello":"world"}"#);
    let upload: Vec<u8> = (0..1u32 << 20)
        .map(|i| (i.wrapping_mul(2654435761) >> 24) as u8)
        .collect();
    let echoed = echo_duplex(&p, "/v1/invoke/js/echo", &upload);
    assert!(
        echoed == upload,
        "the echoed body differs ({} bytes back)",
        echoed.len()
    );
    let (status, _, body) = request(&p, "GET", "/v1/invoke/js/stream?bytes=67108864", &[], b"");
    assert_eq!(status, 200);
    assert_eq!(body.len(), 64 << 20);
    let wrong = body
        .iter()
        .enumerate()
        .position(|(i, &b)| b != PATTERN[i % PATTERN.len()]);
    if let Some(at) = wrong {
        panic!("byte {at} of the streamed body is wrong");
    }
}

/// Reads a streamed response of `/stream?bytes=N` chunk by chunk, checking every byte, while
/// the server's memory is sampled.
#[test]
fn a_gigabyte_streams_out_and_a_large_body_round_trips_with_bounded_memory() {
    const PATTERN: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789\n";
    const GIGABYTE: u64 = 1 << 30;
    let p = Platform::start(&[]);
    hello(
        &p,
        "h",
        &DeployParams {
            timeout_ms: Some(60000),
            ..Default::default()
        },
    );
    assert_eq!(request(&p, "GET", "/v1/invoke/h/", &[], b"").0, 200);
    let before = p.resident_bytes();

    let mut response = ureq::get(format!("{}/v1/invoke/h/stream?bytes={GIGABYTE}", p.url))
        .call()
        .unwrap();
    let mut reader = response.body_mut().with_config().limit(u64::MAX).reader();
    let mut chunk = vec![0u8; 1 << 20];
    let (mut seen, mut peak) = (0u64, before);
    loop {
        let n = reader.read(&mut chunk).unwrap();
        if n == 0 {
            break;
        }
        for (i, &b) in chunk[..n].iter().enumerate() {
            let at = (seen + i as u64) % PATTERN.len() as u64;
            assert_eq!(b, PATTERN[at as usize], "byte {} is wrong", seen + i as u64);
        }
        seen += n as u64;
        if seen % (64 << 20) < n as u64 {
            peak = peak.max(p.resident_bytes());
        }
    }
    assert_eq!(seen, GIGABYTE);
    assert!(
        peak < before + (256 << 20),
        "the server's memory grew from {before} to {peak} bytes while streaming 1 GiB"
    );

    // 256 MiB up and back at once: /echo writes each chunk back as it reads it, so the client
    // must read while it sends (neither side holds the whole body).
    let upload: Vec<u8> = (0..256u32 << 20)
        .map(|i| (i.wrapping_mul(2654435761) >> 24) as u8)
        .collect();
    let before = p.resident_bytes();
    let echoed = echo_duplex(&p, "/v1/invoke/h/echo", &upload);
    assert!(
        echoed == upload,
        "the echoed body differs ({} bytes back)",
        echoed.len()
    );
    let after = p.resident_bytes();
    assert!(
        after < before + (128 << 20),
        "the server's memory grew from {before} to {after} bytes echoing 256 MiB"
    );
    let (_, _, body) = request(&p, "POST", "/v1/invoke/h/sum", &[], &upload);
    let sum = String::from_utf8(body).unwrap();
    assert!(sum.starts_with(&format!("{} ", upload.len())), "{sum}");
}

/// POSTs `body` to `path` from one thread while this one reads the chunked response, and
/// returns the response body (after checking for a 200).
fn echo_duplex(p: &Platform, path: &str, body: &[u8]) -> Vec<u8> {
    let stream = TcpStream::connect(authority(p)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let mut writer = stream.try_clone().unwrap();
    let head = format!(
        "POST {path} HTTP/1.1\r\nhost: {}\r\ncontent-length: {}\r\n\r\n",
        authority(p),
        body.len()
    );
    std::thread::scope(|s| {
        s.spawn(move || {
            writer.write_all(head.as_bytes()).unwrap();
            for chunk in body.chunks(1 << 20) {
                writer.write_all(chunk).unwrap();
            }
        });
        let mut reader = std::io::BufReader::new(&stream);
        let mut line = String::new();
        std::io::BufRead::read_line(&mut reader, &mut line).unwrap();
        assert!(line.starts_with("HTTP/1.1 200"), "{line}");
        loop {
            line.clear();
            std::io::BufRead::read_line(&mut reader, &mut line).unwrap();
            if line == "\r\n" {
                break;
            }
            assert!(
                !line.to_ascii_lowercase().starts_with("content-length"),
                "expected a chunked body"
            );
        }
        let mut out = Vec::with_capacity(body.len());
        loop {
            line.clear();
            std::io::BufRead::read_line(&mut reader, &mut line).unwrap();
            let size = usize::from_str_radix(line.trim_end(), 16).unwrap();
            let mut chunk = vec![0u8; size + 2];
            reader.read_exact(&mut chunk).unwrap();
            if size == 0 {
                return out;
            }
            out.extend_from_slice(&chunk[..size]);
        }
    })
}

/// Sends a request for `path` whose body is announced as `declared` bytes but only `sent` of
/// them arrive; returns the status line and how long the answer took.
fn send_partial_body(p: &Platform, path: &str, declared: usize, sent: usize) -> (String, Duration) {
    let mut stream = TcpStream::connect(authority(p)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let head = format!(
        "POST {path} HTTP/1.1\r\nhost: {}\r\ncontent-length: {declared}\r\n\r\n",
        authority(p)
    );
    let started = Instant::now();
    stream.write_all(head.as_bytes()).unwrap();
    stream.write_all(&vec![b'x'; sent]).unwrap();
    let mut answer = Vec::new();
    let mut buf = [0u8; 4096];
    while !answer.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = stream
            .read(&mut buf)
            .expect("an answer before the read timeout");
        assert!(n > 0, "the server closed without answering");
        answer.extend_from_slice(&buf[..n]);
    }
    let text = String::from_utf8_lossy(&answer).into_owned();
    (text.lines().next().unwrap().to_owned(), started.elapsed())
}

#[test]
fn traps_budgets_spent_computing_or_waiting_and_memory_limits_get_their_errors() {
    let p = Platform::start(&["--cores", "1", "--quarantine-after", "3"]);
    hello(
        &p,
        "h",
        &DeployParams {
            timeout_ms: Some(300),
            memory_mb: Some(32),
            ..Default::default()
        },
    );

    let (status, _, body) = request(&p, "GET", "/v1/invoke/h/trap", &[], b"");
    let text = String::from_utf8_lossy(&body);
    assert_eq!(status, 500, "{text}");
    assert!(
        text.contains("unreachable") && text.contains("asked to trap"),
        "{text}"
    );

    let started = Instant::now();
    let (status, _, body) = request(&p, "GET", "/v1/invoke/h/spin", &[], b"");
    assert_eq!(status, 504, "{}", String::from_utf8_lossy(&body));
    assert!(String::from_utf8_lossy(&body).contains("timeout of 300 ms"));
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );

    // The guest waits on a body that never comes: stopped at its deadline all the same.
    let (status, took) = send_partial_body(&p, "/v1/invoke/h/sum", 1000, 10);
    assert!(status.contains(" 504 "), "{status}");
    assert!(
        took >= Duration::from_millis(300) && took < Duration::from_secs(2),
        "answered after {took:?}"
    );

    let (status, _, body) = request(&p, "GET", "/v1/invoke/h/grow?mb=8", &[], b"");
    assert_eq!((status, body.as_slice()), (200, &b"grew 8 MiB\n"[..]));
    let (status, _, body) = request(&p, "GET", "/v1/invoke/h/grow?mb=64", &[], b"");
    let text = String::from_utf8_lossy(&body);
    assert_eq!(status, 500, "{text}");
    assert!(text.contains("memory limit of 32 MiB"), "{text}");

    // The node kept serving throughout.
    let (status, _, body) = request(&p, "POST", "/v1/invoke/h/echo", &[], b"still here");
    assert_eq!((status, body.as_slice()), (200, &b"still here"[..]));

    // Budget kills in a row put it in quarantine, like any function.
    for _ in 0..3 {
        assert_eq!(request(&p, "GET", "/v1/invoke/h/spin", &[], b"").0, 504);
    }
    let (status, _, body) = request(&p, "GET", "/v1/invoke/h/", &[], b"");
    assert_eq!(status, 409, "{}", String::from_utf8_lossy(&body));
    assert!(String::from_utf8_lossy(&body).contains("quarantined"));
    assert_eq!(p.post("/v1/functions/h/release", b"").status, 200);
    assert_eq!(request(&p, "GET", "/v1/invoke/h/", &[], b"").0, 200);
}

#[test]
fn a_request_waiting_on_its_body_holds_no_core() {
    let p = Platform::start(&["--cores", "1"]);
    hello(
        &p,
        "h",
        &DeployParams {
            timeout_ms: Some(1500),
            ..Default::default()
        },
    );
    // On the only core, one request waits for a body that never comes, until its budget ends.
    let waiting = std::thread::scope(|s| {
        let waiting = s.spawn(|| send_partial_body(&p, "/v1/invoke/h/sum", 100, 1));
        std::thread::sleep(Duration::from_millis(200));
        let started = Instant::now();
        for _ in 0..20 {
            let (status, _, _) = request(&p, "GET", "/v1/invoke/h/", &[], b"");
            assert_eq!(status, 200);
        }
        let others = started.elapsed();
        assert!(
            others < Duration::from_millis(1000),
            "20 requests took {others:?} beside one waiting on its body"
        );
        waiting.join().unwrap()
    });
    assert!(waiting.0.contains(" 504 "), "{}", waiting.0);
}

#[test]
fn outbound_requests_are_denied_unless_the_host_is_allowed() {
    // A loopback service is reached only because the operator's ceiling names it (and a node
    // without tokens deploys as an admin, who may grant addresses).
    let service = LoopbackServer::start();
    let allowed = format!("127.0.0.1:{}", service.port);
    let p = Platform::start(&["--outbound-ceiling", &allowed]);
    let target = format!("http://{allowed}/");
    hello(&p, "closed", &DeployParams::default());
    let (status, _, body) = request(
        &p,
        "GET",
        &format!("/v1/invoke/closed/fetch?url={target}"),
        &[],
        b"",
    );
    let text = String::from_utf8_lossy(&body);
    assert_eq!(status, 502, "{text}");
    assert!(text.contains("HttpRequestDenied"), "{text}");

    let d = hello(
        &p,
        "open",
        &DeployParams {
            allow_outbound: Some(allowed.to_string()),
            ..Default::default()
        },
    );
    assert_eq!(d.allow_outbound, [allowed.to_string()]);
    let (status, _, body) = request(
        &p,
        "GET",
        &format!("/v1/invoke/open/fetch?url={target}"),
        &[],
        b"",
    );
    assert_eq!(
        (status, String::from_utf8_lossy(&body).as_ref()),
        (200, format!("upstream 200\n{SECRET}").as_str())
    );
    // Another port of the same host is still denied, and so is the node's own API.
    for other in [
        "http://127.0.0.1:1/".to_owned(),
        format!("{}/healthz", p.url),
    ] {
        let (_, _, body) = request(
            &p,
            "GET",
            &format!("/v1/invoke/open/fetch?url={other}"),
            &[],
            b"",
        );
        assert!(
            String::from_utf8_lossy(&body).contains("HttpRequestDenied"),
            "{other}"
        );
    }
    assert_eq!(service.accepted(), 1);
}

#[test]
fn invalid_components_are_refused_with_the_reason_and_nothing_is_stored() {
    let p = Platform::start(&[]);
    let empty = wat::parse_str("(component)").unwrap();
    let r = p.put("/v1/functions/empty", &empty);
    assert_eq!(r.status, 400);
    assert!(
        r.error().contains("not `wasi:http/incoming-handler@0.2.x`")
            && r.error().contains("wasi:http/proxy"),
        "{}",
        r.error()
    );
    let exports_a_function = wat::parse_str(
        r#"(component (core module $m (func (export "f"))) (core instance $i (instantiate $m))
             (func (export "run") (canon lift (core func $i "f"))))"#,
    )
    .unwrap();
    let r = p.put("/v1/functions/run", &exports_a_function);
    assert_eq!(r.status, 400);
    assert!(r.error().contains("exports [run]"), "{}", r.error());
    let mut torn = mote_guests::HTTP_HELLO.wasm.to_vec();
    torn.truncate(torn.len() / 2);
    let r = p.put("/v1/functions/torn", &torn);
    assert_eq!(r.status, 400);
    assert!(r.error().contains("invalid WebAssembly"), "{}", r.error());
    assert!(p.function_names().is_empty());
    assert_eq!(
        std::fs::read_dir(p.data.join("modules"))
            .map(|d| d.count())
            .unwrap_or(0),
        0,
        "a refused component left a blob behind"
    );
}
