//! One module per subcommand group.

pub mod bench;
pub mod client;
pub mod job;
pub mod logs;
pub mod platform;
pub mod store;
pub mod up;
