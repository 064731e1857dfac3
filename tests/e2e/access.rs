//! Access control (issue 23): every route refuses a request without credentials (401) and one
//! with a token of the wrong scope (403), each naming what is needed; tokens are made, listed
//! and revoked through the API and the CLI and stored only as hashes; a revoked token stops
//! working on every node of a cluster within a second; public functions take calls without a
//! token; a node off loopback is closed unless `--insecure`. Repeated failures are in the
//! attacks' `guessing` module.

use crate::platform::{Platform, api_client, mote_bin, try_wait};
use crate::store::Store;
use mote_api::{CreateToken, DeployParams};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A response's status and body.
pub(crate) struct Answer {
    pub(crate) status: u16,
    pub(crate) body: String,
}

pub(crate) fn agent() -> ureq::Agent {
    Platform::agent_trusting(None)
}

/// `method` on `url` with `headers` and `body`.
pub(crate) fn send(method: &str, url: &str, headers: &[(&str, &str)], body: &[u8]) -> Answer {
    let request = ureq::http::Request::builder().method(method).uri(url);
    let request = headers
        .iter()
        .fold(request, |r, (name, value)| r.header(*name, *value));
    let mut response = agent()
        .run(request.body(body.to_vec()).unwrap())
        .expect("the request reached the server");
    Answer {
        status: response.status().as_u16(),
        body: response.body_mut().read_to_string().unwrap_or_default(),
    }
}

pub(crate) fn bearer(token: &str) -> String {
    format!("Bearer {token}")
}

pub(crate) fn read_trimmed(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap().trim().to_owned()
}

/// Makes a token with `scopes` through the typed client, with the admin token; returns it.
pub(crate) fn make_token(url: &str, admin: &str, name: &str, scopes: &[&str]) -> String {
    let request = CreateToken {
        name: name.to_owned(),
        scopes: scopes.iter().map(|s| s.to_string()).collect(),
        replace: false,
    };
    let made = try_wait(api_client(url, Some(admin), None).create_token(&request))
        .unwrap_or_else(|e| panic!("making {name}: {e}"));
    assert_eq!(made.scopes, request.scopes);
    made.token.expect("the answer that made a token carries it")
}

/// A node that requires tokens, with the example functions, a public one, and a token per
/// scope besides its admin token.
pub(crate) struct Closed {
    pub(crate) p: Platform,
    pub(crate) admin: String,
    pub(crate) secret: String,
    pub(crate) read: String,
    pub(crate) invoke: String,
    pub(crate) deploy: String,
}

impl Closed {
    pub(crate) fn start(extra: &[&str]) -> Closed {
        let mut args = vec!["--require-tokens", "--examples"];
        args.extend_from_slice(extra);
        let p = Platform::start(&args);
        let admin = read_trimmed(&p.data.join("admin.token"));
        let secret = read_trimmed(&p.data.join("cluster.secret"));
        let read = make_token(&p.url, &admin, "reader", &["read"]);
        let invoke = make_token(&p.url, &admin, "caller", &["invoke"]);
        let deploy = make_token(&p.url, &admin, "deployer", &["deploy"]);
        Closed {
            p,
            admin,
            secret,
            read,
            invoke,
            deploy,
        }
    }

    pub(crate) fn token(&self, scope: &str) -> &str {
        match scope {
            "read" => &self.read,
            "invoke" => &self.invoke,
            "deploy" => &self.deploy,
            "admin" => &self.admin,
            other => panic!("no token for {other}"),
        }
    }
}

