use super::*;
use mote_access::{FailureLimiter, Grants, HostAllowList, Token, TokenName, TokenRecord};
use std::time::Duration;

/// Functions as the tests deploy them: `pub` is public; `open` is mounted on `/open/...`
/// (public), and a whole site that is not public on `/...`.
struct Deployed;

impl Functions for Deployed {
    fn is_public(&self, name: &str) -> bool {
        name == "pub"
    }
    fn mounted_private(&self, path: &str) -> bool {
        !path.starts_with("/open/")
    }
}

struct Node {
    gate: Gate,
    tokens: Vec<(Scope, Token)>,
}

const SECRET: &str = "0123456789abcdef0123456789abcdef";

fn node(site: Site, tokens_required: bool) -> Node {
    let grants = Arc::new(Grants::new());
    let tokens: Vec<(Scope, Token)> = Scope::ALL.iter().map(|s| (*s, Token::generate())).collect();
    grants.replace(tokens.iter().map(|(scope, token)| {
        TokenRecord::new(
            TokenName::new(scope.as_str()).unwrap(),
            [*scope].into_iter().collect(),
            token,
        )
    }));
    let access = Access {
        tokens_required,
        grants,
        failures: FailureLimiter::new(3, Duration::from_secs(60)),
        hosts: HostAllowList::new(
            &["127.0.0.1".parse().unwrap()],
            "http://127.0.0.1:8080",
            &[],
        )
        .unwrap(),
    };
    let secret = ClusterSecret::new(SECRET).ok();
    Node {
        gate: Gate::new(site, Arc::new(access), secret, Arc::new(Deployed)),
        tokens,
    }
}

impl Node {
    fn token(&self, scope: Scope) -> String {
        let token = &self.tokens.iter().find(|(s, _)| *s == scope).unwrap().1;
        format!("Bearer {}", token.expose())
    }
}

fn client(last: u8) -> SocketAddr {
    SocketAddr::from(([10, 0, 0, last], 40000))
}

fn request(method: &str, path: &str, headers: &[(&str, &str)]) -> Request<Body> {
    let mut builder = Request::builder().method(method).uri(path);
    if !headers.iter().any(|(name, _)| *name == "host") {
        builder = builder.header("host", "127.0.0.1:8080");
    }
    for (name, value) in headers {
        builder = builder.header(*name, *value);
    }
    builder.body(Body::empty()).unwrap()
}

/// The status the gate answers with, or 0 if it lets the request in; and the request as the
/// router would get it.
fn admit(node: &Node, mut request: Request<Body>, from: SocketAddr) -> (u16, Request<Body>) {
    let status = match node.gate.admit(&mut request, from) {
        Ok(()) => 0,
        Err(response) => response.status().as_u16(),
    };
    (status, request)
}

#[test]
fn hosts_the_node_does_not_answer_to_are_refused_before_anything_else() {
    let node = node(Site::Api, false);
    let (status, _) = admit(
        &node,
        request("GET", "/healthz", &[("host", "evil.example:8080")]),
        client(1),
    );
    assert_eq!(status, 421);
    let absolute = request("GET", "http://evil.example:8080/healthz", &[]);
    assert_eq!(
        admit(&node, absolute, client(1)).0,
        421,
        "an absolute URI names a host too"
    );
    assert_eq!(
        admit(
            &node,
            request("GET", "/healthz", &[("host", "localhost:8080")]),
            client(1)
        )
        .0,
        0
    );
    let mut twice = request("GET", "/healthz", &[]);
    twice
        .headers_mut()
        .append("host", "evil.example".parse().unwrap());
    assert_eq!(
        admit(&node, twice, client(1)).0,
        421,
        "a second Host slipped by"
    );
}

