//! A record, its key, and bytes viewed as records.

use std::fmt;

/// Bytes in a record.
pub const RECORD_LEN: usize = 100;
/// Bytes in a record's key, its first bytes; records sort by key alone.
pub const KEY_LEN: usize = 10;
/// The most categories: a record's category is decided by its first key byte, so more would only
/// add categories that can never hold a record.
pub const MAX_CATEGORIES: usize = 256;

/// One record.
pub type Record = [u8; RECORD_LEN];
/// A record's key.
pub type Key = [u8; KEY_LEN];

/// Why bytes or parameters cannot be worked on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Error {
    /// The bytes are not a whole number of records.
    NotRecords {
        /// How many bytes there were.
        len: usize,
    },
    /// The number of categories is outside 1..=[`MAX_CATEGORIES`].
    Categories {
        /// The number asked for.
        categories: usize,
    },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NotRecords { len } => write!(
                f,
                "{len} bytes are not a whole number of {RECORD_LEN}-byte records"
            ),
            Self::Categories { categories } => write!(
                f,
                "{categories} categories: the sort splits records into 1 to {MAX_CATEGORIES}"
            ),
        }
    }
}

impl std::error::Error for Error {}

/// `bytes` as records.
pub fn records(bytes: &[u8]) -> Result<&[Record], Error> {
    match bytes.as_chunks() {
        (records, []) => Ok(records),
        _ => Err(Error::NotRecords { len: bytes.len() }),
    }
}

/// `bytes` as records that can be reordered in place.
pub fn records_mut(bytes: &mut [u8]) -> Result<&mut [Record], Error> {
    let len = bytes.len();
    match bytes.as_chunks_mut() {
        (records, []) => Ok(records),
        _ => Err(Error::NotRecords { len }),
    }
}

/// The key of `record`.
pub fn key(record: &Record) -> Key {
    let mut key = [0; KEY_LEN];
    key.copy_from_slice(&record[..KEY_LEN]);
    key
}
