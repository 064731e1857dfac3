//! A function's log (`GET /v1/functions/{name}/logs`): NDJSON, one [`LogLine`] per line,
//! oldest first.

use serde::{Deserialize, Serialize};

/// One entry of a function's log as the API gives it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogLine {
    /// Its number in its node's log of the function.
    pub seq: u64,
    /// When it was written, RFC 3339.
    pub time: String,
    /// When it was written, in milliseconds since the Unix epoch.
    pub unix_ms: u64,
    /// The node whose log it is in.
    pub node: String,
    /// The call that wrote it, as its response's `mote-call-id` named it (empty if none).
    pub call: String,
    /// `log`, `stdout`, `stderr`, `outcome` (why a call failed) or `missing` (a peer whose
    /// entries are left out, and why).
    pub stream: String,
    /// How the call ended: `ok`, `trap`, `timeout`, `memory_limit`, ... (empty if not known).
    pub outcome: String,
    /// What was written.
    pub text: String,
}
