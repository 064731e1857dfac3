//! Refusing clients that keep failing to authenticate. Each client may fail a number of times
//! per window; past that, every request it makes that needs or presents credentials gets 429
//! until its window ends, good credentials included, so that a correct guess made after the
//! refusal starts gains nothing. The check comes before the credential check.
//!
//! A client is an IPv4 address, or an IPv6 /64 (one host's allotment: rotating addresses within
//! it gains nothing). The table of failing clients holds at most a fixed number of them; once it
//! is full, every client it does not hold shares one overflow entry, so that many addresses
//! together guess no faster than one.
//!
//! Clients with good credentials never take the lock: the refused clients are a map swapped
//! whole when one is added, read without a lock, and empty unless someone is being refused.

use arc_swap::ArcSwap;
use parking_lot::Mutex;
use rustc_hash::FxHashMap;
use std::net::IpAddr;
use std::time::{Duration, Instant};

/// The most clients the table of failures holds, and so the most the refused map holds.
const CAPACITY: usize = 16_384;

/// Who failed: an address, or an IPv6 network, or every client the full table does not hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Client {
    V4(u32),
    V6Net(u64),
    Overflow,
}

impl Client {
    fn of(ip: IpAddr) -> Self {
        match ip {
            IpAddr::V4(v4) => Client::V4(v4.to_bits()),
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => Client::V4(v4.to_bits()),
                None => Client::V6Net((v6.to_bits() >> 64) as u64),
            },
        }
    }
}

#[derive(Clone, Copy)]
struct Window {
    started: Instant,
    failures: u32,
}

/// Failed authentications per client, in fixed windows.
pub struct FailureLimiter {
    allowed: u32,
    window: Duration,
    capacity: usize,
    failing: Mutex<FxHashMap<Client, Window>>,
    /// Refused clients and until when.
    refused: ArcSwap<FxHashMap<Client, Instant>>,
}

impl FailureLimiter {
    /// Allows `allowed` failures per client every `window` (0: no limit).
    pub fn new(allowed: u32, window: Duration) -> Self {
        Self::with_capacity(allowed, window, CAPACITY)
    }

    fn with_capacity(allowed: u32, window: Duration, capacity: usize) -> Self {
        Self {
            allowed,
            window,
            capacity,
            failing: Mutex::new(FxHashMap::default()),
            refused: ArcSwap::default(),
        }
    }

    /// `Some(wait)` if requests from `client` are refused for now, with how long until they may
    /// try again.
    pub fn refused(&self, client: IpAddr) -> Option<Duration> {
        self.refused_at(client, Instant::now())
    }

    fn refused_at(&self, client: IpAddr, now: Instant) -> Option<Duration> {
        let refused = self.refused.load();
        if refused.is_empty() {
            return None;
        }
        let key = Client::of(client);
        let left =
            |until: &Instant| Some(until.saturating_duration_since(now)).filter(|d| !d.is_zero());
        if let Some(wait) = refused.get(&key).and_then(left) {
            return Some(wait);
        }
        let overflow = refused.get(&Client::Overflow).and_then(left)?;
        // Only the clients the full table did not hold share the overflow entry.
        let held = self.lock().contains_key(&key);
        (!held).then_some(overflow)
    }

    /// Counts a failure from `client`; `Some(wait)` if it has now failed too often, with how
    /// long until it may try again.
    pub fn failed(&self, client: IpAddr) -> Option<Duration> {
        self.failed_at(client, Instant::now())
    }

