//! mote's HTTP API: thin axum handlers over a [`mote_node::Node`]. Each handler validates its
//! input, calls the node once, and maps the result through [`ApiError`], the one table from
//! errors to status codes. Guest code never runs on the gateway's threads: invocations wait on
//! the node's executors asynchronously.
//!
//! Routes:
//! - `PUT /v1/functions/{name}?timeout_ms=|timeout_us=&memory_mb=` deploys the module in the
//!   body (201); a `wasi:http` component also takes `route=/path/...` and
//!   `allow_outbound=HOST[:PORT],...`.
//! - `GET /v1/functions`, `GET /v1/functions/{name}`, `DELETE /v1/functions/{name}`.
//! - `POST /v1/functions/{name}/release` lets a quarantined function's calls in again.
//! - `GET /v1/functions/{name}/logs?tail=N&follow=true`: the function's log as NDJSON, merged
//!   from every node of the cluster (`logs`).
//! - `POST /v1/invoke/{name}` runs the function with the body as input (200 with its output).
//! - `ANY /v1/invoke/{name}[/{path}]` serves the request with a `wasi:http` component, which
//!   sees the method, `/{path}` with the query, the headers and the body, and answers with its
//!   own status, headers and body, both bodies streaming; any other path is served by the
//!   component mounted on the most specific route that matches it, if any.
//! - `GET /v1/node`: the scheduling policy, queue and each function's expected processing time.
//! - `GET /v1/cluster`: every node of the cluster as this node sees it, and its state store.
//! - `GET /v1/internal/modules/{sha256}`: a module's bytes, for peers that adopted its record.
//! - `POST /v1/internal/store-peers` (`{"name", "url"}`): a joining node's store replica, for
//!   this node's replica to pull from (the edge set-up).
//! - `POST /v1/jobs` (`{"function", "workers", "partitions_per_core", "args"}`) starts a job
//!   with this node as its controller (201 with its status); `GET /v1/jobs`, `GET
//!   /v1/jobs/{id}`; `DELETE /v1/jobs/{id}` cancels it.
//! - `PUT /v1/internal/jobs/{id}` prepares this node's worker of a job (a controller's
//!   `JobSpec`), `POST /v1/internal/jobs/{id}/run` runs it once every worker is prepared,
//!   `POST /v1/internal/jobs/{id}/messages` takes another worker's message,
//!   `POST /v1/internal/jobs/{id}/reports` a worker's report, `DELETE /v1/internal/jobs/{id}`
//!   stops the worker.
//! - `POST /v1/tokens` (`{"name", "scopes"}`) makes a token (201, the token in the body, once),
//!   `GET /v1/tokens` lists them, `DELETE /v1/tokens/{name}` revokes one.
//! - `GET /healthz`, `GET /metrics` (Prometheus text format).
//! - `GET /v1/dashboard` (one snapshot of what the live dashboard shows), `GET
//!   /v1/dashboard/events` (a snapshot every second, as server-sent events); `GET /ui` and every
//!   path below it redirect to the dashboard's own listener, which [`serve_dashboard`] serves
//!   (the page, its files and its data, nothing else): [`dashboard`].
//!
//! Every request passes the gate first (`gate`): the `Host` it names, the web page that made it
//! if any, and the credentials its route needs ([`mote_access::need`]: a token's scope, the
//! cluster secret for the internal routes, or nothing); credentials never reach a handler, so
//! no guest sees them. [`Access`] holds the node's tokens and limits; `listen` bounds what
//! clients may hold open.
//!
//! In a cluster ([`mote_peers::Peers`]) an invocation runs where placement says: here, or on
//! one peer, which runs it whatever its load (the request says who forwarded it). A peer that
//! cannot be reached is skipped for the next choice; one that fails while it holds the call is
//! a 502 naming it. Every invocation's response names the node that ran it in `mote-node`.

pub mod dashboard;
mod error;
mod gate;
mod listen;
mod logs;
mod tokens;

