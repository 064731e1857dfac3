//! One module per subcommand group.

pub mod bench;
pub mod client;
pub mod job;
pub mod platform;
pub mod security;
pub mod store;
pub mod up;
