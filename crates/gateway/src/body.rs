//! Reading request bodies: bounded in size ([`read_body`]) or parsed as declared JSON
//! ([`json_body`]), each failure an [`ApiError`] that says what is wrong.

use crate::error::ApiError;
use axum::body::Body;
use axum::http::{HeaderMap, header};
use bytes::Bytes;
use http_body_util::BodyExt;

/// A JSON body, or an error that says what is wrong with it: 415 unless it is declared
/// `application/json` (a web page can send other types without asking the server first, never
/// this one), 400 if it does not parse.
pub(crate) fn json_body<T: serde::de::DeserializeOwned>(
    headers: &HeaderMap,
    body: &[u8],
    what: &str,
) -> Result<T, ApiError> {
    let declared = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.split(';').next().unwrap_or_default().trim());
    if !declared.is_some_and(|t| t.eq_ignore_ascii_case("application/json")) {
        return Err(ApiError::UnsupportedMediaType(format!(
            "the body must be a {what} sent as `Content-Type: application/json`{}",
            match declared {
                Some(t) => format!(", not `{t}`"),
                None => String::new(),
            }
        )));
    }
    serde_json::from_slice(body)
        .map_err(|e| ApiError::BadRequest(format!("the body is not a valid {what}: {e}")))
}

/// How much of an oversized body is read and thrown away before answering 413. A server that
/// answers and closes while the client is still sending makes the client see a reset connection
/// instead of the 413; draining a bounded amount lets ordinary clients read the answer.
const DRAIN_BYTES: u64 = 64 << 20;

/// Reads a body of at most `limit` bytes, without copying when it arrives in one piece.
pub(crate) async fn read_body(
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
