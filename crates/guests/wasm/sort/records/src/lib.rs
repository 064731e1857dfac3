//! The data of the microtask paper's distributed sort (`000_…`, section IV), without any I/O: what
//! the sort's functions (`sort/gen`, `sort/partition`, `sort/category`, `sort/validate`) compute
//! between reading and writing objects, so all of it is tested natively.
//!
//! The data set is gensort's 100-byte binary records with 10-byte keys ([`gensort`], generated
//! from [`rand16`]), checked as valsort does with a [`Checksum`]. The sort splits records into
//! categories by the first key byte ([`category`], [`partition`]), sorts each category by key
//! ([`sort`]), and [`validate`] summarises a sorted category; categories are ranges of keys in
//! order, so the whole output is sorted when each category is and each one's last key is at most
//! the next one's first.
//!
//! Data moves as plain bytes, as objects hold it; [`records`] and [`records_mut`] view bytes as
//! records without copying.

pub mod checksum;
pub mod gensort;
pub mod rand16;
mod record;

pub use checksum::Checksum;
pub use record::{
    Error, KEY_LEN, Key, MAX_CATEGORIES, RECORD_LEN, Record, key, records, records_mut,
};

/// The category, out of `categories`, of a record: its first key byte scaled to `0..categories`,
/// so category `c` holds a range of keys and every key in it sorts before every key in `c + 1`.
/// gensort's keys are uniform, so the categories come out nearly equal in size.
pub fn category(record: &Record, categories: usize) -> usize {
    usize::from(record[0]) * categories / 256
}

/// Splits `bytes` into `categories` parts by [`category`], keeping the records' order within each.
///
/// Each part is allocated once at its exact size (a first pass counts the records per category),
/// so the parts take as much memory as the input and no more.
pub fn partition(bytes: &[u8], categories: usize) -> Result<Vec<Vec<u8>>, Error> {
    if !(1..=MAX_CATEGORIES).contains(&categories) {
        return Err(Error::Categories { categories });
    }
    let records = records(bytes)?;
    let mut counts = vec![0; categories];
    for record in records {
        counts[category(record, categories)] += 1;
    }
    let mut parts: Vec<Vec<u8>> = counts
        .into_iter()
        .map(|n| Vec::with_capacity(n * RECORD_LEN))
        .collect();
    for record in records {
        parts[category(record, categories)].extend_from_slice(record);
    }
    Ok(parts)
}

/// Sorts the records in `bytes` by key, in place. Records with equal keys may end in any order,
/// which valsort accepts too.
pub fn sort(bytes: &mut [u8]) -> Result<(), Error> {
    records_mut(bytes)?.sort_unstable_by(|a, b| a[..KEY_LEN].cmp(&b[..KEY_LEN]));
    Ok(())
}

/// What [`validate`] found in a run of records.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Summary {
    /// How many records there are.
    pub records: u64,
    /// Their checksum.
    pub checksum: Checksum,
    /// The first record's key, if there is a record.
    pub first_key: Option<Key>,
    /// The last record's key, if there is a record.
    pub last_key: Option<Key>,
    /// How many records have a smaller key than the record before them; 0 if sorted.
    pub unordered: u64,
    /// The index of the first such record.
    pub first_unordered: Option<u64>,
}

