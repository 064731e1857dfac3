//! `sha512`: the microsecond benchmark's compute-bound guest, after the paper's preemption
//! experiment: SHA-512 over a 64-byte block, `n` times in a chain (each digest is the next
//! input, SHA-512 digests being 64 bytes). The request body is `n=<count>` (default 1000); the
//! response is the last digest in hex, so the work cannot be optimised away.

use sha2::{Digest, Sha512};

fn rounds(body: &[u8]) -> u64 {
    std::str::from_utf8(body)
        .ok()
        .and_then(|s| s.trim().strip_prefix("n="))
        .and_then(|n| n.parse().ok())
        .unwrap_or(1000)
}

fn chain(n: u64) -> [u8; 64] {
    let mut block = [0x5a_u8; 64];
    for _ in 0..n {
        block = Sha512::digest(block).into();
    }
    block
}

fn sha512(body: &[u8]) -> Vec<u8> {
    chain(rounds(body))
        .iter()
        .flat_map(|b| {
            let hex = b"0123456789abcdef";
            [hex[usize::from(b >> 4)], hex[usize::from(b & 15)]]
        })
        .collect()
}

mote_sdk::handler!(sha512);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chains_digests() {
        assert_eq!(chain(0), [0x5a; 64]);
        let once: [u8; 64] = Sha512::digest([0x5a_u8; 64]).into();
        assert_eq!(chain(1), once);
        assert_eq!(rounds(b"n=7"), 7);
        assert_eq!(rounds(b""), 1000);
        assert_eq!(sha512(b"n=0").len(), 128);
    }
}
