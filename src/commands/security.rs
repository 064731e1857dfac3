//! The flags of TLS and the cluster secret, shared by `mote up` and `mote store`; what they
//! resolve to is `mote_platform`'s [`Security`].

use clap::Args;
use mote_platform::{SecretSource, Security, SecurityConfig, TlsChoice};
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

impl SecurityArgs {
    /// The settings the flags give, the cluster secret from MOTE_CLUSTER_SECRET unless a file
    /// holds it.
    pub fn config(&self) -> SecurityConfig {
        let tls = match (&self.tls_cert, &self.tls_key, self.tls_self_signed) {
            (Some(cert), Some(key), _) => TlsChoice::Files {
                cert: cert.clone(),
                key: key.clone(),
            },
            (_, _, true) => TlsChoice::SelfSigned,
            _ => TlsChoice::Off,
        };
        let cluster_secret = match &self.cluster_secret_file {
            Some(file) => Some(SecretSource::File(file.clone())),
            None => std::env::var(SECRET_ENV)
                .ok()
                .map(|text| SecretSource::Text {
                    text,
                    from: SECRET_ENV.to_owned(),
                }),
        };
        SecurityConfig {
            tls,
            tls_ca: self.tls_ca.clone(),
            cluster_secret,
        }
    }

    /// Loads or makes the certificate (a self-signed one in `data/tls`, for `names`), the
    /// trusted certificates and the secret.
    pub fn resolve(&self, data: Option<&Path>, names: &[String]) -> anyhow::Result<Security> {
        Ok(Security::resolve(&self.config(), data, names)?)
    }
}
