//! The one wire between mote's nodes. Everything a node asks of another goes through this
//! crate: forwarded calls, idle nodes pulling waiting calls, module fetches, the log fan-out,
//! store replicas introducing themselves, and jobs' specs, messages and reports between
//! controllers and workers.
//!
//! - [`route`]: every route between nodes, as the pattern the gateway serves it under and as a
//!   [`Route`] a node builds its path from.
//! - [`PeerRequest`]: a whole request (route, body in the route's encoding, headers, time
//!   allowed), made by one constructor per route.
//! - [`WireClient`]: one kept-alive HTTP/1.1 client that speaks https where a peer's URL says
//!   so and adds the cluster secret where it may travel.
//! - [`WireError`]: a failure, naming the peer ([`Peer`]) and saying whether the request may
//!   have taken effect there ([`Failure`]).
//!
//! It depends on the types, TLS and job-message crates only: the node, its cluster and the
//! gateway use it, never the other way round.

mod client;
mod error;
mod request;
pub mod route;

pub use client::WireClient;
pub use error::{Failure, Peer, WireError};
pub use request::{PeerRequest, Pull, Pulled, StorePeer};
pub use route::{FORWARDED_BY, LogsFrom, MOVED, NOT_DEPLOYED_HERE, Route};
