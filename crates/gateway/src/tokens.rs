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
use serde::{Deserialize, Serialize};

/// `POST /v1/tokens`'s body.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CreateToken {
    name: String,
    scopes: Vec<String>,
    /// Replace a token of the same name (which stops working) instead of refusing.
    #[serde(default)]
    replace: bool,
}

/// A token as the API lists it: never the token itself.
#[derive(Serialize)]
struct TokenView<'a> {
    name: &'a str,
    scopes: &'a [Scope],
    created_ms: u64,
    /// Only in the response that made it.
    #[serde(skip_serializing_if = "Option::is_none")]
    token: Option<&'a str>,
}

impl<'a> TokenView<'a> {
    fn of(record: &'a TokenRecord) -> Self {
        Self {
            name: record.name.as_str(),
            scopes: &record.scopes,
            created_ms: record.created_ms,
            token: None,
        }
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
    tracing::info!(token = %record.name, scopes = ?record.scopes, "a token was made");
    let view = TokenView {
        token: Some(token.expose()),
        ..TokenView::of(&record)
    };
    Ok((StatusCode::CREATED, axum::Json(view)).into_response())
}

pub(crate) async fn list(State(gw): State<Gateway>) -> Result<Response, ApiError> {
    let records = gw.tokens.list().await?;
    let tokens: Vec<TokenView<'_>> = records.iter().map(TokenView::of).collect();
    Ok(axum::Json(serde_json::json!({ "tokens": tokens })).into_response())
}

pub(crate) async fn revoke(
    State(gw): State<Gateway>,
    Path(name): Path<String>,
) -> Result<Response, ApiError> {
    gw.tokens.revoke(&name).await?;
    tracing::info!(token = %name, "a token was revoked");
    Ok(axum::Json(serde_json::json!({ "name": name, "revoked": true })).into_response())
}
