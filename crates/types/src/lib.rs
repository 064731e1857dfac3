//! The vocabulary every mote crate shares, with no I/O and no heavy dependencies.
//!
//! - [`FunctionName`]: a validated function name, safe to use in URLs, metric labels and store keys.
//! - [`Limits`]: what one call of a function may consume (time, memory), with the platform defaults.
//! - [`GuestKind`]: which calling convention a module follows, detected from its exports.
//! - [`FunctionRecord`]: the persisted description of a deployed function.
//! - [`HttpSettings`]: a `wasi:http` component's [`Route`] and the [`OutboundHost`]s it may call.
//! - `outbound`: where outbound requests may go: [`OutboundHost`] entries, who may grant them
//!   ([`Grantor`]), a node's [`OutboundCeiling`], the special-purpose address ranges
//!   ([`special_range`]) and the decision for one request ([`OutboundRules`]).
//! - [`ClusterSecret`]: what the nodes and store replicas of one cluster show each other.
//! - [`with_causes`]: an error and its causes on one line.
//! - [`Escaped`]: someone else's text (a guest's log line) as a log or a terminal shows it: one
//!   line, no control characters.
//! - [`abi`]: the names and status codes of the mote guest ABI (the `mote-abi` crate, which the
//!   guest SDK shares).

pub use mote_abi as abi;

mod causes;
mod escape;
mod http;
mod limits;
mod name;
mod outbound;
mod record;
mod secret;

pub use causes::with_causes;
pub use escape::Escaped;
pub use http::{HttpSettings, Route, RouteError};
pub use limits::{Limits, LimitsError, ShowBudget, Timeout};
pub use name::{FunctionName, NameError};
pub use outbound::{
    Grantor, OutboundCeiling, OutboundHost, OutboundHostError, OutboundRules, Refusal, Special,
    special_range,
};
pub use record::{DeployOptions, FunctionRecord, GuestKind};
pub use secret::{CLUSTER_SECRET_HEADER, ClusterSecret, PlainSecret, SecretError};
