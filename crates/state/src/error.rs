//! What a state operation can fail with.

/// A state operation failed. The store is unchanged by a failed write.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    /// The store's backing storage failed.
    #[error("state store {path}: {message}")]
    Storage {
        /// Where the store lives.
        path: String,
        /// What failed.
        message: String,
    },
    /// The etcd-API store did not answer or refused a request.
    #[error("state store at {endpoints}: {message}")]
    Remote {
        /// The endpoints the platform uses.
        endpoints: String,
        /// What failed.
        message: String,
    },
    /// A blob could not be read or written.
    #[error("module blob {path}: {source}")]
    Blob {
        /// The blob's path.
        path: String,
        /// The underlying I/O error.
        source: std::io::Error,
    },
}
