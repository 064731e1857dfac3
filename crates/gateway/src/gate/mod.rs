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

use crate::access::Access;
use crate::error::ApiError;
use axum::body::Body;
use axum::http::{HeaderMap, Request, header};
use axum::response::{IntoResponse, Response};
use mote_access::{Denied, Holder, Need, Page, Scope};
use mote_peers::FORWARDED_BY;
use mote_types::{CLUSTER_SECRET_HEADER, ClusterSecret};
use std::net::SocketAddr;
use std::sync::Arc;

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
        use mote_access::{FailureLimiter, Grants, HostAllowList};
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
mod tests;
