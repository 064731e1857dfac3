//! Attack 6: a tenant grants its component the node's network. With a `deploy` token it asked
//! for `*`, `127.0.0.1:PORT`, `169.254.169.254`, `[::1]`, `0.0.0.0`, and its component then
//! read a loopback-only service and the node's own API. Now `*`, addresses and ranges are an
//! admin's to grant, within the node's `--outbound-ceiling`; names are a deployer's, but a name
//! never reaches a loopback, private, link-local or own address, however it resolves; and every
//! connection is checked again, whatever the record says. Beside each refusal, the legitimate
//! use: named hosts from a deployer, and an operator's ceiling with an admin's grant that
//! reaches a loopback service.
//!
//! The component is `http-hello`, whose `/fetch?url=URL` makes an outbound GET and answers
//! `upstream STATUS` and the body, or 502 with wasi:http's error code. Only loopback is ever
//! connected to: the other special addresses are refused at deploy here and classified by the
//! unit tests of `mote_types::outbound`.

use crate::platform::{Platform, mote_bin};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

/// What the loopback service answers: what a tenant must not read.
pub(crate) const SECRET: &str = "loopback-only secret";

/// An HTTP service on loopback that answers every request with [`SECRET`] and counts the
/// connections it accepted; stopped when dropped.
pub(crate) struct LoopbackServer {
    pub(crate) port: u16,
    accepted: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl LoopbackServer {
    pub(crate) fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let accepted = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (counted, stopping) = (accepted.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            for stream in listener.incoming() {
                if stopping.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(mut stream) = stream else { continue };
                counted.fetch_add(1, Ordering::SeqCst);
                stream
                    .set_read_timeout(Some(Duration::from_secs(5)))
                    .unwrap();
                let mut head = Vec::new();
                let mut buf = [0u8; 1024];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                let _ = write!(
                    stream,
                    "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{SECRET}",
                    SECRET.len()
                );
            }
        });
        Self {
            port,
            accepted,
            stop,
            thread: Some(thread),
        }
    }

    /// Connections accepted so far.
    pub(crate) fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }
}

impl Drop for LoopbackServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wakes the accepting thread, which sees the flag and ends.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// `s` percent-encoded for a query value.
fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// A node that requires tokens, with its admin token and a deployer's token
/// (`deploy`, `invoke`, `read`).
struct Node {
    p: Platform,
    admin: String,
    deployer: String,
    _dir: Option<tempfile::TempDir>,
}

impl Node {
    fn start(extra: &[&str]) -> Node {
        let dir = tempfile::tempdir().unwrap();
        let node = Self::start_in(&dir.path().join("data"), extra);
        Node {
            _dir: Some(dir),
            ..node
        }
    }

    fn start_in(data: &Path, extra: &[&str]) -> Node {
        let mut args = vec!["--require-tokens"];
        args.extend_from_slice(extra);
        let p = Platform::start_in_logging(data, &args, &data.with_extension("log"));
        let admin = std::fs::read_to_string(p.data.join("admin.token"))
            .unwrap()
            .trim()
            .to_owned();
        let made = request(
            "POST",
            &format!("{}/v1/tokens", p.url),
            &admin,
            br#"{"name":"tenant","scopes":["deploy","invoke","read"]}"#,
        );
        let deployer = match made.0 {
            201 => serde_json::from_str::<serde_json::Value>(&made.1).unwrap()["token"]
                .as_str()
                .unwrap()
                .to_owned(),
            // A restarted node keeps its tokens; this one is not needed again.
            409 => String::new(),
            status => panic!("making the tenant's token: {status} {}", made.1),
        };
        Node {
            p,
            admin,
            deployer,
            _dir: None,
        }
    }

    /// GETs `path` with the admin's token: the status and body.
    fn get(&self, path: &str) -> (u16, String) {
        request("GET", &format!("{}{path}", self.p.url), &self.admin, b"")
    }

    /// Deploys `http-hello` as `name` granted `grants`, with `token`: the status and body.
    fn deploy(&self, token: &str, name: &str, grants: &str) -> (u16, String) {
        request(
            "PUT",
            &format!(
                "{}/v1/functions/{name}?allow_outbound={}",
                self.p.url,
                encode(grants)
            ),
            token,
            mote_guests::HTTP_HELLO.wasm,
        )
    }

    /// Has `name` GET `url`, with the admin's token: the status and body.
    fn fetch(&self, name: &str, url: &str) -> (u16, String) {
        request(
            "GET",
            &format!("{}/v1/invoke/{name}/fetch?url={}", self.p.url, encode(url)),
            &self.admin,
            b"",
        )
    }

