//! `/v1/tokens`: making, listing and revoking tokens (the `admin` scope). A new token is in the
//! response to its creation and nowhere else; the store keeps only its hash.

use crate::body::json_body;
use crate::error::ApiError;
use crate::state::Gateway;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use mote_access::{Scope, TokenName, TokenRecord};
use mote_api::{CreateToken, Revoked, TokenInfo, TokenList};

/// `record` as the API lists it: without the token.
fn token_info(record: &TokenRecord) -> TokenInfo {
    TokenInfo {
        name: record.name.as_str().to_owned(),
        scopes: record
            .scopes
            .iter()
            .map(|s| s.as_str().to_owned())
            .collect(),
        created_ms: record.created_ms,
        token: None,
    }
}

pub(crate) async fn create(
    State(gw): State<Gateway>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let request: CreateToken = json_body(
        &headers,
        &body,
        "token request ({\"name\": NAME, \"scopes\": [\"invoke\", ...]})",
    )?;
    let name = TokenName::new(request.name).map_err(|e| ApiError::BadRequest(e.to_string()))?;
    let scopes = request
        .scopes
        .iter()
        .map(|s| s.parse::<Scope>())
        .collect::<Result<_, _>>()
        .map_err(|e| ApiError::BadRequest(e.to_string()))?;
    let (token, record) = gw.tokens.create(name, scopes, request.replace).await?;
    // This node takes the token at once; the others when their watch sees the record. Left
    // to the watch, a client that used the token on this node at once could be refused.
    gw.access.grants.put(record.clone());
    tracing::info!(token = %record.name, scopes = ?record.scopes, "a token was made");
    let view = TokenInfo {
        token: Some(token.expose().to_owned()),
        ..token_info(&record)
    };
    Ok((StatusCode::CREATED, axum::Json(view)).into_response())
}

pub(crate) async fn list(State(gw): State<Gateway>) -> Result<Response, ApiError> {
    let records = gw.tokens.list().await?;
    let tokens = records.iter().map(token_info).collect();
    Ok(axum::Json(TokenList { tokens }).into_response())
}

pub(crate) async fn revoke(
    State(gw): State<Gateway>,
    Path(name): Path<String>,
) -> Result<Response, ApiError> {
    gw.tokens.revoke(&name).await?;
    // This node stops taking it at once, before its watch sees the delete.
    gw.access.grants.remove(&name);
    tracing::info!(token = %name, "a token was revoked");
    Ok(axum::Json(Revoked {
        name,
        revoked: true,
    })
    .into_response())
}