pub use dashboard::DashboardAt;
pub use error::ApiError;
pub use gate::Access;
pub use listen::{IDLE_TIMEOUT, ListenLimits};
pub use logs::{LOGS_MISSING, MOTE_CALL_ID};

use axum::Router;
use axum::body::Body;
use axum::extract::{DefaultBodyLimit, Extension, Path, Query, State};
use axum::http::HeaderValue;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get, post, put};
use bytes::Bytes;
use http_body_util::BodyExt;
use mote_access::TokenStore;
use mote_cluster::{NodeName, Origin};
use mote_job_service::{JobService, RunRequest};
use mote_node::{CallId, Node};
use mote_peers::{FORWARDED_BY, ForwardError, Peers, Route};
use mote_types::{
    DeployOptions, FunctionName, FunctionRecord, GuestKind, HttpSettings, Limits, OutboundHost,
    Timeout,
};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// Limits of the HTTP layer.
#[derive(Clone, Copy, Debug)]
pub struct GatewayConfig {
    /// The largest request body `POST /v1/invoke` accepts.
    pub max_body_bytes: usize,
    /// The largest module `PUT /v1/functions` accepts.
    pub max_module_bytes: usize,
    /// What clients may hold open of each listener.
    pub listen: ListenLimits,
}

impl Default for GatewayConfig {
    fn default() -> Self {
        Self {
            max_body_bytes: 16 << 20,
            max_module_bytes: 64 << 20,
            listen: ListenLimits::default(),
        }
    }
}

/// The header that names the node that ran a call.
pub const MOTE_NODE: &str = "mote-node";

/// The handlers' state. The router clones it for every request, so it is one `Arc`: a clone
/// is one reference count, whatever the parts cost to clone (a store's client clones a gRPC
/// channel's buffer and senders).
#[derive(Clone)]
struct Gateway(Arc<GatewayParts>);

struct GatewayParts {
    node: Arc<Node>,
    peers: Arc<Peers>,
    jobs: Arc<JobService>,
    /// This node's name, as `mote-node` carries it.
    name: HeaderValue,
    config: GatewayConfig,
    access: Arc<Access>,
    tokens: TokenStore,
}

impl std::ops::Deref for Gateway {
    type Target = GatewayParts;

    fn deref(&self) -> &GatewayParts {
        &self.0
    }
}

/// What the API serves: a node, a member of the cluster `peers`, with its jobs, guarded by
/// `access`, within `config`'s limits.
#[derive(Clone)]
pub struct Api {
    /// The node.
    pub node: Arc<Node>,
    /// Its cluster.
    pub peers: Arc<Peers>,
    /// Its side of jobs.
    pub jobs: Arc<JobService>,
    /// Who may do what.
    pub access: Arc<Access>,
    /// Where tokens are made and revoked.
    pub tokens: TokenStore,
    /// Limits of the HTTP layer.
    pub config: GatewayConfig,
    /// Where the dashboard's own listener is, for the API's `/ui` to send browsers there;
    /// `None` if the node serves no dashboard.
    pub dashboard: Option<DashboardAt>,
}

