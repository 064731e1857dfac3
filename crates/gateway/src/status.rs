//! What the node and its cluster say about themselves: `GET /healthz`, `GET /metrics`,
//! `GET /v1/node` and `GET /v1/cluster`.

use crate::state::Gateway;
use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};

/// 200 while the node serves; the text says whether its state store answers.
pub(crate) async fn healthz(State(gw): State<Gateway>) -> String {
    match gw.peers.store_trouble() {
        None => "ok\n".into(),
        Some(trouble) => format!("degraded: {trouble}\n"),
    }
}

pub(crate) async fn metrics(State(gw): State<Gateway>) -> Response {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        gw.node
            .metrics()
            .encode_with(|out| gw.peers.encode_metrics(out)),
    )
        .into_response()
}

pub(crate) async fn node_status(State(gw): State<Gateway>) -> Response {
    axum::Json(gw.node.schedule()).into_response()
}

pub(crate) async fn cluster(State(gw): State<Gateway>) -> Response {
    axum::Json(gw.peers.view()).into_response()
}
