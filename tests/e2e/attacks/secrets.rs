//! The secrets around a node. A local user reads every process's command line
//! (`/proc/PID/cmdline`): no secret is there, neither `mote up`'s S3 secret key nor a client's
//! token, which come from files or the environment; the old flags are refused with what to use
//! instead. A client pointed at another server (a typo, a hostile `MOTE_SERVER`) does not hand
//! it the admin token `mote up` left in its data directory: that goes only to loopback and to
//! the URL the node advertised. A guest cannot forge the node's log lines or drive a terminal:
//! its text is escaped in the node's log and in `mote logs`, and kept as written by the API.

use crate::fixtures;
use crate::platform::{Platform, mote_bin};
use mote_api::DeployParams;
use mote_testbed::LocalS3;
use sha2::Digest;
use std::io::{BufRead, BufReader, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::time::Duration;

/// A process's command line, as every user of the machine reads it.
fn command_line(pid: u32) -> String {
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).expect("reading /proc/PID/cmdline");
    String::from_utf8_lossy(&raw).replace('\0', " ")
}

/// `mote ARGS`, with nothing the test's own environment may hold that would choose a token, a
/// server, a data directory or a proxy for it.
fn client(args: &[&str]) -> Command {
    let mut command = Command::new(mote_bin());
    command.args(args);
    for name in [
        "MOTE_TOKEN",
        "MOTE_SERVER",
        "MOTE_DATA",
        "http_proxy",
        "HTTP_PROXY",
        "https_proxy",
        "HTTPS_PROXY",
        "all_proxy",
        "ALL_PROXY",
    ] {
        command.env_remove(name);
    }
    command
}

/// Writes `text` to a new file in `dir` only its owner reads, as a secret's file should be.
fn private_file(dir: &Path, name: &str, text: &str) -> std::path::PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, format!("{text}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    path
}

/// A server that stands in for a node: it takes requests one at a time, hands each one's head
/// to the test, and answers only when the test says how, so that a client is still running
/// (waiting for the answer) while the test looks at it.
struct Capture {
    addr: SocketAddr,
    heads: Receiver<String>,
    answers: Sender<(u16, &'static str)>,
}

/// How long a client may take to send its request; far more than it needs.
const REQUEST_WITHIN: Duration = Duration::from_secs(30);

impl Capture {
    fn on(ip: IpAddr) -> Self {
        let listener = TcpListener::bind((ip, 0)).expect("binding the capturing server");
        let addr = listener.local_addr().unwrap();
        let (head_to_test, heads) = channel();
        let (answers, answer_from_test) = channel::<(u16, &'static str)>();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { return };
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut head = String::new();
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                        break;
                    }
                    head.push_str(&line);
                }
                if head_to_test.send(head).is_err() {
                    return;
                }
                let Ok((status, body)) = answer_from_test.recv() else {
                    return;
                };
                let _ = write!(
                    stream,
                    "HTTP/1.1 {status} Captured\r\ncontent-type: application/json\r\n\
                     content-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
            }
        });
        Self {
            addr,
            heads,
            answers,
        }
    }

    fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The head of the next request the server took.
    fn next_head(&self) -> String {
        self.heads
            .recv_timeout(REQUEST_WITHIN)
            .expect("the client sent no request")
    }

    /// Answers the request the server holds.
    fn answer(&self, status: u16, body: &'static str) {
        self.answers.send((status, body)).unwrap();
    }
}

/// The token in a request head's `Authorization: Bearer`, if it has one.
fn bearer(head: &str) -> Option<&str> {
    head.lines().find_map(|line| {
        let (name, value) = line.split_once(':')?;
        name.eq_ignore_ascii_case("authorization")
            .then(|| value.trim().strip_prefix("Bearer "))
            .flatten()
    })
}

