//! CI's short pass: a target's seeds, then inputs made by mutating them the way a fuzzer's
//! first rounds do (bit flips, boundary values, insertions, deletions, splices), from a fixed
//! random seed so that a failure reproduces. It finds what is near the seeds; what is far from
//! them is the long runs' work.

use crate::Target;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};

/// Runs `target` on its seeds and on `inputs` mutations of them.
///
/// # Panics
///
/// When the target does, after printing the input (hex) that made it.
pub fn short_pass(target: &Target, inputs: usize) {
    let seeds = (target.seeds)();
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ target.name.len() as u64);
    let mut input = Vec::new();
    for n in 0..seeds.len() + inputs {
        input.clear();
        match seeds.get(n) {
            Some(seed) => input.extend_from_slice(seed),
            None => mutate(&mut rng, &seeds, &mut input),
        }
        if let Err(panic) = catch_unwind(AssertUnwindSafe(|| (target.run)(&input))) {
            eprintln!(
                "{} failed on input {n}: {}",
                target.name,
                input.iter().map(|b| format!("{b:02x}")).collect::<String>()
            );
            resume_unwind(panic);
        }
    }
}

/// Values at the edges of the integer types, where parsers' arithmetic breaks.
const EDGES: [u64; 8] = [
    0,
    1,
    0x7f,
    0x80,
    0xff,
    u32::MAX as u64,
    i64::MAX as u64,
    u64::MAX,
];

fn mutate(rng: &mut Rng, seeds: &[Vec<u8>], input: &mut Vec<u8>) {
    if rng.below(16) == 0 || seeds.is_empty() {
        // Bytes from nowhere: what a parser's first checks must refuse.
        let len = rng.below(64);
        input.extend((0..len).map(|_| rng.next() as u8));
        return;
    }
    input.extend_from_slice(&seeds[rng.below(seeds.len())]);
    for _ in 0..1 + rng.below(4) {
        let at = rng.below(input.len() + 1);
        match rng.below(7) {
            0 if at < input.len() => input[at] ^= 1 << rng.below(8),
            1 if at < input.len() => input[at] = EDGES[rng.below(EDGES.len())] as u8,
            2 => {
                let edge = EDGES[rng.below(EDGES.len())].to_le_bytes();
                let width = [1, 2, 4, 8][rng.below(4)];
                let end = (at + width).min(input.len());
                input.splice(at..end, edge[..width].iter().copied());
            }
            3 => {
                let len = 1 + rng.below(8);
                input.splice(at..at, (0..len).map(|_| rng.next() as u8));
            }
            4 => {
                let end = (at + 1 + rng.below(8)).min(input.len());
                input.drain(at..end);
            }
            5 => input.truncate(at),
            _ => {
                let other = &seeds[rng.below(seeds.len())];
                let from = rng.below(other.len() + 1);
                input.truncate(at);
                input.extend_from_slice(&other[from..]);
            }
        }
    }
}

/// xorshift64*: fast, deterministic, and plenty for choosing mutations.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A number in `0..n` (`n` > 0).
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}
