//! The live dashboard: its page (`/ui`, its files compiled into the binary, so an isolated edge
//! box serves it without reaching anything else), `GET /v1/dashboard` (one [`Snapshot`] of what
//! this node knows) and `GET /v1/dashboard/events` (a snapshot every second as server-sent
//! events).
//!
//! The page is served only on a listener of its own (`mote up --ui-listen`, [`own_router`]),
//! never on the API's, because the API's origin also serves tenants' `wasi:http` components: a
//! script a tenant serves there would share the page's origin, and with it the token the page
//! keeps in its storage. Only the page, its files and its data are served on the dashboard's
//! listener, so no tenant's code ever runs at its origin. The API keeps the data routes for
//! programs, and its `/ui` sends browsers to the dashboard's listener ([`DashboardAt`],
//! [`api_router`]).
//!
//! A snapshot is assembled from what the parts already keep: the node's schedule, per-function
//! counters ([`mote_node::CallStats`]) and executor activity, the cluster view and the calls
//! forwarded to each peer, the store replicas' lag, and the jobs. Rates and percentiles are over
//! a window: [`Samples`] keeps the cumulative counters read in the last [`WINDOW`], and a
//! snapshot differences the newest reading against the oldest, so nothing on the call path knows
//! about windows.

use crate::ApiError;
use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use futures_util::StreamExt;
use mote_job_service::{JobService, JobStatus};
use mote_node::{ClassSnapshot, ExecutorSample, LatencyCounts, Node, Outcome};
use mote_peers::{Forwarded, MemberView, Peers, ReplicaLag, StoreView};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// How far back rates and percentiles look.
pub const WINDOW: Duration = Duration::from_secs(10);
/// How often the event stream sends a snapshot.
const EVERY: Duration = Duration::from_secs(1);
/// Readings closer together than this are not both kept (several pages may be open).
const MIN_SPACING: Duration = Duration::from_millis(500);
/// The most jobs a snapshot lists, the latest.
const MAX_JOBS: usize = 20;

/// A file of the page.
struct Asset {
    path: &'static str,
    content_type: &'static str,
    body: &'static [u8],
}

const ASSETS: [Asset; 3] = [
    Asset {
        path: "index.html",
        content_type: "text/html; charset=utf-8",
        body: include_bytes!("../ui/index.html"),
    },
    Asset {
        path: "app.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_bytes!("../ui/app.js"),
    },
    Asset {
        path: "style.css",
        content_type: "text/css; charset=utf-8",
        body: include_bytes!("../ui/style.css"),
    },
];

/// The page may load only its own files, talk only to its own origin (the dashboard's listener),
/// and be framed by nobody.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

#[derive(Clone)]
struct Dashboard {
    node: Arc<Node>,
    peers: Arc<Peers>,
    jobs: Arc<JobService>,
    samples: Arc<Samples>,
    access: Arc<crate::Access>,
}

impl Dashboard {
    /// The dashboard's state over `node`, a member of `peers` running `jobs`, guarded by
    /// `access`.
    fn new(
        node: Arc<Node>,
        peers: Arc<Peers>,
        jobs: Arc<JobService>,
        access: Arc<crate::Access>,
    ) -> Self {
        let samples = Arc::new(Samples::default());
        // A first reading now, so that the first snapshot has a window to rate over.
        samples.read(&node);
        Self {
            node,
            peers,
            jobs,
            samples,
            access,
        }
    }
}

/// The dashboard's data, for the page and for programs.
fn data_routes() -> Router<Dashboard> {
    Router::new()
        .route("/v1/dashboard", get(snapshot))
        .route("/v1/dashboard/events", get(events))
}