#[test]
fn every_route_refuses_missing_and_wrong_credentials() {
    let node = Closed::start(&["--auth-failures-per-minute", "0"]);
    let url = &node.p.url;
    let hello = mote_guests::HELLO.wasm;
    let job = br#"{"function":"nothing"}"#;
    let token_request = br#"{"name":"extra","scopes":["read"]}"#;
    let sha = "0".repeat(64);
    // Every route of the API, with the scope it needs; "cluster" routes need the secret.
    let routes: &[(&str, String, &[u8], &str)] = &[
        ("GET", "/metrics".into(), b"", "read"),
        ("GET", "/v1/functions".into(), b"", "read"),
        ("GET", "/v1/functions/hello".into(), b"", "read"),
        ("GET", "/v1/functions/hello/logs".into(), b"", "read"),
        ("GET", "/v1/dashboard".into(), b"", "read"),
        ("PUT", "/v1/functions/another".into(), hello, "deploy"),
        ("POST", "/v1/functions/hello/release".into(), b"", "deploy"),
        ("DELETE", "/v1/functions/echo".into(), b"", "deploy"),
        ("POST", "/v1/invoke/hello".into(), b"x", "invoke"),
        ("GET", "/v1/invoke/http-hello/echo".into(), b"", "invoke"),
        ("GET", "/hello-http/echo".into(), b"", "invoke"),
        ("GET", "/v1/node".into(), b"", "read"),
        ("GET", "/v1/cluster".into(), b"", "read"),
        ("POST", "/v1/jobs".into(), job, "deploy"),
        ("GET", "/v1/jobs".into(), b"", "read"),
        ("GET", "/v1/jobs/j1".into(), b"", "read"),
        ("DELETE", "/v1/jobs/j1".into(), b"", "deploy"),
        ("POST", "/v1/tokens".into(), token_request, "admin"),
        ("GET", "/v1/tokens".into(), b"", "admin"),
        ("DELETE", "/v1/tokens/nobody".into(), b"", "admin"),
        ("GET", format!("/v1/internal/modules/{sha}"), b"", "cluster"),
        ("POST", "/v1/internal/store-peers".into(), b"{}", "cluster"),
        ("PUT", "/v1/internal/jobs/j1".into(), b"{}", "cluster"),
        ("POST", "/v1/internal/jobs/j1/run".into(), b"", "cluster"),
        (
            "POST",
            "/v1/internal/jobs/j1/messages".into(),
            b"",
            "cluster",
        ),
        (
            "POST",
            "/v1/internal/jobs/j1/reports".into(),
            b"{}",
            "cluster",
        ),
        ("DELETE", "/v1/internal/jobs/j1".into(), b"", "cluster"),
    ];
    for (method, path, body, needed) in routes {
        let target = format!("{url}{path}");
        let what = format!("{method} {path}");
        let bare = send(method, &target, &[], body);
        assert_eq!(
            bare.status, 401,
            "{what} without credentials: {}",
            bare.body
        );
        let garbage = send(
            method,
            &target,
            &[("authorization", "Bearer mote_0123")],
            body,
        );
        assert_eq!(
            garbage.status, 401,
            "{what} with an unknown token: {}",
            garbage.body
        );
        if *needed == "cluster" {
            assert!(
                bare.body.contains("cluster secret"),
                "{what}: {}",
                bare.body
            );
            let wrong = send(
                method,
                &target,
                &[("mote-cluster-secret", "0123456789abcdef0123")],
                body,
            );
            assert_eq!(
                wrong.status, 401,
                "{what} with the wrong secret: {}",
                wrong.body
            );
            // Even an admin token is no node of the cluster.
            let admin = send(
                method,
                &target,
                &[("authorization", &bearer(&node.admin))],
                body,
            );
            assert_eq!(
                admin.status, 401,
                "{what} with the admin token: {}",
                admin.body
            );
            let right = send(
                method,
                &target,
                &[("mote-cluster-secret", &node.secret)],
                body,
            );
            assert!(
                ![401, 403].contains(&right.status),
                "{what} with the cluster secret: {} {}",
                right.status,
                right.body
            );
            continue;
        }
        assert!(
            bare.body.contains(&format!("`{needed}` scope")),
            "{what}'s refusal names the scope: {}",
            bare.body
        );
        for other in ["read", "invoke", "deploy"]
            .into_iter()
            .filter(|s| s != needed)
        {
            let wrong = send(
                method,
                &target,
                &[("authorization", &bearer(node.token(other)))],
                body,
            );
            assert_eq!(
                wrong.status, 403,
                "{what} with a {other} token: {}",
                wrong.body
            );
            assert!(
                wrong.body.contains(&format!("needs `{needed}`")),
                "{what}'s 403 names the scope: {}",
                wrong.body
            );
        }
        for allowed in [*needed, "admin"] {
            let right = send(
                method,
                &target,
                &[("authorization", &bearer(node.token(allowed)))],
                body,
            );
            assert!(
                ![401, 403].contains(&right.status),
                "{what} with a {allowed} token: {} {}",
                right.status,
                right.body
            );
        }
    }
    // What needs nothing: health checks and the dashboard's page, which holds no data.
    for open in ["/healthz", "/ui", "/ui/app.js"] {
        let r = send("GET", &format!("{url}{open}"), &[], b"");
        assert_eq!(r.status, 200, "{open}: {}", r.body);
    }
    let unrouted = send("GET", &format!("{url}/nothing-here"), &[], b"");
    assert_eq!(unrouted.status, 404, "{}", unrouted.body);
}

