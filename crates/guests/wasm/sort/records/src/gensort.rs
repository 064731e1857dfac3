//! gensort's binary records: what `gensort` without `-a` writes, byte for byte, in the layout of
//! gensort 1.2 and of Hadoop TeraGen (`GenSort.java`, after gensort 1.1). Record `n`, made from the
//! generator's number `r` for it ([`crate::rand16`]):
//!
//! | bytes  | content |
//! |--------|---------|
//! | 0–9    | the key: the top 10 bytes of `r`, big-endian |
//! | 10–11  | `00 11` |
//! | 12–43  | `n` as 32 uppercase hexadecimal digits |
//! | 44–47  | `88 99 AA BB` |
//! | 48–95  | the low 48 bits of `r` as 12 uppercase hexadecimal digits, each written 4 times |
//! | 96–99  | `CC DD EE FF` |
//!
//! gensort 1.3 and later fill bytes 10–99 from the next nine random numbers instead; the keys, and
//! so the sorted order and every category, are the same in both.

use crate::rand16;
use crate::{KEY_LEN, RECORD_LEN, Record};

const HEX_DIGITS: &[u8; 16] = b"0123456789ABCDEF";

/// Records `first..first + count`. Panics if their bytes do not fit in a `usize`.
pub fn generate(first: u64, count: usize) -> Vec<u8> {
    let len = count.checked_mul(RECORD_LEN);
    let mut out = Vec::with_capacity(len.expect("the records' size overflows usize"));
    let first = u128::from(first);
    let mut rand = rand16::advance(0, first);
    for number in first..first + count as u128 {
        rand = rand16::next(rand);
        out.extend_from_slice(&record(number, rand));
    }
    out
}

/// Record `number`, given the generator's number for it.
fn record(number: u128, rand: u128) -> Record {
    let mut record = [0; RECORD_LEN];
    record[..KEY_LEN].copy_from_slice(&rand.to_be_bytes()[..KEY_LEN]);
    record[10..12].copy_from_slice(&[0x00, 0x11]);
    for (i, digit) in record[12..44].iter_mut().enumerate() {
        *digit = HEX_DIGITS[(number >> (124 - 4 * i)) as usize & 0xf];
    }
    record[44..48].copy_from_slice(&[0x88, 0x99, 0xaa, 0xbb]);
    for (i, filler) in record[48..96].chunks_exact_mut(4).enumerate() {
        filler.fill(HEX_DIGITS[(rand >> (44 - 4 * i)) as usize & 0xf]);
    }
    record[96..].copy_from_slice(&[0xcc, 0xdd, 0xee, 0xff]);
    record
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Checksum, records};

    #[test]
    fn record_0_is_gensorts() {
        // Made from the layout above and C, the generator's first number from 0: key "JimGrayRIP",
        // record number 0, filler from C's low 48 bits 0x202020202001.
        let mut want = b"JimGrayRIP".to_vec();
        want.extend_from_slice(&[0x00, 0x11]);
        want.extend_from_slice(&[b'0'; 32]);
        want.extend_from_slice(&[0x88, 0x99, 0xaa, 0xbb]);
        want.extend_from_slice(b"222200002222000022220000222200002222000000001111");
        want.extend_from_slice(&[0xcc, 0xdd, 0xee, 0xff]);
        assert_eq!(generate(0, 1), want);
    }

    #[test]
    fn records_take_the_numbers_of_random16s_table() {
        // Record 2^k - 1 takes f^(2^k)(0), which Random16.java lists as c_k (see rand16's tests).
        for (number, c, key, filler) in [
            (
                1,
                0x95e0e48262b3edfe04479485c755b646u128,
                "95e0e48262b3edfe0447",
                "9485C755B646",
            ),
            (
                3,
                0x882a02c315362b60765f100068b33a1c,
                "882a02c315362b60765f",
                "100068B33A1C",
            ),
            (
                1023,
                0x991965329dccb28d581199ab18c5fc00,
                "991965329dccb28d5811",
                "99AB18C5FC00",
            ),
        ] {
            let r = generate(number, 1);
            assert_eq!(hex(&r[..10]), key);
            assert_eq!(&r[..10], &c.to_be_bytes()[..10]);
            let digits: Vec<u8> = r[48..96].iter().step_by(4).copied().collect();
            assert_eq!(digits, filler.as_bytes(), "record {number}");
            assert_eq!(&r[12..44], format!("{number:032X}").as_bytes());
        }
    }

    /// Checksums and keys of slices of the data set from an independent implementation: Python's
    /// big integers stepping the LCG from 0 (no skip-ahead), the layout above, zlib's CRC-32.
    #[test]
    fn slices_match_a_reference_implementation() {
        let data = generate(0, 1000);
        let checksum = Checksum::of(records(&data).unwrap());
        assert_eq!(checksum.to_string(), "0000000000000000000001f9ffe645ec");
        let keys: Vec<_> = records(&data)
            .unwrap()
            .iter()
            .map(|r| hex(&r[..10]))
            .collect();
        assert_eq!(keys[999], "4d15a82070c03ee39bf5");
        assert_eq!(keys.iter().min().unwrap(), "00675bef0e528c74d1e4");
        assert_eq!(keys.iter().max().unwrap(), "ffb4d5e8475ed345334b");

        let data = generate(100_000, 1000);
        assert_eq!(hex(&data[..10]), "00c9ba0a5745e72b3396");
        let checksum = Checksum::of(records(&data).unwrap());
        assert_eq!(checksum.to_string(), "0000000000000000000001e1b1e8b6c4");
    }

    #[test]
    fn slices_generated_apart_are_the_whole() {
        let whole = generate(5, 300);
        assert_eq!([generate(5, 120), generate(125, 180)].concat(), whole);
        assert_eq!(
            &generate(u64::MAX, 1)[12..44],
            b"0000000000000000FFFFFFFFFFFFFFFF"
        );
    }

    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }
}
