//! Calls, served on the reader that read them: `POST /v1/invoke/{name}` runs a function here
//! (on this reader if a core is free, `Node::invoke_here`) or on the peer placement chooses (a
//! call waiting here may still move, once, to a peer that pulls it: [`run_moved`]);
//! `ANY /v1/invoke/{name}[/{path}]` and any path under a component's route are served by a
//! `wasi:http` component, on this reader. Every response names the node that ran it. What
//! a reader may not do (forward to a peer, serve the API's other routes) runs on the I/O
//! runtime ([`Hop`]).

use crate::body::read_body;
use crate::error::ApiError;
use crate::logs::MOTE_CALL_ID;
use crate::readers::Hop;
use crate::state::Gateway;
use axum::Extension;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use http_body_util::BodyExt;
use mote_cluster::{NodeName, Origin};
use mote_node::{CallId, InvokeError, Reader};
use mote_peers::{FORWARDED_BY, ForwardError, NOT_DEPLOYED_HERE, Route};
use mote_types::GuestKind;
use mote_wire::MOVED;
use std::sync::Arc;

/// The header that names the node that ran a call.
pub const MOTE_NODE: &str = "mote-node";

pub(crate) async fn invoke(
    State(gw): State<Gateway>,
    Extension(reader): Extension<Arc<Reader>>,
    Path(name): Path<String>,
    request: axum::extract::Request,
) -> Response {
    if gw.node.kind(&name) == Some(GuestKind::WasiHttp) {
        return serve_component(&gw, &reader, &name, "/", request).await;
    }
    if request.method() != axum::http::Method::POST {
        return ran_here(
            &gw,
            ApiError::MethodNotAllowed(format!(
                "`{name}` is not a wasi:http component; invoke it with POST /v1/invoke/{name} and the input as the body"
            ))
            .into_response(),
        );
    }
    let (parts, body) = request.into_parts();
    match invoke_routed(&gw, &reader, &name, &parts.headers, body).await {
        Ok(response) => response,
        Err(e) => ran_here(&gw, e.into_response()),
    }
}

/// `ANY /v1/invoke/{name}/{path}`: a request to a component, which sees `/{path}` as the
/// client sent it (still percent-encoded, as the extracted `path` would not be).
pub(crate) async fn invoke_path(
    State(gw): State<Gateway>,
    Extension(reader): Extension<Arc<Reader>>,
    Path((name, _)): Path<(String, String)>,
    request: axum::extract::Request,
) -> Response {
    let error = match gw.node.kind(&name) {
        Some(GuestKind::WasiHttp) => None,
        Some(_) => Some(ApiError::NoRoute),
        None => Some(ApiError::FunctionNotFound(name.clone())),
    };
    if let Some(error) = error {
        return ran_here(&gw, error.into_response());
    }
    // `/v1/invoke/{name}{path}`: everything from the slash after the name on.
    let raw = request.uri().path();
    let path = raw
        .strip_prefix("/v1/invoke/")
        .and_then(|rest| rest.find('/').map(|i| &rest[i..]))
        .unwrap_or("/")
        .to_owned();
    serve_component(&gw, &reader, &name, &path, request).await
}

/// Serves `request` with the component `name`, which sees `path` and the request's query.
/// Components run on the node that received the request: their bodies stream, which the
/// forwarding between nodes (whole bodies) does not do.
async fn serve_component(
    gw: &Gateway,
    reader: &Reader,
    name: &str,
    path: &str,
    request: axum::extract::Request,
) -> Response {
    let (mut parts, body) = request.into_parts();
    let path_and_query = match parts.uri.query() {
        Some(query) => format!("{path}?{query}"),
        None => path.to_owned(),
    };
    parts.uri = match axum::http::Uri::builder()
        .path_and_query(path_and_query)
        .build()
    {
        Ok(uri) => uri,
        Err(e) => {
            let error = ApiError::BadRequest(format!("the request's path is not valid: {e}"));
            return ran_here(gw, error.into_response());
        }
    };
    // wasi:http gives the guest an authority; an HTTP/1.0 client may not send one.
    if !parts.headers.contains_key(header::HOST) {
        parts
            .headers
            .insert(header::HOST, HeaderValue::from_static("localhost"));
    }
    let request = axum::http::Request::from_parts(parts, body);
    match gw.node.serve_http(reader, name, request).await {
        Ok(response) => {
            let call = response.extensions().get::<CallId>().copied();
            let mut response = response.map(Body::new);
            name_call(gw, &mut response, call);
            ran_here(gw, response)
        }
        Err(e) => ran_here(gw, ApiError::from(e).into_response()),
    }
}

