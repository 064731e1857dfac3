//! Jobs as clients see them: `POST /v1/jobs` starts one with this node as its controller,
//! `GET /v1/jobs[/{id}]` shows them, `DELETE /v1/jobs/{id}` cancels one.

use crate::body::json_body;
use crate::error::ApiError;
use crate::state::Gateway;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use mote_job_service::RunRequest;

pub(crate) async fn run_job(
    State(gw): State<Gateway>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let request: RunRequest =
        json_body(&headers, &body, "job request ({\"function\": NAME, ...})")?;
    let status = gw.jobs.run(request).await?;
    Ok((StatusCode::CREATED, axum::Json(status)).into_response())
}

pub(crate) async fn list_jobs(State(gw): State<Gateway>) -> Response {
    axum::Json(gw.jobs.list()).into_response()
}

pub(crate) async fn job_status(
    State(gw): State<Gateway>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    Ok(axum::Json(gw.jobs.status(&id).await?).into_response())
}

pub(crate) async fn cancel_job(
    State(gw): State<Gateway>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    Ok(axum::Json(gw.jobs.cancel(&id).await?).into_response())
}
