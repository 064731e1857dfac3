//! Assembles the single-machine platform from its crates: runtime, embedded state, node. Shared
//! by `mote up` and the in-process benchmarks so both run exactly the same parts.

use anyhow::Context;
use mote_node::{ExecutorsConfig, Node};
use mote_runtime::{Runtime, RuntimeConfig};
use mote_state::{EmbeddedStore, ModuleBlobs};
use std::path::Path;
use std::sync::Arc;

/// Opens the state under `data` and starts a node with `executors`.
pub async fn start_node(data: &Path, executors: ExecutorsConfig) -> anyhow::Result<Arc<Node>> {
    std::fs::create_dir_all(data)
        .with_context(|| format!("cannot create data directory {}", data.display()))?;
    let runtime = Runtime::new(RuntimeConfig::new(data.join("artifacts"), executors.cores))?;
    let store = EmbeddedStore::open(&data.join("state.redb")).with_context(|| {
        format!(
            "cannot open the state in {} (is another `mote up` using it?)",
            data.display()
        )
    })?;
    let blobs = ModuleBlobs::open(&data.join("modules"))?;
    let node = Node::start(Arc::new(runtime), Arc::new(store), blobs, executors).await?;
    Ok(Arc::new(node))
}

/// The number of cores this machine offers.
pub fn available_cores() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}
