//! Attack 3: any web page drove a loopback node. A `text/plain` POST from a foreign page reached
//! `/v1/invoke/*`, `/v1/jobs` and `POST /v1/tokens` (which minted an admin token), and with DNS
//! rebinding (`Host: evil.example`) a page could also deploy and read. Now the node answers only
//! the hosts it is known by (421), its API refuses requests that pages of other origins make
//! (403) and takes JSON only as `application/json` (415, which a page cannot send without asking
//! first); programs, and the user's own address bar, are served as before.

use super::{loopback, raw};
use crate::access::send;
use crate::platform::Platform;

/// What a page of another site makes the browser send, with and without fetch metadata (an
/// older browser sends only `Origin`).
const FOREIGN: [&[(&str, &str)]; 2] = [
    &[
        ("origin", "http://evil.example"),
        ("sec-fetch-site", "cross-site"),
        ("content-type", "text/plain"),
    ],
    &[
        ("origin", "http://evil.example"),
        ("content-type", "text/plain"),
    ],
];

#[test]
fn a_page_of_another_site_cannot_drive_a_loopback_node() {
    let p = Platform::start(&["--examples"]);
    let url = &p.url;
    let token_request = br#"{"name":"stolen","scopes":["admin"]}"#;
    let job = br#"{"function":"lr","args":[["generate","1000"]]}"#;
    let attempts: [(&str, &str, &[u8]); 5] = [
        ("POST", "/v1/invoke/hello", b"from a page"),
        ("POST", "/v1/jobs", job),
        ("POST", "/v1/tokens", token_request),
        ("GET", "/v1/invoke/http-hello/echo", b""),
        ("GET", "/v1/functions", b""),
    ];
    for headers in FOREIGN {
        for (method, path, body) in attempts {
            let r = send(method, &format!("{url}{path}"), headers, body);
            assert_eq!(
                r.status, 403,
                "{method} {path} from a foreign page: {}",
                r.body
            );
            assert!(r.body.contains("web page of another origin"), "{}", r.body);
        }
    }
    // No token was made, no job started.
    let tokens = send("GET", &format!("{url}/v1/tokens"), &[], b"");
    assert_eq!(tokens.status, 200, "{}", tokens.body);
    assert!(!tokens.body.contains("stolen"), "{}", tokens.body);
    let jobs = send("GET", &format!("{url}/v1/jobs"), &[], b"");
    assert_eq!(jobs.body.trim(), "[]", "{}", jobs.body);

    // Programs still drive it, and the user's own address bar still reads it.
    let hello = send("POST", &format!("{url}/v1/invoke/hello"), &[], b"mote");
    assert_eq!((hello.status, hello.body.as_str()), (200, "Hello, mote!\n"));
    let typed = send(
        "GET",
        &format!("{url}/v1/functions"),
        &[("sec-fetch-site", "none")],
        b"",
    );
    assert_eq!(typed.status, 200, "{}", typed.body);
    // A JSON route takes JSON only as such, from anyone: a page cannot send that unasked.
    let plain = send(
        "POST",
        &format!("{url}/v1/tokens"),
        &[("content-type", "text/plain")],
        token_request,
    );
    assert_eq!(plain.status, 415, "{}", plain.body);
    assert!(plain.body.contains("application/json"), "{}", plain.body);
    let json = send(
        "POST",
        &format!("{url}/v1/tokens"),
        &[("content-type", "application/json; charset=utf-8")],
        br#"{"name":"made-by-a-program","scopes":["read"]}"#,
    );
    assert_eq!(json.status, 201, "{}", json.body);
}

#[test]
fn a_tenants_page_may_call_functions_but_not_use_the_api() {
    let p = Platform::start(&["--examples"]);
    let url = &p.url;
    let same = [
        ("sec-fetch-site", "same-origin"),
        ("content-type", "text/plain"),
    ];
    let called = send("POST", &format!("{url}/v1/invoke/hello"), &same, b"page");
    assert_eq!(
        (called.status, called.body.as_str()),
        (200, "Hello, page!\n")
    );
    for (method, path, body) in [
        ("PUT", "/v1/functions/mine", mote_guests::HELLO.wasm),
        (
            "POST",
            "/v1/tokens",
            br#"{"name":"x","scopes":["admin"]}"#.as_slice(),
        ),
        ("GET", "/v1/tokens", b"".as_slice()),
        ("GET", "/v1/functions/hello/logs", b"".as_slice()),
    ] {
        let r = send(method, &format!("{url}{path}"), &same, body);
        assert_eq!(
            r.status, 403,
            "{method} {path} from the node's own origin: {}",
            r.body
        );
        assert!(r.body.contains("own origin"), "{}", r.body);
    }
    // A component's own paths take whatever pages its author wants.
    let form = send(
        "POST",
        &format!("{url}/hello-http/echo"),
        FOREIGN[0],
        b"a form",
    );
    assert_eq!((form.status, form.body.as_str()), (200, "a form"));
}

#[test]
fn a_page_that_renames_itself_to_the_node_dns_rebinding_is_refused() {
    let p = Platform::start(&["--examples", "--allow-host", "mote.test"]);
    let url = &p.url;
    let wasm = mote_guests::HELLO.wasm;
    for host in [
        "evil.example",
        "evil.example:{port}",
        "localhost.evil.example",
        "127.0.0.1.nip.io",
    ] {
        let host = host.replace("{port}", url.rsplit(':').next().unwrap());
        for (head, body) in [
            (
                format!("GET /v1/functions HTTP/1.1\r\nhost: {host}"),
                b"".as_slice(),
            ),
            (
                format!("PUT /v1/functions/rebound HTTP/1.1\r\nhost: {host}"),
                wasm,
            ),
            (
                format!("POST /v1/invoke/hello HTTP/1.1\r\nhost: {host}"),
                b"x".as_slice(),
            ),
        ] {
            let (status, answer) = raw(loopback(), url, &head, body);
            assert_eq!(status, 421, "{head}: {answer}");
            assert!(answer.contains("--allow-host"), "{answer}");
        }
    }
    // An absolute URI names a host too.
    let (status, _) = raw(
        loopback(),
        url,
        "GET http://evil.example/v1/functions HTTP/1.1\r\nhost: {addr}",
        b"",
    );
    assert_eq!(status, 421);
    let deployed = send("GET", &format!("{url}/v1/functions/rebound"), &[], b"");
    assert_eq!(
        deployed.status, 404,
        "a rebinding page deployed: {}",
        deployed.body
    );
    // The names the node is known by are served: its address, loopback's names, the operator's.
    for host in [
        "{addr}",
        "localhost:1",
        "LOCALHOST",
        "mote.test:8080",
        "app.localhost",
    ] {
        let (status, answer) = raw(
            loopback(),
            url,
            &format!("GET /v1/functions HTTP/1.1\r\nhost: {host}"),
            b"",
        );
        assert_eq!(status, 200, "{host}: {answer}");
    }
}
