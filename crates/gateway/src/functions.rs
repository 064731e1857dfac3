//! Functions: `PUT /v1/functions/{name}` deploys one, `GET /v1/functions[/{name}]` shows them,
//! `DELETE` removes one and `POST .../release` lets a quarantined one's calls in again.

use crate::body::read_body;
use crate::error::ApiError;
use crate::state::Gateway;
use axum::body::Body;
use axum::extract::{Extension, Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use mote_api::{DeployParams, FunctionInfo, FunctionList, Released};
use mote_node::Node;
use mote_types::{
    DeployOptions, FunctionName, FunctionRecord, HttpSettings, Limits, OutboundHost, Timeout,
};

/// The HTTP settings a deploy's parameters give; empty for any function without them.
fn http_settings(params: &DeployParams) -> Result<HttpSettings, ApiError> {
    let bad = |e: &dyn std::fmt::Display| ApiError::BadRequest(e.to_string());
    Ok(HttpSettings {
        route: match &params.route {
            Some(route) => Some(mote_types::Route::parse(route).map_err(|e| bad(&e))?),
            None => None,
        },
        allow_outbound: match &params.allow_outbound {
            Some(list) => OutboundHost::parse_list(list).map_err(|e| bad(&e))?,
            None => Vec::new(),
        },
    })
}

/// `record` as the API shows it, with its quarantine.
fn with_quarantine(record: &FunctionRecord, node: &Node) -> FunctionInfo {
    FunctionInfo {
        quarantined_after_kills: node.quarantined(record.name.as_str()),
        ..FunctionInfo::from(record)
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
        http: http_settings(&params)?,
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
    Ok((StatusCode::CREATED, axum::Json(FunctionInfo::from(&record))).into_response())
}

pub(crate) async fn list_functions(State(gw): State<Gateway>) -> Response {
    let records = gw.node.list();
    let functions = records
        .iter()
        .map(|r| with_quarantine(r, &gw.node))
        .collect();
    axum::Json(FunctionList { functions }).into_response()
}

pub(crate) async fn get_function(
    State(gw): State<Gateway>,
    Path(name): Path<String>,
) -> Result<Response, ApiError> {
    let record = gw.node.get(&name).ok_or(ApiError::FunctionNotFound(name))?;
    Ok(axum::Json(with_quarantine(&record, &gw.node)).into_response())
}

pub(crate) async fn release_function(
    State(gw): State<Gateway>,
    Path(name): Path<String>,
) -> Result<Response, ApiError> {
    let released = gw.node.release(&name)?;
    Ok(axum::Json(Released { name, released }).into_response())
}

pub(crate) async fn remove_function(
    State(gw): State<Gateway>,
    Path(name): Path<String>,
) -> Result<Response, ApiError> {
    let record = gw.node.remove(&name).await?;
    Ok(axum::Json(FunctionInfo::from(&record)).into_response())
}
