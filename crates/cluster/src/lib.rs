//! How many mote nodes act as one platform, written as state machines without I/O: the caller
//! feeds them events and reads their decisions, and passes time in, so the same code runs in a
//! node, in tests and in a simulation of a thousand nodes in virtual time.
//!
//! - [`Membership`] is one node's view of the cluster: which nodes are up, where they listen,
//!   how loaded they said they were and when they were last heard from. It changes only through
//!   [`Event`]s, which the node derives from the state store (each node keeps a key alive under
//!   a lease and watches the others').
//! - [`Placement`] decides where a call that arrived at this node runs ([`Decision`]): here, on
//!   one peer, or nowhere. Each function has a few home nodes chosen by rendezvous hashing, so
//!   its code stays resident on them; when they are busy, the call goes where it is expected
//!   to finish first, from each node's [`Backlog`]: its expected work arranged by what a new
//!   call would wait for. A call forwarded by a peer always runs where it lands. A node with a
//!   core free and nothing waiting asks it which peer to pull waiting calls from
//!   ([`Placement::pull_from`]: late correction).
//!
//! The I/O around them (leases, watches, forwarding over HTTP, fetching module blobs) belongs to
//! the node.

mod backlog;
mod membership;
mod placement;

pub use backlog::{Backlog, CLASSES, class_of};
pub use membership::{Event, Load, Member, Membership, NodeName, Report};
pub use placement::{Decision, MAX_CHOICES, MAX_HOMES, Origin, Placement, PlacementConfig};
