//! `GET /v1/functions/{name}/logs`: a function's log as NDJSON, one entry per line, oldest
//! first. `tail=N` gives the newest N entries; `follow=true` keeps the response open and streams
//! entries as calls write them, until the client leaves or the node stops.
//!
//! In a cluster the node asked merges its peers' logs of the function into its own: it asks
//! every peer with `local=true` (a peer asked so answers with its own entries only, and names
//! the last sequence number it wrote in `mote-logs-last-seq`) and orders the entries by time.
//! Following, it then asks each peer to follow on from that number (`after=SEQ`) and passes
//! their entries on as they come. A peer that does not answer is skipped and named: in a
//! `mote-logs-missing` header and in an entry of stream `missing`.
//!
//! Peers ask each other at `GET /v1/internal/logs/{name}` (the cluster secret's route), which
//! answers as `local=true` does. A followed log ends when the node stops, when the client
//! leaves, or when the token that opened it is revoked.
//!
//! Each entry: `seq` (its number in its node's log of the function), `time` (RFC 3339) and
//! `unix_ms`, `node`, `call` (the id the call's response named in `mote-call-id`), `stream`
//! (`log`, `stdout`, `stderr`, `outcome` for why a call failed), `outcome` (`ok`, `trap`,
//! `timeout`, `memory_limit`, ...) and `text`.

