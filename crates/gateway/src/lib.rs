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
//! The handlers live by resource (`functions`, `invoke`, `jobs`, `tokens`, `logs`, `status`,
//! the dashboard's data in [`dashboard`]), the routes between nodes together in `internal`;
//! this module assembles them into one router behind the gate.
//!
//! In a cluster ([`mote_peers::Peers`]) an invocation runs where placement says: here, or on
//! one peer, which runs it whatever its load (the request says who forwarded it). A peer that
//! cannot be reached is skipped for the next choice; one that fails while it holds the call is
//! a 502 naming it. Every invocation's response names the node that ran it in `mote-node`.

mod access;
mod body;
pub mod dashboard;
mod error;
mod functions;
mod gate;
mod internal;
mod invoke;
mod jobs;
mod listen;
mod logs;
mod readers;
mod state;
mod status;
mod tokens;

pub use access::Access;
pub use dashboard::DashboardAt;
pub use error::ApiError;
pub use invoke::MOTE_NODE;
pub use listen::{IDLE_TIMEOUT, ListenLimits};
pub use logs::{LOGS_MISSING, MOTE_CALL_ID};
pub use readers::Readers;
pub use state::GatewayConfig;

use axum::Router;
use axum::http::HeaderValue;
use axum::routing::{any, get, post, put};
use mote_access::TokenStore;
use mote_job_service::JobService;
use mote_node::Node;
use mote_peers::Peers;
use state::{Gateway, GatewayParts};
use std::sync::Arc;

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

/// The routers that serve `api`: the one its readers serve (calls, `/healthz`, components'
/// paths, and everything else handed to the I/O runtime), and the gate in front of it.
fn routers(api: Api) -> (Router, gate::Gate) {
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
    let io = tokio::runtime::Handle::current();
    let gateway = Gateway(Arc::new(GatewayParts {
        relay: node.relay().clone(),
        io: io.clone(),
        node,
        peers,
        jobs,
        name,
        config,
        access,
        tokens,
    }));
    // Served on the I/O runtime: whatever opens files, connects or writes to the store.
    let elsewhere = Router::new()
        .route("/metrics", get(status::metrics))
        .route("/v1/functions", get(functions::list_functions))
        .route(
            "/v1/functions/{name}",
            put(functions::deploy)
                .get(functions::get_function)
                .delete(functions::remove_function),
        )
        .route(
            "/v1/functions/{name}/release",
            post(functions::release_function),
        )
        .route("/v1/functions/{name}/logs", get(logs::function_logs))
        .route("/v1/node", get(status::node_status))
        .route("/v1/cluster", get(status::cluster))
        .route("/v1/jobs", post(jobs::run_job).get(jobs::list_jobs))
        .route(
            "/v1/jobs/{id}",
            get(jobs::job_status).delete(jobs::cancel_job),
        )
        .route("/v1/tokens", post(tokens::create).get(tokens::list))
        .route("/v1/tokens/{name}", axum::routing::delete(tokens::revoke))
        .merge(internal::routes())
        .fallback(|| async { error::ApiError::NoRoute })
        .with_state(gateway.clone())
        .merge(dashboard);
    let hop = readers::Hop {
        router: elsewhere,
        relay: gateway.relay.clone(),
        io,
    };
    // Served on the readers.
    let here = Router::new()
        .route("/healthz", get(status::healthz))
        .route(mote_wire::route::INVOKE, any(invoke::invoke))
        .route("/v1/invoke/{name}/", any(invoke::invoke))
        .route("/v1/invoke/{name}/{*path}", any(invoke::invoke_path))
        .fallback(invoke::not_found)
        .with_state(gateway.clone())
        .layer(axum::Extension(Arc::new(hop)));
    let gate = gate::Gate::new(
        gate::Site::Api,
        gateway.access.clone(),
        gateway.peers.cluster_secret().cloned(),
        gateway.node.clone(),
    );
    (here, gate)
}

/// Starts serving the API on `listener`: over TLS with `tls` (a rustls server configuration,
/// such as `mote_tls::Identity::server_config`'s), else plain HTTP, by one reader per core of
/// the node (`readers`), each confined (unless the operator turned that off, `mote up --seccomp
/// off`) and serving when this returns; [`Readers::serve_until`] stops them. Must be called on
/// the node's I/O runtime.
pub fn serve(
    listener: std::net::TcpListener,
    tls: Option<Arc<tokio_rustls::rustls::ServerConfig>>,
    api: Api,
) -> std::io::Result<Readers> {
    let node = api.node.clone();
    let limits = api.config.listen;
    let (router, gate) = routers(api);
    let setup = readers::Setup {
        listener: Some(listener),
        tls: tls.map(tokio_rustls::TlsAcceptor::from),
        gate: Arc::new(gate),
        router,
        limits,
        confine: node.confines(),
        count: node.cores(),
        node,
    };
    readers::start(setup)
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