#[test]
fn public_functions_take_calls_without_a_token() {
    let node = Closed::start(&[]);
    let url = &node.p.url;
    let auth = [("authorization", bearer(&node.deploy))];
    let auth: Vec<(&str, &str)> = auth.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let hello = mote_guests::HELLO.wasm;
    let deployed = send(
        "PUT",
        &format!("{url}/v1/functions/open?public=true"),
        &auth,
        hello,
    );
    assert_eq!(deployed.status, 201, "{}", deployed.body);
    assert!(
        deployed.body.contains("\"public\":true"),
        "{}",
        deployed.body
    );
    let call = send("POST", &format!("{url}/v1/invoke/open"), &[], b"world");
    assert_eq!(call.status, 200, "{}", call.body);
    assert!(call.body.contains("world"), "{}", call.body);
    // Redeployed without the flag, it is closed again.
    let redeployed = send("PUT", &format!("{url}/v1/functions/open"), &auth, hello);
    assert_eq!(redeployed.status, 201, "{}", redeployed.body);
    let refused = send("POST", &format!("{url}/v1/invoke/open"), &[], b"world");
    assert_eq!(refused.status, 401, "{}", refused.body);
}

#[test]
fn tokens_are_stored_hashed_and_made_listed_and_revoked_with_the_cli() {
    let node = Closed::start(&[]);
    let mote = |args: &[&str], token: Option<&str>| {
        let mut command = Command::new(mote_bin());
        command
            .args(args)
            .args(["--server", &node.p.url])
            .env_remove("MOTE_TOKEN")
            .env("MOTE_DATA", &node.p.data);
        if let Some(token) = token {
            command.env("MOTE_TOKEN", token);
        }
        command.output().unwrap()
    };
    let admin_file = node.p.data.join("admin.token");
    let mode = std::fs::metadata(&admin_file).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "admin.token is the owner's alone");

    // The CLI finds the admin token in MOTE_DATA.
    let made = mote(&["token", "create", "ci", "--scope", "invoke,read"], None);
    assert!(made.status.success(), "{made:?}");
    let stdout = String::from_utf8(made.stdout).unwrap();
    let token = stdout.lines().last().unwrap().trim().to_owned();
    assert!(token.starts_with("mote_"), "{stdout}");

    let listed = mote(&["token", "ls"], None);
    let listing = String::from_utf8(listed.stdout).unwrap();
    assert!(
        listing.contains("ci") && listing.contains("read,invoke"),
        "{listing}"
    );
    assert!(!listing.contains(&token), "ls shows no token: {listing}");

    let again = mote(&["token", "create", "ci", "--scope", "read"], None);
    assert!(!again.status.success());
    assert!(
        String::from_utf8_lossy(&again.stderr).contains("exists"),
        "{again:?}"
    );

    let called = mote(&["invoke", "hello", "-d", "cli"], Some(&token));
    assert!(called.status.success(), "{called:?}");
    let denied = mote(&["deploy", "x", admin_file.to_str().unwrap()], Some(&token));
    let message = String::from_utf8_lossy(&denied.stderr);
    assert!(
        message.contains("needs `deploy`") && message.contains("403"),
        "{message}"
    );

    // The store holds the hash, never the token: read it with the etcd API.
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let endpoint = node_store_endpoint(&node.p, &node.admin);
    let values = runtime.block_on(async {
        let mut client = etcd_client::Client::connect([endpoint], None)
            .await
            .unwrap();
        let got = client
            .get(
                "/mote/tokens/",
                Some(etcd_client::GetOptions::new().with_prefix()),
            )
            .await
            .unwrap();
        got.kvs()
            .iter()
            .map(|kv| String::from_utf8_lossy(kv.value()).into_owned())
            .collect::<Vec<_>>()
    });
    assert!(values.len() >= 5, "{values:?}");
    for value in &values {
        assert!(
            !value.contains(&token) && !value.contains(&node.admin),
            "{value}"
        );
        assert!(value.contains("\"sha256\""), "{value}");
    }

    let revoked = mote(&["token", "revoke", "ci"], None);
    assert!(revoked.status.success(), "{revoked:?}");
    let after = mote(&["invoke", "hello", "-d", "cli"], Some(&token));
    assert!(!after.status.success());
    assert!(
        String::from_utf8_lossy(&after.stderr).contains("401"),
        "{after:?}"
    );
}

/// The etcd API address of a node's embedded store, from its cluster view.
fn node_store_endpoint(p: &Platform, admin: &str) -> String {
    let view = send(
        "GET",
        &format!("{}/v1/cluster", p.url),
        &[("authorization", &bearer(admin))],
        b"",
    );
    let view: serde_json::Value = serde_json::from_str(&view.body).unwrap_or_default();
    view["store"]["endpoints"]
        .as_str()
        .unwrap_or_else(|| panic!("no store endpoint in {view}"))
        .split(',')
        .next()
        .unwrap()
        .to_owned()
}

