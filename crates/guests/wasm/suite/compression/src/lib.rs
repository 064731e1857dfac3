//! `compression`: deflates a few megabytes of generated text-like data and inflates it again,
//! modelling SeBS's 311.compression (which zips a directory of files with Python's `shutil`, i.e.
//! zlib's deflate at level 6). The deflate is `miniz_oxide`, a pure-Rust port of miniz.
//!
//! Request: `seed=42 size=5120` (KiB of input). Answer: `in=… out=… crc32=… roundtrip=ok`, with the
//! CRC-32 a zip archive would store for the input. A round trip that does not give the input back
//! answers `roundtrip=FAILED` instead.

use suite_input::{Params, Rng};

const DEFAULT_KIB: u64 = 5 * 1024;
/// Input, deflated data and the round trip's copy must fit in the default 128 MiB memory limit.
const MAX_KIB: u64 = 32 * 1024;
/// zlib's default level, which `shutil.make_archive` uses.
const LEVEL: u8 = 6;

fn compression(body: &[u8]) -> Vec<u8> {
    let params = Params::parse(body);
    let size = params.u64_in("size", DEFAULT_KIB, 1, MAX_KIB) as usize * 1024;
    let input = documents(size, &mut Rng::new(params.seed()));
    let crc = crc32(&input);
    let compressed = miniz_oxide::deflate::compress_to_vec(&input, LEVEL);
    // Into a buffer of the original size, as unzip does (a zip entry records it): a growing
    // buffer would briefly need twice the memory.
    let mut output = vec![0; input.len()];
    let inflated = miniz_oxide::inflate::decompress_slice_iter_to_slice(
        &mut output,
        std::iter::once(compressed.as_slice()),
        false,
        false,
    );
    let roundtrip = match inflated {
        Ok(len) if len == input.len() && output == input && crc32(&output) == crc => "ok",
        _ => "FAILED",
    };
    format!(
        "seed={} in={} out={} crc32={crc:08x} roundtrip={roundtrip}\n",
        params.seed(),
        input.len(),
        compressed.len(),
    )
    .into_bytes()
}

/// `size` bytes of what a directory of documents holds: prose drawn from a Zipf-distributed
/// vocabulary (very compressible, as natural language is) interleaved with log lines full of
/// numbers and hexadecimal ids (much less so). Deflate gets about 3:1 out of the mix.
fn documents(size: usize, rng: &mut Rng) -> Vec<u8> {
    let vocabulary: Vec<String> = (0..4096).map(|_| word(rng)).collect();
    let ln_words = (vocabulary.len() as f64).ln();
    let mut out = Vec::with_capacity(size + 256);
    let mut timestamp = 1_700_000_000u64 + rng.below(1 << 20);
    while out.len() < size {
        if rng.below(10) < 7 {
            let mut column = 0;
            for i in 0..30 + rng.below(60) {
                // e^(u·ln N) - 1 is spread log-uniformly over 0..N: frequency ∝ 1/rank, Zipf's
                // law, without a cumulative table to search.
                let rank = ((rng.unit() * ln_words).exp() as usize).saturating_sub(1);
                let word = &vocabulary[rank.min(vocabulary.len() - 1)];
                if column + word.len() > 78 {
                    out.push(b'\n');
                    column = 0;
                } else if i > 0 {
                    out.push(b' ');
                    column += 1;
                }
                out.extend_from_slice(word.as_bytes());
                column += word.len();
            }
            out.extend_from_slice(b".\n\n");
        } else {
            timestamp += rng.below(5000);
            let line = format!(
                "{timestamp} INFO request id={:016x} user={} bytes={} took={}.{:03}ms\n",
                rng.next_u64(),
                rng.below(100_000),
                rng.below(1 << 24),
                rng.below(900),
                rng.below(1000),
            );
            out.extend_from_slice(line.as_bytes());
        }
    }
    out.truncate(size);
    out
}

/// A pronounceable made-up word of 1 to 4 syllables.
fn word(rng: &mut Rng) -> String {
    const ONSETS: [&str; 16] = [
        "b", "c", "d", "f", "g", "h", "l", "m", "n", "p", "r", "s", "t", "v", "st", "tr",
    ];
    const VOWELS: [&str; 8] = ["a", "e", "i", "o", "u", "ea", "ou", "y"];
    (0..1 + rng.below(4))
        .map(|_| {
            let onset = ONSETS[rng.below(ONSETS.len() as u64) as usize];
            let vowel = VOWELS[rng.below(VOWELS.len() as u64) as usize];
            format!("{onset}{vowel}")
        })
        .collect()
}

/// CRC-32 (IEEE 802.3, reflected), the checksum zip and gzip store for each file.
fn crc32(bytes: &[u8]) -> u32 {
    const TABLE: [u32; 256] = {
        let mut table = [0u32; 256];
        let mut i = 0;
        while i < 256 {
            let mut c = i as u32;
            let mut bit = 0;
            while bit < 8 {
                c = if c & 1 != 0 {
                    0xedb8_8320 ^ (c >> 1)
                } else {
                    c >> 1
                };
                bit += 1;
            }
            table[i] = c;
            i += 1;
        }
        table
    };
    !bytes.iter().fold(!0u32, |crc, &b| {
        TABLE[((crc ^ u32::from(b)) & 0xff) as usize] ^ (crc >> 8)
    })
}

mote_sdk::handler!(compression);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc32_matches_the_standard_check_value() {
        assert_eq!(crc32(b"123456789"), 0xcbf4_3926);
        assert_eq!(crc32(b""), 0);
    }

    #[test]
    fn round_trips_semi_compressible_text() {
        let out = String::from_utf8(compression(b"size=256")).unwrap();
        assert!(out.contains("in=262144 "), "{out}");
        assert!(out.contains("roundtrip=ok"), "{out}");
        let compressed: usize = out
            .split_whitespace()
            .find_map(|kv| kv.strip_prefix("out="))
            .unwrap()
            .parse()
            .unwrap();
        // Text-like: clearly compressible, but far from trivially so.
        assert!(
            compressed > 262_144 / 8 && compressed < 262_144 / 2,
            "{out}"
        );
    }
}