/// Runs a call here or on the peer placement chooses; a peer that cannot be reached is left
/// out and the next choice taken.
async fn invoke_routed(
    gw: &Gateway,
    reader: &Reader,
    name: &str,
    headers: &HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let input = read_body(headers, body, gw.config.max_body_bytes, "request body").await?;
    let origin = match headers.contains_key(FORWARDED_BY) {
        true => Origin::Peer,
        false => Origin::Client,
    };
    if origin == Origin::Peer && !gw.peers.knows(name) {
        let mut response = ApiError::FunctionNotFound(name.to_owned()).into_response();
        response
            .headers_mut()
            .insert(NOT_DEPLOYED_HERE, HeaderValue::from_static("1"));
        return Ok(ran_here(gw, response));
    }
    // Peers left out of this call: the first `unreachable` could not be reached, the rest had
    // not heard of the function yet.
    let mut excluded: Vec<NodeName> = Vec::new();
    let mut unreachable = 0;
    loop {
        match gw.peers.route(name, origin, &excluded) {
            Route::Here => break,
            Route::Refuse => {
                return Err(ApiError::NoNodeTakes(unreachable_names(
                    &excluded[..unreachable],
                )));
            }
            Route::Peer(peer, url) => {
                if !gw.peers.knows(name) {
                    return Err(ApiError::FunctionNotFound(name.to_owned()));
                }
                let content_type = headers.get(header::CONTENT_TYPE);
                match forward(gw, &peer, &url, name, input.clone(), content_type, false).await {
                    Ok(response) => return Ok(response),
                    // The store is eventually consistent: a peer may not have the record this
                    // node has. The call did not run there.
                    Err(e @ ForwardError::NotDeployed { .. }) => {
                        tracing::info!(error = %e, "placing the call again without that peer");
                        excluded.push(peer);
                    }
                    Err(e @ ForwardError::Unreachable { .. }) => {
                        tracing::warn!(error = %e, "a peer is unreachable; placing the call again without it");
                        excluded.insert(unreachable, peer);
                        unreachable += 1;
                    }
                    Err(e @ ForwardError::Lost { .. }) => return Err(ApiError::PeerFailed(e)),
                }
            }
        }
    }
    // With peers, a call that waits here may move to one that asks for it (late correction),
    // once: a call that moved here stays.
    let movable = gw.peers.has_others() && !headers.contains_key(MOVED);
    let reply = match gw
        .node
        .invoke_here(reader, name, input.clone(), movable)
        .await
    {
        Err(InvokeError::Moved { to }) => {
            return run_moved(gw, reader, name, headers, input, &to).await;
        }
        reply => reply?,
    };
    Ok(respond_here(gw, reply))
}

/// Forwards a call to `peer` at `url` from the I/O runtime (a reader may not connect), reading
/// the answer's body there, whole.
async fn forward(
    gw: &Gateway,
    peer: &NodeName,
    url: &str,
    name: &str,
    input: Bytes,
    content_type: Option<&HeaderValue>,
    moved: bool,
) -> Result<Response, ForwardError> {
    let (peers, name) = (gw.peers.clone(), name.to_owned());
    let (peer, url) = (peer.clone(), url.to_owned());
    let content_type = content_type.cloned();
    let (node, at) = (peer.as_str().to_owned(), url.clone());
    let lost = move |detail: String| ForwardError::Lost {
        node: node.clone(),
        url: at.clone(),
        detail,
    };
    let lost_here = lost.clone();
    let forwarded = gw.relay.spawn(&gw.io, async move {
        let response = peers
            .forward(&peer, &url, &name, input, content_type.as_ref(), moved)
            .await?;
        let (parts, body) = response.into_parts();
        let body = body
            .collect()
            .await
            .map_err(|e| lost(format!("reading its answer: {e}")))?;
        Ok(Response::from_parts(parts, Body::from(body.to_bytes())))
    });
    forwarded.await.map_err(|e| lost_here(e.to_string()))?
}

