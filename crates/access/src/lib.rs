//! Who may do what on a mote node.
//!
//! - [`Scope`] and [`Scopes`]: what a token allows: `read` (look), `invoke` (call functions),
//!   `deploy` (change functions, run jobs), `admin` (everything, tokens included).
//! - [`Token`]: a new secret, shown once; [`TokenRecord`]: what the state store keeps of it (its
//!   name, scopes and sha256, never the token itself), under `/mote/tokens/NAME`.
//! - [`Grants`]: the node's table of live tokens, swapped whole on every change so that a check
//!   takes no lock; [`TokenStore`] writes records and loads them into the table. The node's
//!   watch of the store (`mote_peers`) keeps the table current, which is how a token revoked on
//!   one node stops working on every node within the watch's latency.
//! - [`FailureLimiter`]: a client address that keeps failing gets 429 for a while.
//!
//! No I/O happens on a check: hashing the presented token and one map lookup.

mod failures;
mod grants;
mod scope;
mod store;
mod token;

pub use failures::FailureLimiter;
pub use grants::{Denied, Grant, Grants};
pub use scope::{Scope, ScopeError, Scopes};
pub use store::{TOKEN_PREFIX, TokenStore, TokenStoreError};
pub use token::{Token, TokenName, TokenNameError, TokenRecord, hash_token};
