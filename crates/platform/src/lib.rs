//! The whole mote platform of one machine as a library: [`Platform::start`] takes a
//! [`PlatformConfig`] (everything `mote up` is told, typed, with its defaults) and starts the
//! state store (embedded, or reached), the node, its cluster membership, the job engine, the
//! API and the dashboard; [`Platform::drain`] stops taking work and lets open calls finish, and
//! [`Platform::stop`] ends everything and releases the listeners. `mote up` is this plus flag
//! parsing, printing and waiting for a signal; tests start platforms in-process with it.
//!
//! Module order, one way: `platform` (the lifecycle) uses `state` (the store), `access` (tokens
//! and the cluster secret), `security` (TLS), `examples`, `workers`, `data_dir`; all of them use
//! `config`, `notice`, `machine` and `error`, the leaves.

mod access;
pub mod config;
pub mod data_dir;
pub mod error;
pub mod examples;
pub mod machine;
pub mod notice;
pub mod platform;
pub mod security;
pub mod state;
mod workers;

pub use config::{
    AccessConfig, DEFAULT_DATA_DIR, DEFAULT_LISTEN, DEFAULT_STORE_LISTEN, ObjectsChoice,
    PlatformConfig, SecretSource, SecurityConfig, StoreChoice, TlsChoice, UiListen,
};
pub use error::PlatformError;
pub use notice::Notice;
pub use platform::{Drained, Platform, Serving};
pub use security::{Security, certificate_names};
