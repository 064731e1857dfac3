//! The text `mote bench jobs --wordcount` counts: lines of 8 to 12 words separated by single
//! spaces, each word drawn by Zipf's law (exponent [`EXPONENT`]) from a vocabulary of
//! [`VOCABULARY`] synthetic words, all from a seed, so that every run and every system gets the
//! same bytes.
//!
//! Word `r` (the `r + 1`-th most frequent) is lowercase ASCII letters, longer the rarer it is, as
//! in natural languages (Zipf's law of abbreviation): 1 to 4 letters for the first ranks, up to
//! 10 for the last, about 5 for a word of the text on average. Words are only letters and
//! separators only ` ` and `\n`, so every system's whitespace split agrees on them. Ranks are
//! drawn with Walker's alias method, a table look-up per word, so 256 MiB take a few seconds.

use super::points::SplitMix;
use std::collections::HashSet;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Distinct words the text draws from.
pub const VOCABULARY: usize = 500_000;
/// Zipf's exponent: the word of rank `r` (from 1) occurs in proportion to `1 / r^EXPONENT`.
/// At 1.0, as in English, the most frequent word is 7% of the text.
pub const EXPONENT: f64 = 1.0;

/// A stream of lines of Zipf-distributed words.
pub struct Text {
    /// Every word's letters, one after another.
    letters: Vec<u8>,
    /// Where each word ends in `letters`, by rank.
    ends: Vec<u32>,
    ranks: Alias,
    rng: SplitMix,
}

impl Text {
    /// The text of `seed`: its vocabulary, then its words, both from the seed.
    pub fn new(seed: u64) -> Self {
        let mut rng = SplitMix(seed);
        let mut letters = Vec::new();
        let mut ends = Vec::with_capacity(VOCABULARY);
        let mut seen = HashSet::with_capacity(VOCABULARY);
        for rank in 0..VOCABULARY {
            let bits = (usize::BITS - (rank + 1).leading_zeros()) as usize;
            let mut len = 1 + bits / 3 + (rng.next() % 4) as usize;
            let mut word = Vec::new();
            for attempt in 1.. {
                word.clear();
                word.extend((0..len).map(|_| b'a' + (rng.next() % 26) as u8));
                if seen.insert(word.clone()) {
                    break;
                }
                // Short lengths run out of words (there are 26 of one letter).
                if attempt % 4 == 0 {
                    len += 1;
                }
            }
            letters.extend_from_slice(&word);
            ends.push(u32::try_from(letters.len()).expect("the vocabulary fits 4 GiB"));
        }
        let weights: Vec<f64> = (1..=VOCABULARY)
            .map(|r| (r as f64).powf(-EXPONENT))
            .collect();
        Self {
            letters,
            ends,
            ranks: Alias::new(&weights),
            rng,
        }
    }

    /// The word of `rank`, 0 the most frequent.
    pub fn word(&self, rank: usize) -> &[u8] {
        let start = match rank {
            0 => 0,
            r => self.ends[r - 1] as usize,
        };
        &self.letters[start..self.ends[rank] as usize]
    }

    /// Appends the next line, `\n` included, to `out`.
    pub fn line(&mut self, out: &mut Vec<u8>) {
        let words = 8 + self.rng.next() % 5;
        for i in 0..words {
            let rank = self.ranks.sample(self.rng.next());
            out.extend_from_slice(self.word(rank));
            out.push(if i + 1 == words { b'\n' } else { b' ' });
        }
    }
}

/// Writes about `bytes` of the text of `seed` to `objects` files `text-00000`, ... in `dir`, in
/// order: each of whole lines, each at least its share of `bytes` and less than a line more.
pub fn write(dir: &Path, bytes: u64, objects: usize, seed: u64) -> std::io::Result<Vec<PathBuf>> {
    let mut text = Text::new(seed);
    let objects = objects.max(1);
    let mut line = Vec::with_capacity(256);
    let mut paths = Vec::with_capacity(objects);
    for k in 0..objects {
        let share = bytes / objects as u64 + u64::from((k as u64) < bytes % objects as u64);
        let path = dir.join(format!("text-{k:05}"));
        let mut out = std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(&path)?);
        let mut written = 0;
        while written < share {
            line.clear();
            text.line(&mut line);
            out.write_all(&line)?;
            written += line.len() as u64;
        }
        out.flush()?;
        paths.push(path);
    }
    Ok(paths)
}

/// Walker's alias method: draws index `i` with probability `weights[i] / sum` from one random
/// number, with one look-up.
struct Alias {
    /// Column `i` keeps `i` when the low 32 bits of the draw are below this, else takes
    /// `alias[i]`.
    keep: Vec<u64>,
    alias: Vec<u32>,
}

