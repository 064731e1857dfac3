//! Attack 2: a tenant's page and the dashboard's token. The dashboard keeps its token in its
//! origin's storage, so no origin that serves a tenant's code may be the dashboard's: the page
//! has a listener of its own (`--ui-listen`) that serves only the page and its data, never a
//! component, and the API's `/ui` only sends browsers there. Here over HTTP against the real
//! binary; the browser's side (a hostile component page in the same browser as a signed-in
//! dashboard) is `tests/ui/dashboard.mjs`.

use crate::platform::{Platform, mote_bin};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::time::Duration;

/// A response's status, `Location` and body.
struct Answer {
    status: u16,
    location: Option<String>,
    content_type: Option<String>,
    body: String,
}

impl Answer {
    fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.body))
    }
}

/// A client that follows no redirect, so that a test sees where it is sent, trusting `ca` if
/// given.
fn agent(ca: Option<&Path>) -> ureq::Agent {
    let mut tls = ureq::tls::TlsConfig::builder();
    if let Some(ca) = ca {
        let pem = std::fs::read(ca).expect("reading the trusted certificate");
        let cert = ureq::tls::Certificate::from_pem(&pem).expect("a PEM certificate");
        tls = tls.root_certs(ureq::tls::RootCerts::new_with_certs(&[cert]));
    }
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .max_redirects(0)
        .timeout_global(Some(Duration::from_secs(60)))
        .tls_config(tls.build())
        .build()
        .into()
}