    /// The node's own API port.
    fn api_port(&self) -> u16 {
        self.p.url.rsplit(':').next().unwrap().parse().unwrap()
    }

    /// What the node logged (warnings and worse).
    fn log(&self) -> String {
        std::fs::read_to_string(self.p.data.with_extension("log")).unwrap()
    }
}

/// `method` on `url` with `token`; a POST's body is JSON (the only POSTs here make tokens).
fn request(method: &str, url: &str, token: &str, body: &[u8]) -> (u16, String) {
    let mut request = ureq::http::Request::builder()
        .method(method)
        .uri(url)
        .header("authorization", format!("Bearer {token}"));
    if method == "POST" {
        request = request.header("content-type", "application/json");
    }
    let request = request.body(body.to_vec()).unwrap();
    let mut response = Platform::agent_trusting(None)
        .run(request)
        .expect("the request reached the node");
    let status = response.status().as_u16();
    (status, response.body_mut().read_to_string().unwrap())
}

/// Asserts that `fetched` is wasi:http's refusal, not a connection that failed.
fn assert_denied(fetched: (u16, String), what: &str) {
    assert_eq!(fetched.0, 502, "{what}: {}", fetched.1);
    assert!(
        fetched.1.contains("HttpRequestDenied"),
        "{what}: {}",
        fetched.1
    );
}

#[test]
fn a_deploy_token_cannot_grant_the_node_s_network() {
    let node = Node::start(&[]);
    let port = LoopbackServer::start().port;
    for grant in [
        "*".to_owned(),
        "*:443".to_owned(),
        format!("127.0.0.1:{port}"),
        "169.254.169.254".to_owned(),
        "[::1]".to_owned(),
        "0.0.0.0".to_owned(),
        "10.0.0.0/8".to_owned(),
        "[fd00::/8]:443".to_owned(),
        format!("api.example.com,127.0.0.1:{port}"),
    ] {
        let (status, body) = node.deploy(&node.deployer, "grabby", &grant);
        assert_eq!(status, 403, "a deployer granted {grant}: {body}");
        assert!(
            body.contains("needs an admin") && body.contains(grant.rsplit(',').next().unwrap()),
            "{grant}: {body}"
        );
    }
    let (status, body) = node.get("/v1/functions/grabby");
    assert_eq!(status, 404, "a refused deploy left a function: {body}");

    // An admin may grant `*` (public addresses only), but not an address beyond the ceiling.
    let (status, body) = node.deploy(&node.admin, "anywhere", "*");
    assert_eq!(status, 201, "{body}");
    let (status, body) = node.deploy(&node.admin, "loopback", &format!("127.0.0.1:{port}"));
    assert_eq!(status, 400, "{body}");
    assert!(
        body.contains(&format!("127.0.0.1:{port}")) && body.contains("--outbound-ceiling"),
        "{body}"
    );

    // The legitimate use: a deployer names the hosts its component calls.
    let (status, body) = node.deploy(&node.deployer, "api", "api.example.com:443,*.example.org");
    assert_eq!(status, 201, "{body}");
    let (_, body) = node.get("/v1/functions/api");
    let shown: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        shown["allow_outbound"],
        serde_json::json!(["api.example.com:443", "*.example.org"])
    );
    assert_eq!(shown["route"], serde_json::Value::Null, "{body}");
    assert_eq!(shown["public"], false, "{body}");
    let (_, body) = node.get("/v1/functions");
    let listed: serde_json::Value = serde_json::from_str(&body).unwrap();
    let anywhere = listed["functions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == "anywhere")
        .unwrap();
    assert_eq!(anywhere["allow_outbound"], serde_json::json!(["*"]));

    // `mote ls` shows each function's route, public flag and grants.
    let ls = Command::new(mote_bin())
        .args(["ls", "--server", &node.p.url])
        .env("MOTE_TOKEN", &node.admin)
        .output()
        .unwrap();
    let printed = String::from_utf8_lossy(&ls.stdout);
    assert!(ls.status.success(), "{printed}");
    assert!(
        printed.contains("PUBLIC") && printed.contains("OUTBOUND"),
        "{printed}"
    );
    let api = printed.lines().find(|l| l.starts_with("api ")).unwrap();
    assert!(
        api.contains(" no ") && api.contains("api.example.com:443,*.example.org"),
        "{printed}"
    );
}