/// The router that serves `api`, and the gate in front of it.
fn router(api: Api) -> (Router, gate::Gate) {
    let Api {
        node,
        peers,
        jobs,
        access,
        tokens,
        config,
        dashboard,
    } = api;
    let name = HeaderValue::from_str(peers.name()).expect("node names are header-safe");
    let dashboard = dashboard::api_router(
        node.clone(),
        peers.clone(),
        jobs.clone(),
        access.clone(),
        dashboard,
    );
    let gateway = Gateway(Arc::new(GatewayParts {
        node,
        peers,
        jobs,
        name,
        config,
        access,
        tokens,
    }));
    let router = Router::new()
        .route("/healthz", get(healthz))
        .route("/metrics", get(metrics))
        .route("/v1/functions", get(list_functions))
        .route(
            "/v1/functions/{name}",
            put(deploy).get(get_function).delete(remove_function),
        )
        .route("/v1/functions/{name}/release", post(release_function))
        .route("/v1/functions/{name}/logs", get(logs::function_logs))
        .route("/v1/invoke/{name}", any(invoke))
        .route("/v1/invoke/{name}/", any(invoke))
        .route("/v1/invoke/{name}/{*path}", any(invoke_path))
        .route("/v1/node", get(node_status))
        .route("/v1/cluster", get(cluster))
        .route("/v1/internal/modules/{sha256}", get(module))
        .route(mote_peers::STORE_PEERS_PATH, post(store_peer))
        .route("/v1/jobs", post(run_job).get(list_jobs))
        .route("/v1/jobs/{id}", get(job_status).delete(cancel_job))
        .route(
            "/v1/internal/jobs/{id}",
            put(start_worker).delete(stop_worker),
        )
        .route(
            "/v1/internal/jobs/{id}/messages",
            // Scatter pieces can be large (a PageRank step's contributions to one worker).
            post(job_message).layer(DefaultBodyLimit::max(1 << 30)),
        )
        .route("/v1/internal/jobs/{id}/run", post(run_worker))
        .route("/v1/internal/jobs/{id}/reports", post(job_report))
        .route("/v1/tokens", post(tokens::create).get(tokens::list))
        .route("/v1/tokens/{name}", axum::routing::delete(tokens::revoke))
        .route("/v1/internal/logs/{name}", get(logs::peer_logs))
        .fallback(not_found)
        .with_state(gateway.clone())
        .merge(dashboard);
    let gate = gate::Gate::new(
        gate::Site::Api,
        gateway.access.clone(),
        gateway.peers.cluster_secret().cloned(),
        gateway.node.clone(),
    );
    (router, gate)
}

/// Serves the API on `listener` until `shutdown` resolves: over TLS with `tls` (a rustls
/// server configuration, such as `mote_tls::Identity::server_config`'s), else plain HTTP.
pub async fn serve(
    listener: tokio::net::TcpListener,
    tls: Option<Arc<tokio_rustls::rustls::ServerConfig>>,
    api: Api,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let logs = api.node.clone();
    let limits = api.config.listen;
    let shutdown = async move {
        shutdown.await;
        // Followed logs never end by themselves: without this the server would wait for them.
        logs.logs().stop_following();
    };
    let (router, gate) = router(api);
    let tls = tls.map(tokio_rustls::TlsAcceptor::from);
    listen::serve(listener, tls, Arc::new(gate), router, limits, shutdown).await
}

/// Serves the dashboard of `api` on `listener` (`mote up --ui-listen`) until `shutdown`
/// resolves, over TLS with `tls` as the API is: the page, its files and its data behind the
/// same gate as the API, and a 404 for every other path. No function is ever served there, so
/// no script a tenant serves shares the page's origin ([`dashboard`]).
pub async fn serve_dashboard(
    listener: tokio::net::TcpListener,
    tls: Option<Arc<tokio_rustls::rustls::ServerConfig>>,
    api: Api,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let routes = dashboard::own_router(
        api.node.clone(),
        api.peers.clone(),
        api.jobs.clone(),
        api.access.clone(),
    );
    let gate = gate::Gate::new(
        gate::Site::Dashboard,
        api.access.clone(),
        api.peers.cluster_secret().cloned(),
        api.node.clone(),
    );
    let tls = tls.map(tokio_rustls::TlsAcceptor::from);
    listen::serve(
        listener,
        tls,
        Arc::new(gate),
        routes,
        api.config.listen,
        shutdown,
    )
    .await
}

/// 200 while the node serves; the text says whether its state store answers.
async fn healthz(State(gw): State<Gateway>) -> String {
    match gw.peers.store_trouble() {
        None => "ok\n".into(),
        Some(trouble) => format!("degraded: {trouble}\n"),
    }
}

