//! gensort's random numbers (`rand16.c`, and Hadoop TeraGen's `Random16.java` after it): a 128-bit
//! linear congruential generator, x' = A·x + C mod 2^128, started at 0. Record `n` takes the
//! `n + 1`-th number, and [`advance`] jumps there in O(log n) steps, so any slice of the data set
//! can be generated on its own, by any function, without generating what comes before it.

/// The multiplier, from L'Ecuyer's tables of LCGs with a good lattice structure (1999).
pub const A: u128 = 0x2360_ed05_1fc6_5da4_4385_df64_9fcc_f645;
/// The increment: odd, as a full-period LCG modulo a power of two needs. Its top 10 bytes spell
/// "JimGrayRIP", so that is the key of record 0.
pub const C: u128 = 0x4a69_6d47_7261_7952_4950_2020_2020_2001;

/// The number that follows `x`.
pub fn next(x: u128) -> u128 {
    A.wrapping_mul(x).wrapping_add(C)
}

/// The number `steps` steps after `x`. The generator is an affine map f(x) = A·x + C, and so is
/// each power f^(2^k)(x) = a_k·x + c_k, with a_(k+1) = a_k² and c_(k+1) = a_k·c_k + c_k; applying
/// the powers for the bits of `steps` takes at most 128 of them.
pub fn advance(x: u128, steps: u128) -> u128 {
    let (mut x, mut steps) = (x, steps);
    let (mut a, mut c) = (A, C);
    while steps != 0 {
        if steps & 1 == 1 {
            x = a.wrapping_mul(x).wrapping_add(c);
        }
        c = a.wrapping_mul(c).wrapping_add(c);
        a = a.wrapping_mul(a);
        steps >>= 1;
    }
    x
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Rows `[k] = (a_k, c_k)` of the table of f^(2^k) in Hadoop's `Random16.java`
    /// (hadoop-mapreduce-examples, `org/apache/hadoop/examples/terasort/Random16.java`, `genArray`),
    /// which its author took from gensort's `rand16.c`.
    const RANDOM16_GEN_ARRAY: [(u32, u128, u128); 11] = [
        (
            0,
            0x2360ed051fc65da44385df649fccf645,
            0x4a696d47726179524950202020202001,
        ),
        (
            1,
            0x17bce35bdf69743c529ed9eb20e0ae99,
            0x95e0e48262b3edfe04479485c755b646,
        ),
        (
            2,
            0xf4dd417327db7a9bd194dfbe42d45771,
            0x882a02c315362b60765f100068b33a1c,
        ),
        (
            3,
            0x6347af777a7898f6d1a2d6f33505ffe1,
            0x5efc4abfaca23e8ca8edb1f2dfbf6478,
        ),
        (
            10,
            0xae4f079d54fbece1478331d3c6bef001,
            0x991965329dccb28d581199ab18c5fc00,
        ),
        (
            31,
            0x0a88c0a91cff430829e6c7de00000001,
            0x9d6f1a00a8f3f76e7eb8d4bf80000000,
        ),
        (
            63,
            0xaf85d0c629e6c7de0000000000000001,
            0x7858ca25feb8d4bf8000000000000000,
        ),
        (
            64,
            0x5f0ba18c53cd8fbc0000000000000001,
            0xf0b1944bfd71a97f0000000000000000,
        ),
        (
            100,
            0x3cd8fbc0000000000000000000000001,
            0xd71a97f0000000000000000000000000,
        ),
        (
            126,
            0x00000000000000000000000000000001,
            0xc0000000000000000000000000000000,
        ),
        (
            127,
            0x00000000000000000000000000000001,
            0x80000000000000000000000000000000,
        ),
    ];

    #[test]
    fn skip_ahead_matches_random16s_published_powers() {
        for (k, a, c) in RANDOM16_GEN_ARRAY {
            let steps = 1u128 << k;
            // f^(2^k)(0) = c_k, and f^(2^k)(1) - f^(2^k)(0) = a_k.
            assert_eq!(advance(0, steps), c, "c of f^(2^{k})");
            assert_eq!(advance(1, steps).wrapping_sub(c), a, "a of f^(2^{k})");
        }
        assert_eq!((A, C), (RANDOM16_GEN_ARRAY[0].1, RANDOM16_GEN_ARRAY[0].2));
    }

    #[test]
    fn advancing_is_stepping() {
        let mut x = 0;
        for n in 0..300 {
            assert_eq!(advance(0, n), x, "after {n} steps");
            x = next(x);
        }
    }

    proptest! {
        #[test]
        fn advances_compose(x: u128, n in 0u128..1 << 100, m in 0u128..1 << 100) {
            prop_assert_eq!(advance(advance(x, n), m), advance(x, n + m));
        }
    }
}
