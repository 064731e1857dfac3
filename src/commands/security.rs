//! The flags of TLS and the cluster secret, shared by `mote up` and `mote store`, and what they
//! resolve to: the identity the process serves with and how it reaches its store and peers.

use anyhow::Context;
use clap::Args;
use mote_tls::{Identity, PeerAccess, Trust};
use mote_types::ClusterSecret;
use std::path::{Path, PathBuf};

/// The environment variable that may hold the cluster secret itself (not a file name), for
/// set-ups that pass secrets through the environment.
pub const SECRET_ENV: &str = "MOTE_CLUSTER_SECRET";

/// TLS and cluster-secret options.
#[derive(Args)]
pub struct SecurityArgs {
    /// Serve over TLS with this PEM certificate (chain), with --tls-key. Peers and clients must
    /// trust it (their --tls-ca), and it must name the host or address they dial.
    #[arg(long, requires = "tls_key", conflicts_with = "tls_self_signed")]
    tls_cert: Option<PathBuf>,
    /// The PEM private key of --tls-cert.
    #[arg(long, requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// Serve over TLS with a self-signed certificate made on first start in DATA/tls (cert.pem,
    /// and key.pem readable by its owner only), for the host name, localhost, 127.0.0.1, ::1
    /// and the advertised host; later starts reuse it. Clients trust it with --tls-ca
    /// DATA/tls/cert.pem.
    #[arg(long)]
    tls_self_signed: bool,
    /// The PEM certificates this process trusts when it connects to its store and its peers
    /// over https [default: the web PKI roots and its own certificate].
    #[arg(long, env = "MOTE_TLS_CA")]
    tls_ca: Option<PathBuf>,
    /// A file holding the cluster's shared secret (at least 16 printable characters; make one
    /// with `openssl rand -hex 32`), also read from MOTE_CLUSTER_SECRET. Nodes and store
    /// replicas show it to each other, and refuse peers that do not.
    #[arg(long, env = "MOTE_CLUSTER_SECRET_FILE")]
    cluster_secret_file: Option<PathBuf>,
}

/// What the flags resolve to.
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

impl SecurityArgs {
    /// Loads or makes the certificate (a self-signed one in `data/tls`, for `names`), the
    /// trusted certificates and the secret.
    pub fn resolve(&self, data: Option<&Path>, names: &[String]) -> anyhow::Result<Security> {
        let identity = match (&self.tls_cert, &self.tls_key, self.tls_self_signed) {
            (Some(cert), Some(key), _) => Some(Identity::load(cert, key)?),
            (_, _, true) => {
                let data = data.context(
                    "--tls-self-signed keeps its certificate in the data directory: give --data",
                )?;
                Some(Identity::self_signed(&data.join("tls"), names)?)
            }
            _ => None,
        };
        let trust = match &self.tls_ca {
            Some(ca) => Trust::from_file(ca)?,
            None => Trust::with_own(identity.as_ref()),
        };
        let serves_tls = identity.is_some();
        Ok(Security {
            identity,
            access: PeerAccess {
                trust,
                secret: self.secret()?,
                serves_tls,
            },
        })
    }

    fn secret(&self) -> anyhow::Result<Option<ClusterSecret>> {
        if let Some(file) = &self.cluster_secret_file {
            let text = std::fs::read_to_string(file).with_context(|| {
                format!(
                    "cannot read the cluster secret from {} (--cluster-secret-file)",
                    file.display()
                )
            })?;
            let secret = ClusterSecret::new(&text)
                .with_context(|| format!("the cluster secret in {}", file.display()))?;
            return Ok(Some(secret));
        }
        match std::env::var(SECRET_ENV) {
            Ok(text) => {
                Ok(Some(ClusterSecret::new(&text).with_context(|| {
                    format!("the cluster secret in {SECRET_ENV}")
                })?))
            }
            Err(_) => Ok(None),
        }
    }
}

/// The names a self-signed certificate is made for: the host name, localhost, the loopback
/// addresses, the specific addresses the process listens on and the host of its advertised URL.
pub fn certificate_names(listening: &[std::net::IpAddr], advertised: Option<&str>) -> Vec<String> {
    let mut names = vec![
        super::machine::host_name(),
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
