//! valsort's checksum: the sum, modulo 2^128, of the CRC-32 of every record. A sum does not
//! depend on order, so the checksums of the input and of the sorted output agree exactly when the
//! sort lost, duplicated and changed no record (short of a collision), and the checksums of parts
//! add up to the checksum of the whole.

use std::fmt;

use crate::Record;

/// A valsort checksum; shown as 32 lowercase hexadecimal digits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Checksum(pub u128);

impl Checksum {
    /// The checksum of `records`.
    pub fn of(records: &[Record]) -> Self {
        let mut sum = Self::default();
        records.iter().for_each(|r| sum.add(r));
        sum
    }

    /// Adds one record.
    pub fn add(&mut self, record: &Record) {
        self.0 = self.0.wrapping_add(u128::from(crc32fast::hash(record)));
    }
}

impl fmt::Display for Checksum {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:032x}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_add_their_crc32() {
        // CRC-32's standard check value is CRC("123456789") = 0xCBF43926.
        let mut record = [b' '; 100];
        record[..9].copy_from_slice(b"123456789");
        let crc = crc32fast::hash(&record);
        assert_eq!(crc32fast::hash(b"123456789"), 0xcbf4_3926);
        let mut sum = Checksum(u128::MAX - 1);
        sum.add(&record);
        assert_eq!(sum, Checksum(u128::from(crc) - 2), "wraps at 2^128");
        assert_eq!(
            Checksum::of(&[record, record]).to_string(),
            format!("{:032x}", 2 * u128::from(crc))
        );
    }
}
