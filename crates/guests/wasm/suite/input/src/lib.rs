//! The input side of every function in the suite: the request's parameter string ([`Params`])
//! and the seeded generator ([`Rng`]) its workload is drawn from.
//!
//! SeBS functions read their inputs from object storage; mote functions have no storage, so each
//! one generates an input of the same shape from a seed instead. The same request therefore always
//! does the same work and gives the same answer, which is what both a benchmark and a test need.

/// The request's parameters: a small `key=value` string such as `seed=7 size=2000`.
///
/// Parsing is lenient, because the body is typed by people and benchmark scripts: pairs may be
/// separated by whitespace, `,`, `;` or `&`, and anything that is not a `key=value` pair is
/// ignored. An empty body means "all defaults".
#[derive(Debug, Default, Clone)]
pub struct Params {
    pairs: Vec<(String, String)>,
}

impl Params {
    /// Parses a request body; never fails.
    pub fn parse(body: &[u8]) -> Self {
        let text = String::from_utf8_lossy(body);
        let pairs = text
            .split(|c: char| c.is_whitespace() || matches!(c, ',' | ';' | '&'))
            .filter_map(|token| token.split_once('='))
            .map(|(key, value)| (key.trim().to_ascii_lowercase(), value.trim().to_owned()))
            .filter(|(key, _)| !key.is_empty())
            .collect();
        Self { pairs }
    }

    /// The value of the last `key=` (so appending a pair overrides an earlier one).
    pub fn get(&self, key: &str) -> Option<&str> {
        self.pairs
            .iter()
            .rev()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// `key` as an unsigned integer, or `default` if it is missing or not a number. Underscores
    /// are allowed as digit separators (`size=4_000_000`).
    pub fn u64(&self, key: &str, default: u64) -> u64 {
        self.get(key)
            .and_then(|v| v.replace('_', "").parse().ok())
            .unwrap_or(default)
    }

    /// Like [`Params::u64`], clamped to `min..=max` so that a typo cannot ask a function for
    /// more memory than it is allowed, or for a degenerate empty input.
    pub fn u64_in(&self, key: &str, default: u64, min: u64, max: u64) -> u64 {
        self.u64(key, default).clamp(min, max)
    }

    /// The `seed=` parameter every suite function takes.
    pub fn seed(&self) -> u64 {
        self.u64("seed", DEFAULT_SEED)
    }
}

/// The seed used when the request names none.
pub const DEFAULT_SEED: u64 = 42;

/// SplitMix64: one word of state, passes BigCrush, and is a handful of instructions per number,
/// so generating the input costs little next to the work done on it. Not for cryptography.
#[derive(Debug, Clone)]
pub struct Rng {
    state: u64,
}

impl Rng {
    /// A generator whose whole sequence is determined by `seed`.
    pub fn new(seed: u64) -> Self {
        Self { state: seed }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (`n > 0`). Uses the high half of a 128-bit product instead of `%`;
    /// the bias is below 2^-32 for every `n` the suite uses, far under anything measurable.
    pub fn below(&mut self, n: u64) -> u64 {
        debug_assert!(n > 0);
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// A number in `[0, 1)` with 53 random bits.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_leniently_with_defaults() {
        let p = Params::parse(b"seed=7  size=2_000,ms=5;junk x= =3 SIZE=2500");
        assert_eq!(p.seed(), 7);
        assert_eq!(p.u64("size", 1), 2500);
        assert_eq!(p.u64("ms", 1), 5);
        assert_eq!(p.u64("x", 9), 9);
        assert_eq!(p.u64("missing", 9), 9);
        assert_eq!(Params::parse(b"").seed(), DEFAULT_SEED);
        assert_eq!(Params::parse(b"size=0").u64_in("size", 10, 1, 100), 1);
        assert_eq!(
            Params::parse(&[0xff, b' ', b's', b'=', b'1']).u64("s", 0),
            1
        );
    }

    #[test]
    fn generator_is_deterministic_and_in_range() {
        let (mut a, mut b) = (Rng::new(1), Rng::new(1));
        for _ in 0..1000 {
            assert_eq!(a.next_u64(), b.next_u64());
            assert!(a.below(10) < 10);
            let u = a.unit();
            assert!((0.0..1.0).contains(&u));
            b.below(10);
            b.unit();
        }
        assert_ne!(Rng::new(1).next_u64(), Rng::new(2).next_u64());
    }
}