/// Runs a call this node handed to the peer `to` before it started: forwarded there, once. If
/// `to` cannot take it after all (unreachable, or not yet told of the function), the call
/// did not run there and runs here, where it no longer moves.
async fn run_moved(
    gw: &Gateway,
    reader: &Reader,
    name: &str,
    headers: &HeaderMap,
    input: Bytes,
    to: &str,
) -> Result<Response, ApiError> {
    if let Some(url) = gw.peers.url_of(to) {
        let peer = NodeName::from(to);
        gw.peers.moving_to(to, name);
        let content_type = headers.get(header::CONTENT_TYPE);
        match forward(gw, &peer, &url, name, input.clone(), content_type, true).await {
            Ok(response) => return Ok(response),
            Err(e @ (ForwardError::NotDeployed { .. } | ForwardError::Unreachable { .. })) => {
                tracing::info!(error = %e, "a call handed to a peer runs here after all");
            }
            Err(e @ ForwardError::Lost { .. }) => return Err(ApiError::PeerFailed(e)),
        }
    }
    let reply = gw.node.invoke_here(reader, name, input, false).await?;
    Ok(respond_here(gw, reply))
}

/// The response to a call that ran here.
fn respond_here(gw: &Gateway, reply: mote_node::Reply) -> Response {
    let mut response = match reply.result {
        Ok(output) => {
            ([(header::CONTENT_TYPE, "application/octet-stream")], output).into_response()
        }
        Err(e) => ApiError::from(e).into_response(),
    };
    name_call(gw, &mut response, reply.call);
    ran_here(gw, response)
}

fn unreachable_names(nodes: &[NodeName]) -> String {
    match nodes.is_empty() {
        true => "none was unreachable".into(),
        false => {
            let names: Vec<&str> = nodes.iter().map(NodeName::as_str).collect();
            format!("unreachable: {}", names.join(", "))
        }
    }
}

/// Names the call a response answers, as its function's log entries name it.
fn name_call(gw: &Gateway, response: &mut Response, call: Option<CallId>) {
    // The rendered id's buffer becomes the header's without a copy.
    if let Some(call) = call
        && let Ok(id) = HeaderValue::from_maybe_shared(Bytes::from(call.render(gw.peers.name())))
    {
        response.headers_mut().insert(MOTE_CALL_ID, id);
    }
}

/// Names this node in a response to a call it answered itself.
fn ran_here(gw: &Gateway, mut response: Response) -> Response {
    response.headers_mut().insert(MOTE_NODE, gw.name.clone());
    response
}

/// Any other path: one the API owns is served on the I/O runtime ([`Hop`]); otherwise the
/// component mounted on the most specific matching route serves it, or it is a 404.
pub(crate) async fn not_found(
    State(gw): State<Gateway>,
    Extension(reader): Extension<Arc<Reader>>,
    Extension(hop): Extension<Arc<Hop>>,
    request: axum::extract::Request,
) -> Response {
    let path = request.uri().path();
    if mote_access::owned(path) {
        return hop.serve(request).await;
    }
    let Some(function) = gw.node.route(path) else {
        return ApiError::NoRoute.into_response();
    };
    let route = function
        .http()
        .route
        .as_ref()
        .expect("only routed functions are in the route table");
    let inner = route.strip(path).to_owned();
    let name = function.name().clone();
    serve_component(&gw, &reader, &name, &inner, request).await
}
