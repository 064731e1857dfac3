//! Errors the store returns, with etcd's messages and gRPC codes so clients react as they do
//! with etcd.

use tonic::{Code, Status};

/// Why a request failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// The revision asked for was compacted away.
    #[error("etcdserver: mvcc: required revision has been compacted")]
    Compacted,
    /// The revision asked for is ahead of the replica.
    #[error("etcdserver: mvcc: required revision is a future revision")]
    FutureRevision,
    /// A request without a key.
    #[error("etcdserver: key is not provided")]
    EmptyKey,
    /// `ignore_value` or `ignore_lease` on a key that does not exist.
    #[error("etcdserver: key not found")]
    KeyNotFound,
    /// One transaction branch writes a key twice.
    #[error("etcdserver: duplicate key given in txn request")]
    DuplicateKey,
    /// Too many operations in one transaction.
    #[error("etcdserver: too many operations in txn request (the limit is {limit})")]
    TooManyOps {
        /// The most operations allowed.
        limit: usize,
    },
    /// A value given together with `ignore_value`.
    #[error("etcdserver: value is provided")]
    ValueProvided,
    /// A lease given together with `ignore_lease`.
    #[error("etcdserver: lease is provided")]
    LeaseProvided,
    /// No lease with that id on this replica.
    #[error("etcdserver: requested lease not found")]
    LeaseNotFound,
    /// A lease with that id exists already.
    #[error("etcdserver: lease already exists")]
    LeaseExists,
    /// A TTL beyond etcd's maximum.
    #[error("etcdserver: too large lease TTL")]
    LeaseTtlTooLarge,
    /// The data directory could not be read or written.
    #[error(
        "mote store: the data directory failed ({0}); this replica takes no more writes: fix the disk and restart it"
    )]
    Disk(String),
}

impl StoreError {
    /// The gRPC code etcd sends for this error.
    pub fn code(&self) -> Code {
        match self {
            Self::Compacted | Self::FutureRevision => Code::OutOfRange,
            Self::EmptyKey
            | Self::KeyNotFound
            | Self::DuplicateKey
            | Self::TooManyOps { .. }
            | Self::ValueProvided
            | Self::LeaseProvided => Code::InvalidArgument,
            Self::LeaseNotFound => Code::NotFound,
            Self::LeaseExists | Self::LeaseTtlTooLarge => Code::FailedPrecondition,
            Self::Disk(_) => Code::Unavailable,
        }
    }
}

impl From<StoreError> for Status {
    fn from(e: StoreError) -> Self {
        Status::new(e.code(), e.to_string())
    }
}
