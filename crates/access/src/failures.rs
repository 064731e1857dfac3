//! Refusing clients that keep failing to authenticate: each address may fail a number of times
//! per window; past that its requests get 429 until the window ends. Only failures take the
//! lock, so a client with a good token never waits on it.

use rustc_hash::FxHashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How many addresses are remembered before expired windows are swept: a bound on memory when
/// many addresses fail.
const SWEEP_AT: usize = 4096;

/// Failed authentications per client address, in fixed windows.
pub struct FailureLimiter {
    allowed: u32,
    window: Duration,
    seen: Mutex<FxHashMap<IpAddr, Window>>,
}

#[derive(Clone, Copy)]
struct Window {
    started: Instant,
    failures: u32,
}

impl FailureLimiter {
    /// Allows `allowed` failures per address every `window` (0: no limit).
    pub fn new(allowed: u32, window: Duration) -> Self {
        Self {
            allowed,
            window,
            seen: Mutex::new(FxHashMap::default()),
        }
    }

    /// Counts a failure from `client`; `Some(wait)` if it has failed too often, with how long
    /// until it may try again.
    pub fn failed(&self, client: IpAddr) -> Option<Duration> {
        self.failed_at(client, Instant::now())
    }

    fn failed_at(&self, client: IpAddr, now: Instant) -> Option<Duration> {
        if self.allowed == 0 {
            return None;
        }
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        if seen.len() >= SWEEP_AT {
            seen.retain(|_, w| now.duration_since(w.started) < self.window);
        }
        let window = seen.entry(client).or_insert(Window {
            started: now,
            failures: 0,
        });
        if now.duration_since(window.started) >= self.window {
            *window = Window {
                started: now,
                failures: 0,
            };
        }
        window.failures = window.failures.saturating_add(1);
        (window.failures > self.allowed).then(|| {
            self.window
                .saturating_sub(now.duration_since(window.started))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_past_the_allowance_until_the_window_ends() {
        let limiter = FailureLimiter::new(3, Duration::from_secs(10));
        let (a, b): (IpAddr, IpAddr) = ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
        let t0 = Instant::now();
        for _ in 0..3 {
            assert_eq!(limiter.failed_at(a, t0), None);
        }
        let wait = limiter.failed_at(a, t0 + Duration::from_secs(4));
        assert_eq!(wait, Some(Duration::from_secs(6)));
        assert_eq!(
            limiter.failed_at(b, t0),
            None,
            "another address has its own count"
        );
        assert_eq!(limiter.failed_at(a, t0 + Duration::from_secs(10)), None);
    }

    #[test]
    fn zero_means_no_limit() {
        let limiter = FailureLimiter::new(0, Duration::from_secs(10));
        let a: IpAddr = "::1".parse().unwrap();
        assert!((0..100).all(|_| limiter.failed(a).is_none()));
    }

    #[test]
    fn memory_stays_bounded_under_many_addresses() {
        let limiter = FailureLimiter::new(1, Duration::from_millis(1));
        let t0 = Instant::now();
        for i in 0..(3 * SWEEP_AT as u32) {
            let now = t0 + Duration::from_millis(u64::from(i / 100));
            limiter.failed_at(IpAddr::from(i.to_be_bytes()), now);
        }
        assert!(limiter.seen.lock().unwrap().len() <= SWEEP_AT);
    }
}