impl Alias {
    /// Vose's construction: columns of height 1 on average; each column under it is topped up
    /// from one over it.
    fn new(weights: &[f64]) -> Self {
        let n = weights.len();
        let sum: f64 = weights.iter().sum();
        let mut height: Vec<f64> = weights.iter().map(|w| w * n as f64 / sum).collect();
        let mut keep = vec![1u64 << 32; n];
        let mut alias: Vec<u32> = (0..n as u32).collect();
        let (mut under, mut over): (Vec<usize>, Vec<usize>) =
            (0..n).partition(|&i| height[i] < 1.0);
        while let (Some(u), Some(&o)) = (under.pop(), over.last()) {
            keep[u] = (height[u] * (1u64 << 32) as f64) as u64;
            alias[u] = o as u32;
            height[o] -= 1.0 - height[u];
            if height[o] < 1.0 {
                over.pop();
                under.push(o);
            }
        }
        // What is left is 1 up to rounding: those columns keep their own index.
        Self { keep, alias }
    }

    fn sample(&self, random: u64) -> usize {
        // The high 32 bits pick the column (multiply-shift, no division), the low ones decide.
        let column = (((random >> 32) * self.keep.len() as u64) >> 32) as usize;
        match (random & 0xffff_ffff) < self.keep[column] {
            true => column,
            false => self.alias[column] as usize,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn the_same_seed_gives_the_same_text_and_another_seed_another() {
        let lines = |seed| {
            let mut text = Text::new(seed);
            let mut out = Vec::new();
            for _ in 0..1000 {
                text.line(&mut out);
            }
            out
        };
        let a = lines(1);
        assert_eq!(a, lines(1));
        assert_ne!(a, lines(2));
        for line in String::from_utf8(a).unwrap().lines() {
            let words: Vec<&str> = line.split(' ').collect();
            assert!((8..=12).contains(&words.len()), "{line}");
            assert!(
                words
                    .iter()
                    .all(|w| !w.is_empty() && w.bytes().all(|b| b.is_ascii_lowercase()))
            );
        }
    }

    #[test]
    fn the_vocabulary_is_distinct_words_longer_the_rarer() {
        let text = Text::new(3);
        let words: HashSet<&[u8]> = (0..VOCABULARY).map(|r| text.word(r)).collect();
        assert_eq!(words.len(), VOCABULARY);
        let mean = |ranks: std::ops::Range<usize>| {
            let n = ranks.len() as f64;
            ranks.map(|r| text.word(r).len() as f64).sum::<f64>() / n
        };
        assert!(mean(0..100) < 4.5, "{}", mean(0..100));
        assert!(mean(VOCABULARY - 1000..VOCABULARY) > 8.0);
        assert!((0..VOCABULARY).all(|r| (1..=12).contains(&text.word(r).len())));
    }

    #[test]
    fn objects_are_whole_lines_and_add_up_to_the_size_asked() {
        let dir = tempfile::tempdir().unwrap();
        let bytes = 1 << 20;
        let paths = write(dir.path(), bytes, 3, 5).unwrap();
        let mut total = 0;
        for path in &paths {
            let object = std::fs::read(path).unwrap();
            assert!(object.ends_with(b"\n"));
            let share = bytes / 3;
            assert!((share..share + 200).contains(&(object.len() as u64)));
            total += object.len() as u64;
        }
        assert!((bytes..bytes + 600).contains(&total), "{total}");
    }

    #[test]
    fn word_frequencies_follow_zipf_at_the_head() {
        let mut text = Text::new(9);
        let mut out = Vec::new();
        while out.len() < 4 << 20 {
            text.line(&mut out);
        }
        let mut counts: HashMap<&[u8], f64> = HashMap::new();
        let mut words = 0.0;
        for word in out
            .split(|&b| b == b' ' || b == b'\n')
            .filter(|w| !w.is_empty())
        {
            *counts.entry(word).or_default() += 1.0;
            words += 1.0;
        }
        let share = |rank: usize| counts[text.word(rank)] / words;
        let harmonic: f64 = (1..=VOCABULARY).map(|r| (r as f64).powf(-EXPONENT)).sum();
        let first = share(0);
        assert!((first * harmonic - 1.0).abs() < 0.03, "{first}");
        for rank in [1, 3, 9, 99] {
            let expected = ((rank + 1) as f64).powf(EXPONENT);
            let ratio = first / share(rank);
            assert!(
                (ratio / expected - 1.0).abs() < 0.15,
                "rank {rank}: {ratio} against {expected}"
            );
        }
    }
}
