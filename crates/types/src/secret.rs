//! The cluster secret: what nodes and store replicas of one cluster show each other, so that a
//! process without it can neither join nor call a node's internal routes.

use std::fmt;
use std::sync::Arc;

/// The header (HTTP) and metadata key (gRPC) that carries the cluster secret between nodes.
pub const CLUSTER_SECRET_HEADER: &str = "mote-cluster-secret";

/// A cluster's shared secret: printable ASCII, at least [`ClusterSecret::MIN_LEN`] characters.
/// `Debug` and `Display` never show it.
#[derive(Clone, PartialEq, Eq)]
pub struct ClusterSecret(Arc<str>);

/// Why a text is not a usable cluster secret.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SecretError {
    /// Too short to resist guessing.
    #[error(
        "the cluster secret has {0} characters; it needs at least {min} (make one with `openssl rand -hex 32`)",
        min = ClusterSecret::MIN_LEN
    )]
    TooShort(usize),
    /// It could not travel in a header.
    #[error(
        "the cluster secret may hold only printable ASCII without spaces (make one with `openssl rand -hex 32`)"
    )]
    NotPrintable,
}

impl ClusterSecret {
    /// The fewest characters a secret may have.
    pub const MIN_LEN: usize = 16;

    /// Checks `text` (surrounding whitespace, such as a file's last newline, is dropped).
    pub fn new(text: &str) -> Result<Self, SecretError> {
        let text = text.trim();
        if !text.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(SecretError::NotPrintable);
        }
        if text.len() < Self::MIN_LEN {
            return Err(SecretError::TooShort(text.len()));
        }
        Ok(Self(text.into()))
    }

    /// The secret, to send to a peer.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Whether `presented` is the secret. The time taken depends only on the lengths, so that
    /// a caller cannot learn the secret a byte at a time from response times.
    pub fn matches(&self, presented: &[u8]) -> bool {
        let ours = self.0.as_bytes();
        if ours.len() != presented.len() {
            return false;
        }
        ours.iter()
            .zip(presented)
            .fold(0u8, |diff, (a, b)| diff | (a ^ b))
            == 0
    }
}

impl fmt::Debug for ClusterSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ClusterSecret(..)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_only_itself() {
        let secret = ClusterSecret::new("0123456789abcdef0123\n").unwrap();
        assert!(secret.matches(b"0123456789abcdef0123"));
        assert!(!secret.matches(b"0123456789abcdef0124"));
        assert!(!secret.matches(b"0123456789abcdef012"));
        assert!(!secret.matches(b""));
        assert_eq!(format!("{secret:?}"), "ClusterSecret(..)");
    }

    #[test]
    fn refuses_weak_or_unprintable_secrets() {
        assert_eq!(ClusterSecret::new("short"), Err(SecretError::TooShort(5)));
        assert_eq!(
            ClusterSecret::new("0123456789 abcdef0123"),
            Err(SecretError::NotPrintable)
        );
    }
}
