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
    /// Too many operations in one transaction (the limit is [`crate::engine::MAX_TXN_OPS`]).
    /// The message is etcd's to the letter: clients recognise errors by it.
    #[error("etcdserver: too many operations in txn request")]
    TooManyOps,
    /// A range sorted in an order or by a target etcd does not define.
    #[error("etcdserver: invalid sort option")]
    InvalidSortOption,
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
    /// A watch over a range that holds no key (its end is not after its start); a watch
    /// create request is refused with this as its cancel reason.
    #[error("mvcc: watcher range is empty")]
    EmptyWatchRange,
    /// A watch create request naming a watch id the stream already uses.
    #[error("mvcc: duplicate watch ID provided on the WatchStream")]
    DuplicateWatchId,
    /// The replica is stopping: a stream still open then (a watch, a lease keep-alive) ends
    /// with this, etcd's error for a server that is stopping, on which clients move to another
    /// endpoint or retry; the message is etcd's to the letter.
    #[error("etcdserver: server stopped")]
    Stopped,
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
            Self::Compacted | Self::FutureRevision | Self::LeaseTtlTooLarge => Code::OutOfRange,
            Self::EmptyKey
            | Self::KeyNotFound
            | Self::DuplicateKey
            | Self::TooManyOps
            | Self::InvalidSortOption
            | Self::EmptyWatchRange
            | Self::DuplicateWatchId
            | Self::ValueProvided
            | Self::LeaseProvided => Code::InvalidArgument,
            Self::LeaseNotFound => Code::NotFound,
            Self::LeaseExists => Code::FailedPrecondition,
            Self::Stopped | Self::Disk(_) => Code::Unavailable,
        }
    }
}

impl From<StoreError> for Status {
    fn from(e: StoreError) -> Self {
        Status::new(e.code(), e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// clientv3 recognises an error by its exact message and code: a limit appended to the
    /// message, or a lease TTL error sent as FailedPrecondition, reached clients as an unknown
    /// error instead of `rpctypes.ErrTooManyOps` and `ErrLeaseTTLTooLarge`.
    #[test]
    fn messages_and_codes_are_etcds() {
        let cases = [
            (
                StoreError::TooManyOps,
                Code::InvalidArgument,
                "etcdserver: too many operations in txn request",
            ),
            (
                StoreError::LeaseTtlTooLarge,
                Code::OutOfRange,
                "etcdserver: too large lease TTL",
            ),
            (
                StoreError::InvalidSortOption,
                Code::InvalidArgument,
                "etcdserver: invalid sort option",
            ),
            (
                StoreError::Stopped,
                Code::Unavailable,
                "etcdserver: server stopped",
            ),
        ];
        for (error, code, message) in cases {
            let status = Status::from(error);
            assert_eq!((status.code(), status.message()), (code, message));
        }
    }
}