#[test]
fn pages_may_not_use_the_api_but_may_call_functions_from_the_nodes_origin() {
    let node = node(Site::Api, false);
    let cross = [("sec-fetch-site", "cross-site")];
    let same = [("sec-fetch-site", "same-origin")];
    for (method, path) in [
        ("POST", "/v1/invoke/f"),
        ("POST", "/v1/tokens"),
        ("POST", "/v1/jobs"),
        ("PUT", "/v1/functions/f"),
        ("GET", "/v1/functions"),
    ] {
        assert_eq!(
            admit(&node, request(method, path, &cross), client(1)).0,
            403,
            "{method} {path}"
        );
    }
    assert_eq!(
        admit(&node, request("POST", "/v1/tokens", &same), client(1)).0,
        403
    );
    assert_eq!(
        admit(&node, request("PUT", "/v1/functions/f", &same), client(1)).0,
        403
    );
    assert_eq!(
        admit(&node, request("POST", "/v1/invoke/f", &same), client(1)).0,
        0
    );
    let origin = [("origin", "http://evil.example")];
    assert_eq!(
        admit(&node, request("POST", "/v1/invoke/f", &origin), client(1)).0,
        403
    );
    // A component's own paths are its business; a program or the user's address bar pass.
    assert_eq!(
        admit(&node, request("POST", "/site/form", &cross), client(1)).0,
        0
    );
    assert_eq!(
        admit(
            &node,
            request("GET", "/v1/functions", &[("sec-fetch-site", "none")]),
            client(1)
        )
        .0,
        0
    );
    assert_eq!(
        admit(&node, request("GET", "/v1/functions", &[]), client(1)).0,
        0
    );
    // Links and windows from any page reach what holds no data: the dashboard's page, the
    // API's redirect to it, the health check.
    for path in ["/ui", "/ui/app.js", "/healthz"] {
        for site in [&same, &cross] {
            assert_eq!(admit(&node, request("GET", path, site), client(1)).0, 0);
        }
    }
    // The dashboard's page reads its own listener's data.
    let dashboard = super::tests::node(Site::Dashboard, false);
    assert_eq!(
        admit(
            &dashboard,
            request("GET", "/v1/dashboard/events", &same),
            client(1)
        )
        .0,
        0
    );
    assert_eq!(
        admit(
            &dashboard,
            request("GET", "/v1/dashboard/events", &cross),
            client(1)
        )
        .0,
        403
    );
}

#[test]
fn the_dashboards_listener_answers_404_for_everything_else_before_credentials() {
    let dashboard = node(Site::Dashboard, true);
    for (method, path) in [
        ("POST", "/v1/invoke/f"),
        ("POST", "/v1/tokens"),
        ("GET", "/site/x"),
        ("GET", "/healthz"),
        ("GET", "/uix"),
    ] {
        let (status, _) = admit(&dashboard, request(method, path, &[]), client(1));
        assert_eq!(status, 404, "{method} {path}");
    }
    // The page passes without a token; its data needs one.
    assert_eq!(
        admit(&dashboard, request("GET", "/ui/app.js", &[]), client(1)).0,
        0
    );
    assert_eq!(
        admit(&dashboard, request("GET", "/v1/dashboard", &[]), client(1)).0,
        401
    );
}

#[test]
fn each_route_takes_its_scope_and_no_other() {
    let node = node(Site::Api, true);
    let cases = [
        ("GET", "/v1/functions", Scope::Read),
        ("PUT", "/v1/functions/f", Scope::Deploy),
        ("POST", "/v1/invoke/f", Scope::Invoke),
        ("POST", "/site/x", Scope::Invoke),
        ("POST", "/v1beta/x", Scope::Invoke),
        ("POST", "/v1/tokens", Scope::Admin),
    ];
    for (i, (method, path, needed)) in cases.into_iter().enumerate() {
        for scope in Scope::ALL {
            let auth = node.token(scope);
            let (status, _) = admit(
                &node,
                request(method, path, &[("authorization", &auth)]),
                client(i as u8),
            );
            let expected = match scope == needed || scope == Scope::Admin {
                true => 0,
                false => 403,
            };
            assert_eq!(status, expected, "{method} {path} with {scope}");
        }
        assert_eq!(
            admit(&node, request(method, path, &[]), client(100 + i as u8)).0,
            401,
            "{method} {path}"
        );
    }
    assert_eq!(
        admit(&node, request("POST", "/v1/invoke/pub", &[]), client(1)).0,
        0
    );
    assert_eq!(admit(&node, request("GET", "/open/x", &[]), client(1)).0, 0);
    assert_eq!(
        admit(&node, request("GET", "/ui/app.js", &[]), client(1)).0,
        0
    );
    // Not the tokens route: under /ui, whose reads hold no data (the router's 404 or
    // redirect answers it).
    assert_eq!(
        admit(&node, request("GET", "/ui/../v1/tokens", &[]), client(101)).0,
        0
    );
    assert_eq!(
        admit(&node, request("POST", "/ui/../v1/tokens", &[]), client(101)).0,
        401
    );
}

