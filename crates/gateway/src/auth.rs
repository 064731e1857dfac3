//! Who may call which route. Every request is classified by its method and path into what it
//! needs ([`need`], the one table of the API's permissions), then checked before any handler
//! runs: a token's scope (`Authorization: Bearer TOKEN`), or the cluster secret for the routes
//! nodes use among themselves. A node that does not require tokens and has no cluster secret
//! has no check at all: the layer is not installed.

use crate::tls::{PlainListener, TlsListener};
use crate::{ApiError, Gateway};
use axum::extract::connect_info::Connected;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{Method, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::serve::IncomingStream;
use mote_access::{Denied, FailureLimiter, Grants, Scope, TokenStore};
use mote_types::{CLUSTER_SECRET_HEADER, ClusterSecret};
use std::net::SocketAddr;
use std::sync::Arc;

/// The address a request came from, for the log of refusals and the limit on failures; any
/// listener of TCP connections gives it, plain or TLS.
#[derive(Clone, Copy, Debug)]
pub struct ClientAddr(pub SocketAddr);

impl Connected<IncomingStream<'_, PlainListener>> for ClientAddr {
    fn connect_info(stream: IncomingStream<'_, PlainListener>) -> Self {
        ClientAddr(*stream.remote_addr())
    }
}

impl Connected<IncomingStream<'_, TlsListener>> for ClientAddr {
    fn connect_info(stream: IncomingStream<'_, TlsListener>) -> Self {
        ClientAddr(*stream.remote_addr())
    }
}

/// A node's access control.
pub struct Access {
    /// Whether requests need tokens; when not, only the internal routes are guarded (by the
    /// cluster secret, if there is one).
    pub tokens_required: bool,
    /// The live tokens.
    pub grants: Arc<Grants>,
    /// Where tokens are made and revoked.
    pub tokens: TokenStore,
    /// Refuses client addresses that keep failing.
    pub failures: FailureLimiter,
}

impl Access {
    /// Whether any request can be refused, given the cluster's secret (`secret`), so whether
    /// the check is installed at all.
    pub(crate) fn guards(&self, secret: Option<&ClusterSecret>) -> bool {
        self.tokens_required || secret.is_some()
    }
}

/// What a request needs to get through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Need<'a> {
    /// Nothing: health checks and the dashboard's page (which holds no data).
    Nothing,
    /// A token with this scope.
    Scope(Scope),
    /// A call of the function named so: a token with `invoke`, unless the function is public.
    Invoke(&'a str),
    /// A path no API route owns: a token with `invoke` if a component is mounted there and is
    /// not public; otherwise nothing (it is a 404).
    Mounted,
    /// The cluster secret: a route only nodes call.
    Cluster,
}

/// What a request with `method` on `path` needs: the API's permissions in one place.
pub fn need<'a>(method: &Method, path: &'a str) -> Need<'a> {
    let looks = matches!(*method, Method::GET | Method::HEAD);
    let changes = |what: Scope| match looks {
        true => Need::Scope(Scope::Read),
        false => Need::Scope(what),
    };
    if path == "/healthz" || path == "/ui" || path.starts_with("/ui/") {
        return Need::Nothing;
    }
    if path == "/metrics" {
        return Need::Scope(Scope::Read);
    }
    let Some(api) = path.strip_prefix("/v1") else {
        return Need::Mounted;
    };
    let (first, rest) = match api.strip_prefix('/') {
        Some(api) => api.split_once('/').unwrap_or((api, "")),
        None => ("", ""),
    };
    match first {
        "internal" => Need::Cluster,
        "tokens" => Need::Scope(Scope::Admin),
        "invoke" => Need::Invoke(rest.split('/').next().unwrap_or_default()),
        "functions" | "jobs" => changes(Scope::Deploy),
        _ => Need::Scope(Scope::Read),
    }
}

