//! The logistic-regression training points mote's `lr` and the peers read: one point a line, the
//! label (0 or 1) then 20 features, comma-separated, from a fixed seed so that every run and every
//! system gets the same file.

use std::io::Write;
use std::path::Path;

/// Features per point, as in the paper's data (vectors of 20 floats).
pub const FEATURES: usize = 20;

/// splitmix64: a small, fixed PRNG, so the file does not depend on a crate's version.
pub(super) struct SplitMix(pub(super) u64);

impl SplitMix {
    pub(super) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [-1, 1).
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 52) as f64 - 1.0
    }
}

/// Writes `points` points to `path`: features uniform in [-1, 1), the label whether a hidden
/// weight vector's dot product with them, plus a little noise, is positive.
pub fn write(path: &Path, points: u64, seed: u64) -> std::io::Result<()> {
    let mut rng = SplitMix(seed);
    let hidden: Vec<f64> = (0..FEATURES).map(|_| rng.unit()).collect();
    let mut out = std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(path)?);
    let mut x = [0.0; FEATURES];
    for _ in 0..points {
        for v in &mut x {
            *v = rng.unit();
        }
        let score: f64 = hidden.iter().zip(&x).map(|(w, x)| w * x).sum::<f64>() + 0.1 * rng.unit();
        write!(out, "{}", u8::from(score > 0.0))?;
        for v in &x {
            write!(out, ",{v:.6}")?;
        }
        out.write_all(b"\n")?;
    }
    out.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_file_is_the_same_every_time_and_well_formed() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        write(&a, 100, 7).unwrap();
        write(&b, 100, 7).unwrap();
        let text = std::fs::read_to_string(&a).unwrap();
        assert_eq!(text, std::fs::read_to_string(&b).unwrap());
        assert_eq!(text.lines().count(), 100);
        for line in text.lines() {
            let fields: Vec<&str> = line.split(',').collect();
            assert_eq!(fields.len(), 1 + FEATURES);
            assert!(fields[0] == "0" || fields[0] == "1");
            assert!(fields[1..].iter().all(|f| f.parse::<f64>().is_ok()));
        }
        let ones = text.lines().filter(|l| l.starts_with('1')).count();
        assert!((20..80).contains(&ones), "{ones} of 100 labelled 1");
    }
}
