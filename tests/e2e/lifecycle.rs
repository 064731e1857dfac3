//! `mote_platform` as a library: a platform started, used, drained and stopped in this process.
//!
//! What a drain does to new work, as these tests pin it: the listeners close at once, so a new
//! connection is refused (not answered 503), while a call already in progress finishes and its
//! answer arrives.

use crate::platform::in_process_config;
use mote_platform::{Drained, Platform, PlatformConfig, PlatformError, TlsChoice};
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A platform of one core on free ports, its state in `dir`, without a dashboard.
fn config(dir: &tempfile::TempDir) -> PlatformConfig {
    let mut config = in_process_config(&dir.path().join("data"));
    config.cores = Some(1);
    config.node_name = Some("in-process".to_owned());
    config.stop_timeout = Duration::from_secs(20);
    config
}

/// Sends one HTTP/1.1 request on a connection of its own; the status and the whole response.
async fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    body: &[u8],
) -> std::io::Result<(u16, String)> {
    let mut stream = TcpStream::connect(addr).await?;
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(body).await?;
    let mut response = Vec::new();
    stream.read_to_end(&mut response).await?;
    let response = String::from_utf8_lossy(&response).into_owned();
    let status = response
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    Ok((status, response))
}

/// Whether `addr` can be bound again: the platform let its listener go.
fn released(addr: SocketAddr) -> bool {
    std::net::TcpListener::bind(addr).is_ok()
}

/// Folds `n` million numbers, `n` the little-endian u32 body: about `n` ms of one core.
const FOLD: &str = r#"(module (memory (export "memory") 1)
  (func (export "mote_alloc") (param i32) (result i32) i32.const 16)
  (func (export "mote_handle") (param $p i32) (param $n i32) (result i64)
    (local $i i64) (local $end i64) (local $acc i64)
    (if (local.get $n) (then
      (local.set $end (i64.mul (i64.extend_i32_u (i32.load (local.get $p))) (i64.const 1000000)))))
    (local.set $acc (i64.const 1469598103934665603))
    (block $done (loop $l
      (br_if $done (i64.ge_u (local.get $i) (local.get $end)))
      (local.set $acc (i64.mul (i64.xor (local.get $acc) (local.get $i)) (i64.const 1099511628211)))
      (local.set $i (i64.add (local.get $i) (i64.const 1)))
      (br $l)))
    (i64.store (i32.const 0) (local.get $acc))
    i64.const 8))"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_example_answers_over_http_and_stop_releases_the_port() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = config(&dir);
    config.examples = true;
    let platform = Platform::start(config).await.unwrap();
    let serving = platform.serving().clone();
    assert_eq!(serving.policy, mote_sched::Policy::Fc, "the CLI's default");
    assert!(serving.api_url().starts_with("http://127.0.0.1:"));
    assert_eq!(serving.dashboard_url(), None);
    assert!(!serving.tokens_required, "loopback needs no tokens");
    let (status, response) = request(serving.api, "POST", "/v1/invoke/hello", b"mote")
        .await
        .unwrap();
    assert_eq!(status, 200, "{response}");
    assert!(response.trim_end().ends_with("Hello, mote!"), "{response}");
    assert!(!released(serving.api), "the platform still listens");
    platform.stop().await.unwrap();
    assert!(released(serving.api), "the API's port is free after stop");
    let refused = TcpStream::connect(serving.api).await;
    assert!(refused.is_err(), "nobody listens after stop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drain_refuses_new_connections_and_lets_the_running_call_finish() {
    let dir = tempfile::tempdir().unwrap();
    let mut platform = Platform::start(config(&dir)).await.unwrap();
    let api = platform.serving().api;
    let wasm = wat::parse_str(FOLD).unwrap();
    let (status, response) = request(api, "PUT", "/v1/functions/fold?timeout_ms=60000", &wasm)
        .await
        .unwrap();
    assert!((200..300).contains(&status), "{response}");
    let call = tokio::spawn(async move {
        request(api, "POST", "/v1/invoke/fold", &1500u32.to_le_bytes()).await
    });
    // The call has reached its core.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!call.is_finished());
    let drain = tokio::spawn(async move {
        let drained = platform.drain().await;
        (platform, drained)
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        !call.is_finished(),
        "the call outlasts the start of the drain"
    );
    assert!(
        TcpStream::connect(api).await.is_err(),
        "a draining platform takes no new connection"
    );
    let (status, response) = call.await.unwrap().unwrap();
    assert_eq!(status, 200, "the call in progress finished: {response}");
    let (platform, drained) = drain.await.unwrap();
    assert_eq!(drained.unwrap(), Drained::Finished);
    platform.stop().await.unwrap();
    assert!(released(api));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_certificate_is_a_tls_error_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = config(&dir);
    let cert = dir.path().join("no-such-cert.pem");
    config.security.tls = TlsChoice::Files {
        cert: cert.clone(),
        key: dir.path().join("no-such-key.pem"),
    };
    let error = Platform::start(config).await.err().expect("no certificate");
    assert!(matches!(error, PlatformError::Tls(_)), "{error:?}");
    assert!(
        error.to_string().contains(&cert.display().to_string()),
        "{error}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_taken_port_is_a_listen_error_naming_the_setting() {
    let dir = tempfile::tempdir().unwrap();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let mut config = config(&dir);
    config.listen = taken.local_addr().unwrap();
    let error = Platform::start(config)
        .await
        .err()
        .expect("the port is taken");
    match &error {
        PlatformError::Listen { addr, what, .. } => {
            assert_eq!(*addr, taken.local_addr().unwrap());
            assert_eq!(*what, "the API");
        }
        other => panic!("not a listen error: {other:?}"),
    }
    assert!(error.to_string().contains("--listen"), "{error}");
}