/// Checks the records in `bytes` as valsort does: counts them, sums their checksum, and counts the
/// places where the keys go down.
pub fn validate(bytes: &[u8]) -> Result<Summary, Error> {
    let records = records(bytes)?;
    let mut summary = Summary {
        records: records.len() as u64,
        checksum: Checksum::default(),
        first_key: records.first().map(key),
        last_key: records.last().map(key),
        unordered: 0,
        first_unordered: None,
    };
    for (i, record) in records.iter().enumerate() {
        summary.checksum.add(record);
        if i > 0 && record[..KEY_LEN] < records[i - 1][..KEY_LEN] {
            summary.unordered += 1;
            summary.first_unordered.get_or_insert(i as u64);
        }
    }
    Ok(summary)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A record with key `key` (padded with zeros) whose other bytes hold `tag`, so records with
    /// equal keys still differ.
    fn record(key: &[u8], tag: u64) -> Record {
        let mut record = [0; RECORD_LEN];
        record[..key.len()].copy_from_slice(key);
        record[KEY_LEN..KEY_LEN + 8].copy_from_slice(&tag.to_le_bytes());
        record
    }

    #[test]
    fn bytes_that_are_not_whole_records_are_refused() {
        let bytes = vec![0; 250];
        let err = Error::NotRecords { len: 250 };
        assert_eq!(records(&bytes).unwrap_err(), err);
        assert_eq!(partition(&bytes, 4).unwrap_err(), err);
        assert_eq!(validate(&bytes).unwrap_err(), err);
        assert_eq!(sort(&mut bytes.clone()).unwrap_err(), err);
        assert_eq!(
            err.to_string(),
            "250 bytes are not a whole number of 100-byte records"
        );
        assert_eq!(records(&[]).unwrap().len(), 0);
    }

    #[test]
    fn categories_are_ranges_of_the_first_key_byte() {
        let at = |b: u8, n| category(&record(&[b], 0), n);
        assert_eq!(
            (at(0, 16), at(15, 16), at(16, 16), at(255, 16)),
            (0, 0, 1, 15)
        );
        assert_eq!((at(0, 1), at(255, 1)), (0, 0));
        assert_eq!((at(127, 2), at(128, 2)), (0, 1));
        assert_eq!((at(0, 256), at(200, 256), at(255, 256)), (0, 200, 255));
        assert_eq!((at(85, 3), at(86, 3), at(171, 3)), (0, 1, 2));
    }

    #[test]
    fn partitions_keep_order_and_make_every_category() {
        let input: Vec<u8> = [record(&[200], 1), record(&[3], 2), record(&[201], 3)].concat();
        let parts = partition(&input, 4).unwrap();
        assert_eq!(parts.len(), 4);
        assert_eq!(parts[0], record(&[3], 2));
        assert!(parts[1].is_empty() && parts[2].is_empty());
        assert_eq!(parts[3], [record(&[200], 1), record(&[201], 3)].concat());
        assert!(parts.iter().all(|p| p.capacity() == p.len()));
        assert_eq!(partition(&[], 2).unwrap(), [Vec::<u8>::new(), Vec::new()]);
        for categories in [0, 257] {
            assert_eq!(
                partition(&input, categories).unwrap_err(),
                Error::Categories { categories }
            );
        }
    }

    #[test]
    fn sorting_orders_by_the_key_alone() {
        let mut bytes: Vec<u8> = [
            record(b"b", 1),
            record(b"a\xff", 2),
            record(b"a", 3),
            record(b"\0\0\0\0\0\0\0\0\0\x01", 4),
            record(b"\0", 5),
        ]
        .concat();
        sort(&mut bytes).unwrap();
        let tags: Vec<u8> = records(&bytes)
            .unwrap()
            .iter()
            .map(|r| r[KEY_LEN])
            .collect();
        assert_eq!(tags, [5, 4, 3, 2, 1]);
    }

    #[test]
    fn validation_counts_the_places_keys_go_down() {
        let bytes: Vec<u8> = [
            record(b"a", 0),
            record(b"c", 1),
            record(b"b", 2),
            record(b"b", 3),
            record(b"a", 4),
        ]
        .concat();
        let summary = validate(&bytes).unwrap();
        assert_eq!(summary.records, 5);
        assert_eq!(summary.unordered, 2);
        assert_eq!(summary.first_unordered, Some(2));
        assert_eq!(summary.first_key, Some(*b"a\0\0\0\0\0\0\0\0\0"));
        assert_eq!(summary.last_key, Some(*b"a\0\0\0\0\0\0\0\0\0"));
        assert_eq!(summary.checksum, Checksum::of(records(&bytes).unwrap()));

        let empty = validate(&[]).unwrap();
        assert_eq!(
            (
                empty.records,
                empty.first_key,
                empty.unordered,
                empty.checksum
            ),
            (0, None, 0, Checksum(0))
        );
    }

    #[test]
    fn the_sort_of_generated_records_validates() {
        let input = gensort::generate(1_000, 5_000);
        let parts = partition(&input, 7).unwrap();
        let (mut last, mut count, mut checksum): (Option<Key>, u64, u128) = (None, 0, 0);
        for mut part in parts {
            sort(&mut part).unwrap();
            let summary = validate(&part).unwrap();
            assert_eq!(summary.unordered, 0);
            if let (Some(last), Some(first)) = (last, summary.first_key) {
                assert!(last <= first, "categories overlap");
            }
            last = summary.last_key.or(last);
            count += summary.records;
            checksum = checksum.wrapping_add(summary.checksum.0);
        }
        assert_eq!(count, 5_000);
        assert_eq!(Checksum(checksum), validate(&input).unwrap().checksum);
    }

    /// Records with keys from a small alphabet, so equal keys and equal first bytes are common.
    fn some_records() -> impl Strategy<Value = Vec<u8>> {
        prop::collection::vec((0u8..4, 0u8..3, any::<u64>()), 0..200).prop_map(|keys| {
            keys.into_iter()
                .map(|(a, b, tag)| record(&[a * 64, b], tag))
                .collect::<Vec<_>>()
                .concat()
        })
    }

    fn multiset(bytes: &[u8]) -> Vec<Record> {
        let mut records = records(bytes).unwrap().to_vec();
        records.sort_unstable();
        records
    }

    proptest! {
        #[test]
        fn partition_then_sort_is_a_sort(input in some_records(), categories in 1usize..=256) {
            let parts = partition(&input, categories).unwrap();
            prop_assert_eq!(parts.len(), categories);
            let mut output = Vec::new();
            for (c, mut part) in parts.into_iter().enumerate() {
                prop_assert!(records(&part).unwrap().iter().all(|r| category(r, categories) == c));
                sort(&mut part).unwrap();
                output.extend_from_slice(&part);
            }
            let summary = validate(&output).unwrap();
            prop_assert_eq!(summary.unordered, 0);
            prop_assert_eq!(summary.checksum, validate(&input).unwrap().checksum);
            prop_assert_eq!(multiset(&output), multiset(&input));
        }

        #[test]
        fn validation_agrees_with_a_plain_count(input in some_records()) {
            let keys: Vec<&[u8]> = records(&input).unwrap().iter().map(|r| &r[..KEY_LEN]).collect();
            let down: Vec<usize> = (1..keys.len()).filter(|&i| keys[i] < keys[i - 1]).collect();
            let summary = validate(&input).unwrap();
            prop_assert_eq!(summary.unordered, down.len() as u64);
            prop_assert_eq!(summary.first_unordered, down.first().map(|&i| i as u64));
            prop_assert_eq!(summary.records, keys.len() as u64);
        }
    }
}
