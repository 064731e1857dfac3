//! The gate every request passes before the router sees it: one decision, made on the request as
//! the client sent it, in this order:
//!
//! 1. **Host**: a `Host` the node does not answer to is refused (421), which is what defeats DNS
//!    rebinding ([`mote_access::HostAllowList`]).
//! 2. **Pages**: mote's own routes refuse requests that a web page of another origin made, and
//!    on the API's listener also those of a page of the node's own origin (a tenant's component)
//!    except calls of functions (403). Paths that components serve are the components' business.
//! 3. **Credentials**, for what the route needs ([`mote_access::need`]): the cluster secret opens
//!    only the internal routes and calls forwarded by a peer; everything else needs a token with
//!    the route's scope, unless the node requires none. A client that failed too often is refused
//!    (429) before its credentials are looked at.
//! 4. **Stripping**: the cluster secret, any `Authorization` that is a mote token, and a peer's
//!    forwarding mark that no secret vouched for are removed, so that no handler can pass them on
//!    to a guest. A token that got through is left in the request's extensions as a
//!    [`Holder`], for what must end when it is revoked.

use crate::ApiError;
use axum::body::Body;
use axum::http::{HeaderMap, Request, header};
use axum::response::{IntoResponse, Response};
use mote_access::{Denied, FailureLimiter, Grants, Holder, HostAllowList, Need, Page, Scope};
use mote_peers::FORWARDED_BY;
use mote_types::{CLUSTER_SECRET_HEADER, ClusterSecret};
use std::net::SocketAddr;
use std::sync::Arc;

/// A node's access control.
pub struct Access {
    /// Whether requests need tokens; when not, only the internal routes are guarded (by the
    /// cluster secret, if there is one).
    pub tokens_required: bool,
    /// The live tokens.
    pub grants: Arc<Grants>,
    /// Refuses clients that keep failing.
    pub failures: FailureLimiter,
    /// The `Host` names the node answers to.
    pub hosts: HostAllowList,
}

/// Which listener a gate guards: what pages may do differs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Site {
    /// The API, where tenants' components are served too: pages of its origin may only call
    /// functions.
    Api,
    /// The dashboard's own listener, which serves nothing of tenants': its page reads its data.
    Dashboard,
}

/// What the gate asks of the deployed functions.
pub(crate) trait Functions: Send + Sync {
    /// Whether the function named so takes calls without a token.
    fn is_public(&self, name: &str) -> bool;
    /// Whether a component that is not public is mounted on `path`.
    fn mounted_private(&self, path: &str) -> bool;
}

impl Functions for mote_node::Node {
    fn is_public(&self, name: &str) -> bool {
        mote_node::Node::is_public(self, name)
    }

    fn mounted_private(&self, path: &str) -> bool {
        self.route(path).is_some_and(|f| !f.record().public)
    }
}

/// Who a request was let in as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Principal {
    /// Nobody in particular: the route needs nothing, or the node requires no credentials.
    Anyone,
    /// A peer, by the cluster secret.
    Peer,
    /// The holder of a token.
    Token(Holder),
}

/// One listener's gate.
pub(crate) struct Gate {
    site: Site,
    access: Arc<Access>,
    secret: Option<ClusterSecret>,
    functions: Arc<dyn Functions>,
}

impl Gate {
    /// The gate of `site`, with the node's `access`, the cluster's `secret` and its `functions`.
    pub(crate) fn new(
        site: Site,
        access: Arc<Access>,
        secret: Option<ClusterSecret>,
        functions: Arc<dyn Functions>,
    ) -> Self {
        Self {
            site,
            access,
            secret,
            functions,
        }
    }

    /// Lets `request` from `client` in, stripped of its credentials, or answers it.
    pub(crate) fn admit(
        &self,
        request: &mut Request<Body>,
        client: SocketAddr,
    ) -> Result<(), Box<Response>> {
        self.decide(request, client)
            .map_err(|refused| Box::new(refused.into_response()))
    }

