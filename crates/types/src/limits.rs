//! Per-function limits and their defaults. The runtime enforces them; this module only says what
//! they are and which values are acceptable.

use serde::{Deserialize, Serialize};

/// What one call of a function may consume.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    /// Wall-clock time one call may run before it is stopped.
    pub timeout_ms: u64,
    /// The most linear memory one instance may hold, in MiB.
    pub memory_mb: u32,
}

impl Limits {
    /// Default call timeout: 10 s.
    pub const DEFAULT_TIMEOUT_MS: u64 = 10_000;
    /// Default memory: 128 MiB.
    pub const DEFAULT_MEMORY_MB: u32 = 128;
    /// The longest timeout a function may ask for: 15 minutes.
    pub const MAX_TIMEOUT_MS: u64 = 15 * 60 * 1000;
    /// The most memory a function may ask for: 4 GiB, all that a 32-bit linear memory can address.
    pub const MAX_MEMORY_MB: u32 = 4096;

    /// Builds limits from optional user input, filling in defaults and checking ranges.
    pub fn new(timeout_ms: Option<u64>, memory_mb: Option<u32>) -> Result<Self, LimitsError> {
        let limits = Self {
            timeout_ms: timeout_ms.unwrap_or(Self::DEFAULT_TIMEOUT_MS),
            memory_mb: memory_mb.unwrap_or(Self::DEFAULT_MEMORY_MB),
        };
        if !(1..=Self::MAX_TIMEOUT_MS).contains(&limits.timeout_ms) {
            return Err(LimitsError::Timeout(limits.timeout_ms));
        }
        if !(1..=Self::MAX_MEMORY_MB).contains(&limits.memory_mb) {
            return Err(LimitsError::Memory(limits.memory_mb));
        }
        Ok(limits)
    }

    /// The memory limit in bytes.
    pub fn memory_bytes(&self) -> usize {
        (self.memory_mb as usize) << 20
    }
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            timeout_ms: Self::DEFAULT_TIMEOUT_MS,
            memory_mb: Self::DEFAULT_MEMORY_MB,
        }
    }
}

/// A limit outside the range the platform accepts.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LimitsError {
    /// `timeout_ms` out of range.
    #[error("timeout_ms={0} is out of range; use 1 to {max}", max = Limits::MAX_TIMEOUT_MS)]
    Timeout(u64),
    /// `memory_mb` out of range.
    #[error("memory_mb={0} is out of range; use 1 to {max}", max = Limits::MAX_MEMORY_MB)]
    Memory(u32),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_fill_missing_values() {
        assert_eq!(Limits::new(None, None).unwrap(), Limits::default());
        assert_eq!(Limits::new(Some(5), None).unwrap().timeout_ms, 5);
    }

    #[test]
    fn out_of_range_is_rejected() {
        assert_eq!(Limits::new(Some(0), None), Err(LimitsError::Timeout(0)));
        assert_eq!(
            Limits::new(None, Some(4097)),
            Err(LimitsError::Memory(4097))
        );
        assert!(Limits::new(Some(Limits::MAX_TIMEOUT_MS + 1), None).is_err());
    }
}