async fn metrics(State(gw): State<Gateway>) -> Response {
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

/// Query parameters of a deploy.
#[derive(Debug, Deserialize)]
struct DeployParams {
    timeout_ms: Option<u64>,
    timeout_us: Option<u64>,
    memory_mb: Option<u32>,
    route: Option<String>,
    allow_outbound: Option<String>,
    /// Callable without a token.
    #[serde(default)]
    public: bool,
}

impl DeployParams {
    /// The HTTP settings the parameters give; empty for any function without them.
    fn http(&self) -> Result<HttpSettings, ApiError> {
        let bad = |e: &dyn std::fmt::Display| ApiError::BadRequest(e.to_string());
        Ok(HttpSettings {
            route: match &self.route {
                Some(route) => Some(mote_types::Route::parse(route).map_err(|e| bad(&e))?),
                None => None,
            },
            allow_outbound: match &self.allow_outbound {
                Some(list) => OutboundHost::parse_list(list).map_err(|e| bad(&e))?,
                None => Vec::new(),
            },
        })
    }
}

/// A function as the API shows it.
#[derive(Debug, Serialize)]
struct FunctionView<'a> {
    name: &'a str,
    sha256: &'a str,
    kind: &'a str,
    timeout_ms: u64,
    timeout_us: u64,
    memory_mb: u32,
    size_bytes: u64,
    /// A component's route (null if none): shown for every function, so that what a function
    /// exposes is never left out.
    route: Option<&'a mote_types::Route>,
    /// The hosts a component may call (empty if none).
    allow_outbound: &'a [OutboundHost],
    /// Callable without a token.
    public: bool,
    /// Budget kills in a row that put it in quarantine, if it is quarantined.
    #[serde(skip_serializing_if = "Option::is_none")]
    quarantined_after_kills: Option<u32>,
}

impl<'a> FunctionView<'a> {
    fn with_quarantine(self, node: &Node) -> Self {
        Self {
            quarantined_after_kills: node.quarantined(self.name),
            ..self
        }
    }
}

impl<'a> From<&'a FunctionRecord> for FunctionView<'a> {
    fn from(r: &'a FunctionRecord) -> Self {
        Self {
            name: r.name.as_str(),
            sha256: &r.sha256,
            kind: r.kind.as_str(),
            timeout_ms: r.limits.timeout_ms(),
            timeout_us: r.limits.timeout_us,
            memory_mb: r.limits.memory_mb,
            size_bytes: r.size_bytes,
            route: r.http.route.as_ref(),
            allow_outbound: &r.http.allow_outbound,
            public: r.public,
            quarantined_after_kills: None,
        }
    }
}

async fn deploy(
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
        http: params.http()?,
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
    Ok((StatusCode::CREATED, axum::Json(FunctionView::from(&record))).into_response())
}

async fn list_functions(State(gw): State<Gateway>) -> Response {
    let records = gw.node.list();
    let functions: Vec<FunctionView<'_>> = records
        .iter()
        .map(|r| FunctionView::from(r).with_quarantine(&gw.node))
        .collect();
    axum::Json(serde_json::json!({ "functions": functions })).into_response()
}

async fn get_function(
    State(gw): State<Gateway>,
    Path(name): Path<String>,
) -> Result<Response, ApiError> {
    let record = gw.node.get(&name).ok_or(ApiError::FunctionNotFound(name))?;
    Ok(axum::Json(FunctionView::from(&record).with_quarantine(&gw.node)).into_response())
}

async fn release_function(
    State(gw): State<Gateway>,
    Path(name): Path<String>,
) -> Result<Response, ApiError> {
    let released = gw.node.release(&name)?;
    Ok(axum::Json(serde_json::json!({ "name": name, "released": released })).into_response())
}

async fn remove_function(
    State(gw): State<Gateway>,
    Path(name): Path<String>,
) -> Result<Response, ApiError> {
    let record = gw.node.remove(&name).await?;
    Ok(axum::Json(FunctionView::from(&record)).into_response())
}