/// An address of this machine beyond loopback, from the kernel's local routing table: a server
/// bound there is, to the CLI, another machine's.
fn address_beyond_loopback() -> IpAddr {
    let table = std::fs::read_to_string("/proc/net/fib_trie").expect("reading /proc/net/fib_trie");
    let mut last = None;
    for line in table.lines().map(str::trim) {
        if let Some(address) = line.strip_prefix("|-- ") {
            last = address.parse::<Ipv4Addr>().ok();
        } else if line == "/32 host LOCAL"
            && let Some(address) = last.filter(|a| !a.is_loopback())
        {
            return address.into();
        }
    }
    panic!("this test needs an IPv4 address beyond loopback on this machine; it has none")
}

fn wait(child: Child) -> Output {
    child.wait_with_output().expect("waiting for the client")
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn mote_up_takes_its_s3_secret_key_from_a_file_and_not_from_its_command_line() {
    let binary = std::env::var("MOTE_S3S_FS").expect(
        "MOTE_S3S_FS must name the s3s-fs binary: run ./scripts/test, or ./scripts/s3s-fs and export it",
    );
    let s3 = LocalS3::start(binary.as_ref(), "mote-modules").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let key_file = private_file(dir.path(), "s3.key", LocalS3::SECRET_KEY);
    let key_file = key_file.to_str().unwrap();

    let p = Platform::start_with_env(
        &["--s3-endpoint", s3.url(), "--s3-secret-key-file", key_file],
        &[("MOTE_S3_ACCESS_KEY", LocalS3::ACCESS_KEY)],
    );
    let seen = command_line(p.pid());
    assert!(
        seen.contains("--s3-secret-key-file"),
        "not mote up's: {seen}"
    );
    assert!(!seen.contains(LocalS3::SECRET_KEY), "{seen}");
    // The key works: s3s-fs checks every request's signature, and the deploy's copy of the
    // module in the modules bucket got through.
    let wasm = fixtures::busy(3);
    p.deploy("kept", &wasm, &DeployParams::default());
    let sha = hex::encode(sha2::Sha256::digest(&wasm));
    let copy = s3.dir().join("mote-modules").join(format!("{sha}.wasm"));
    assert!(copy.exists(), "no copy of the module in object storage");

    // The old flag is refused, with what to use instead, before anything starts.
    let data = dir.path().join("refused");
    let refused = Platform::up_command(&data, &["--s3-endpoint", s3.url()])
        .args(["--s3-secret-key", LocalS3::SECRET_KEY])
        .env("MOTE_S3_ACCESS_KEY", LocalS3::ACCESS_KEY)
        .output()
        .unwrap();
    assert!(!refused.status.success());
    let message = stderr(&refused);
    assert!(
        message.contains("--s3-secret-key is not taken")
            && message.contains("MOTE_S3_SECRET_KEY")
            && message.contains("--s3-secret-key-file FILE"),
        "{message}"
    );
    assert!(!data.exists(), "mote up started anyway");
}

#[test]
fn a_client_s_token_is_sent_but_is_in_no_command_line() {
    let token = format!("mote_{}", "5e".repeat(32));
    let dir = tempfile::tempdir().unwrap();
    let token_file = private_file(dir.path(), "token", &token);
    let empty_data = dir.path().join("no-node-here");
    let server = Capture::on(Ipv4Addr::LOCALHOST.into());

    // From --token-file, then from MOTE_TOKEN: while each client waits for its answer, its
    // command line is read as another user would, and its request carries the token.
    let mut from_file = client(&["ls", "--server", &server.url(), "--token-file"]);
    from_file.arg(&token_file);
    let mut from_env = client(&["ls", "--server", &server.url()]);
    from_env.env("MOTE_TOKEN", &token);
    for mut command in [from_file, from_env] {
        let running = command
            .env("MOTE_DATA", &empty_data)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let head = server.next_head();
        let seen = command_line(running.id());
        assert!(seen.contains(" ls --server "), "not the client's: {seen}");
        assert!(!seen.contains(&token), "{seen}");
        assert_eq!(bearer(&head), Some(token.as_str()), "{head}");
        server.answer(200, r#"{"functions":[]}"#);
        let done = wait(running);
        assert!(done.status.success(), "{done:?}");
    }

    // The old flag is refused before any request, without echoing the token.
    let refused = client(&["ls", "--server", &server.url(), "--token", &token])
        .env("MOTE_DATA", &empty_data)
        .output()
        .unwrap();
    assert!(!refused.status.success());
    let message = stderr(&refused);
    assert!(
        message.contains("--token is not taken")
            && message.contains("MOTE_TOKEN")
            && message.contains("--token-file FILE"),
        "{message}"
    );
    assert!(!message.contains(&token), "{message}");
}

#[test]
fn the_admin_token_goes_only_to_the_node_that_wrote_it() {
    let beyond = address_beyond_loopback();
    // The node advertises a URL beyond loopback; a server there stands in for it, as the node
    // would answer there on a machine with a proxy or a second interface in front of it.
    let advertised = Capture::on(beyond);
    let p = Platform::start(&["--require-tokens", "--advertise", &advertised.url()]);
    let written = std::fs::read_to_string(p.data.join("url")).expect("mote up writes DATA/url");
    assert_eq!(written.trim(), advertised.url());
    let admin = std::fs::read_to_string(p.data.join("admin.token")).unwrap();
    let admin = admin.trim();
    let ls = |server: &str| {
        let mut command = client(&["ls", "--server", server]);
        command
            .env("MOTE_DATA", &p.data)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        command
    };

    // The node itself, on loopback: the admin token lists its functions, as always.
    let listed = ls(&p.url).output().unwrap();
    assert!(listed.status.success(), "{listed:?}");
    // The URL it advertised is this node too.
    let running = ls(&advertised.url()).spawn().unwrap();
    assert_eq!(bearer(&advertised.next_head()), Some(admin));
    advertised.answer(200, r#"{"functions":[]}"#);
    assert!(wait(running).status.success());

    // Another server, even one on this machine: no token, and a 401 says why and what to do.
    let foreign = Capture::on(beyond);
    let running = ls(&foreign.url()).spawn().unwrap();
    let head = foreign.next_head();
    assert_eq!(
        bearer(&head),
        None,
        "the admin token went to {}: {head}",
        foreign.url()
    );
    foreign.answer(401, r#"{"error":"this route needs a token"}"#);
    let refused = wait(running);
    assert!(!refused.status.success());
    let message = stderr(&refused);
    assert!(
        message.contains("admin token")
            && message.contains("was not sent")
            && message.contains("MOTE_TOKEN")
            && message.contains("--token-file"),
        "{message}"
    );

    // A token the user gives goes where the user points it.
    let running = ls(&foreign.url())
        .env("MOTE_TOKEN", "mote_given")
        .spawn()
        .unwrap();
    assert_eq!(bearer(&foreign.next_head()), Some("mote_given"));
    foreign.answer(200, r#"{"functions":[]}"#);
    assert!(wait(running).status.success());
}

/// What the guests below write, each as a forged line of the node's log that also turns the
/// terminal red, a Windows path whose `\n` is two characters, and plain words.
const FORGED: &str = "ok\n2026-01-01T00:00:00Z INFO fake line\x1b[31m";
const FORGED_SHOWN: &str = r"ok\n2026-01-01T00:00:00Z INFO fake line\u{1b}[31m";
const PATH: &str = r"C:\new";
const PATH_SHOWN: &str = r"C:\\new";
const PLAIN: &str = "plain words";

/// A mote ABI guest that logs each of `lines` with `mote.log`, then answers nothing.
fn logger(lines: &[&str]) -> Vec<u8> {
    let mut data = String::new();
    let mut calls = String::new();
    let mut at = 16;
    for line in lines {
        data.push_str(&format!(
            "(data (i32.const {at}) \"{}\")\n",
            fixtures::wat_string(line)
        ));
        calls.push_str(&format!(
            "(call $log (i32.const {at}) (i32.const {}))\n",
            line.len()
        ));
        at += line.len() + 16;
    }
    fixtures::wasm(&format!(
        r#"(module
            (import "mote" "log" (func $log (param i32 i32)))
            (memory (export "memory") 1)
            {data}
            (func (export "mote_alloc") (param i32) (result i32) i32.const 1024)
            (func (export "mote_handle") (param i32 i32) (result i64) {calls} i64.const 0))"#
    ))
}

/// Whether any line of `text` is one the guest forged: the fake line at the start of a line.
fn starts_a_line_with_the_forgery(text: &str) -> bool {
    text.lines()
        .any(|line| line.starts_with("2026-01-01T00:00:00Z INFO fake"))
}

#[test]
fn a_guest_s_log_text_is_escaped_in_mote_logs_and_the_node_log() {
    let dir = tempfile::tempdir().unwrap();
    let node_log = dir.path().join("node.log");
    let p = Platform::start_logging(&[], &node_log, "warn,mote::guest=info");
    p.deploy(
        "forger",
        &logger(&[FORGED, PATH, PLAIN]),
        &DeployParams::default(),
    );
    p.deploy(
        "failing",
        &fixtures::wasi_exit3_writing(FORGED),
        &DeployParams::default(),
    );
    assert_eq!(p.invoke("forger", b"").status, 200);
    let failed = client(&["invoke", "failing", "--server", &p.url])
        .output()
        .unwrap();
    assert!(!failed.status.success());

    // The caller's terminal: the failed call's message quotes the stderr, escaped.
    let message = stderr(&failed);
    assert!(message.contains("exited with status 3"), "{message}");
    assert!(message.contains(FORGED_SHOWN), "{message}");
    assert!(
        !message.contains('\x1b') && !starts_a_line_with_the_forgery(&message),
        "{message:?}"
    );

    // `mote logs`: each entry on its line, the guest's text escaped; plain text as it was.
    let logs = |name: &str, json: bool| {
        let mut command = client(&["logs", name, "--server", &p.url]);
        if json {
            command.arg("--json");
        }
        let output = command.output().unwrap();
        assert!(output.status.success(), "{output:?}");
        String::from_utf8(output.stdout).unwrap()
    };
    let shown = logs("forger", false);
    let texts: Vec<&str> = shown
        .lines()
        .map(|line| {
            line.split_once(" log: ")
                .expect("an entry of the log stream")
                .1
        })
        .collect();
    assert_eq!(texts, [FORGED_SHOWN, PATH_SHOWN, PLAIN], "{shown}");
    let shown = logs("failing", false);
    assert!(shown.contains(FORGED_SHOWN), "{shown}");
    for shown in [logs("forger", false), shown] {
        assert!(
            !shown.contains('\x1b') && !starts_a_line_with_the_forgery(&shown),
            "{shown:?}"
        );
    }
    // The API keeps what the guest wrote; JSON escapes it.
    let kept: Vec<String> = logs("forger", true)
        .lines()
        .map(|line| {
            let entry: serde_json::Value = serde_json::from_str(line).unwrap();
            entry["text"].as_str().unwrap().to_owned()
        })
        .collect();
    assert_eq!(kept, [FORGED, PATH, PLAIN]);

    // The node's own log: the guest's lines (info, under mote::guest) and the failed call's
    // message (a warning) are there, escaped, and no line of it is the guest's.
    let log = std::fs::read_to_string(&node_log).unwrap();
    assert!(log.contains(FORGED_SHOWN), "{log}");
    assert!(log.contains(PATH_SHOWN) && log.contains(PLAIN), "{log}");
    assert!(
        log.lines()
            .any(|line| line.contains("request failed") && line.contains(FORGED_SHOWN)),
        "{log}"
    );
    assert!(
        !log.contains('\x1b') && !starts_a_line_with_the_forgery(&log),
        "{log:?}"
    );
}