    fn failed_at(&self, client: IpAddr, now: Instant) -> Option<Duration> {
        if self.allowed == 0 {
            return None;
        }
        let mut failing = self.lock();
        let mut key = Client::of(client);
        if !failing.contains_key(&key) && failing.len() >= self.capacity {
            failing.retain(|_, w| now.duration_since(w.started) < self.window);
            if failing.len() >= self.capacity {
                key = Client::Overflow;
            }
        }
        let window = failing.entry(key).or_insert(Window {
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
        if window.failures <= self.allowed {
            return None;
        }
        let until = window.started + self.window;
        if window.failures == self.allowed + 1 {
            // The first failure past the allowance starts the refusal; later ones find it there.
            self.refused.rcu(|refused| {
                let mut refused = FxHashMap::clone(refused);
                refused.retain(|_, until| *until > now);
                refused.insert(key, until);
                refused
            });
        }
        Some(until.saturating_duration_since(now))
    }

    fn lock(&self) -> parking_lot::MutexGuard<'_, FxHashMap<Client, Window>> {
        self.failing.lock()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn refuses_past_the_allowance_until_the_window_ends() {
        let limiter = FailureLimiter::new(3, Duration::from_secs(10));
        let (a, b) = (ip("10.0.0.1"), ip("10.0.0.2"));
        let t0 = Instant::now();
        for _ in 0..3 {
            assert_eq!(limiter.failed_at(a, t0), None);
            assert_eq!(
                limiter.refused_at(a, t0),
                None,
                "refused within the allowance"
            );
        }
        let wait = limiter.failed_at(a, t0 + Duration::from_secs(4));
        assert_eq!(wait, Some(Duration::from_secs(6)));
        // Refused before any credential is looked at, so a correct guess now gains nothing.
        assert_eq!(
            limiter.refused_at(a, t0 + Duration::from_secs(5)),
            Some(Duration::from_secs(5))
        );
        assert_eq!(
            limiter.refused_at(b, t0),
            None,
            "another address has its own count"
        );
        assert_eq!(limiter.refused_at(a, t0 + Duration::from_secs(10)), None);
        assert_eq!(limiter.failed_at(a, t0 + Duration::from_secs(10)), None);
    }

    #[test]
    fn an_ipv6_host_is_its_64_and_a_mapped_ipv4_its_address() {
        let limiter = FailureLimiter::new(2, Duration::from_secs(60));
        let t0 = Instant::now();
        // Three addresses of one /64: one client.
        for addr in ["2001:db8:1:2::1", "2001:db8:1:2::2", "2001:db8:1:2:ffff::9"] {
            limiter.failed_at(ip(addr), t0);
        }
        assert!(limiter.refused_at(ip("2001:db8:1:2::77"), t0).is_some());
        assert!(limiter.refused_at(ip("2001:db8:1:3::1"), t0).is_none());
        for _ in 0..3 {
            limiter.failed_at(ip("::ffff:10.0.0.9"), t0);
        }
        assert!(limiter.refused_at(ip("10.0.0.9"), t0).is_some());
    }

    #[test]
    fn zero_means_no_limit() {
        let limiter = FailureLimiter::new(0, Duration::from_secs(10));
        let a = ip("::1");
        assert!((0..100).all(|_| limiter.failed(a).is_none()));
        assert!(limiter.refused(a).is_none());
    }

    /// Many addresses together guess no faster than one: once the table is full, the clients it
    /// does not hold share one count, and the table never grows past its capacity.
    #[test]
    fn a_full_table_puts_new_clients_in_one_shared_count() {
        let capacity = 64;
        let limiter = FailureLimiter::with_capacity(2, Duration::from_secs(60), capacity);
        let t0 = Instant::now();
        let addr = |i: u32| IpAddr::from((0x0a00_0000 + i).to_be_bytes());
        for i in 0..capacity as u32 {
            limiter.failed_at(addr(i), t0);
        }
        let mut refused_after = None;
        for i in 0..10u32 {
            if limiter.failed_at(addr(1000 + i), t0).is_some() {
                refused_after = Some(i + 1);
                break;
            }
        }
        assert_eq!(
            refused_after,
            Some(3),
            "the overflow count allows what one client may"
        );
        assert!(
            limiter.refused_at(addr(5000), t0).is_some(),
            "an unheld client shares it"
        );
        assert!(
            limiter.refused_at(addr(1), t0).is_none(),
            "a held client keeps its own"
        );
        assert!(limiter.lock().len() <= capacity + 1);
        // Once the windows end, the table makes room again.
        let later = t0 + Duration::from_secs(61);
        assert_eq!(limiter.failed_at(addr(9999), later), None);
        assert!(limiter.lock().contains_key(&Client::of(addr(9999))));
    }
}
