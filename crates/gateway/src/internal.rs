//! The routes between the nodes of a cluster, which the gate opens only with the cluster
//! secret (`mote_access::need`): a module's bytes for a peer that adopted its record, a joining
//! node's store replica, an idle peer's pull of waiting calls, a job's worker (prepared, run, sent messages and reports, stopped) and
//! a node's own log of a function. Kept together so that what nodes say to each other has one
//! place.

use crate::body::json_body;
use crate::error::ApiError;
use crate::logs;
use crate::state::Gateway;
use axum::Router;
use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use bytes::Bytes;
use mote_wire::{Pull, Pulled, StorePeer, route};

/// The internal routes, for the API's router to merge.
pub(crate) fn routes() -> Router<Gateway> {
    Router::new()
        .route(route::MODULE, get(module))
        .route(route::STORE_PEERS, post(store_peer))
        .route(route::PULL, post(pull))
        .route(route::JOB, put(start_worker).delete(stop_worker))
        .route(
            route::JOB_MESSAGES,
            // Scatter pieces can be large (a PageRank step's contributions to one worker).
            post(job_message).layer(DefaultBodyLimit::max(1 << 30)),
        )
        .route(route::JOB_RUN, post(run_worker))
        .route(route::JOB_REPORTS, post(job_report))
        .route(route::LOGS, get(logs::peer_logs))
}

async fn store_peer(
    State(gw): State<Gateway>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let peer: StorePeer = json_body(&headers, &body, "store peer ({\"name\", \"url\"})")?;
    match gw.peers.introduced(&peer.name, &peer.url) {
        true => Ok(StatusCode::NO_CONTENT.into_response()),
        false => Err(ApiError::BadRequest(
            "this node's store replica does not peer (it uses --store, or was started without --store-peer-listen)".into(),
        )),
    }
}

/// A peer with a core free asks for calls that wait here; the answer says how many this node
/// forwards to it.
async fn pull(
    State(gw): State<Gateway>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let Some(by) = headers
        .get(mote_wire::FORWARDED_BY)
        .and_then(|v| v.to_str().ok())
    else {
        return Err(ApiError::BadRequest(format!(
            "a pull names the node that asks in the `{}` header",
            mote_wire::FORWARDED_BY
        )));
    };
    let pull: Pull = json_body(&headers, &body, "pull ({\"calls\"})")?;
    let moved = gw.peers.hand_over(by, pull.calls);
    Ok(axum::Json(Pulled { moved }).into_response())
}

async fn module(
    State(gw): State<Gateway>,
    Path(sha256): Path<String>,
) -> Result<Response, ApiError> {
    let well_formed = sha256.len() == 64
        && sha256
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    if !well_formed {
        return Err(ApiError::BadRequest(format!(
            "`{sha256}` is not a module's name: a module is named by its sha256, 64 lowercase hex digits"
        )));
    }
    let bytes = gw
        .node
        .module(&sha256)
        .ok_or(ApiError::ModuleNotHere(sha256))?;
    Ok(([(header::CONTENT_TYPE, "application/wasm")], bytes).into_response())
}

async fn start_worker(
    State(gw): State<Gateway>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<StatusCode, ApiError> {
    let spec: mote_jobs::message::JobSpec = json_body(&headers, &body, "job spec")?;
    if spec.id != id {
        return Err(ApiError::BadRequest(format!(
            "the spec is for job {}, the path names {id}",
            spec.id
        )));
    }
    gw.jobs.start_worker(spec).await?;
    Ok(StatusCode::CREATED)
}

async fn run_worker(
    State(gw): State<Gateway>,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    gw.jobs.run_worker(&id)?;
    Ok(StatusCode::NO_CONTENT)
}

async fn stop_worker(
    State(gw): State<Gateway>,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    gw.jobs.stop_worker(&id).await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn job_message(
    State(gw): State<Gateway>,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<StatusCode, ApiError> {
    let message = mote_jobs::message::decode_envelope(&body)
        .map_err(|e| ApiError::BadRequest(e.to_string()))?;
    gw.jobs.deliver(&id, message).await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn job_report(
    State(gw): State<Gateway>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<StatusCode, ApiError> {
    let report: mote_jobs::message::Report = json_body(&headers, &body, "job report")?;
    gw.jobs.report(&id, report).await?;
    Ok(StatusCode::NO_CONTENT)
}
