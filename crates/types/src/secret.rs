//! The cluster secret: what nodes and store replicas of one cluster show each other, so that a
//! process without it can neither join nor call a node's internal routes. A process that serves
//! TLS sends it over TLS only ([`ClusterSecret::may_travel_to`]): a peer given a plain `http://`
//! URL by mistake must not make it travel in clear.

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

impl ClusterSecret {
    /// Whether the secret may be sent to `url` by a process that serves TLS (`serves_tls`) or
    /// not: over `https://` always, over anything else only by a process without TLS (whose
    /// whole cluster speaks plain HTTP).
    pub fn may_travel_to(url: &str, serves_tls: bool) -> Result<(), PlainSecret> {
        let encrypted = url
            .get(..8)
            .is_some_and(|scheme| scheme.eq_ignore_ascii_case("https://"));
        match encrypted || !serves_tls {
            true => Ok(()),
            false => Err(PlainSecret {
                url: url.to_owned(),
            }),
        }
    }
}

/// The secret was not sent: it would have travelled in clear from a process that serves TLS.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
#[error(
    "the cluster secret is not sent to {url}: this process serves TLS, so it reaches its peers over https only (give the peer a certificate and an https:// URL)"
)]
pub struct PlainSecret {
    /// Where it would have gone.
    pub url: String,
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

    #[test]
    fn a_process_with_tls_sends_the_secret_over_https_only() {
        assert!(ClusterSecret::may_travel_to("https://n2:8080", true).is_ok());
        assert!(ClusterSecret::may_travel_to("HTTPS://n2:8080", true).is_ok());
        let refused = ClusterSecret::may_travel_to("http://n2:8080", true).unwrap_err();
        assert!(refused.to_string().contains("http://n2:8080"), "{refused}");
        assert!(ClusterSecret::may_travel_to("n2:8080", true).is_err());
        assert!(ClusterSecret::may_travel_to("http://n2:8080", false).is_ok());
    }
}