    fn decide(&self, request: &mut Request<Body>, client: SocketAddr) -> Result<(), ApiError> {
        let headers = request.headers();
        let host = headers.get(header::HOST).map(|h| h.as_bytes());
        let authority = request.uri().authority().map(|a| a.as_str().as_bytes());
        // Every host the request names, so that no second `Host` slips past the first.
        let named = headers.get_all(header::HOST).iter().map(|h| h.as_bytes());
        if let Some(refused) = named
            .chain(authority)
            .find(|h| !self.access.hosts.allows(h))
        {
            return Err(ApiError::HostNotAllowed(
                String::from_utf8_lossy(refused).into_owned(),
            ));
        }
        let path = request.uri().path();
        if self.site == Site::Dashboard && !crate::dashboard::serves(path) {
            return Err(ApiError::NotOnDashboard(path.to_owned()));
        }
        let need = mote_access::need(request.method().as_str(), path);
        let page = mote_access::page(
            headers.get("sec-fetch-site").map(|h| h.as_bytes()),
            headers.get(header::ORIGIN).map(|h| h.as_bytes()),
            host.or(authority),
        );
        self.check_page(need, page, headers)?;
        let principal = self.authenticate(need, path, headers, client)?;
        strip(request.headers_mut(), principal, self.secret.is_some());
        if let Principal::Token(holder) = principal {
            request.extensions_mut().insert(holder);
        }
        Ok(())
    }

    fn check_page(&self, need: Need<'_>, page: Page, headers: &HeaderMap) -> Result<(), ApiError> {
        let allowed = match (page, need, self.site) {
            // What needs nothing holds no data and changes nothing: a link from anywhere to the
            // dashboard, or a tenant's page opening it through the API's redirect, is fine.
            (Page::None, _, _) | (_, Need::Mounted | Need::Nothing, _) => true,
            (Page::SameOrigin, Need::Invoke(_), Site::Api) => true,
            (Page::SameOrigin, _, Site::Dashboard) => true,
            (Page::SameOrigin, _, Site::Api) | (Page::CrossOrigin, _, _) => false,
        };
        if allowed {
            return Ok(());
        }
        let origin = headers
            .get(header::ORIGIN)
            .map(|o| String::from_utf8_lossy(o.as_bytes()).into_owned());
        let from = match (page, origin) {
            (Page::SameOrigin, _) => "a page of this node's own origin".to_owned(),
            (_, Some(origin)) => format!("a web page of another origin ({origin})"),
            (_, None) => "a web page of another site".to_owned(),
        };
        let message = match page {
            Page::SameOrigin => format!(
                "mote's API does not take requests from {from}, where tenants' components are served, except calls of functions; use the CLI or an HTTP client, and the dashboard on its own listener (--ui-listen)"
            ),
            _ => format!(
                "mote's API does not take requests from {from}: a page cannot act for the people whose browser it runs in; use the CLI or an HTTP client"
            ),
        };
        Err(ApiError::Forbidden(message))
    }

    fn authenticate(
        &self,
        need: Need<'_>,
        path: &str,
        headers: &HeaderMap,
        client: SocketAddr,
    ) -> Result<Principal, ApiError> {
        let access = &*self.access;
        let peer_route = match need {
            Need::Cluster => true,
            Need::Invoke(_) => headers.contains_key(FORWARDED_BY),
            _ => false,
        };
        if peer_route && let Some(presented) = headers.get(CLUSTER_SECRET_HEADER) {
            self.not_refused(client)?;
            return match &self.secret {
                Some(secret) if secret.matches(presented.as_bytes()) => Ok(Principal::Peer),
                Some(_) => Err(self.refuse(client, "a peer sent the wrong cluster secret", || {
                    ApiError::Unauthorized(
                        "the cluster secret is wrong: every node of a cluster needs the same --cluster-secret-file".into(),
                    )
                })),
                None => Err(self.refuse(
                    client,
                    "a peer sent a cluster secret this node does not have",
                    || {
                        ApiError::Unauthorized(
                            "this node has no cluster secret: start it with the cluster's --cluster-secret-file".into(),
                        )
                    },
                )),
            };
        }
        let needed = match need {
            Need::Nothing => return Ok(Principal::Anyone),
            Need::Cluster => match (&self.secret, access.tokens_required) {
                (None, false) => return Ok(Principal::Anyone),
                _ => {
                    self.not_refused(client)?;
                    return Err(self.refuse(
                        client,
                        "a request for an internal route came without the cluster secret",
                        || {
                            ApiError::Unauthorized(format!(
                                "this route is for the nodes of the cluster: it needs the cluster secret in `{CLUSTER_SECRET_HEADER}` (every node takes it from --cluster-secret-file)"
                            ))
                        },
                    ));
                }
            },
            _ if !access.tokens_required => return Ok(Principal::Anyone),
            Need::Scope(scope) => scope,
            Need::Invoke(name) => match self.functions.is_public(name) {
                true => return Ok(Principal::Anyone),
                false => Scope::Invoke,
            },
            // Nothing is mounted on the dashboard's listener: every such path is its 404.
            Need::Mounted => match self.site == Site::Api && self.functions.mounted_private(path) {
                true => Scope::Invoke,
                false => return Ok(Principal::Anyone),
            },
        };
        self.not_refused(client)?;
        let authorization = headers.get(header::AUTHORIZATION).map(|v| v.as_bytes());
        match access.grants.check(authorization, needed) {
            Ok(holder) => Ok(Principal::Token(holder)),
            Err(denied @ Denied::Scope { .. }) => Err(ApiError::Forbidden(denied.to_string())),
            Err(denied) => Err(
                self.refuse(client, "a request came without a valid token", || {
                    ApiError::Unauthorized(denied.to_string())
                }),
            ),
        }
    }

