//! `dna-visualisation`: the "squiggle" transform of a DNA sequence, serialised as JSON; the
//! longest function of the suite. It models SeBS's 504.dna-visualisation, which runs
//! `squiggle.transform(sequence)` from the Python `squiggle` package on a genome and uploads
//! `json.dumps` of the result.
//!
//! The transform draws the sequence as a walk: base `i` spans x from `i` to `i + 1` in two half
//! steps, and moves y by +1 (G), -1 (T) or not at all (A, C; with a bump of ±½ in between), so that
//! each base has a distinct shape. Like SeBS, the result is written out as
//! `[[x0, x1, …], [y0, y1, …]]` in Python's number format; the text stands in for the upload, so it
//! is produced in pieces and dropped, which keeps memory bounded for any sequence length.
//!
//! Request: `seed=42 size=10000000` (bases). Answer: `bases=… points=… last=x,y min_y=… max_y=…
//! json_bytes=…`.

use std::fmt::Write as _;

use suite_input::{Params, Rng};

const DEFAULT_BASES: u64 = 10_000_000;
/// The sequence is held in memory (one byte per base), the JSON is not.
const MAX_BASES: u64 = 64_000_000;
/// Bases transformed and serialised at a time: large enough to amortise the loop, small enough
/// to stay in cache.
const CHUNK_BASES: usize = 16 * 1024;

fn dna_visualisation(body: &[u8]) -> Vec<u8> {
    let params = Params::parse(body);
    let bases = params.u64_in("size", DEFAULT_BASES, 1, MAX_BASES) as usize;
    let sequence = genome(bases, &mut Rng::new(params.seed()));
    let mut json_bytes = 0;
    let walk = squiggle_json(&sequence, |piece| json_bytes += piece.len());
    format!(
        "seed={} bases={bases} points={} last={:?},{:?} min_y={:?} max_y={:?} json_bytes={json_bytes}\n",
        params.seed(),
        walk.points,
        walk.last.0,
        walk.last.1,
        walk.min_y,
        walk.max_y,
    )
    .into_bytes()
}

/// `bases` random bases with a bacterial genome's composition (about 44 % G+C, like the
/// *B. subtilis* genome SeBS uses).
fn genome(bases: usize, rng: &mut Rng) -> Vec<u8> {
    // Thresholds on a 16-bit draw: A 28 %, T 28 %, G 22 %, C 22 %.
    const A: u64 = 18_350;
    const T: u64 = 2 * A;
    const G: u64 = T + 14_418;
    let mut sequence = Vec::with_capacity(bases);
    while sequence.len() < bases {
        let bits = rng.next_u64();
        for shift in [0, 16, 32, 48] {
            let draw = (bits >> shift) & 0xffff;
            sequence.push(match draw {
                d if d < A => b'A',
                d if d < T => b'T',
                d if d < G => b'G',
                _ => b'C',
            });
        }
    }
    sequence.truncate(bases);
    sequence
}

/// What the answer reports about the walk.
#[derive(Debug, PartialEq)]
struct Walk {
    points: usize,
    last: (f64, f64),
    min_y: f64,
    max_y: f64,
}

/// Appends the two y values `squiggle.transform` gives each base (the bump, then where the base
/// ends) and returns the new running value. Anything but A, C, G, T (either case) is a flat step,
/// as in `squiggle`.
fn squiggle(bases: &[u8], mut running: f64, y: &mut Vec<f64>) -> f64 {
    for &base in bases {
        let (bump, step) = match base.to_ascii_uppercase() {
            b'A' => (0.5, 0.0),
            b'C' => (-0.5, 0.0),
            b'T' => (-0.5, -1.0),
            b'G' => (0.5, 1.0),
            _ => (0.0, 0.0),
        };
        y.push(running + bump);
        running += step;
        y.push(running);
    }
    running
}

