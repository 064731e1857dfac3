//! One module per subcommand group.

pub mod access;
pub mod bench;
pub mod client;
pub mod credential;
pub mod job;
pub mod logs;
pub mod machine;
pub mod output;
pub mod platform;
pub mod progress;
pub mod secrets;
pub mod security;
pub mod store;
pub mod token;
pub mod up;