async fn invoke(
    State(gw): State<Gateway>,
    Path(name): Path<String>,
    request: axum::extract::Request,
) -> Response {
    if gw.node.kind(&name) == Some(GuestKind::WasiHttp) {
        return serve_component(&gw, &name, "/", request).await;
    }
    if request.method() != axum::http::Method::POST {
        return ran_here(
            &gw,
            ApiError::MethodNotAllowed(format!(
                "`{name}` is not a wasi:http component; invoke it with POST /v1/invoke/{name} and the input as the body"
            ))
            .into_response(),
        );
    }
    let (parts, body) = request.into_parts();
    match invoke_routed(&gw, &name, &parts.headers, body).await {
        Ok(response) => response,
        Err(e) => ran_here(&gw, e.into_response()),
    }
}

/// `ANY /v1/invoke/{name}/{path}`: a request to a component, which sees `/{path}` as the
/// client sent it (still percent-encoded, as the extracted `path` would not be).
async fn invoke_path(
    State(gw): State<Gateway>,
    Path((name, _)): Path<(String, String)>,
    request: axum::extract::Request,
) -> Response {
    let error = match gw.node.kind(&name) {
        Some(GuestKind::WasiHttp) => None,
        Some(_) => Some(ApiError::NoRoute),
        None => Some(ApiError::FunctionNotFound(name.clone())),
    };
    if let Some(error) = error {
        return ran_here(&gw, error.into_response());
    }
    // `/v1/invoke/{name}{path}`: everything from the slash after the name on.
    let raw = request.uri().path();
    let path = raw
        .strip_prefix("/v1/invoke/")
        .and_then(|rest| rest.find('/').map(|i| &rest[i..]))
        .unwrap_or("/")
        .to_owned();
    serve_component(&gw, &name, &path, request).await
}

/// Serves `request` with the component `name`, which sees `path` and the request's query.
/// Components run on the node that received the request: their bodies stream, which the
/// forwarding between nodes (whole bodies) does not do.
async fn serve_component(
    gw: &Gateway,
    name: &str,
    path: &str,
    request: axum::extract::Request,
) -> Response {
    let (mut parts, body) = request.into_parts();
    let path_and_query = match parts.uri.query() {
        Some(query) => format!("{path}?{query}"),
        None => path.to_owned(),
    };
    parts.uri = match axum::http::Uri::builder()
        .path_and_query(path_and_query)
        .build()
    {
        Ok(uri) => uri,
        Err(e) => {
            let error = ApiError::BadRequest(format!("the request's path is not valid: {e}"));
            return ran_here(gw, error.into_response());
        }
    };
    // wasi:http gives the guest an authority; an HTTP/1.0 client may not send one.
    if !parts.headers.contains_key(header::HOST) {
        parts
            .headers
            .insert(header::HOST, HeaderValue::from_static("localhost"));
    }
    let request = axum::http::Request::from_parts(parts, body);
    match gw.node.serve_http(name, request).await {
        Ok(response) => {
            let call = response.extensions().get::<CallId>().copied();
            let mut response = response.map(Body::new);
            name_call(gw, &mut response, call);
            ran_here(gw, response)
        }
        Err(e) => ran_here(gw, ApiError::from(e).into_response()),
    }
}