#[test]
fn names_and_addresses_that_lead_to_loopback_are_refused_at_connect() {
    let node = Node::start(&[]);
    let service = LoopbackServer::start();
    let port = service.port;

    // A deployer's name resolves to loopback: granted, but never connected.
    let (status, body) = node.deploy(&node.deployer, "local", &format!("localhost:{port}"));
    assert_eq!(status, 201, "{body}");
    assert_denied(
        node.fetch("local", &format!("http://localhost:{port}/")),
        "localhost",
    );

    // An admin's `*` is any public address: loopback in any spelling is not one.
    let (status, body) = node.deploy(&node.admin, "anywhere", "*");
    assert_eq!(status, 201, "{body}");
    for url in [
        format!("http://127.0.0.1:{port}/"),
        format!("http://127.1:{port}/"),
        format!("http://[::ffff:127.0.0.1]:{port}/"),
        format!("http://[::1]:{port}/"),
        format!("http://0.0.0.0:{port}/"),
        format!("http://localhost:{port}/"),
    ] {
        assert_denied(node.fetch("anywhere", &url), &url);
    }
    // Nor is the node's own API.
    let api = format!("http://127.0.0.1:{}/v1/functions", node.api_port());
    assert_denied(node.fetch("anywhere", &api), "the node's own API");
    assert_eq!(service.accepted(), 0, "a refused request connected");

    let log = node.log();
    let line = log
        .lines()
        .find(|l| l.contains("outbound request refused") && l.contains("local"))
        .unwrap_or_else(|| panic!("no refusal logged for `local`: {log}"));
    assert!(
        line.contains("localhost")
            && (line.contains("127.0.0.1") || line.contains("::1"))
            && line.contains("loopback"),
        "the refusal names the host, address and reason: {line}"
    );
}

#[test]
fn an_operator_s_ceiling_and_an_admin_s_grant_reach_a_loopback_service() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let service = LoopbackServer::start();
    let port = service.port;
    // Public hosts by any name, and one loopback service by its address.
    let ceiling = format!("*,127.0.0.1:{port}");
    let node = Node::start_in(&data, &["--outbound-ceiling", &ceiling]);

    let (status, body) = node.deploy(&node.admin, "db", &format!("127.0.0.1:{port}"));
    assert_eq!(status, 201, "{body}");
    let expected = (200, format!("upstream 200\n{SECRET}"));
    assert_eq!(
        node.fetch("db", &format!("http://127.0.0.1:{port}/")),
        expected
    );
    // An address grant matches a name by the address it resolves to.
    assert_eq!(
        node.fetch("db", &format!("http://localhost:{port}/")),
        expected
    );
    let reached = service.accepted();
    assert_eq!(reached, 2);
    // The ceiling names one port: the node's API stays out of reach.
    let api = format!("http://127.0.0.1:{}/v1/functions", node.api_port());
    assert_denied(
        node.fetch("db", &api),
        "the node's own API under the ceiling",
    );

    // A deployer still cannot grant the address, and its name for it is refused at connect.
    let (status, body) = node.deploy(&node.deployer, "mine", &format!("127.0.0.1:{port}"));
    assert_eq!(status, 403, "{body}");
    let (status, body) = node.deploy(&node.deployer, "mine", &format!("localhost:{port}"));
    assert_eq!(status, 201, "{body}");
    assert_denied(
        node.fetch("mine", &format!("http://localhost:{port}/")),
        "a deployer's name for loopback",
    );
    assert_eq!(service.accepted(), reached);

    // Restarted without the ceiling, the node refuses what the stored record still grants:
    // the check at connect time is the one that holds.
    node.p.stop();
    let node = Node::start_in(&data, &[]);
    let (status, body) = node.get("/v1/functions/db");
    assert_eq!(status, 200, "{body}");
    assert!(body.contains(&format!("127.0.0.1:{port}")), "{body}");
    assert_denied(
        node.fetch("db", &format!("http://127.0.0.1:{port}/")),
        "a stored grant above the new ceiling",
    );
    assert_eq!(service.accepted(), reached);
}

#[test]
fn a_node_with_no_outbound_ceiling_sends_nothing() {
    let node = Node::start(&["--outbound-ceiling", "none"]);
    let (status, body) = node.deploy(&node.deployer, "api", "api.example.com");
    assert_eq!(status, 400, "{body}");
    assert!(
        body.contains("api.example.com") && body.contains("--outbound-ceiling `none`"),
        "{body}"
    );
    // Components without grants still deploy and serve.
    let (status, body) = node.deploy(&node.deployer, "plain", "");
    assert_eq!(status, 201, "{body}");
    let (status, body) = request(
        "GET",
        &format!("{}/v1/invoke/plain/", node.p.url),
        &node.deployer,
        b"",
    );
    assert_eq!(
        (status, body.as_str()),
        (200, "Hello from a wasi:http component\n")
    );
}