    /// 429 for a client that failed too often, before anything it presents is looked at.
    fn not_refused(&self, client: SocketAddr) -> Result<(), ApiError> {
        match self.access.failures.refused(client.ip()) {
            None => Ok(()),
            Some(wait) => Err(ApiError::TooManyFailures {
                retry_after_s: wait.as_secs().max(1),
            }),
        }
    }

    /// Answers a failed authentication: `error`, or 429 once the client has failed too often.
    /// Each failure is logged with the client's address until it is refused outright, so that a
    /// flood of guesses does not flood the log.
    fn refuse(&self, client: SocketAddr, what: &str, error: impl FnOnce() -> ApiError) -> ApiError {
        match self.access.failures.failed(client.ip()) {
            None => {
                tracing::warn!(%client, "refused: {what}");
                error()
            }
            Some(wait) => ApiError::TooManyFailures {
                retry_after_s: wait.as_secs().max(1),
            },
        }
    }
}

/// Resolves when what `holder` opened must end: its token no longer allows `needed` (it was
/// revoked or narrowed). Never, for a request that no token let in.
pub(crate) fn revocation(
    access: &Arc<Access>,
    holder: Option<Holder>,
    needed: Scope,
) -> impl std::future::Future<Output = ()> + Send + 'static + use<> {
    let access = access.clone();
    async move {
        match holder {
            Some(holder) => access.grants.revoked(holder, needed).await,
            None => std::future::pending().await,
        }
    }
}

/// Removes what no handler may pass on: the cluster secret; an `Authorization` that is a mote
/// token (whether or not it let the request in) or that a token check accepted; and, on a node
/// with a secret, a forwarding mark the secret did not vouch for (it would make this node run a
/// call whatever its placement says).
fn strip(headers: &mut HeaderMap, principal: Principal, has_secret: bool) {
    headers.remove(CLUSTER_SECRET_HEADER);
    let credential = headers.get(header::AUTHORIZATION).is_some_and(|value| {
        matches!(principal, Principal::Token(_))
            || mote_access::is_mote_credential(value.as_bytes())
    });
    if credential {
        headers.remove(header::AUTHORIZATION);
    }
    if has_secret && principal != Principal::Peer {
        headers.remove(FORWARDED_BY);
    }
}

#[cfg(test)]
impl Gate {
    /// A gate that lets everything in: a loopback node without tokens or functions.
    pub(crate) fn open_for_tests() -> Self {
        struct NoFunctions;
        impl Functions for NoFunctions {
            fn is_public(&self, _: &str) -> bool {
                false
            }
            fn mounted_private(&self, _: &str) -> bool {
                false
            }
        }
        let access = Access {
            tokens_required: false,
            grants: Arc::new(Grants::new()),
            failures: FailureLimiter::new(0, std::time::Duration::from_secs(60)),
            hosts: HostAllowList::new(&["127.0.0.1".parse().expect("an address")], "", &[])
                .expect("no hosts to parse"),
        };
        Self::new(Site::Api, Arc::new(access), None, Arc::new(NoFunctions))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mote_access::{Token, TokenName, TokenRecord};
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
        let tokens: Vec<(Scope, Token)> =
            Scope::ALL.iter().map(|s| (*s, Token::generate())).collect();
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
}