/// Runs a call here or on the peer placement chooses; a peer that cannot be reached is left
/// out and the next choice taken.
async fn invoke_routed(
    gw: &Gateway,
    name: &str,
    headers: &HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let input = read_body(headers, body, gw.config.max_body_bytes, "request body").await?;
    let origin = match headers.contains_key(FORWARDED_BY) {
        true => Origin::Peer,
        false => Origin::Client,
    };
    let mut unreachable: Vec<NodeName> = Vec::new();
    loop {
        match gw.peers.route(name, origin, &unreachable) {
            Route::Here => break,
            Route::Refuse => return Err(ApiError::NoNodeTakes(unreachable_names(&unreachable))),
            Route::Peer(peer, url) => {
                if !gw.peers.knows(name) {
                    return Err(ApiError::FunctionNotFound(name.to_owned()));
                }
                let content_type = headers.get(header::CONTENT_TYPE);
                match gw
                    .peers
                    .forward(&peer, &url, name, input.clone(), content_type)
                    .await
                {
                    Ok(response) => return Ok(response.map(Body::new)),
                    Err(e @ ForwardError::Unreachable { .. }) => {
                        tracing::warn!(error = %e, "a peer is unreachable; placing the call again without it");
                        unreachable.push(peer);
                    }
                    Err(e @ ForwardError::Lost { .. }) => return Err(ApiError::PeerFailed(e)),
                }
            }
        }
    }
    let reply = gw.node.invoke_traced(name, input).await?;
    let mut response = match reply.result {
        Ok(output) => {
            ([(header::CONTENT_TYPE, "application/octet-stream")], output).into_response()
        }
        Err(e) => ApiError::from(e).into_response(),
    };
    name_call(gw, &mut response, reply.call);
    Ok(ran_here(gw, response))
}

fn unreachable_names(nodes: &[NodeName]) -> String {
    match nodes.is_empty() {
        true => "none was unreachable".into(),
        false => {
            let names: Vec<&str> = nodes.iter().map(NodeName::as_str).collect();
            format!("unreachable: {}", names.join(", "))
        }
    }
}

/// Names the call a response answers, as its function's log entries name it.
fn name_call(gw: &Gateway, response: &mut Response, call: Option<CallId>) {
    // The rendered id's buffer becomes the header's without a copy.
    if let Some(call) = call
        && let Ok(id) = HeaderValue::from_maybe_shared(Bytes::from(call.render(gw.peers.name())))
    {
        response.headers_mut().insert(MOTE_CALL_ID, id);
    }
}

/// Names this node in a response to a call it answered itself.
fn ran_here(gw: &Gateway, mut response: Response) -> Response {
    response.headers_mut().insert(MOTE_NODE, gw.name.clone());
    response
}

async fn cluster(State(gw): State<Gateway>) -> Response {
    axum::Json(gw.peers.view()).into_response()
}

/// A store replica that introduces itself.
#[derive(Deserialize)]
struct StorePeer {
    name: String,
    url: String,
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

async fn run_job(
    State(gw): State<Gateway>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let request: RunRequest =
        json_body(&headers, &body, "job request ({\"function\": NAME, ...})")?;
    let status = gw.jobs.run(request).await?;
    Ok((StatusCode::CREATED, axum::Json(status)).into_response())
}

async fn list_jobs(State(gw): State<Gateway>) -> Response {
    axum::Json(gw.jobs.list()).into_response()
}

async fn job_status(
    State(gw): State<Gateway>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    Ok(axum::Json(gw.jobs.status(&id)?).into_response())
}

async fn cancel_job(
    State(gw): State<Gateway>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    Ok(axum::Json(gw.jobs.cancel(&id).await?).into_response())
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

async fn node_status(State(gw): State<Gateway>) -> Response {
    axum::Json(gw.node.schedule()).into_response()
}

/// Any path the API does not own: the component mounted on the most specific matching route
/// serves it, or it is a 404.
async fn not_found(State(gw): State<Gateway>, request: axum::extract::Request) -> Response {
    let path = request.uri().path();
    let routed = match mote_access::owned(path) {
        true => None,
        false => gw.node.route(path),
    };
    let Some(function) = routed else {
        return ApiError::NoRoute.into_response();
    };
    let route = function
        .http()
        .route
        .as_ref()
        .expect("only routed functions are in the route table");
    let inner = route.strip(path).to_owned();
    let name = function.name().clone();
    serve_component(&gw, &name, &inner, request).await
}

/// How much of an oversized body is read and thrown away before answering 413. A server that
/// answers and closes while the client is still sending makes the client see a reset connection
/// instead of the 413; draining a bounded amount lets ordinary clients read the answer.
const DRAIN_BYTES: u64 = 64 << 20;

/// Reads a body of at most `limit` bytes, without copying when it arrives in one piece.
async fn read_body(
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