use crate::error::ApiError;
use crate::state::Gateway;
use axum::body::Body;
use axum::extract::{Extension, Path, Query, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use futures_util::stream::{self, BoxStream, StreamExt};
use http_body_util::BodyExt;
use mote_access::{Holder, Scope};
use mote_api::LogLine;
use mote_cluster::NodeName;
use mote_node::{LogEntry, LogFollower};
use mote_wire::LogsFrom;
use serde::Deserialize;
use std::convert::Infallible;
use std::future::Future;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The header that names the call a response answers, as the function's log entries name it.
pub const MOTE_CALL_ID: &str = "mote-call-id";
/// The header that names the peers whose entries a merged log lacks, and why.
pub const LOGS_MISSING: &str = "mote-logs-missing";
/// The header of a node's own log (`local=true`): the last sequence number it wrote.
const LAST_SEQ: &str = "mote-logs-last-seq";
/// How long a peer may take to answer before its entries are left out.
const PEER_WAIT: Duration = Duration::from_secs(5);
/// The media type of the answer.
const NDJSON: &str = "application/x-ndjson";

/// The query of a logs request.
#[derive(Debug, Deserialize)]
pub(crate) struct LogsParams {
    /// The newest entries to give; all by default.
    tail: Option<usize>,
    /// Keep streaming entries as they are written.
    #[serde(default)]
    follow: bool,
    /// This node's entries only (what a peer asks).
    #[serde(default)]
    local: bool,
    /// Only entries numbered above this (a peer that read up to it and follows on).
    after: Option<u64>,
}

/// `entry`, from `node`'s log, as the API shows it.
fn wire_entry(node: &str, entry: LogEntry) -> LogLine {
    LogLine {
        seq: entry.seq,
        time: rfc3339(entry.unix_ms),
        unix_ms: entry.unix_ms,
        node: node.to_owned(),
        call: entry.call.render(node),
        stream: entry.stream.as_str().to_owned(),
        outcome: entry.outcome.as_str().to_owned(),
        text: entry.text,
    }
}

/// An entry that says `node`'s entries are missing, and why.
fn missing_entry(node: &str, why: String) -> LogLine {
    let unix_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or_default();
    LogLine {
        seq: 0,
        time: rfc3339(unix_ms),
        unix_ms,
        node: node.to_owned(),
        call: String::new(),
        stream: "missing".into(),
        outcome: String::new(),
        text: why,
    }
}

/// Appends `entry` to `out` as one NDJSON line.
fn line(entry: &LogLine, out: &mut Vec<u8>) {
    serde_json::to_writer(&mut *out, entry).expect("an entry serializes");
    out.push(b'\n');
}

fn rfc3339(unix_ms: u64) -> String {
    humantime::format_rfc3339_millis(UNIX_EPOCH + Duration::from_millis(unix_ms)).to_string()
}

fn ndjson(entries: &[LogLine]) -> Vec<u8> {
    let mut out = Vec::new();
    for entry in entries {
        line(entry, &mut out);
    }
    out
}

/// `GET /v1/functions/{name}/logs?tail=N&follow=true`.
pub(crate) async fn function_logs(
    State(gw): State<Gateway>,
    Path(name): Path<String>,
    params: Result<Query<LogsParams>, axum::extract::rejection::QueryRejection>,
    holder: Option<Extension<Holder>>,
) -> Result<Response, ApiError> {
    let Query(params) = params.map_err(|e| ApiError::BadRequest(e.body_text()))?;
    logs(gw, name, params, holder.map(|Extension(h)| h)).await
}

/// `GET /v1/internal/logs/{name}?tail=N&follow=true&after=SEQ`: a peer asking for this node's
/// own entries.
pub(crate) async fn peer_logs(
    State(gw): State<Gateway>,
    Path(name): Path<String>,
    params: Result<Query<LogsParams>, axum::extract::rejection::QueryRejection>,
) -> Result<Response, ApiError> {
    let Query(params) = params.map_err(|e| ApiError::BadRequest(e.body_text()))?;
    let params = LogsParams {
        local: true,
        ..params
    };
    logs(gw, name, params, None).await
}

async fn logs(
    gw: Gateway,
    name: String,
    params: LogsParams,
    holder: Option<Holder>,
) -> Result<Response, ApiError> {
    let ring = match gw.node.get(&name) {
        Some(_) => gw.node.logs().get(&name),
        None => None,
    };
    let Some(ring) = ring else {
        return Err(ApiError::FunctionNotFound(name));
    };
    let me = gw.peers.name().to_owned();
    let tail = params.tail.unwrap_or(usize::MAX);
    let (mine, last_seq) = match params.after {
        Some(seq) => ring.after(seq),
        None => ring.tail(tail),
    };
    let mut entries: Vec<LogLine> = mine.into_iter().map(|e| wire_entry(&me, e)).collect();
    let follower = params.follow.then(|| ring.follow(last_seq));
    drop(ring);
    if params.local {
        let body = match follower {
            None => Body::from(ndjson(&entries)),
            Some(follower) => {
                let live = local_stream(me, follower);
                let history = stream::once(async move { Ok(Bytes::from(ndjson(&entries))) });
                Body::from_stream(history.chain(live).take_until(ends(&gw, holder)))
            }
        };
        let mut response = answer(body);
        response
            .headers_mut()
            .insert(LAST_SEQ, HeaderValue::from(last_seq));
        return Ok(response);
    }
    let (theirs, mut missing, followed) = peers_logs(&gw, &name, tail).await;
    entries.extend(theirs);
    entries.sort_by(|a, b| (a.unix_ms, &a.node, a.seq).cmp(&(b.unix_ms, &b.node, b.seq)));
    let keep = entries.len().saturating_sub(tail);
    entries.drain(..keep);
    let missing_names: Vec<String> = missing
        .iter()
        .map(|m| format!("{} ({})", m.node, m.text))
        .collect();
    entries.append(&mut missing);
    let body = match follower {
        None => Body::from(ndjson(&entries)),
        Some(follower) => {
            let mut sources: Vec<BoxStream<'static, Result<Bytes, Infallible>>> =
                vec![local_stream(me, follower)];
            let from = |peer: &NodeName| {
                let (_, seq) = followed.iter().find(|(p, _)| p == peer)?;
                Some(LogsFrom::FollowAfter(*seq))
            };
            for (peer, answered) in gw.peers.fetch_logs(&name, from, PEER_WAIT).await {
                sources.push(peer_stream(peer.to_string(), answered));
            }
            let history = stream::once(async move { Ok(Bytes::from(ndjson(&entries))) });
            let live = stream::select_all(sources);
            Body::from_stream(history.chain(live).take_until(ends(&gw, holder)))
        }
    };
    let mut response = answer(body);
    if !missing_names.is_empty()
        && let Ok(value) = HeaderValue::from_str(&missing_names.join("; "))
    {
        response.headers_mut().insert(LOGS_MISSING, value);
    }
    Ok(response)
}

/// The newest `tail` entries of every peer's log of `name`, who did not give theirs (as
/// `missing` entries), and where to follow on from in the logs of those who did.
async fn peers_logs(
    gw: &Gateway,
    name: &str,
    tail: usize,
) -> (Vec<LogLine>, Vec<LogLine>, Vec<(NodeName, u64)>) {
    let (mut entries, mut missing, mut followed) = (Vec::new(), Vec::new(), Vec::new());
    for (peer, answered) in gw
        .peers
        .fetch_logs(name, |_| Some(LogsFrom::Tail(tail)), PEER_WAIT)
        .await
    {
        match read_entries(answered).await {
            Ok((theirs, seq)) => {
                entries.extend(theirs);
                followed.push((peer, seq));
            }
            Err(why) => missing.push(missing_entry(peer.as_str(), why)),
        }
    }
    (entries, missing, followed)
}

/// Resolves when a followed log must end: the node stops, or the token that opened it no
/// longer allows reading.
fn ends(gw: &Gateway, holder: Option<Holder>) -> impl Future<Output = ()> + Send + 'static + use<> {
    let stopped = gw.node.logs().stopped();
    let revoked = crate::access::revocation(&gw.access, holder, Scope::Read);
    async move {
        tokio::select! {
            () = stopped => {}
            () = revoked => {}
        }
    }
}

