//! Functions: `PUT /v1/functions/{name}` deploys one, `GET /v1/functions[/{name}]` shows them,
//! `DELETE` removes one and `POST .../release` lets a quarantined one's calls in again.

use crate::body::read_body;
use crate::error::ApiError;
use crate::state::Gateway;
use axum::body::Body;
use axum::extract::{Extension, Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use mote_node::Node;
use mote_types::{
    DeployOptions, FunctionName, FunctionRecord, HttpSettings, Limits, OutboundHost, Timeout,
};
use serde::{Deserialize, Serialize};

/// Query parameters of a deploy.
#[derive(Debug, Deserialize)]
pub(crate) struct DeployParams {
    timeout_ms: Option<u64>,
    timeout_us: Option<u64>,
    memory_mb: Option<u32>,
    route: Option<String>,
    allow_outbound: Option<String>,
    /// Callable without a token.
    #[serde(default)]
    public: bool,
}

impl DeployParams {
    /// The HTTP settings the parameters give; empty for any function without them.
    fn http(&self) -> Result<HttpSettings, ApiError> {
        let bad = |e: &dyn std::fmt::Display| ApiError::BadRequest(e.to_string());
        Ok(HttpSettings {
            route: match &self.route {
                Some(route) => Some(mote_types::Route::parse(route).map_err(|e| bad(&e))?),
                None => None,
            },
            allow_outbound: match &self.allow_outbound {
                Some(list) => OutboundHost::parse_list(list).map_err(|e| bad(&e))?,
                None => Vec::new(),
            },
        })
    }
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
    /// A component's route (null if none): shown for every function, so that what a function
    /// exposes is never left out.
    route: Option<&'a mote_types::Route>,
    /// The hosts a component may call (empty if none).
    allow_outbound: &'a [OutboundHost],
    /// Callable without a token.
    public: bool,
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
            route: r.http.route.as_ref(),
            allow_outbound: &r.http.allow_outbound,
            public: r.public,
            quarantined_after_kills: None,
        }
    }
}

pub(crate) async fn deploy(
    State(gw): State<Gateway>,
    Path(name): Path<String>,
    params: Result<Query<DeployParams>, axum::extract::rejection::QueryRejection>,
    holder: Option<Extension<mote_access::Holder>>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let name = FunctionName::new(name)?;
    let Query(params) = params.map_err(|e| ApiError::BadRequest(e.body_text()))?;
    let timeout = Timeout::from_params(params.timeout_ms, params.timeout_us)?;
    let limits = Limits::new(timeout, params.memory_mb)?;
    // The gate took the token off the request and left who presented it.
    let admin = !gw.access.tokens_required
        || holder.is_some_and(|Extension(h)| h.scopes.allows(mote_access::Scope::Admin));
    let options = DeployOptions {
        http: params.http()?,
        public: params.public,
        grantor: match admin {
            true => mote_types::Grantor::Admin,
            false => mote_types::Grantor::Deployer,
        },
    };
    let wasm = read_body(&headers, body, gw.config.max_module_bytes, "module").await?;
    let record = gw
        .node
        .deploy_with(name, wasm.clone(), limits, options)
        .await?;
    gw.peers.keep_module(&record.sha256, wasm).await;
    Ok((StatusCode::CREATED, axum::Json(FunctionView::from(&record))).into_response())
}

pub(crate) async fn list_functions(State(gw): State<Gateway>) -> Response {
    let records = gw.node.list();
    let functions: Vec<FunctionView<'_>> = records
        .iter()
        .map(|r| FunctionView::from(r).with_quarantine(&gw.node))
        .collect();
    axum::Json(serde_json::json!({ "functions": functions })).into_response()
}

pub(crate) async fn get_function(
    State(gw): State<Gateway>,
    Path(name): Path<String>,
) -> Result<Response, ApiError> {
    let record = gw.node.get(&name).ok_or(ApiError::FunctionNotFound(name))?;
    Ok(axum::Json(FunctionView::from(&record).with_quarantine(&gw.node)).into_response())
}

pub(crate) async fn release_function(
    State(gw): State<Gateway>,
    Path(name): Path<String>,
) -> Result<Response, ApiError> {
    let released = gw.node.release(&name)?;
    Ok(axum::Json(serde_json::json!({ "name": name, "released": released })).into_response())
}

pub(crate) async fn remove_function(
    State(gw): State<Gateway>,
    Path(name): Path<String>,
) -> Result<Response, ApiError> {
    let record = gw.node.remove(&name).await?;
    Ok(axum::Json(FunctionView::from(&record)).into_response())
}