/// `method` on `url` with `headers` and `body`.
fn send_with(
    agent: &ureq::Agent,
    method: &str,
    url: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Answer {
    let request = ureq::http::Request::builder().method(method).uri(url);
    let request = headers
        .iter()
        .fold(request, |r, (name, value)| r.header(*name, *value));
    let mut response = agent
        .run(request.body(body.to_vec()).unwrap())
        .unwrap_or_else(|e| panic!("{method} {url} reached no server: {e}"));
    let header = |name: &str| {
        response
            .headers()
            .get(name)
            .map(|v| v.to_str().unwrap().to_owned())
    };
    Answer {
        status: response.status().as_u16(),
        location: header("location"),
        content_type: header("content-type"),
        body: response
            .body_mut()
            .with_config()
            .limit(1 << 30)
            .read_to_string()
            .unwrap_or_default(),
    }
}

fn send(method: &str, url: &str, headers: &[(&str, &str)], body: &[u8]) -> Answer {
    send_with(&agent(None), method, url, headers, body)
}

fn bearer(token: &str) -> String {
    format!("Bearer {token}")
}

/// A node that requires tokens, with the examples (`http-hello` mounted on `/hello-http/...`),
/// its admin token and a `read` and an `invoke` token.
struct Closed {
    p: Platform,
    dashboard: String,
    admin: String,
    read: String,
    invoke: String,
}

impl Closed {
    fn start() -> Closed {
        let p = Platform::start(&["--require-tokens", "--examples"]);
        let dashboard = p.dashboard.clone().expect("a `dashboard on` line");
        let admin = std::fs::read_to_string(p.data.join("admin.token"))
            .unwrap()
            .trim()
            .to_owned();
        let make = |name: &str, scope: &str| {
            let body = serde_json::json!({ "name": name, "scopes": [scope] }).to_string();
            let made = send(
                "POST",
                &format!("{}/v1/tokens", p.url),
                &[
                    ("authorization", &bearer(&admin)),
                    ("content-type", "application/json"),
                ],
                body.as_bytes(),
            );
            assert_eq!(made.status, 201, "making {name}: {}", made.body);
            made.json()["token"].as_str().unwrap().to_owned()
        };
        let read = make("viewer", "read");
        let invoke = make("caller", "invoke");
        Closed {
            dashboard,
            admin,
            read,
            invoke,
            p,
        }
    }
}

/// The first snapshot `url`'s event stream sends with `token`.
fn first_event(url: &str, token: &str) -> serde_json::Value {
    let response = agent(None)
        .get(format!("{url}/v1/dashboard/events"))
        .header("authorization", bearer(token))
        .call()
        .expect("the stream opens");
    assert_eq!(response.status(), 200);
    let mut lines = BufReader::new(response.into_body().into_reader()).lines();
    let data = lines
        .find_map(|line| line.unwrap().strip_prefix("data: ").map(str::to_owned))
        .expect("a snapshot before the stream ends");
    serde_json::from_str(&data).unwrap()
}

#[test]
fn the_dashboards_listener_serves_its_page_and_data_and_nothing_else() {
    let node = Closed::start();
    let (api, ui) = (&node.p.url, &node.dashboard);
    assert_ne!(api, ui, "the dashboard's origin is not the API's");
    let read = bearer(&node.read);
    let admin = bearer(&node.admin);

    // The page and its files need nothing (they hold no data); the data needs `read`.
    for file in [
        "/ui",
        "/ui/",
        "/ui/index.html",
        "/ui/app.js",
        "/ui/style.css",
    ] {
        let r = send("GET", &format!("{ui}{file}"), &[], b"");
        assert_eq!(r.status, 200, "{file}: {}", r.body);
    }
    let r = send("GET", &format!("{ui}/v1/dashboard"), &[], b"");
    assert_eq!(r.status, 401, "{}", r.body);
    let invoke_only = bearer(&node.invoke);
    let r = send(
        "GET",
        &format!("{ui}/v1/dashboard"),
        &[("authorization", &invoke_only)],
        b"",
    );
    assert_eq!(r.status, 403, "{}", r.body);
    let r = send(
        "GET",
        &format!("{ui}/v1/dashboard"),
        &[("authorization", &read)],
        b"",
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let names: Vec<String> = r.json()["functions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap().to_owned())
        .collect();
    assert!(names.iter().any(|n| n == "http-hello"), "{names:?}");
    assert!(first_event(ui, &node.read)["node"].is_string());

    // A component answers on its route at the API's origin (the legitimate use)...
    let component = "/hello-http/echo?q=1";
    let r = send(
        "GET",
        &format!("{api}{component}"),
        &[("authorization", &invoke_only)],
        b"",
    );
    assert_eq!(r.status, 200, "{}", r.body);
    // ...and never at the dashboard's, whoever asks: no tenant's code runs at its origin. Nor
    // does the rest of the API.
    for (method, path) in [
        ("GET", component),
        ("POST", "/hello-http/echo"),
        ("GET", "/v1/invoke/http-hello/"),
        ("POST", "/v1/invoke/hello"),
        ("GET", "/v1/functions"),
        ("POST", "/v1/tokens"),
        ("GET", "/metrics"),
        ("GET", "/healthz"),
        ("GET", "/"),
        ("GET", "/uix"),
    ] {
        for who in [&[][..], &[("authorization", admin.as_str())][..]] {
            let r = send(method, &format!("{ui}{path}"), who, b"");
            assert_eq!(r.status, 404, "{method} {path}: {}", r.body);
            assert!(
                r.body.contains("serves only mote's dashboard"),
                "{method} {path}: {}",
                r.body
            );
        }
    }
    let r = send(
        "GET",
        &format!("{ui}/ui/nope.js"),
        &[("authorization", &admin)],
        b"",
    );
    assert_eq!(r.status, 404, "{}", r.body);
}

#[test]
fn the_apis_ui_sends_browsers_to_the_dashboard_and_programs_keep_its_data() {
    let node = Closed::start();
    let (api, ui) = (&node.p.url, &node.dashboard);
    let ui_port = ui.rsplit(':').next().unwrap();
    for path in ["/ui", "/ui/", "/ui/app.js", "/ui/x/y?z=1"] {
        let r = send("GET", &format!("{api}{path}"), &[], b"");
        assert_eq!(r.status, 307, "{path}: {}", r.body);
        assert_eq!(
            r.location.as_deref(),
            Some(&*format!("{ui}{path}")),
            "{path}"
        );
    }
    // The browser is sent to the name it used, with the dashboard's port.
    let r = send(
        "GET",
        &format!("{api}/ui"),
        &[("host", "localhost:1234")],
        b"",
    );
    assert_eq!(
        r.location.as_deref(),
        Some(&*format!("http://localhost:{ui_port}/ui"))
    );
    // Followed, the redirect gives the page.
    let page = Platform::agent_trusting(None)
        .get(format!("{api}/ui"))
        .call()
        .unwrap()
        .body_mut()
        .read_to_string()
        .unwrap();
    assert!(page.contains("<script src=\"/ui/app.js\""), "{page}");

    // Programs still read the dashboard's data from the API, with a token.
    let r = send("GET", &format!("{api}/v1/dashboard"), &[], b"");
    assert_eq!(r.status, 401, "{}", r.body);
    let r = send(
        "GET",
        &format!("{api}/v1/dashboard"),
        &[("authorization", &bearer(&node.read))],
        b"",
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(first_event(api, &node.read)["node"].is_string());
}

#[test]
fn no_component_may_be_mounted_on_ui() {
    let node = Closed::start();
    let api = &node.p.url;
    let admin = bearer(&node.admin);
    let deploy = |name: &str, route: &str| {
        send(
            "PUT",
            &format!("{api}/v1/functions/{name}?route={route}&public=true"),
            &[("authorization", &admin)],
            mote_guests::HTTP_HELLO.wasm,
        )
    };
    for route in ["/ui", "/ui/...", "/ui/x", "/ui/app.js"] {
        let r = deploy("squatter", route);
        assert_eq!(r.status, 400, "{route}: {}", r.body);
        let error = r.json()["error"].as_str().unwrap().to_owned();
        assert!(
            error.contains(route) && error.contains("/ui its dashboard"),
            "{route}: {error}"
        );
    }
    // A path that only begins with the letters is anyone's.
    let r = deploy("neighbour", "/uix/...");
    assert_eq!(r.status, 201, "{}", r.body);
    let r = send("GET", &format!("{api}/uix/echo"), &[], b"");
    assert_eq!(r.status, 200, "{}", r.body);
    // A component on the whole site still does not get `/ui`: the API sends it to the
    // dashboard, and the dashboard's listener serves no component.
    let r = deploy("site", "/...");
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(send("GET", &format!("{api}/other"), &[], b"").status, 200);
    assert_eq!(send("GET", &format!("{api}/ui/x"), &[], b"").status, 307);
    let r = send("GET", &format!("{}/other", node.dashboard), &[], b"");
    assert_eq!(r.status, 404, "{}", r.body);
}

#[test]
fn ui_listen_off_serves_no_dashboard_and_programs_keep_its_data() {
    let p = Platform::start(&["--ui-listen", "off", "--cores", "1"]);
    assert_eq!(p.dashboard, None, "no `dashboard on` line");
    for path in ["/ui", "/ui/app.js"] {
        let r = send("GET", &format!("{}{path}", p.url), &[], b"");
        assert_eq!(r.status, 404, "{path}: {}", r.body);
        assert!(r.body.contains("--ui-listen"), "{path}: {}", r.body);
    }
    let snap = p.get("/v1/dashboard");
    assert_eq!(snap.status, 200, "{}", snap.text());
    assert_eq!(snap.json()["cores"], 1);
}

#[test]
fn a_taken_dashboard_address_is_named_and_the_node_does_not_start() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let dir = tempfile::tempdir().unwrap();
    let out = Platform::up_command(&dir.path().join("data"), &["--ui-listen", &addr])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&addr) && stderr.contains("--ui-listen"),
        "{stderr}"
    );
    let out = std::process::Command::new(mote_bin())
        .args(["up", "--ui-listen", "8081"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--ui-listen") && stderr.contains("IP:PORT"),
        "{stderr}"
    );
}

#[test]
fn over_tls_the_dashboard_is_served_over_tls_too() {
    let p = Platform::start_self_signed(&["--cores", "1"]);
    let cert = p.certificate();
    let ui = p.dashboard.clone().expect("a `dashboard on` line");
    assert!(ui.starts_with("https://127.0.0.1:"), "{ui}");
    let trusting = agent(Some(&cert));
    let r = send_with(&trusting, "GET", &format!("{ui}/ui"), &[], b"");
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.content_type.as_deref(), Some("text/html; charset=utf-8"));
    let r = send_with(&trusting, "GET", &format!("{}/ui", p.url), &[], b"");
    assert_eq!(r.location.as_deref(), Some(&*format!("{ui}/ui")));
    // No plain HTTP on the dashboard's port either: only a 400 that says to use https.
    let plain = ui.replacen("https://", "http://", 1);
    let r = send_with(&agent(None), "GET", &format!("{plain}/ui"), &[], b"");
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(r.body.contains("use an https:// URL"), "{}", r.body);
    assert!(!r.body.contains("<html"), "{}", r.body);
}

#[test]
fn a_dashboard_beyond_loopback_makes_the_node_require_tokens() {
    // The API on loopback alone would take requests without tokens; the dashboard's data on
    // every address must not.
    let p = Platform::start(&["--ui-listen", "0.0.0.0:0", "--cores", "1"]);
    let ui = p.dashboard.clone().expect("a `dashboard on` line");
    let ui = ui.replacen("0.0.0.0", "127.0.0.1", 1);
    let r = send("GET", &format!("{ui}/v1/dashboard"), &[], b"");
    assert_eq!(r.status, 401, "{}", r.body);
    assert_eq!(
        send("GET", &format!("{}/v1/functions", p.url), &[], b"").status,
        401
    );
    let admin = std::fs::read_to_string(p.data.join("admin.token")).unwrap();
    let r = send(
        "GET",
        &format!("{ui}/v1/dashboard"),
        &[("authorization", &bearer(admin.trim()))],
        b"",
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(send("GET", &format!("{ui}/ui"), &[], b"").status, 200);
}