fn answer(body: Body) -> Response {
    (StatusCode::OK, [(header::CONTENT_TYPE, NDJSON)], body).into_response()
}

/// This node's new entries as they are written.
fn local_stream(
    me: String,
    follower: LogFollower,
) -> BoxStream<'static, Result<Bytes, Infallible>> {
    stream::unfold(follower, move |mut follower| {
        let me = me.clone();
        async move {
            let entries = follower.next().await?;
            let mut out = Vec::new();
            for entry in entries {
                line(&wire_entry(&me, entry), &mut out);
            }
            Some((Ok(Bytes::from(out)), follower))
        }
    })
    .boxed()
}

/// A peer's entries as it streams them, a whole line at a time (so that the lines of two peers
/// never interleave), then an entry that says its stream ended, and why.
fn peer_stream(
    peer: String,
    answered: Result<hyper::Response<hyper::body::Incoming>, mote_peers::ForwardError>,
) -> BoxStream<'static, Result<Bytes, Infallible>> {
    let notice = |peer: &str, why: String| {
        let mut out = Vec::new();
        line(&missing_entry(peer, why), &mut out);
        Ok(Bytes::from(out))
    };
    let response = match answered {
        Ok(response) if response.status().is_success() => response,
        Ok(response) => {
            let why = format!("it answered {} to following its log", response.status());
            return stream::once(async move { notice(&peer, why) }).boxed();
        }
        Err(e) => return stream::once(async move { notice(&peer, e.to_string()) }).boxed(),
    };
    let body = response.into_body().into_data_stream();
    stream::unfold(
        (Some(body), Vec::<u8>::new(), peer),
        move |(body, mut pending, peer)| async move {
            let mut body = body?;
            loop {
                match body.next().await {
                    Some(Ok(data)) => {
                        pending.extend_from_slice(&data);
                        if let Some(end) = pending.iter().rposition(|b| *b == b'\n') {
                            let lines: Vec<u8> = pending.drain(..=end).collect();
                            return Some((Ok(Bytes::from(lines)), (Some(body), pending, peer)));
                        }
                    }
                    Some(Err(e)) => {
                        let why = format!("its log stream failed: {e}");
                        return Some((notice(&peer, why), (None, pending, peer)));
                    }
                    None => {
                        let why =
                            "it ended its log stream (it stopped, or the function is gone there)"
                                .to_owned();
                        return Some((notice(&peer, why), (None, pending, peer)));
                    }
                }
            }
        },
    )
    .boxed()
}

/// A peer's entries and the last sequence number it wrote, or why there are none.
async fn read_entries(
    answered: Result<hyper::Response<hyper::body::Incoming>, mote_peers::ForwardError>,
) -> Result<(Vec<LogLine>, u64), String> {
    let response = answered.map_err(|e| e.to_string())?;
    let status = response.status();
    let seq = response
        .headers()
        .get(LAST_SEQ)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok());
    let body = tokio::time::timeout(PEER_WAIT, response.into_body().collect())
        .await
        .map_err(|_| format!("its log did not arrive within {} ms", PEER_WAIT.as_millis()))?
        .map_err(|e| format!("its log was cut short: {e}"))?
        .to_bytes();
    if !status.is_success() {
        let text = String::from_utf8_lossy(&body);
        return Err(format!("it answered {status}: {}", text.trim()));
    }
    let Some(seq) = seq else {
        return Err(format!("its answer lacks {LAST_SEQ}: is it an older mote?"));
    };
    let entries = body
        .split(|b| *b == b'\n')
        .filter(|line| !line.is_empty())
        .map(serde_json::from_slice)
        .collect::<Result<Vec<LogLine>, _>>()
        .map_err(|e| format!("its log is not NDJSON entries: {e}"))?;
    Ok((entries, seq))
}