/// The routes of the dashboard's own listener over `node`, a member of `peers` running `jobs`:
/// the page, its files and its data, and a 404 for every other path.
pub(crate) fn own_router(
    node: Arc<Node>,
    peers: Arc<Peers>,
    jobs: Arc<JobService>,
    access: Arc<crate::Access>,
) -> Router {
    data_routes()
        .route("/ui", get(page))
        .route("/ui/", get(page))
        .route("/ui/{file}", get(asset))
        .fallback(not_the_dashboards)
        .with_state(Dashboard::new(node, peers, jobs, access))
}

/// What the dashboard adds to the API's listener over `node`, a member of `peers` running
/// `jobs`: its data, and `/ui` and every path below it sending browsers to the dashboard at
/// `at` (a 404 naming `--ui-listen` if the node serves none).
pub(crate) fn api_router(
    node: Arc<Node>,
    peers: Arc<Peers>,
    jobs: Arc<JobService>,
    access: Arc<crate::Access>,
    at: Option<DashboardAt>,
) -> Router {
    let elsewhere = Router::new()
        .route("/ui", get(to_own_listener))
        .route("/ui/", get(to_own_listener))
        .route("/ui/{*rest}", get(to_own_listener))
        .with_state(at);
    data_routes()
        .with_state(Dashboard::new(node, peers, jobs, access))
        .merge(elsewhere)
}

/// Where the dashboard's own listener is, as the API's `/ui` sends browsers there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DashboardAt {
    /// `https` when the API serves TLS (the dashboard then does too, with the same identity).
    scheme: &'static str,
    /// The address the dashboard's listener is bound to.
    addr: SocketAddr,
    /// Whether the dashboard is reached at whatever name the API was: it listens on every
    /// address, or on the API's.
    follows_host: bool,
}

impl DashboardAt {
    /// The dashboard listening on `addr` (over TLS if `tls`), beside the API on `api`.
    pub fn new(addr: SocketAddr, api: SocketAddr, tls: bool) -> Self {
        Self {
            scheme: match tls {
                true => "https",
                false => "http",
            },
            addr,
            follows_host: addr.ip().is_unspecified() || addr.ip() == api.ip(),
        }
    }

    /// The dashboard's origin (`scheme://host:port`) for a browser that reached the API at
    /// `host` (the request's `Host`, if it sent one).
    pub fn origin_for(&self, host: Option<&str>) -> String {
        let port = self.addr.port();
        let name = host
            .filter(|_| self.follows_host)
            .and_then(|host| host.parse::<axum::http::uri::Authority>().ok())
            .map(|authority| authority.host().to_owned())
            .filter(|name| !name.is_empty());
        match (name, self.addr.ip().is_unspecified()) {
            (Some(name), _) => format!("{}://{name}:{port}", self.scheme),
            // Neither the request nor the address names a host a browser could use.
            (None, true) => format!("{}://localhost:{port}", self.scheme),
            (None, false) => format!("{}://{}", self.scheme, self.addr),
        }
    }
}

/// `/ui` on the API's listener: a temporary redirect to the same path on the dashboard's own
/// listener (temporary, as its port may change with the node's flags), or a 404 that says how
/// to serve one.
async fn to_own_listener(State(at): State<Option<DashboardAt>>, request: Request) -> Response {
    let Some(at) = at else {
        let error = "this node serves no dashboard: it was started with --ui-listen off; start it with --ui-listen ADDR to serve the dashboard there";
        return (
            StatusCode::NOT_FOUND,
            axum::Json(serde_json::json!({ "error": error })),
        )
            .into_response();
    };
    let host = request.uri().authority().map(|a| a.as_str()).or_else(|| {
        request
            .headers()
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
    });
    let path = request.uri().path_and_query().map_or("/ui", |p| p.as_str());
    // The host was parsed as an authority and the path is the request's, so the location is a
    // valid header value.
    let location = format!("{}{path}", at.origin_for(host));
    (
        StatusCode::TEMPORARY_REDIRECT,
        [(header::LOCATION, location)],
    )
        .into_response()
}

