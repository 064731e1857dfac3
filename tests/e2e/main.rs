//! End-to-end tests: each starts the real `mote` binary (`mote up` on a free port and a fresh
//! data directory) and drives it over HTTP or through the CLI, as a user would.

mod access;
mod api;
mod attacks;
mod bad_input;
mod burst;
mod cli;
mod cluster;
mod components;
mod confinement;
mod dashboard;
mod first_use;
mod fixtures;
mod jobs;
mod late_correction;
mod lifecycle;
mod limits;
mod logs;
mod microtasks;
mod platform;
mod preempt;
mod restart;
mod shutdown;
mod store;
mod tls;
mod where_read;
