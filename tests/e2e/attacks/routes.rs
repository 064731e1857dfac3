//! Attacks 4 and 5: `/ui/…` lifted authentication for every path below it (a component that is
//! not public, mounted on `/...`, answered `GET /ui/a/b` without a token), and a `read` token
//! invoked functions through `/v1beta/...` or `/v1x/...` (`/v1` was stripped as a string prefix,
//! not a path segment). Now what a request needs is decided on whole segments of the path as
//! sent, which is also what the router matches: the table below goes over every kind of route
//! and the spellings that once confused them, for each scope, against the real binary.

use super::{loopback, raw};
use crate::access::{Closed, bearer, send};

/// What a path is, and so what each scope gets there.
#[derive(Clone, Copy, Debug)]
enum Is {
    /// An API route needing this scope, which answers `ok` to it (a status that is neither 401
    /// nor 403).
    Api(&'static str),
    /// A path the platform owns with no route there (or not for this method): 401 without a
    /// token, 404 or 405 to a `read` one.
    Nothing,
    /// A path the whole-site component (not public) serves: `invoke` (or `admin`) only.
    Site,
    /// Under `/ui`: for anyone, a redirect to the dashboard's own listener, which holds no data.
    Dashboard,
}

const SCOPES: [&str; 4] = ["read", "invoke", "deploy", "admin"];

#[test]
fn every_route_and_its_tricky_spellings_for_every_scope() {
    let node = Closed::start(&["--auth-failures-per-minute", "0"]);
    let url = &node.p.url;
    let deployed = send(
        "PUT",
        &format!("{url}/v1/functions/site?route=/..."),
        &[("authorization", &bearer(&node.admin))],
        mote_guests::HTTP_HELLO.wasm,
    );
    assert_eq!(deployed.status, 201, "{}", deployed.body);
    let site = "Hello from a wasi:http component";
    let table: &[(&str, &str, Is)] = &[
        ("GET", "/v1/functions", Is::Api("read")),
        ("GET", "/v1/node", Is::Api("read")),
        ("GET", "/metrics", Is::Api("read")),
        ("POST", "/v1/functions/hello/release", Is::Api("deploy")),
        ("POST", "/v1/invoke/hello", Is::Api("invoke")),
        ("GET", "/v1/invoke/site/echo", Is::Api("invoke")),
        ("GET", "/v1/tokens", Is::Api("admin")),
        ("GET", "/hello-http/", Is::Site),
        ("GET", "/anything/at/all", Is::Site),
        // Not under the segment /v1, whatever they look like: a component's paths.
        ("GET", "/v1beta/invoke/hello", Is::Site),
        ("POST", "/v1x/invoke/hello", Is::Site),
        ("GET", "/v1./tokens", Is::Site),
        ("GET", "/V1/tokens", Is::Site),
        ("GET", "/%76%31/tokens", Is::Site),
        ("GET", "/uix/a", Is::Site),
        ("GET", "/UI/a/b", Is::Site),
        // Under /v1, but no route: the platform's, and a 404 to those who may look.
        ("GET", "/v1/%74okens", Is::Nothing),
        ("GET", "/v1//tokens", Is::Nothing),
        ("POST", "/ui/a/b", Is::Nothing),
        // Under /ui: the platform's, never a component's, and nothing of the API's.
        ("GET", "/ui/a/b", Is::Dashboard),
        ("GET", "/ui/../v1/tokens", Is::Dashboard),
        ("GET", "/ui/%2e%2e/v1/tokens", Is::Dashboard),
    ];
    for (method, path, is) in table {
        let head = |auth: Option<&str>| match auth {
            Some(token) => format!(
                "{method} {path} HTTP/1.1\r\nhost: {{addr}}\r\nauthorization: Bearer {token}"
            ),
            None => format!("{method} {path} HTTP/1.1\r\nhost: {{addr}}"),
        };
        let body: &[u8] = if *method == "POST" { b"x" } else { b"" };
        let (status, answer) = raw(loopback(), url, &head(None), body);
        if let Is::Dashboard = is {
            for auth in [None, Some(node.token("admin"))] {
                let (status, answer) = raw(loopback(), url, &head(auth), body);
                assert_eq!(status, 307, "{method} {path}: {answer}");
                assert!(!answer.contains(site), "{method} {path}: {answer}");
            }
            continue;
        }
        assert_eq!(status, 401, "{method} {path} without a token: {answer}");
        for scope in SCOPES {
            let (status, answer) = raw(loopback(), url, &head(Some(node.token(scope))), body);
            let what = format!("{method} {path} with a {scope} token ({is:?})");
            match is {
                Is::Api(needed) if scope == *needed || scope == "admin" => {
                    assert!(![401, 403].contains(&status), "{what}: {status} {answer}")
                }
                Is::Api(needed) => {
                    assert_eq!(status, 403, "{what}: {answer}");
                    assert!(
                        answer.contains(&format!("needs `{needed}`")),
                        "{what}: {answer}"
                    );
                }
                Is::Nothing if scope == "read" || scope == "admin" => {
                    assert!([404, 405].contains(&status), "{what}: {status} {answer}");
                    assert!(
                        !answer.contains(site),
                        "{what} reached a component: {answer}"
                    );
                }
                Is::Nothing => assert!([403, 404].contains(&status), "{what}: {status} {answer}"),
                Is::Site if scope == "invoke" || scope == "admin" => {
                    assert_eq!(status, 200, "{what}: {answer}");
                    assert!(answer.contains(site), "{what}: {answer}");
                }
                Is::Site => {
                    assert_eq!(status, 403, "{what}: {answer}");
                    assert!(answer.contains("needs `invoke`"), "{what}: {answer}");
                }
                Is::Dashboard => unreachable!("answered above"),
            }
        }
    }
    // Nothing may be mounted where the platform's own paths are.
    for route in ["/ui/...", "/ui", "/ui/x", "/v1/...", "/healthz"] {
        let r = send(
            "PUT",
            &format!("{url}/v1/functions/squatter?route={route}"),
            &[("authorization", &bearer(&node.admin))],
            mote_guests::HTTP_HELLO.wasm,
        );
        assert_eq!(r.status, 400, "route {route}: {}", r.body);
    }
}