/// Any other path on the dashboard's own listener (the gate answers most before this: see
/// [`serves`]).
async fn not_the_dashboards(request: Request) -> Response {
    ApiError::NotOnDashboard(request.uri().path().to_owned()).into_response()
}

/// Whether the dashboard's own listener serves `path`: the page and its files, and its data.
/// Every other path is a 404 there for anyone, before credentials are looked at.
pub(crate) fn serves(path: &str) -> bool {
    matches!(path, "/ui" | "/v1/dashboard" | "/v1/dashboard/events") || path.starts_with("/ui/")
}

async fn page(headers: HeaderMap) -> Response {
    serve_asset(&ASSETS[0], &headers)
}

async fn asset(
    axum::extract::Path(file): axum::extract::Path<String>,
    headers: HeaderMap,
) -> Response {
    match ASSETS.iter().find(|a| a.path == file) {
        Some(asset) => serve_asset(asset, &headers),
        None => {
            let names: Vec<&str> = ASSETS.iter().map(|a| a.path).collect();
            let error = format!(
                "the dashboard has no file `{file}` (it has {}); open the dashboard at /ui",
                names.join(", ")
            );
            (
                StatusCode::NOT_FOUND,
                axum::Json(serde_json::json!({ "error": error })),
            )
                .into_response()
        }
    }
}

