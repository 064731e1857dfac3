//! One module per subcommand group.

pub mod bench;
pub mod client;
pub mod credential;
pub mod job;
pub mod logs;
pub mod output;
pub mod progress;
pub mod secrets;
pub mod security;
pub mod signal;
pub mod store;
pub mod token;
pub mod up;
