//! mote's HTTP API: thin axum handlers over a [`mote_node::Node`]. Each handler validates its
//! input, calls the node once, and maps the result through [`ApiError`], the one table from
//! errors to status codes. Guest code never runs on the gateway's threads: invocations wait on
//! the node's executors asynchronously.
//!
//! Routes:
//! - `PUT /v1/functions/{name}?timeout_ms=|timeout_us=&memory_mb=` deploys the module in the
//!   body (201).
//! - `GET /v1/functions`, `GET /v1/functions/{name}`, `DELETE /v1/functions/{name}`.
//! - `POST /v1/functions/{name}/release` lets a quarantined function's calls in again.
//! - `POST /v1/invoke/{name}` runs the function with the body as input (200 with its output).
//! - `GET /v1/node`: the scheduling policy, queue and each function's expected processing time.
//! - `GET /healthz`, `GET /metrics` (Prometheus text format).

mod error;

pub use error::ApiError;

use axum::Router;
use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use bytes::Bytes;
use http_body_util::BodyExt;
use mote_node::Node;
use mote_types::{FunctionName, FunctionRecord, Limits, Timeout};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// Limits of the HTTP layer.
#[derive(Clone, Copy, Debug)]
pub struct GatewayConfig {
    /// The largest request body `POST /v1/invoke` accepts.
    pub max_body_bytes: usize,
    /// The largest module `PUT /v1/functions` accepts.
    pub max_module_bytes: usize,
}

impl Default for GatewayConfig {
    fn default() -> Self {
        Self {
            max_body_bytes: 16 << 20,
            max_module_bytes: 64 << 20,
        }
    }
}

#[derive(Clone)]
struct Gateway {
    node: Arc<Node>,
    config: GatewayConfig,
}

/// Builds the API's router over `node`.
pub fn router(node: Arc<Node>, config: GatewayConfig) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/metrics", get(metrics))
        .route("/v1/functions", get(list_functions))
        .route(
            "/v1/functions/{name}",
            put(deploy).get(get_function).delete(remove_function),
        )
        .route("/v1/functions/{name}/release", post(release_function))
        .route("/v1/invoke/{name}", post(invoke))
        .route("/v1/node", get(node_status))
        .fallback(not_found)
        .with_state(Gateway { node, config })
}

/// Serves the API on `listener` until `shutdown` resolves.
pub async fn serve(
    listener: tokio::net::TcpListener,
    node: Arc<Node>,
    config: GatewayConfig,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, router(node, config))
        .with_graceful_shutdown(shutdown)
        .await
}

async fn healthz() -> &'static str {
    "ok\n"
}

async fn metrics(State(gw): State<Gateway>) -> Response {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        gw.node.metrics().encode(),
    )
        .into_response()
}

/// Query parameters of a deploy.
#[derive(Debug, Deserialize)]
struct DeployParams {
    timeout_ms: Option<u64>,
    timeout_us: Option<u64>,
    memory_mb: Option<u32>,
}

/// A function as the API shows it.
#[derive(Debug, Serialize)]
struct FunctionView<'a> {
    name: &'a str,
    sha256: &'a str,
    kind: &'a str,
    timeout_ms: u64,
    timeout_us: u64,
    memory_mb: u32,
    size_bytes: u64,
    /// Budget kills in a row that put it in quarantine, if it is quarantined.
    #[serde(skip_serializing_if = "Option::is_none")]
    quarantined_after_kills: Option<u32>,
}

impl<'a> FunctionView<'a> {
    fn with_quarantine(self, node: &Node) -> Self {
        Self {
            quarantined_after_kills: node.quarantined(self.name),
            ..self
        }
    }
}

impl<'a> From<&'a FunctionRecord> for FunctionView<'a> {
    fn from(r: &'a FunctionRecord) -> Self {
        Self {
            name: r.name.as_str(),
            sha256: &r.sha256,
            kind: r.kind.as_str(),
            timeout_ms: r.limits.timeout_ms(),
            timeout_us: r.limits.timeout_us,
            memory_mb: r.limits.memory_mb,
            size_bytes: r.size_bytes,
            quarantined_after_kills: None,
        }
    }
}

