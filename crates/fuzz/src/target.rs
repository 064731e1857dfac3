//! What a fuzz target is.

/// A fuzz target: its name (the `fuzz/` binary's and `scripts/fuzz`'s argument), the function
/// that checks one input, and inputs that reach each of its parts.
pub struct Target {
    /// The name.
    pub name: &'static str,
    /// Checks one input; panics on a failure.
    pub run: fn(&[u8]),
    /// The seed corpus.
    pub seeds: fn() -> Vec<Vec<u8>>,
}