#[test]
fn a_node_off_loopback_is_closed_unless_insecure() {
    for (insecure, expected) in [(false, 401), (true, 200)] {
        let dir = tempfile::tempdir().unwrap();
        let mut command = Command::new(mote_bin());
        command
            .args([
                "up",
                "--listen",
                "0.0.0.0:0",
                "--store-listen",
                "127.0.0.1:0",
            ])
            .args(["--log", "warn", "--data"])
            .arg(dir.path());
        if insecure {
            command.arg("--insecure");
        }
        let mut child = mote_testbed::KilledOnDrop::new(
            command
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        );
        let mut lines =
            std::io::BufRead::lines(std::io::BufReader::new(child.stdout.take().unwrap()));
        let mut printed = Vec::new();
        let port = loop {
            let line = lines.next().expect("mote up exited").unwrap();
            printed.push(line.clone());
            if let Some(rest) = line.strip_prefix("mote is up on ") {
                let addr = rest.split_whitespace().next().unwrap();
                break addr.rsplit(':').next().unwrap().to_owned();
            }
        };
        let warned = printed.iter().any(|l| l.starts_with("WARNING: --insecure"));
        assert_eq!(warned, insecure, "{printed:?}");
        let r = send(
            "GET",
            &format!("http://127.0.0.1:{port}/v1/functions"),
            &[],
            b"",
        );
        assert_eq!(r.status, expected, "insecure={insecure}: {}", r.body);
    }
}

#[test]
fn a_loopback_node_stays_open_and_still_makes_its_admin_token() {
    let p = Platform::start(&[]);
    p.deploy("hello", mote_guests::HELLO.wasm, &DeployParams::default());
    assert_eq!(p.invoke("hello", b"open").status, 200);
    let admin = read_trimmed(&p.data.join("admin.token"));
    assert!(admin.starts_with("mote_"));
    let tokens = send("GET", &format!("{}/v1/tokens", p.url), &[], b"");
    assert_eq!(tokens.status, 200, "{}", tokens.body);
    assert!(tokens.body.contains("admin-"), "{}", tokens.body);
}

#[test]
fn a_revoked_token_stops_working_on_every_node_within_a_second() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let store = runtime.block_on(Store::start("shared", &dir.path().join("store"), &[]));
    let secret = dir.path().join("cluster.secret");
    std::fs::write(&secret, "a-cluster-secret-for-this-test\n").unwrap();
    let node = |name: &str| {
        let args = [
            "--node",
            name,
            "--store",
            &store.url,
            "--cores",
            "1",
            "--require-tokens",
            "--cluster-secret-file",
            secret.to_str().unwrap(),
        ];
        Platform::start_in(&dir.path().join(name), &args)
    };
    let (n1, n2) = (node("n1"), node("n2"));
    let admin = read_trimmed(&n1.data.join("admin.token"));
    let token = make_token(&n1.url, &admin, "short-lived", &["read"]);
    let on_n2 = || {
        let r = send(
            "GET",
            &format!("{}/v1/functions", n2.url),
            &[("authorization", &bearer(&token))],
            b"",
        );
        r.status
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while on_n2() != 200 {
        assert!(
            Instant::now() < deadline,
            "n2 never took the token made on n1"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let revoked = send(
        "DELETE",
        &format!("{}/v1/tokens/short-lived", n1.url),
        &[("authorization", &bearer(&admin))],
        b"",
    );
    assert_eq!(revoked.status, 200, "{}", revoked.body);
    let at = Instant::now();
    while on_n2() != 401 {
        assert!(
            at.elapsed() < Duration::from_secs(1),
            "n2 still took the token a second after it was revoked on n1"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    drop((n1, n2, store));
}

#[test]
fn jobs_run_on_a_node_that_requires_tokens() {
    // The controller and its worker talk over the internal routes, with the cluster secret.
    let node = Closed::start(&["--cores", "2"]);
    let url = &node.p.url;
    let deploy = bearer(&node.deploy);
    let deployed = send(
        "PUT",
        &format!("{url}/v1/functions/busy"),
        &[("authorization", &deploy)],
        mote_guests::BUSY.wasm,
    );
    assert_eq!(deployed.status, 201, "{}", deployed.body);
    let request = br#"{"function":"busy","args":[["stages","20"]]}"#;
    let started = send(
        "POST",
        &format!("{url}/v1/jobs"),
        &[
            ("authorization", &deploy),
            ("content-type", "application/json"),
        ],
        request,
    );
    assert_eq!(started.status, 201, "{}", started.body);
    let id = serde_json::from_str::<serde_json::Value>(&started.body).unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        let r = send(
            "GET",
            &format!("{url}/v1/jobs/{id}"),
            &[("authorization", &bearer(&node.read))],
            b"",
        );
        assert_eq!(r.status, 200, "{}", r.body);
        let status: serde_json::Value = serde_json::from_str(&r.body).unwrap();
        if status["state"] != "running" {
            break status;
        }
        assert!(Instant::now() < deadline, "the job still runs: {status}");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(status["state"], "succeeded", "{status}");
}