#[test]
fn the_cluster_secret_opens_internal_routes_and_forwarded_calls_only() {
    let node = node(Site::Api, true);
    let secret = [("mote-cluster-secret", SECRET)];
    let forwarded = [("mote-cluster-secret", SECRET), ("mote-forwarded-by", "n2")];
    assert_eq!(
        admit(
            &node,
            request("GET", "/v1/internal/modules/x", &secret),
            client(1)
        )
        .0,
        0
    );
    let (status, seen) = admit(
        &node,
        request("POST", "/v1/invoke/f", &forwarded),
        client(1),
    );
    assert_eq!(status, 0);
    assert!(
        seen.headers().contains_key(FORWARDED_BY),
        "a vouched-for mark stays"
    );
    assert!(!seen.headers().contains_key(CLUSTER_SECRET_HEADER));
    for (method, path) in [
        ("POST", "/v1/tokens"),
        ("PUT", "/v1/functions/f"),
        ("GET", "/v1/functions"),
    ] {
        assert_eq!(
            admit(&node, request(method, path, &secret), client(2)).0,
            401,
            "{method} {path}"
        );
    }
    // A client's own forwarding mark, without the secret, is an ordinary call.
    let auth = node.token(Scope::Invoke);
    let (status, seen) = admit(
        &node,
        request(
            "POST",
            "/v1/invoke/f",
            &[("mote-forwarded-by", "n2"), ("authorization", &auth)],
        ),
        client(3),
    );
    assert_eq!(status, 0);
    assert!(!seen.headers().contains_key(FORWARDED_BY));
    let wrong = [("mote-cluster-secret", "not-the-secret-at-all-0000")];
    assert_eq!(
        admit(
            &node,
            request("GET", "/v1/internal/modules/x", &wrong),
            client(4)
        )
        .0,
        401
    );
}

#[test]
fn mote_credentials_never_reach_a_handler_and_others_do() {
    let node = node(Site::Api, true);
    let invoke = node.token(Scope::Invoke);
    let (status, seen) = admit(
        &node,
        request("POST", "/site/x", &[("authorization", &invoke)]),
        client(1),
    );
    assert_eq!(status, 0);
    assert!(seen.headers().get("authorization").is_none());
    assert!(seen.extensions().get::<Holder>().is_some());
    // A public component gets its own apps' credentials, and never a mote token, live or not.
    let (_, seen) = admit(
        &node,
        request("GET", "/open/x", &[("authorization", "Basic dXNlcjpwdw==")]),
        client(1),
    );
    assert_eq!(seen.headers()["authorization"], "Basic dXNlcjpwdw==");
    let (_, seen) = admit(
        &node,
        request("GET", "/open/x", &[("authorization", &invoke)]),
        client(1),
    );
    assert!(seen.headers().get("authorization").is_none());
    let (_, seen) = admit(
        &node,
        request(
            "GET",
            "/open/x",
            &[("authorization", "Bearer mote_revoked")],
        ),
        client(1),
    );
    assert!(seen.headers().get("authorization").is_none());
    let open = super::tests::node(Site::Api, false);
    let (_, seen) = admit(
        &open,
        request(
            "POST",
            "/v1/invoke/f",
            &[("authorization", &invoke), ("mote-cluster-secret", SECRET)],
        ),
        client(1),
    );
    assert!(seen.headers().get("authorization").is_none());
    assert!(seen.headers().get(CLUSTER_SECRET_HEADER).is_none());
}

#[test]
fn a_client_that_failed_too_often_is_refused_even_with_a_good_token() {
    let node = node(Site::Api, true);
    let admin = node.token(Scope::Admin);
    let guess = [("authorization", "Bearer mote_guess")];
    let statuses: Vec<u16> = (0..5)
        .map(|_| admit(&node, request("GET", "/v1/functions", &guess), client(7)).0)
        .collect();
    assert_eq!(statuses, [401, 401, 401, 429, 429]);
    let good = request("GET", "/v1/functions", &[("authorization", &admin)]);
    assert_eq!(
        admit(&node, good, client(7)).0,
        429,
        "a correct guess after the refusal passed"
    );
    let elsewhere = request("GET", "/v1/functions", &[("authorization", &admin)]);
    assert_eq!(admit(&node, elsewhere, client(8)).0, 0);
    assert_eq!(
        admit(&node, request("GET", "/healthz", &[]), client(7)).0,
        0,
        "what needs nothing stays open"
    );
}
