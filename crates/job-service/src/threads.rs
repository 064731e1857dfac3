//! How a worker's executor threads run ([`JobThreads`]): how many, confined how, and how they
//! give way to calls.

use mote_node::confine::ExecutorFilter;
use mote_node::priority::JobShare;
use std::sync::Arc;

/// How a worker's executor threads run: how many, confined how, and at what share of the
/// cores calls want too.
#[derive(Clone, Default)]
pub struct JobThreads {
    /// Executor threads per worker: the node's cores.
    pub cores: usize,
    /// The seccomp allow-list they run under, when confined.
    pub confine: Option<Arc<ExecutorFilter>>,
    /// What they keep of a core a call's executor wants.
    pub share: JobShare,
}
