//! Per-function limits and their defaults. The runtime enforces them; this module only says what
//! they are and which values are acceptable.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::time::Duration;

/// What one call of a function may consume.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "StoredLimits", into = "StoredLimits")]
pub struct Limits {
    /// Wall-clock budget of one call, in microseconds; past it the call is stopped.
    pub timeout_us: u64,
    /// The most linear memory one instance may hold, in MiB.
    pub memory_mb: u32,
}

/// A call's time budget as a user gives it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Timeout {
    /// In milliseconds (`timeout_ms`).
    Ms(u64),
    /// In microseconds (`timeout_us`), for functions that run for microseconds.
    Us(u64),
}

impl Limits {
    /// Default call timeout: 10 s.
    pub const DEFAULT_TIMEOUT_MS: u64 = 10_000;
    /// Default memory: 128 MiB.
    pub const DEFAULT_MEMORY_MB: u32 = 128;
    /// The longest timeout a function may ask for: 15 minutes.
    pub const MAX_TIMEOUT_MS: u64 = 15 * 60 * 1000;
    /// The shortest budget a function may ask for: below it, the epoch ticker's resolution and
    /// the cost of starting a call would make the budget meaningless.
    pub const MIN_TIMEOUT_US: u64 = 100;
    /// The most memory a function may ask for: 4 GiB, all that a 32-bit linear memory can address.
    pub const MAX_MEMORY_MB: u32 = 4096;

    /// Builds limits from optional user input, filling in defaults and checking ranges.
    pub fn new(timeout: Option<Timeout>, memory_mb: Option<u32>) -> Result<Self, LimitsError> {
        let timeout_us = match timeout.unwrap_or(Timeout::Ms(Self::DEFAULT_TIMEOUT_MS)) {
            Timeout::Ms(ms) if (1..=Self::MAX_TIMEOUT_MS).contains(&ms) => ms * 1000,
            Timeout::Ms(ms) => return Err(LimitsError::TimeoutMs(ms)),
            Timeout::Us(us)
                if (Self::MIN_TIMEOUT_US..=Self::MAX_TIMEOUT_MS * 1000).contains(&us) =>
            {
                us
            }
            Timeout::Us(us) => return Err(LimitsError::TimeoutUs(us)),
        };
        let memory_mb = memory_mb.unwrap_or(Self::DEFAULT_MEMORY_MB);
        if !(1..=Self::MAX_MEMORY_MB).contains(&memory_mb) {
            return Err(LimitsError::Memory(memory_mb));
        }
        Ok(Self {
            timeout_us,
            memory_mb,
        })
    }

    /// The call's time budget.
    pub fn timeout(&self) -> Duration {
        Duration::from_micros(self.timeout_us)
    }

    /// The budget in whole milliseconds, rounded up (what `timeout_ms` reports).
    pub fn timeout_ms(&self) -> u64 {
        self.timeout_us.div_ceil(1000)
    }

    /// The memory limit in bytes.
    pub fn memory_bytes(&self) -> usize {
        (self.memory_mb as usize) << 20
    }
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            timeout_us: Self::DEFAULT_TIMEOUT_MS * 1000,
            memory_mb: Self::DEFAULT_MEMORY_MB,
        }
    }
}

/// A budget written the way people read it: `250 µs`, `20 ms`, `1.5 ms`.
pub struct ShowBudget(pub u64);

impl fmt::Display for ShowBudget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            us if us < 1000 => write!(f, "{us} µs"),
            us if us % 1000 == 0 => write!(f, "{} ms", us / 1000),
            us => write!(f, "{} ms", us as f64 / 1000.0),
        }
    }
}

/// How limits are stored and shown: `timeout_us` is the truth; `timeout_ms` is kept beside it
/// for people and for records written before budgets had microsecond resolution.
#[derive(Serialize, Deserialize)]
struct StoredLimits {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    timeout_us: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    timeout_ms: Option<u64>,
    memory_mb: u32,
}

impl From<Limits> for StoredLimits {
    fn from(l: Limits) -> Self {
        Self {
            timeout_us: Some(l.timeout_us),
            timeout_ms: Some(l.timeout_ms()),
            memory_mb: l.memory_mb,
        }
    }
}

