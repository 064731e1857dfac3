//! The handlers' state ([`Gateway`]) and the limits of the HTTP layer ([`GatewayConfig`]).

use crate::access::Access;
use crate::listen::ListenLimits;
use axum::http::HeaderValue;
use mote_access::TokenStore;
use mote_job_service::JobService;
use mote_node::Node;
use mote_peers::Peers;
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

/// The handlers' state. The router clones it for every request, so it is one `Arc`: a clone
/// is one reference count, whatever the parts cost to clone (a store's client clones a gRPC
/// channel's buffer and senders).
#[derive(Clone)]
pub(crate) struct Gateway(pub(crate) Arc<GatewayParts>);

pub(crate) struct GatewayParts {
    pub(crate) node: Arc<Node>,
    /// How readers start work on the I/O runtime.
    pub(crate) relay: Arc<mote_confine::Relay>,
    /// The node's I/O runtime, where readers send what they may not do.
    pub(crate) io: tokio::runtime::Handle,
    pub(crate) peers: Arc<Peers>,
    pub(crate) jobs: Arc<JobService>,
    /// This node's name, as `mote-node` carries it.
    pub(crate) name: HeaderValue,
    pub(crate) config: GatewayConfig,
    pub(crate) access: Arc<Access>,
    pub(crate) tokens: TokenStore,
}

impl std::ops::Deref for Gateway {
    type Target = GatewayParts;

    fn deref(&self) -> &GatewayParts {
        &self.0
    }
}
