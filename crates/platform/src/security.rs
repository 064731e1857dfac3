//! What TLS and the cluster secret ([`SecurityConfig`]) resolve to: the identity a process
//! serves with and how it reaches its store and peers. `mote store` resolves them too.

use crate::config::{SecretSource, SecurityConfig, TlsChoice};
use crate::error::PlatformError;
use mote_tls::{Identity, PeerAccess, Trust};
use mote_types::ClusterSecret;
use std::path::Path;

/// What a [`SecurityConfig`] resolves to.
pub struct Security {
    /// The certificate and key this process serves with, if it serves TLS.
    pub identity: Option<Identity>,
    /// Whom it trusts, and the secret it shows its peers.
    pub access: PeerAccess,
}

impl Security {
    /// `http` or `https`, as this process serves.
    pub fn scheme(&self) -> &'static str {
        match self.identity {
            Some(_) => "https",
            None => "http",
        }
    }

    /// The store's server TLS, if it serves TLS.
    pub fn store_server(&self) -> Option<mote_tls::ServerTlsConfig> {
        self.identity.as_ref().map(Identity::tonic_server)
    }

    /// How a store replica deals with its peers.
    pub fn store_access(&self) -> mote_store::replica::PeerAccess {
        mote_store::replica::PeerAccess {
            secret: self.access.secret.clone(),
            tls: Some(self.access.trust.tonic_client()),
            serves_tls: self.identity.is_some(),
        }
    }
}

impl Security {
    /// Loads or makes the certificate (a self-signed one in `data/tls`, for `names`), the
    /// trusted certificates and the secret.
    pub fn resolve(
        config: &SecurityConfig,
        data: Option<&Path>,
        names: &[String],
    ) -> Result<Self, PlatformError> {
        let identity = match &config.tls {
            TlsChoice::Files { cert, key } => Some(Identity::load(cert, key)?),
            TlsChoice::SelfSigned => {
                let data = data.ok_or_else(|| {
                    PlatformError::Config(
                        "--tls-self-signed keeps its certificate in the data directory: give --data"
                            .to_owned(),
                    )
                })?;
                Some(Identity::self_signed(&data.join("tls"), names)?)
            }
            TlsChoice::Off => None,
        };
        let trust = match &config.tls_ca {
            Some(ca) => Trust::from_file(ca)?,
            None => Trust::with_own(identity.as_ref()),
        };
        let serves_tls = identity.is_some();
        Ok(Security {
            identity,
            access: PeerAccess {
                trust,
                secret: config.cluster_secret.as_ref().map(secret).transpose()?,
                serves_tls,
            },
        })
    }
}

/// The cluster secret `source` holds.
fn secret(source: &SecretSource) -> Result<ClusterSecret, PlatformError> {
    match source {
        SecretSource::File(file) => {
            let text = std::fs::read_to_string(file).map_err(|source| PlatformError::File {
                what: "read the cluster secret (--cluster-secret-file) from",
                path: file.clone(),
                source,
            })?;
            ClusterSecret::new(&text).map_err(|source| PlatformError::Secret {
                at: file.display().to_string(),
                source,
            })
        }
        SecretSource::Text { text, from } => {
            ClusterSecret::new(text).map_err(|source| PlatformError::Secret {
                at: from.clone(),
                source,
            })
        }
    }
}

/// The names a self-signed certificate is made for: the host name, localhost, the loopback
/// addresses, the specific addresses the process listens on and the host of its advertised URL.
pub fn certificate_names(listening: &[std::net::IpAddr], advertised: Option<&str>) -> Vec<String> {
    let mut names = vec![
        crate::machine::host_name(),
        "localhost".to_owned(),
        "127.0.0.1".to_owned(),
        "::1".to_owned(),
    ];
    for ip in listening.iter().filter(|ip| !ip.is_unspecified()) {
        names.push(ip.to_string());
    }
    // The host of a URL such as https://node-a.example:8080, without brackets around an IPv6.
    if let Some(host) = advertised
        .and_then(|url| url.split_once("://"))
        .and_then(|(_, rest)| rest.split(['/', '?']).next())
        .map(|authority| match authority.rsplit_once(':') {
            Some((host, port)) if port.bytes().all(|b| b.is_ascii_digit()) => host,
            _ => authority,
        })
        .map(|host| host.trim_start_matches('[').trim_end_matches(']'))
        .filter(|host| !host.is_empty())
    {
        names.push(host.to_owned());
    }
    names.sort();
    names.dedup();
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_certificate_names_the_advertised_host_and_the_addresses_listened_on() {
        let names = certificate_names(
            &["10.0.0.5".parse().unwrap(), "0.0.0.0".parse().unwrap()],
            Some("https://node-a.example:8443/"),
        );
        for name in [
            "localhost",
            "127.0.0.1",
            "::1",
            "10.0.0.5",
            "node-a.example",
        ] {
            assert!(
                names.iter().any(|n| n == name),
                "{name} missing from {names:?}"
            );
        }
        assert!(!names.iter().any(|n| n == "0.0.0.0"), "{names:?}");
        let v6 = certificate_names(&[], Some("https://[fd00::1]:8443"));
        assert!(v6.iter().any(|n| n == "fd00::1"), "{v6:?}");
    }
}