impl TryFrom<StoredLimits> for Limits {
    type Error = LimitsError;
    fn try_from(s: StoredLimits) -> Result<Self, Self::Error> {
        let timeout = match (s.timeout_us, s.timeout_ms) {
            (Some(us), _) => Timeout::Us(us),
            (None, Some(ms)) => Timeout::Ms(ms),
            (None, None) => return Err(LimitsError::NoTimeout),
        };
        Limits::new(Some(timeout), Some(s.memory_mb))
    }
}

/// A limit outside the range the platform accepts.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LimitsError {
    /// `timeout_ms` out of range.
    #[error("timeout_ms={0} is out of range; use 1 to {max}", max = Limits::MAX_TIMEOUT_MS)]
    TimeoutMs(u64),
    /// `timeout_us` out of range.
    #[error(
        "timeout_us={0} is out of range; use {min} to {max}",
        min = Limits::MIN_TIMEOUT_US,
        max = Limits::MAX_TIMEOUT_MS * 1000
    )]
    TimeoutUs(u64),
    /// Both units given.
    #[error("give timeout_ms or timeout_us, not both")]
    TwoTimeouts,
    /// A stored record has no timeout at all.
    #[error("limits have neither timeout_us nor timeout_ms")]
    NoTimeout,
    /// `memory_mb` out of range.
    #[error("memory_mb={0} is out of range; use 1 to {max}", max = Limits::MAX_MEMORY_MB)]
    Memory(u32),
}

impl Timeout {
    /// The budget from the two optional query parameters, at most one of which may be given.
    pub fn from_params(ms: Option<u64>, us: Option<u64>) -> Result<Option<Self>, LimitsError> {
        match (ms, us) {
            (Some(_), Some(_)) => Err(LimitsError::TwoTimeouts),
            (Some(ms), None) => Ok(Some(Timeout::Ms(ms))),
            (None, Some(us)) => Ok(Some(Timeout::Us(us))),
            (None, None) => Ok(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_fill_missing_values() {
        assert_eq!(Limits::new(None, None).unwrap(), Limits::default());
        let l = Limits::new(Some(Timeout::Ms(5)), None).unwrap();
        assert_eq!((l.timeout_us, l.timeout_ms()), (5000, 5));
        let l = Limits::new(Some(Timeout::Us(250)), None).unwrap();
        assert_eq!(
            (l.timeout(), l.timeout_ms()),
            (Duration::from_micros(250), 1)
        );
    }

    #[test]
    fn out_of_range_is_rejected() {
        assert_eq!(
            Limits::new(Some(Timeout::Ms(0)), None),
            Err(LimitsError::TimeoutMs(0))
        );
        assert_eq!(
            Limits::new(Some(Timeout::Us(99)), None),
            Err(LimitsError::TimeoutUs(99))
        );
        assert_eq!(
            Limits::new(None, Some(4097)),
            Err(LimitsError::Memory(4097))
        );
        assert!(Limits::new(Some(Timeout::Ms(Limits::MAX_TIMEOUT_MS + 1)), None).is_err());
        assert_eq!(
            Timeout::from_params(Some(1), Some(100)),
            Err(LimitsError::TwoTimeouts)
        );
        assert!(LimitsError::TimeoutUs(5).to_string().contains("use 100 to"));
    }

    #[test]
    fn stored_limits_round_trip_and_old_records_still_load() {
        let l = Limits::new(Some(Timeout::Us(1500)), Some(64)).unwrap();
        let json = serde_json::to_string(&l).unwrap();
        assert_eq!(json, r#"{"timeout_us":1500,"timeout_ms":2,"memory_mb":64}"#);
        assert_eq!(serde_json::from_str::<Limits>(&json).unwrap(), l);
        let old: Limits = serde_json::from_str(r#"{"timeout_ms":1234,"memory_mb":32}"#).unwrap();
        assert_eq!(old.timeout_us, 1_234_000);
        let bad = serde_json::from_str::<Limits>(r#"{"memory_mb":32}"#).unwrap_err();
        assert!(
            bad.to_string()
                .contains("neither timeout_us nor timeout_ms"),
            "{bad}"
        );
    }

    #[test]
    fn budgets_read_naturally() {
        assert_eq!(ShowBudget(250).to_string(), "250 µs");
        assert_eq!(ShowBudget(20_000).to_string(), "20 ms");
        assert_eq!(ShowBudget(1500).to_string(), "1.5 ms");
    }
}