/// A file of the page, revalidated by its hash on every load: the files change only with the
/// binary, and a 304 costs no body.
fn serve_asset(asset: &Asset, headers: &HeaderMap) -> Response {
    let etag = format!("\"{:016x}\"", fnv1a(asset.body));
    let cached = headers
        .get(header::IF_NONE_MATCH)
        .is_some_and(|v| v.as_bytes() == etag.as_bytes());
    let mut response = match cached {
        true => StatusCode::NOT_MODIFIED.into_response(),
        false => asset.body.into_response(),
    };
    let h = response.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(asset.content_type),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert(
        header::ETAG,
        HeaderValue::from_str(&etag).expect("hex is a header value"),
    );
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    // Beyond the policy's `frame-ancestors`, for browsers that predate it: no frame shows the
    // page, a window another origin opens on it gets no handle to it (so it can neither reach
    // nor navigate it), other origins cannot load its files, and it names itself to nobody.
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(
        "cross-origin-opener-policy",
        HeaderValue::from_static("same-origin"),
    );
    h.insert(
        "cross-origin-resource-policy",
        HeaderValue::from_static("same-origin"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    response
}

/// FNV-1a: a stable content hash for the ETag (the page's files are a few KiB).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, b| {
        (hash ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

async fn snapshot(State(d): State<Dashboard>) -> Response {
    axum::Json(d.snapshot()).into_response()
}

async fn events(
    State(d): State<Dashboard>,
    holder: Option<axum::extract::Extension<mote_access::Holder>>,
) -> impl IntoResponse {
    // The stream ends within moments of its token's revocation, not at the next reconnect.
    let revoked = crate::gate::revocation(
        &d.access,
        holder.map(|axum::extract::Extension(h)| h),
        mote_access::Scope::Read,
    );
    let mut tick = tokio::time::interval(EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // The stream ends once the node stops, so that an open page does not hold the graceful
    // shutdown up until its timeout; the page reconnects to whatever answers next.
    let stream = futures_util::stream::unfold((d, tick), |(d, mut tick)| async move {
        tick.tick().await;
        if d.peers.is_draining() {
            return None;
        }
        let event = Event::default().event("snapshot").json_data(d.snapshot());
        Some((event, (d, tick)))
    })
    .take_until(revoked);
    // Proxies that buffer responses (nginx) would hold the events back.
    (
        [("x-accel-buffering", "no")],
        Sse::new(stream).keep_alive(KeepAlive::new().interval(Duration::from_secs(15))),
    )
}

impl Dashboard {
    fn snapshot(&self) -> Snapshot {
        let (now, base) = self.samples.read(&self.node);
        let schedule = self.node.schedule();
        let view = self.peers.view();
        let jobs = self.jobs.list();
        let window = now.at.saturating_duration_since(base.at);
        let secs = window.as_secs_f64();
        let rate = |n: u64| match secs > 0.0 {
            true => n as f64 / secs,
            false => 0.0,
        };
        let expected: HashMap<&str, f64> = schedule
            .functions
            .iter()
            .map(|f| (f.name.as_str(), f.expected_ms))
            .collect();
        let functions: Vec<FunctionRow> = now
            .functions
            .iter()
            .map(|(name, f)| {
                let then = base.functions.get(name).filter(|b| b.key == f.key);
                let calls = f.calls();
                let in_window = calls - then.map_or(0, |b| b.calls().min(calls));
                let latency = match then {
                    Some(b) => f.latency.since(&b.latency),
                    None => f.latency.clone(),
                };
                let ms = |d: Duration| d.as_secs_f64() * 1e3;
                FunctionRow {
                    name: name.clone(),
                    kind: f.kind,
                    calls,
                    calls_per_s: rate(in_window),
                    p50_ms: latency.quantile(0.5).map(ms),
                    p99_ms: latency.quantile(0.99).map(ms),
                    stretch: latency.mean_stretch(),
                    expected_ms: expected.get(name.as_str()).copied().unwrap_or(0.0),
                    outcomes: Outcome::ALL
                        .iter()
                        .zip(f.outcomes)
                        .filter(|(_, n)| *n > 0)
                        .map(|(o, n)| (o.as_str(), n))
                        .collect(),
                    quarantined: f.quarantined,
                    resident: f.resident,
                }
            })
            .collect();
        let executors: Vec<ExecutorRow> = now
            .executors
            .iter()
            .map(|e| {
                let then = base.executors.get(e.index);
                let busy = e.busy_ns - then.map_or(0, |b| b.busy_ns.min(e.busy_ns));
                let calls = e.calls - then.map_or(0, |b| b.calls.min(e.calls));
                ExecutorRow {
                    index: e.index,
                    running: e.running,
                    calls: e.calls,
                    calls_per_s: rate(calls),
                    busy_share: match window.is_zero() {
                        true => 0.0,
                        false => (busy as f64 / window.as_nanos() as f64).min(1.0),
                    },
                }
            })
            .collect();
        let forwarded = self.peers.forwarded();
        let ran_here: u64 = now.functions.values().map(FunctionReading::calls).sum();
        let nodes = view
            .nodes
            .into_iter()
            .map(|member| {
                let sent = forwarded.iter().find(|f| f.peer == member.name).cloned();
                NodeRow {
                    ran_here: member.me.then_some(ran_here),
                    forwarded: sent,
                    member,
                }
            })
            .collect();
        let skip = jobs.len().saturating_sub(MAX_JOBS);
        Snapshot {
            node: view.node,
            at_ms: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64),
            window_s: secs,
            policy: schedule.policy,
            cores: schedule.cores,
            executor_threads: schedule.executor_threads,
            queue_length: schedule.queue_length,
            microtasks: schedule.microtasks,
            calls_per_s: functions.iter().map(|f| f.calls_per_s).sum(),
            busy_cores: executors.iter().map(|e| e.busy_share).sum(),
            functions,
            executors,
            classes: schedule.classes,
            store: StorePanel {
                state: view.store,
                replicas: self.peers.store_replicas(),
            },
            nodes,
            jobs: jobs.into_iter().skip(skip).collect(),
        }
    }
}

/// What `GET /v1/dashboard` answers and each server-sent event carries.
#[derive(Debug, Serialize)]
pub struct Snapshot {
    /// The node answering.
    pub node: String,
    /// When the snapshot was taken, in ms since the Unix epoch.
    pub at_ms: u64,
    /// The window rates and percentiles are over, in seconds.
    pub window_s: f64,
    /// The scheduling policy.
    pub policy: &'static str,
    /// Executor cores.
    pub cores: usize,
    /// Executor threads (more than cores only under `baseline`).
    pub executor_threads: usize,
    /// Calls waiting for an executor.
    pub queue_length: usize,
    /// `on` or `off`.
    pub microtasks: &'static str,
    /// Calls per second over the window, every function's.
    pub calls_per_s: f64,
    /// Executor cores busy on average over the window.
    pub busy_cores: f64,
    /// Every deployed function, by name.
    pub functions: Vec<FunctionRow>,
    /// Every executor thread.
    pub executors: Vec<ExecutorRow>,
    /// The microtask share classes.
    pub classes: Vec<ClassSnapshot>,
    /// The state store.
    pub store: StorePanel,
    /// The cluster's nodes, this one included.
    pub nodes: Vec<NodeRow>,
    /// The latest jobs this node controls.
    pub jobs: Vec<JobStatus>,
}

/// One function's row.
#[derive(Debug, Serialize)]
pub struct FunctionRow {
    name: String,
    kind: &'static str,
    /// Calls since it was deployed (or this node started), every outcome.
    calls: u64,
    calls_per_s: f64,
    /// Response time (arrival to end) percentiles over the window.
    p50_ms: Option<f64>,
    p99_ms: Option<f64>,
    /// Mean response time over processing time of the window's calls.
    stretch: Option<f64>,
    /// Mean of its last 10 processing times: what the policies rank by.
    expected_ms: f64,
    /// Calls by outcome, the ones that happened.
    outcomes: BTreeMap<&'static str, u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    quarantined: Option<u32>,
    resident: bool,
}

/// One executor thread's row.
#[derive(Debug, Serialize)]
pub struct ExecutorRow {
    index: usize,
    running: bool,
    calls: u64,
    calls_per_s: f64,
    /// Share of the window it spent running calls.
    busy_share: f64,
}

/// The state store this node uses, and in the edge set-up the replicas its own pulls from.
#[derive(Debug, Serialize)]
pub struct StorePanel {
    #[serde(flatten)]
    state: StoreView,
    replicas: Vec<ReplicaLag>,
}

/// One node of the cluster, with where calls ran.
#[derive(Debug, Serialize)]
pub struct NodeRow {
    #[serde(flatten)]
    member: MemberView,
    /// For this node: the calls it ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    ran_here: Option<u64>,
    /// For a peer: the calls this node sent it.
    #[serde(skip_serializing_if = "Option::is_none")]
    forwarded: Option<Forwarded>,
}

/// One function's cumulative counters at one moment.
#[derive(Clone, Debug)]
struct FunctionReading {
    /// The deployment: a redeploy starts its counters over.
    key: u64,
    kind: &'static str,
    outcomes: [u64; Outcome::ALL.len()],
    latency: LatencyCounts,
    quarantined: Option<u32>,
    resident: bool,
}

impl FunctionReading {
    fn calls(&self) -> u64 {
        self.outcomes.iter().sum()
    }
}

/// The node's cumulative counters at one moment.
#[derive(Clone, Debug)]
struct Reading {
    at: Instant,
    functions: BTreeMap<String, FunctionReading>,
    executors: Vec<ExecutorSample>,
}

impl Reading {
    fn of(node: &Node) -> Self {
        let functions = node
            .functions()
            .iter()
            .map(|f| {
                let reading = FunctionReading {
                    key: f.key(),
                    kind: f.record().kind.as_str(),
                    outcomes: f.outcomes(),
                    latency: f.call_stats().counts(),
                    quarantined: f.quarantined(),
                    resident: f.is_resident(),
                };
                (f.name().to_string(), reading)
            })
            .collect();
        Self {
            at: Instant::now(),
            functions,
            executors: node.executors_activity(),
        }
    }
}

/// The readings of the last [`WINDOW`], oldest first.
#[derive(Default)]
struct Samples {
    recent: Mutex<VecDeque<Arc<Reading>>>,
}

impl Samples {
    /// Reads the node's counters now; returns that reading and the oldest kept within the
    /// window (the reading itself if there is none yet).
    fn read(&self, node: &Node) -> (Arc<Reading>, Arc<Reading>) {
        let now = Arc::new(Reading::of(node));
        let mut recent = self.recent.lock().unwrap_or_else(|p| p.into_inner());
        remember(&mut recent, now.clone());
        let base = recent.front().cloned().unwrap_or_else(|| now.clone());
        (now, base)
    }
}

/// Keeps `reading` unless the last kept one is too recent, and forgets those older than the
/// window.
fn remember(recent: &mut VecDeque<Arc<Reading>>, reading: Arc<Reading>) {
    let at = reading.at;
    let spaced = recent
        .back()
        .is_none_or(|last| at.saturating_duration_since(last.at) >= MIN_SPACING);
    if spaced {
        recent.push_back(reading);
    }
    while recent
        .front()
        .is_some_and(|first| at.saturating_duration_since(first.at) > WINDOW)
    {
        recent.pop_front();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn reading(at: Instant) -> Arc<Reading> {
        Arc::new(Reading {
            at,
            functions: BTreeMap::new(),
            executors: Vec::new(),
        })
    }

    #[test]
    fn readings_are_kept_spaced_and_within_the_window() {
        let start = Instant::now();
        let mut recent = VecDeque::new();
        remember(&mut recent, reading(start));
        // Too close to the last one: not kept.
        remember(&mut recent, reading(start + Duration::from_millis(100)));
        assert_eq!(recent.len(), 1);
        for s in 1..=12 {
            remember(&mut recent, reading(start + Duration::from_secs(s)));
        }
        // Readings at 2..=12 s are within 10 s of the last.
        assert_eq!(recent.len(), 11);
        assert_eq!(recent[0].at, start + Duration::from_secs(2));
    }

    #[test]
    fn every_asset_has_a_content_type_and_the_page_loads_only_its_own() {
        let page = std::str::from_utf8(ASSETS[0].body).unwrap();
        for asset in &ASSETS[1..] {
            assert!(
                page.contains(&format!("/ui/{}", asset.path)),
                "{}",
                asset.path
            );
        }
        assert!(!page.contains("http://") && !page.contains("https://"));
        let script = std::str::from_utf8(ASSETS[1].body).unwrap();
        assert!(!script.contains("http://") && !script.contains("https://"));
        assert_ne!(fnv1a(ASSETS[1].body), fnv1a(ASSETS[2].body));
    }

    #[test]
    fn the_script_talks_only_to_its_own_origin() {
        let script = std::str::from_utf8(ASSETS[1].body).unwrap();
        // Every call of fetch (not the word in a comment) takes a path on this origin: no URL,
        // no `//host`, nothing computed.
        let calls: Vec<&str> = script
            .split("fetch(")
            .skip(1)
            .filter(|rest| !rest.starts_with(')'))
            .collect();
        assert!(!calls.is_empty());
        for call in calls {
            let start = &call[..call.len().min(40)];
            assert!(
                call.starts_with("\"/") && !call.starts_with("\"//"),
                "fetch({start}"
            );
        }
        for other in [
            "new EventSource(",
            "new WebSocket(",
            "XMLHttpRequest",
            "sendBeacon",
            "postMessage",
            "document.cookie",
            "window.open",
        ] {
            assert!(!script.contains(other), "{other}");
        }
    }

    #[test]
    fn the_page_is_framed_by_nobody_and_reachable_by_no_other_window() {
        let response = serve_asset(&ASSETS[0], &HeaderMap::new());
        let h = response.headers();
        let csp = h[header::CONTENT_SECURITY_POLICY].to_str().unwrap();
        for directive in [
            "frame-ancestors 'none'",
            "connect-src 'self'",
            "script-src 'self'",
        ] {
            assert!(csp.contains(directive), "{csp}");
        }
        assert_eq!(h[header::X_FRAME_OPTIONS], "DENY");
        assert_eq!(h["cross-origin-opener-policy"], "same-origin");
        assert_eq!(h["cross-origin-resource-policy"], "same-origin");
        assert_eq!(h[header::REFERRER_POLICY], "no-referrer");
    }

    fn addr(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    #[test]
    fn the_api_sends_browsers_to_the_dashboards_port_at_the_name_they_used() {
        let beside = DashboardAt::new(addr("127.0.0.1:8081"), addr("127.0.0.1:8080"), false);
        assert_eq!(
            beside.origin_for(Some("127.0.0.1:8080")),
            "http://127.0.0.1:8081"
        );
        assert_eq!(
            beside.origin_for(Some("localhost:8080")),
            "http://localhost:8081"
        );
        assert_eq!(
            beside.origin_for(Some("localhost")),
            "http://localhost:8081"
        );
        assert_eq!(beside.origin_for(None), "http://127.0.0.1:8081");
        assert_eq!(beside.origin_for(Some("")), "http://127.0.0.1:8081");
        assert_eq!(beside.origin_for(Some("a b")), "http://127.0.0.1:8081");
        let every = DashboardAt::new(addr("[::]:9001"), addr("[::]:9000"), true);
        assert_eq!(
            every.origin_for(Some("node-a.example:9000")),
            "https://node-a.example:9001"
        );
        assert_eq!(every.origin_for(Some("[::1]:9000")), "https://[::1]:9001");
        assert_eq!(every.origin_for(None), "https://localhost:9001");
        // On an address of its own, the dashboard is at that address, whatever the API was
        // reached as.
        let apart = DashboardAt::new(addr("10.0.0.2:8081"), addr("127.0.0.1:8080"), false);
        assert_eq!(
            apart.origin_for(Some("127.0.0.1:8080")),
            "http://10.0.0.2:8081"
        );
        assert_eq!(apart.origin_for(None), "http://10.0.0.2:8081");
    }

    fn host() -> impl Strategy<Value = String> {
        prop_oneof![
            "[a-z0-9]{1,10}(\\.[a-z0-9]{1,10}){0,3}",
            any::<std::net::Ipv4Addr>().prop_map(|ip| ip.to_string()),
            any::<std::net::Ipv6Addr>().prop_map(|ip| format!("[{ip}]")),
        ]
    }

    proptest! {
        /// Whatever name and port a browser reached the API at, it is sent to that name with
        /// the dashboard's port and scheme when the dashboard listens beside the API, and to
        /// the dashboard's own address otherwise.
        #[test]
        fn a_redirect_keeps_the_name_and_takes_the_dashboards_port(
            name in host(),
            api_port: Option<u16>,
            port in 1u16..,
            every: bool,
            apart: bool,
            tls: bool,
        ) {
            let ip: std::net::IpAddr = match (every, apart) {
                (true, _) => "0.0.0.0".parse().unwrap(),
                (false, true) => "10.1.2.3".parse().unwrap(),
                (false, false) => "127.0.0.1".parse().unwrap(),
            };
            let at = DashboardAt::new(SocketAddr::new(ip, port), addr("127.0.0.1:8080"), tls);
            let host = match api_port {
                Some(p) => format!("{name}:{p}"),
                None => name.clone(),
            };
            let origin = at.origin_for(Some(&host));
            let uri: axum::http::Uri = format!("{origin}/ui").parse().unwrap();
            prop_assert_eq!(uri.scheme_str(), Some(if tls { "https" } else { "http" }));
            prop_assert_eq!(uri.port_u16(), Some(port));
            let expected_host = match (every, apart) {
                (false, true) => "10.1.2.3".to_owned(),
                _ => name,
            };
            prop_assert_eq!(uri.host(), Some(expected_host.as_str()));
            prop_assert_eq!(uri.path(), "/ui");
        }
    }
}
