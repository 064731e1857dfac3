//! A mote node: takes calls for deployed functions and runs each on one of its executor cores.
//!
//! The call path is `Node::invoke` → [`Registry`] lookup (lock-free) → [`Executors::submit`] (the
//! policy queue) → an executor thread → [`mote_runtime::Runtime::call`] → reply over a oneshot
//! channel. The control path is `Node::deploy`/`Node::remove` → compile → persist (module blob,
//! then record) → publish to the registry.
//!
//! - [`Executors`]: one thread per core, at most one running call each (no oversubscription),
//!   fed from one [`mote_sched::CallQueue`].
//! - [`Registry`]: deployed functions, resident and ready to instantiate, backed by a
//!   [`mote_state::StateStore`] so they survive restarts.
//! - [`NodeMetrics`]: Prometheus metrics of both.

mod error;
mod executor;
mod metrics;
mod registry;

pub use error::{DeployError, InvokeError};
pub use executor::{Executors, ExecutorsConfig};
pub use metrics::{NodeMetrics, Outcome};
pub use registry::{Deployed, Registry};

use bytes::Bytes;
use mote_runtime::Runtime;
use mote_state::{ModuleBlobs, StateStore};
use mote_types::{FunctionName, FunctionRecord, Limits};
use std::sync::Arc;

/// One node: a registry of functions and the executors that run their calls.
pub struct Node {
    registry: Registry,
    executors: Executors,
    metrics: Arc<NodeMetrics>,
}

impl Node {
    /// Starts the executors and loads every function recorded in `store`.
    pub async fn start(
        runtime: Arc<Runtime>,
        store: Arc<dyn StateStore>,
        blobs: ModuleBlobs,
        config: ExecutorsConfig,
    ) -> Result<Self, DeployError> {
        let metrics = Arc::new(NodeMetrics::new());
        let registry = Registry::new(runtime.clone(), store, blobs, metrics.clone());
        registry.load_all().await?;
        let executors = Executors::start(runtime, metrics.clone(), config);
        Ok(Self {
            registry,
            executors,
            metrics,
        })
    }

    /// Runs `name` with `input` as the request body and returns the response body.
    pub async fn invoke(&self, name: &str, input: Bytes) -> Result<Vec<u8>, InvokeError> {
        let function = self
            .registry
            .get(name)
            .ok_or_else(|| InvokeError::NotFound(name.to_owned()))?;
        let reply = self.executors.submit(function, input)?;
        reply
            .await
            .map_err(|_| InvokeError::Internal("the executor dropped the call".into()))?
    }

    /// Deploys (or replaces) `name` with the module `wasm`.
    pub async fn deploy(
        &self,
        name: FunctionName,
        wasm: Bytes,
        limits: Limits,
    ) -> Result<FunctionRecord, DeployError> {
        self.registry.deploy(name, wasm, limits).await
    }

    /// Removes `name`; calls already queued for it still run.
    pub async fn remove(&self, name: &str) -> Result<FunctionRecord, DeployError> {
        self.registry.remove(name).await
    }

    /// The record of `name`, if deployed.
    pub fn get(&self, name: &str) -> Option<FunctionRecord> {
        self.registry.get(name).map(|f| f.record().clone())
    }

    /// Every deployed function, by name.
    pub fn list(&self) -> Vec<FunctionRecord> {
        self.registry.list()
    }

    /// The node's metrics, for the gateway to expose.
    pub fn metrics(&self) -> &NodeMetrics {
        &self.metrics
    }

    /// How many executor cores the node runs calls on.
    pub fn cores(&self) -> usize {
        self.executors.cores()
    }
}
