//! Assembles the single-machine platform from its crates: runtime, embedded state, node. Shared
//! by `mote up` and the in-process benchmarks so both run exactly the same parts.

use anyhow::Context;
use mote_node::{Node, NodeConfig};
use std::path::Path;
use std::sync::Arc;

/// Opens the state under `data` and starts a node set up by `config`.
pub async fn start_node(data: &Path, config: NodeConfig) -> anyhow::Result<Arc<Node>> {
    let node = Node::start_embedded(data, config).await.with_context(|| {
        format!(
            "cannot start the node on {} (is another `mote up` using it?)",
            data.display()
        )
    })?;
    Ok(Arc::new(node))
}

/// The number of cores this machine offers.
pub fn available_cores() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

/// OpenWhisk's default memory per action container; the baseline policy allows as many running
/// calls as fit the machine's memory at this size, as OpenWhisk's invoker does.
const BASELINE_CALL_MEMORY: u64 = 256 << 20;

/// The baseline policy's cap on running calls: physical memory / 256 MiB, at least one per core,
/// at most 256 (threads beyond that only measure the OS scheduler).
pub fn baseline_cap(cores: usize) -> usize {
    let total = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            let line = m.lines().find(|l| l.starts_with("MemTotal:"))?;
            line.split_whitespace().nth(1)?.parse::<u64>().ok()
        })
        .map(|kib| kib * 1024)
        .unwrap_or(4 << 30);
    ((total / BASELINE_CALL_MEMORY) as usize).clamp(cores, 256)
}
