//! How calls that declare phases are scheduled (`mote up --microtasks`, `--core-split`), and
//! the object storage their host I/O uses.

use mote_objects::Objects;
use mote_sched::SplitMode;
use std::sync::Arc;

/// How calls that declare phases are scheduled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MicrotaskMode {
    /// Per share class, with cores split across the classes as given.
    On(SplitMode),
    /// Task-based: a call holds a whole core for its whole duration, waits included.
    Off,
}

impl MicrotaskMode {
    /// `on` or `off`, as `mote up --microtasks` spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::On(_) => "on",
            Self::Off => "off",
        }
    }
}

/// Microtask scheduling and the object storage guests' host I/O uses.
#[derive(Clone, Debug)]
pub struct MicrotaskConfig {
    /// Per class, or task-based.
    pub mode: MicrotaskMode,
    /// Where guests' objects live; `None` fails their object calls with a message saying so.
    pub objects: Option<Arc<Objects>>,
    /// The most calls that declare phases alive at once (running, queued for a share, or
    /// waiting on storage); later ones wait for a slot. Each holds an instance: a node started
    /// with `Node::start_on` sizes the runtime's microtask slots to this.
    pub max_alive: usize,
}

impl Default for MicrotaskConfig {
    fn default() -> Self {
        Self {
            mode: MicrotaskMode::On(SplitMode::Dynamic),
            objects: None,
            max_alive: 256,
        }
    }
}
