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
//! a window: `snapshot` keeps the cumulative counters read in the last [`WINDOW`], and a
//! snapshot differences the newest reading against the oldest, so nothing on the call path knows
//! about windows.

mod snapshot;

pub use snapshot::{ExecutorRow, FunctionRow, NodeRow, Snapshot, StorePanel, WINDOW};

use crate::access::Access;
use crate::error::ApiError;
use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use futures_util::StreamExt;
use mote_job_service::JobService;
use mote_node::Node;
use mote_peers::Peers;
use snapshot::Samples;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// How often the event stream sends a snapshot.
const EVERY: Duration = Duration::from_secs(1);

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
        body: include_bytes!("../../ui/index.html"),
    },
    Asset {
        path: "app.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_bytes!("../../ui/app.js"),
    },
    Asset {
        path: "style.css",
        content_type: "text/css; charset=utf-8",
        body: include_bytes!("../../ui/style.css"),
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
    access: Arc<Access>,
}

impl Dashboard {
    /// The dashboard's state over `node`, a member of `peers` running `jobs`, guarded by
    /// `access`.
    fn new(node: Arc<Node>, peers: Arc<Peers>, jobs: Arc<JobService>, access: Arc<Access>) -> Self {
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

    fn snapshot(&self) -> Snapshot {
        Snapshot::take(&self.node, &self.peers, &self.jobs, &self.samples)
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
    access: Arc<Access>,
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
    access: Arc<Access>,
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
    let revoked = crate::access::revocation(
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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

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