async fn deploy(
    State(gw): State<Gateway>,
    Path(name): Path<String>,
    params: Result<Query<DeployParams>, axum::extract::rejection::QueryRejection>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let name = FunctionName::new(name)?;
    let Query(params) = params.map_err(|e| ApiError::BadRequest(e.body_text()))?;
    let timeout = Timeout::from_params(params.timeout_ms, params.timeout_us)?;
    let limits = Limits::new(timeout, params.memory_mb)?;
    let wasm = read_body(&headers, body, gw.config.max_module_bytes, "module").await?;
    let record = gw.node.deploy(name, wasm, limits).await?;
    Ok((StatusCode::CREATED, axum::Json(FunctionView::from(&record))).into_response())
}

async fn list_functions(State(gw): State<Gateway>) -> Response {
    let records = gw.node.list();
    let functions: Vec<FunctionView<'_>> = records
        .iter()
        .map(|r| FunctionView::from(r).with_quarantine(&gw.node))
        .collect();
    axum::Json(serde_json::json!({ "functions": functions })).into_response()
}

async fn get_function(
    State(gw): State<Gateway>,
    Path(name): Path<String>,
) -> Result<Response, ApiError> {
    let record = gw.node.get(&name).ok_or(ApiError::FunctionNotFound(name))?;
    Ok(axum::Json(FunctionView::from(&record).with_quarantine(&gw.node)).into_response())
}

async fn release_function(
    State(gw): State<Gateway>,
    Path(name): Path<String>,
) -> Result<Response, ApiError> {
    let released = gw.node.release(&name)?;
    Ok(axum::Json(serde_json::json!({ "name": name, "released": released })).into_response())
}

async fn remove_function(
    State(gw): State<Gateway>,
    Path(name): Path<String>,
) -> Result<Response, ApiError> {
    let record = gw.node.remove(&name).await?;
    Ok(axum::Json(FunctionView::from(&record)).into_response())
}

async fn invoke(
    State(gw): State<Gateway>,
    Path(name): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let input = read_body(&headers, body, gw.config.max_body_bytes, "request body").await?;
    let output = gw.node.invoke(&name, input).await?;
    Ok(([(header::CONTENT_TYPE, "application/octet-stream")], output).into_response())
}

async fn node_status(State(gw): State<Gateway>) -> Response {
    axum::Json(gw.node.schedule()).into_response()
}

async fn not_found() -> ApiError {
    ApiError::NoRoute
}

/// How much of an oversized body is read and thrown away before answering 413. A server that
/// answers and closes while the client is still sending makes the client see a reset connection
/// instead of the 413; draining a bounded amount lets ordinary clients read the answer.
const DRAIN_BYTES: u64 = 64 << 20;

/// Reads a body of at most `limit` bytes, without copying when it arrives in one piece.
async fn read_body(
    headers: &HeaderMap,
    mut body: Body,
    limit: usize,
    what: &'static str,
) -> Result<Bytes, ApiError> {
    let too_large = ApiError::TooLarge { what, limit };
    let limit = limit as u64;
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|len| len > limit + DRAIN_BYTES) {
        return Err(too_large);
    }
    let mut chunks: Vec<Bytes> = Vec::new();
    let mut seen: u64 = 0;
    while let Some(frame) = body.frame().await {
        let frame =
            frame.map_err(|e| ApiError::BadRequest(format!("cannot read the {what}: {e}")))?;
        let Ok(data) = frame.into_data() else {
            continue;
        };
        seen += data.len() as u64;
        if seen <= limit {
            chunks.push(data);
        } else if seen > limit + DRAIN_BYTES {
            break;
        }
    }
    if seen > limit {
        return Err(too_large);
    }
    Ok(match chunks.len() {
        0 => Bytes::new(),
        1 => chunks.pop().expect("one chunk"),
        _ => chunks.concat().into(),
    })
}