/// Writes `json.dumps(squiggle.transform(sequence))` to `sink` in pieces and summarises the walk.
fn squiggle_json(sequence: &[u8], mut sink: impl FnMut(&[u8])) -> Walk {
    const PIECE: usize = 64 * 1024;
    let mut json = String::with_capacity(PIECE + 64);
    let flush = |json: &mut String, sink: &mut dyn FnMut(&[u8])| {
        sink(json.as_bytes());
        json.clear();
    };
    let points = 2 * sequence.len() + 1;

    // x is numpy.linspace(0, len, 2·len + 1): every half unit, printed as Python floats.
    json.push_str("[[");
    for k in 0..points {
        if k > 0 {
            json.push_str(", ");
        }
        let _ = write!(json, "{:?}", k as f64 * 0.5);
        if json.len() >= PIECE {
            flush(&mut json, &mut sink);
        }
    }

    json.push_str("], [");
    let mut y = Vec::with_capacity(2 * CHUNK_BASES + 1);
    y.push(0.0);
    let (mut running, mut min_y, mut max_y, mut first) = (0.0, 0.0f64, 0.0f64, true);
    for chunk in sequence.chunks(CHUNK_BASES) {
        running = squiggle(chunk, running, &mut y);
        for &value in &y {
            min_y = min_y.min(value);
            max_y = max_y.max(value);
            if !first {
                json.push_str(", ");
            }
            first = false;
            write_python_number(&mut json, value);
        }
        y.clear();
        flush(&mut json, &mut sink);
    }
    if sequence.is_empty() {
        json.push('0');
    }
    json.push_str("]]");
    flush(&mut json, &mut sink);

    Walk {
        points,
        last: (sequence.len() as f64, running),
        min_y,
        max_y,
    }
}

/// Python keeps `squiggle`'s whole-number y values as ints (`-3`) and the half steps as floats
/// (`-2.5`); print them the way `json.dumps` does.
fn write_python_number(out: &mut String, value: f64) {
    if value.fract() == 0.0 {
        let _ = write!(out, "{}", value as i64);
    } else {
        let _ = write!(out, "{value:?}");
    }
}

mote_sdk::handler!(dna_visualisation);

#[cfg(test)]
mod tests {
    use super::*;

    fn json(sequence: &[u8]) -> (String, Walk) {
        let mut text = Vec::new();
        let walk = squiggle_json(sequence, |piece| text.extend_from_slice(piece));
        (String::from_utf8(text).unwrap(), walk)
    }

    #[test]
    fn matches_the_python_package() {
        // The docstring example of squiggle.transform, through json.dumps.
        let (text, walk) = json(b"ATGC");
        assert_eq!(
            text,
            "[[0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0], [0, 0.5, 0, -0.5, -1, -0.5, 0, -0.5, 0]]"
        );
        assert_eq!(walk.points, 9);
        assert_eq!(walk.last, (4.0, 0.0));
        assert_eq!((walk.min_y, walk.max_y), (-1.0, 0.5));
        assert_eq!(
            json(b"ttc").0,
            "[[0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0], [0, -0.5, -1, -1.5, -2, -2.5, -2]]"
        );
        assert_eq!(json(b"").0, "[[0.0], [0]]");
    }

    #[test]
    fn pieces_join_into_the_same_text() {
        let sequence = genome(3 * CHUNK_BASES + 17, &mut Rng::new(5));
        let (text, walk) = json(&sequence);
        assert_eq!(walk.points, 2 * sequence.len() + 1);
        assert_eq!(text.matches(", ").count(), 2 * (walk.points - 1) + 1);
        assert!(text.starts_with("[[0.0, 0.5, ") && text.ends_with("]]"));
    }

    #[test]
    fn genome_has_the_intended_composition() {
        let sequence = genome(100_000, &mut Rng::new(1));
        let gc = sequence.iter().filter(|&&b| b == b'G' || b == b'C').count();
        assert!((42_000..46_000).contains(&gc), "{gc}");
    }
}
