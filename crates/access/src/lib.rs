//! Who may do what on a mote node, as decisions without I/O that the gateway applies to every
//! request before any handler runs.
//!
//! - [`need`]: what a request needs, from its method and path, decided on whole path segments
//!   (the API's permissions in one table); [`owned`]: the paths no component may serve.
//! - [`HostAllowList`]: the `Host` names a node answers to (DNS rebinding is refused);
//!   [`page`]: whether a web page made a request, and from which origin.
//! - [`Scope`] and [`Scopes`]: what a token allows: `read` (look), `invoke` (call functions),
//!   `deploy` (change functions, run jobs), `admin` (everything, tokens included).
//! - [`Token`]: a new secret, shown once; [`TokenRecord`]: what the state store keeps of it (its
//!   name, scopes and sha256, never the token itself), under `/mote/tokens/NAME`.
//! - [`Grants`]: the node's table of live tokens, swapped whole on every change so that a check
//!   takes no lock; [`TokenStore`] writes records and loads them into the table. The node's
//!   watch of the store (`mote_peers`) keeps the table current, which is how a token revoked on
//!   one node stops working on every node within the watch's latency, and how streams it opened
//!   end ([`Grants::revoked`]).
//! - [`FailureLimiter`]: a client that keeps failing to authenticate is refused for a while,
//!   whatever it presents next.
//!
//! No I/O happens on a check: header parsing, hashing the presented token and map lookups.

mod failures;
mod grants;
mod host;
mod page;
mod route;
mod scope;
mod store;
mod token;

pub use failures::FailureLimiter;
pub use grants::{Denied, Grant, Grants, Holder, is_mote_credential};
pub use host::{HostAllowList, HostError};
pub use page::{Page, page};
pub use route::{DASHBOARD_FILES, Need, need, owned};
pub use scope::{Scope, ScopeError, Scopes};
pub use store::{TOKEN_PREFIX, TokenStore, TokenStoreError};
pub use token::{Token, TokenName, TokenNameError, TokenRecord, hash_token};
