//! How a node is set up: [`NodeConfig`], the executors', microtasks', resident set's and logs'
//! settings together.

use crate::executor::ExecutorsConfig;
use crate::logs::DEFAULT_FUNCTION_LOG_BYTES;
use crate::microtask::MicrotaskConfig;
use mote_runtime::JobShare;
use mote_types::OutboundCeiling;

/// How a node is set up.
#[derive(Clone, Debug)]
pub struct NodeConfig {
    /// The executors and their queue.
    pub executors: ExecutorsConfig,
    /// The most compiled code kept resident, in MiB; past it the least recently called
    /// functions are evicted and their next call is a cold start.
    pub resident_mb: u64,
    /// How calls of functions that declare phases are scheduled, and their object storage.
    pub microtasks: MicrotaskConfig,
    /// The most bytes each function's log keeps; past it the oldest entries go.
    pub function_log_bytes: usize,
    /// The most any function's outbound requests may reach (`--outbound-ceiling`): deploys
    /// that grant more are refused, and every connection is checked against it.
    pub outbound_ceiling: OutboundCeiling,
    /// The share of the cores jobs keep while calls want every core (`--job-share`).
    pub job_share: JobShare,
}

impl NodeConfig {
    /// The default resident budget.
    pub const DEFAULT_RESIDENT_MB: u64 = 1024;
}

impl From<ExecutorsConfig> for NodeConfig {
    fn from(executors: ExecutorsConfig) -> Self {
        Self {
            executors,
            resident_mb: Self::DEFAULT_RESIDENT_MB,
            microtasks: MicrotaskConfig::default(),
            function_log_bytes: DEFAULT_FUNCTION_LOG_BYTES,
            outbound_ceiling: OutboundCeiling::default(),
            job_share: JobShare::default(),
        }
    }
}