/// The check, as an axum middleware.
pub(crate) async fn guard(State(gw): State<Gateway>, request: Request, next: Next) -> Response {
    let access = &gw.access;
    let client = request
        .extensions()
        .get::<ConnectInfo<ClientAddr>>()
        .map(|ConnectInfo(ClientAddr(addr))| *addr);
    if let Some(presented) = request.headers().get(CLUSTER_SECRET_HEADER) {
        return match gw.peers.cluster_secret() {
            Some(secret) if secret.matches(presented.as_bytes()) => next.run(request).await,
            Some(_) => refuse(
                access,
                client,
                "a peer sent the wrong cluster secret",
                || {
                    ApiError::Unauthorized(
                    "the cluster secret is wrong: every node of a cluster needs the same --cluster-secret-file".into(),
                )
                },
            ),
            None => refuse(
                access,
                client,
                "a peer sent a cluster secret this node does not have",
                || {
                    ApiError::Unauthorized(
                    "this node has no cluster secret: start it with the cluster's --cluster-secret-file".into(),
                )
                },
            ),
        };
    }
    let needed = match need(request.method(), request.uri().path()) {
        Need::Nothing => return next.run(request).await,
        Need::Cluster => match (gw.peers.cluster_secret(), access.tokens_required) {
            (None, false) => return next.run(request).await,
            _ => {
                return refuse(
                    access,
                    client,
                    "a request for an internal route came without the cluster secret",
                    || {
                        ApiError::Unauthorized(format!(
                            "this route is for the nodes of the cluster: it needs the cluster secret in `{CLUSTER_SECRET_HEADER}` (every node takes it from --cluster-secret-file)"
                        ))
                    },
                );
            }
        },
        _ if !access.tokens_required => return next.run(request).await,
        Need::Scope(scope) => scope,
        Need::Invoke(name) => match gw.node.is_public(name) {
            true => return next.run(request).await,
            false => Scope::Invoke,
        },
        Need::Mounted => match gw.node.route(request.uri().path()) {
            Some(f) if !f.record().public => Scope::Invoke,
            _ => return next.run(request).await,
        },
    };
    let authorization = request
        .headers()
        .get(header::AUTHORIZATION)
        .map(|v| v.as_bytes());
    match access.grants.check(authorization, needed) {
        Ok(_) => next.run(request).await,
        Err(denied @ Denied::Scope { .. }) => {
            ApiError::Forbidden(denied.to_string()).into_response()
        }
        Err(denied) => refuse(
            access,
            client,
            "a request came without a valid token",
            || ApiError::Unauthorized(denied.to_string()),
        ),
    }
}

/// Answers a failed authentication: `error`, or 429 once the client has failed too often. Each
/// failure is logged with the client's address until its address is refused outright, so that
/// a flood of guesses does not flood the log.
fn refuse(
    access: &Access,
    client: Option<SocketAddr>,
    what: &str,
    error: impl FnOnce() -> ApiError,
) -> Response {
    let Some(addr) = client else {
        return error().into_response();
    };
    match access.failures.failed(addr.ip()) {
        None => {
            tracing::warn!(client = %addr, "refused: {what}");
            error().into_response()
        }
        Some(wait) => ApiError::TooManyFailures {
            retry_after_s: wait.as_secs().max(1),
        }
        .into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_route_needs_what_the_api_documents() {
        let get = Method::GET;
        let cases: &[(&Method, &str, Need<'_>)] = &[
            (&get, "/healthz", Need::Nothing),
            (&get, "/ui", Need::Nothing),
            (&get, "/ui/app.js", Need::Nothing),
            (&get, "/metrics", Need::Scope(Scope::Read)),
            (&get, "/v1/functions", Need::Scope(Scope::Read)),
            (&get, "/v1/functions/f", Need::Scope(Scope::Read)),
            (&get, "/v1/functions/f/logs", Need::Scope(Scope::Read)),
            (&Method::PUT, "/v1/functions/f", Need::Scope(Scope::Deploy)),
            (
                &Method::DELETE,
                "/v1/functions/f",
                Need::Scope(Scope::Deploy),
            ),
            (
                &Method::POST,
                "/v1/functions/f/release",
                Need::Scope(Scope::Deploy),
            ),
            (&Method::POST, "/v1/invoke/f", Need::Invoke("f")),
            (&Method::DELETE, "/v1/invoke/f/a/b?x", Need::Invoke("f")),
            (&Method::POST, "/v1/jobs", Need::Scope(Scope::Deploy)),
            (&get, "/v1/jobs/j1", Need::Scope(Scope::Read)),
            (&Method::DELETE, "/v1/jobs/j1", Need::Scope(Scope::Deploy)),
            (&get, "/v1/node", Need::Scope(Scope::Read)),
            (&get, "/v1/cluster", Need::Scope(Scope::Read)),
            (&get, "/v1/dashboard/events", Need::Scope(Scope::Read)),
            (&Method::POST, "/v1/tokens", Need::Scope(Scope::Admin)),
            (&get, "/v1/tokens", Need::Scope(Scope::Admin)),
            (&Method::DELETE, "/v1/tokens/ci", Need::Scope(Scope::Admin)),
            (&Method::PUT, "/v1/internal/jobs/j1", Need::Cluster),
            (&get, "/v1/internal/modules/ab", Need::Cluster),
            (&get, "/v1", Need::Scope(Scope::Read)),
            (&get, "/v1x", Need::Scope(Scope::Read)),
            (&get, "/v1/unknown", Need::Scope(Scope::Read)),
            (&get, "/hello-http/echo", Need::Mounted),
            (&get, "/", Need::Mounted),
        ];
        for (method, path, expected) in cases {
            assert_eq!(need(method, path), *expected, "{method} {path}");
        }
    }
}
