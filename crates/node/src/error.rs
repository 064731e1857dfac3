//! Errors of the node's two paths. Each says which function and what to do; the gateway maps
//! each variant to exactly one HTTP status.

use mote_runtime::{CallError, CompileError, RuntimeError};
use mote_state::StateError;
use mote_types::ShowBudget;

/// Deploying, removing or loading a function failed. Stored state is unchanged.
#[derive(Debug, thiserror::Error)]
pub enum DeployError {
    /// The module was rejected.
    #[error(transparent)]
    Compile(#[from] CompileError),
    /// The module's initial memory is larger than the function's memory limit.
    #[error(
        "module's memory starts at {needed_mb} MiB, above memory_mb={limit_mb}; deploy with memory_mb={needed_mb} or more"
    )]
    MemoryTooSmall {
        /// MiB the module needs to instantiate.
        needed_mb: u64,
        /// The requested limit.
        limit_mb: u32,
    },
    /// No function has this name.
    #[error("function `{0}` is not deployed")]
    NotFound(String),
    /// A route or outbound hosts were given for a function that is not a component.
    #[error(
        "route and allow_outbound apply to wasi:http components only; this module is a {kind} function"
    )]
    NotHttp {
        /// What the module is.
        kind: mote_types::GuestKind,
    },
    /// An `allow_outbound` entry that only an admin may grant, from a deployer.
    #[error(
        "allow_outbound entry `{entry}` needs an admin: `*`, IP addresses and CIDR ranges reach hosts nobody named, so only a token with the admin scope may grant them; have an admin deploy it, or name the host instead (`api.example.com:443`, `*.example.com`)"
    )]
    OutboundNeedsAdmin {
        /// The entry.
        entry: String,
    },
    /// An `allow_outbound` entry beyond the node's ceiling.
    #[error(
        "allow_outbound entry `{entry}` is beyond this node's --outbound-ceiling `{ceiling}` (a `*` there is public addresses only; a loopback, private or link-local address must be named there by an IP or CIDR entry); grant only what the ceiling covers, or have the node's operator widen --outbound-ceiling"
    )]
    OutboundAboveCeiling {
        /// The entry.
        entry: String,
        /// The node's ceiling.
        ceiling: String,
    },
    /// Another function is mounted on the route.
    #[error(
        "route {route} is taken by function `{owner}`; remove it (mote rm {owner}), redeploy it elsewhere, or choose another route"
    )]
    RouteTaken {
        /// The route.
        route: String,
        /// The function mounted on it.
        owner: String,
    },
    /// The state store failed; the deploy did not happen.
    #[error(transparent)]
    State(#[from] StateError),
    /// The WebAssembly runtime could not be set up.
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    /// The threads that run guest code could not be confined.
    #[error(transparent)]
    Confine(#[from] mote_confine::ConfineError),
    /// A background task failed unexpectedly.
    #[error("internal error: {0}")]
    Internal(String),
    /// The node's configuration is inconsistent.
    #[error("invalid node configuration: {0}")]
    Config(String),
}

/// A call could not be made or failed.
#[derive(Debug, thiserror::Error)]
pub enum InvokeError {
    /// No function has this name.
    #[error("function `{0}` is not deployed; list functions with GET /v1/functions")]
    NotFound(String),
    /// The node's queue is full.
    #[error("node is overloaded: {waiting} calls are already waiting (limit {limit}); retry later")]
    QueueFull {
        /// Calls waiting.
        waiting: usize,
        /// The configured limit.
        limit: usize,
    },
    /// The function was stopped for its budget too many times in a row.
    #[error(
        "function `{name}` is quarantined: {kills} calls in a row ran past their {} budget and were killed; fix it and redeploy, or release it with POST /v1/functions/{name}/release (`mote release {name}`)",
        ShowBudget(*budget_us)
    )]
    Quarantined {
        /// The function.
        name: String,
        /// Budget kills in a row.
        kills: u32,
        /// Its budget in microseconds.
        budget_us: u64,
    },
    /// The function is not resident and its code could not be loaded from disk.
    #[error(
        "function `{name}` cannot be loaded: {detail}; redeploy it (`mote deploy {name} FILE`)"
    )]
    Load {
        /// The function.
        name: String,
        /// What went wrong.
        detail: String,
    },
    /// The node is shutting down.
    #[error("node is shutting down")]
    ShuttingDown,
    /// The call ran and failed.
    #[error(transparent)]
    Call(#[from] CallError),
    /// The call had not started and another node takes it ([`crate::Node::hand_over`]): its
    /// caller forwards it there. Only a caller that asked for a movable call gets this.
    #[error("the call was handed to node `{to}` before it started; forward it there")]
    Moved {
        /// The node that runs it.
        to: std::sync::Arc<str>,
    },
    /// The host failed while running the call (a bug in mote, not in the function).
    #[error("internal error while running the call: {0}")]
    Internal(String),
}
