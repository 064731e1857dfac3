//! mote's TLS plumbing, in one place: what a process shows ([`Identity`]: a certificate chain
//! and its key, from PEM files or generated self-signed on first start) and what it trusts when
//! it connects ([`Trust`]: the web PKI roots and its own certificate, or the certificates an
//! operator names), turned into the configurations each transport wants: rustls for the API's
//! listener and hyper's client, tonic's for the store's gRPC ports and clients; a client built
//! on another TLS stack takes [`Trust::certificates`]. [`PeerAccess`] bundles the trust with the cluster secret a node shows its
//! peers. Every provider is ring's; nothing here relies on a process-wide default.

use mote_types::ClusterSecret;
use rustls::crypto::CryptoProvider;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use rustls::{ClientConfig, ServerConfig};
pub use tonic::transport::{ClientTlsConfig, ServerTlsConfig};

/// The file a self-signed certificate is kept in, under the directory given to
/// [`Identity::self_signed`].
pub const SELF_SIGNED_CERT: &str = "cert.pem";
/// The file its private key is kept in (mode 0600).
pub const SELF_SIGNED_KEY: &str = "key.pem";

/// Why a certificate, a key or a configuration could not be had.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A file could not be read.
    #[error("cannot read the {what} {path} (check the path)")]
    Read {
        /// What the file should hold.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A file holds no certificate.
    #[error(
        "{path} holds no PEM certificate (a `-----BEGIN CERTIFICATE-----` block): --tls-cert and --tls-ca take PEM files"
    )]
    NoCertificate {
        /// The file.
        path: PathBuf,
    },
    /// A file holds no private key.
    #[error(
        "{path} holds no PEM private key (a `-----BEGIN PRIVATE KEY-----`, RSA or EC key block): {detail}; --tls-key takes a PEM file"
    )]
    NoKey {
        /// The file.
        path: PathBuf,
        /// What the parser said.
        detail: String,
    },
    /// The key is not the certificate's, or rustls cannot use them.
    #[error(
        "the certificate {cert} and the key {key} cannot be used together: {detail} (give --tls-key the key the certificate was made for)"
    )]
    Unusable {
        /// The certificate's file.
        cert: PathBuf,
        /// The key's file.
        key: PathBuf,
        /// What rustls said.
        detail: String,
    },
    /// A generated file could not be written.
    #[error("cannot write {path} (is the data directory writable?)")]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// rcgen could not make the certificate.
    #[error("cannot generate a self-signed certificate for {names}: {detail}")]
    Generate {
        /// The names it was for.
        names: String,
        /// What rcgen said.
        detail: String,
    },
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn read(path: &Path, what: &'static str) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read {
        what,
        path: path.to_owned(),
        source,
    })
}

/// The certificates in the PEM `bytes` read from `path`; at least one.
fn certificates(bytes: &[u8], path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs: Vec<_> = CertificateDer::pem_slice_iter(bytes)
        .filter_map(Result::ok)
        .collect();
    match certs.is_empty() {
        true => Err(TlsError::NoCertificate {
            path: path.to_owned(),
        }),
        false => Ok(certs),
    }
}

/// What a server shows its clients: a certificate chain and its private key, checked to work
/// together.
#[derive(Clone)]
pub struct Identity {
    cert: PathBuf,
    cert_pem: Vec<u8>,
    key_pem: Vec<u8>,
    chain: Vec<CertificateDer<'static>>,
    server: Arc<ServerConfig>,
}

impl Identity {
    /// Loads the PEM certificate chain `cert` (the server's first) and the PEM private key `key`.
    pub fn load(cert: &Path, key: &Path) -> Result<Self, TlsError> {
        let cert_pem = read(cert, "TLS certificate")?;
        let key_pem = read(key, "TLS private key")?;
        let chain = certificates(&cert_pem, cert)?;
        let private = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|e| TlsError::NoKey {
            path: key.to_owned(),
            detail: e.to_string(),
        })?;
        let unusable = |detail: String| TlsError::Unusable {
            cert: cert.to_owned(),
            key: key.to_owned(),
            detail,
        };
        let mut server = ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| unusable(e.to_string()))?
            .with_no_client_auth()
            .with_single_cert(chain.clone(), private)
            .map_err(|e| unusable(e.to_string()))?;
        // The API speaks HTTP/1.1 only.
        server.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Self {
            cert: cert.to_owned(),
            cert_pem,
            key_pem,
            chain,
            server: Arc::new(server),
        })
    }

    /// The certificate and key kept in `dir` ([`SELF_SIGNED_CERT`], [`SELF_SIGNED_KEY`]), made
    /// there first if either is missing: self-signed, for `names` (host names or IP addresses).
    /// A later start reuses them, so clients that trust the certificate go on trusting it.
    pub fn self_signed(dir: &Path, names: &[String]) -> Result<Self, TlsError> {
        let (cert, key) = (dir.join(SELF_SIGNED_CERT), dir.join(SELF_SIGNED_KEY));
        if !(cert.exists() && key.exists()) {
            let generated = rcgen::generate_simple_self_signed(names.to_vec()).map_err(|e| {
                TlsError::Generate {
                    names: names.join(", "),
                    detail: e.to_string(),
                }
            })?;
            std::fs::create_dir_all(dir).map_err(|source| TlsError::Write {
                path: dir.to_owned(),
                source,
            })?;
            // The key first: a start that stops between the two finds no certificate and makes
            // both again.
            write_new(
                &key,
                generated.signing_key.serialize_pem().as_bytes(),
                0o600,
            )?;
            write_new(&cert, generated.cert.pem().as_bytes(), 0o644)?;
        }
        Self::load(&cert, &key)
    }

    /// The certificate's file.
    pub fn cert_path(&self) -> &Path {
        &self.cert
    }

    /// The certificate chain, the server's first.
    pub fn chain(&self) -> &[CertificateDer<'static>] {
        &self.chain
    }

    /// The rustls configuration of a server showing this identity (HTTP/1.1 by ALPN).
    pub fn server_config(&self) -> Arc<ServerConfig> {
        self.server.clone()
    }

    /// The same identity for a tonic (gRPC) server.
    pub fn tonic_server(&self) -> ServerTlsConfig {
        ServerTlsConfig::new().identity(tonic::transport::Identity::from_pem(
            &self.cert_pem,
            &self.key_pem,
        ))
    }
}

/// Writes `bytes` to `path` with `mode`, through a temporary file renamed over it, so that
/// nobody ever reads half a key.
fn write_new(path: &Path, bytes: &[u8], mode: u32) -> Result<(), TlsError> {
    let fail = |source| TlsError::Write {
        path: path.to_owned(),
        source,
    };
    let partial = path.with_extension("partial");
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(mode)
        .open(&partial)
        .map_err(fail)?;
    file.write_all(bytes)
        .and_then(|()| file.sync_all())
        .map_err(fail)?;
    std::fs::rename(&partial, path).map_err(fail)
}

/// The certificates a process trusts when it connects to its store and its peers: the web PKI
/// roots and its own certificate by default, or only those an operator names (`--tls-ca`).
/// Cheap to clone.
#[derive(Clone)]
pub struct Trust {
    web_pki: bool,
    extra: Vec<CertificateDer<'static>>,
    extra_pem: Vec<u8>,
    client: Arc<ClientConfig>,
}

impl Default for Trust {
    /// The web PKI roots alone.
    fn default() -> Self {
        Self::new(true, Vec::new(), Vec::new())
    }
}

impl Trust {
    fn new(web_pki: bool, extra: Vec<CertificateDer<'static>>, extra_pem: Vec<u8>) -> Self {
        let mut roots = rustls::RootCertStore::empty();
        if web_pki {
            roots.add_parsable_certificates(webpki_root_certs::TLS_SERVER_ROOT_CERTS.to_vec());
        }
        roots.add_parsable_certificates(extra.clone());
        let client = ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .expect("ring supports rustls's default protocol versions")
            .with_root_certificates(roots)
            .with_no_client_auth();
        Self {
            web_pki,
            extra,
            extra_pem,
            client: Arc::new(client),
        }
    }

    /// The web PKI roots and `identity`'s certificate, if the process has one: what a node
    /// trusts without `--tls-ca`, so that nodes sharing one certificate trust each other.
    pub fn with_own(identity: Option<&Identity>) -> Self {
        match identity {
            None => Self::default(),
            Some(identity) => Self::new(
                true,
                identity.chain[..1].to_vec(),
                identity.cert_pem.clone(),
            ),
        }
    }

    /// Only the PEM certificates in `path` (`--tls-ca`).
    pub fn from_file(path: &Path) -> Result<Self, TlsError> {
        let pem = read(path, "trusted certificates (--tls-ca)")?;
        let certs = certificates(&pem, path)?;
        Ok(Self::new(false, certs, pem))
    }

    /// The rustls configuration of a client.
    pub fn client_config(&self) -> Arc<ClientConfig> {
        self.client.clone()
    }

    /// A hyper connector over `http` that speaks https to `https://` URLs and plain HTTP to
    /// `http://` ones.
    pub fn https_connector(
        &self,
        mut http: hyper_util::client::legacy::connect::HttpConnector,
    ) -> hyper_rustls::HttpsConnector<hyper_util::client::legacy::connect::HttpConnector> {
        http.enforce_http(false);
        hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config((*self.client).clone())
            .https_or_http()
            .enable_http1()
            .wrap_connector(http)
    }

    /// The same trust for a tonic (gRPC) client, such as etcd-client's.
    pub fn tonic_client(&self) -> ClientTlsConfig {
        let mut config = ClientTlsConfig::new();
        if self.web_pki {
            config = config.with_webpki_roots();
        }
        if !self.extra_pem.is_empty() {
            config =
                config.ca_certificate(tonic::transport::Certificate::from_pem(&self.extra_pem));
        }
        config
    }

    /// The certificates this trust adds to the web PKI roots, or trusts in their place
    /// (`--tls-ca`): empty for the web PKI roots alone.
    pub fn own_certificates(&self) -> &[CertificateDer<'static>] {
        &self.extra
    }

    /// Every certificate trusted: the web PKI roots unless `--tls-ca` replaced them, then
    /// [`Trust::own_certificates`]. For clients whose TLS is configured apart from rustls's
    /// (the CLI's blocking client).
    pub fn certificates(&self) -> impl Iterator<Item = &CertificateDer<'static>> {
        let web_pki = webpki_root_certs::TLS_SERVER_ROOT_CERTS
            .iter()
            .filter(|_| self.web_pki);
        web_pki.chain(&self.extra)
    }
}

/// How a node reaches its peers: the certificates it trusts, and the cluster secret it shows
/// them (in the [`mote_types::CLUSTER_SECRET_HEADER`] header or gRPC metadata), over TLS only if
/// it serves TLS itself.
#[derive(Clone, Default)]
pub struct PeerAccess {
    /// Whom it trusts.
    pub trust: Trust,
    /// The cluster's secret, if it has one.
    pub secret: Option<ClusterSecret>,
    /// Whether this process serves TLS: then the secret goes to `https://` peers only.
    pub serves_tls: bool,
}

impl PeerAccess {
    /// The secret as the value of an HTTP header for a request to `url`, marked sensitive so
    /// that no log shows it: `None` without a secret, refused where it would travel in clear
    /// ([`ClusterSecret::may_travel_to`]).
    pub fn secret_header_for(
        &self,
        url: &str,
    ) -> Result<Option<http::HeaderValue>, mote_types::PlainSecret> {
        let Some(secret) = &self.secret else {
            return Ok(None);
        };
        ClusterSecret::may_travel_to(url, self.serves_tls)?;
        let mut value = http::HeaderValue::from_str(secret.expose())
            .expect("a cluster secret is printable ASCII");
        value.set_sensitive(true);
        Ok(Some(value))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names() -> Vec<String> {
        vec!["localhost".into(), "127.0.0.1".into(), "::1".into()]
    }

    #[test]
    fn a_self_signed_pair_is_made_once_with_a_private_key_and_reused() {
        let dir = tempfile::tempdir().unwrap();
        let tls = dir.path().join("tls");
        let first = Identity::self_signed(&tls, &names()).unwrap();
        let mode = std::fs::metadata(tls.join(SELF_SIGNED_KEY))
            .unwrap()
            .permissions();
        assert_eq!(
            std::os::unix::fs::PermissionsExt::mode(&mode) & 0o777,
            0o600
        );
        let again = Identity::self_signed(&tls, &names()).unwrap();
        assert_eq!(first.chain(), again.chain());
        assert!(!tls.join("key.partial").exists());
    }

    #[test]
    fn a_key_that_is_not_the_certificates_is_refused_naming_both_files() {
        let dir = tempfile::tempdir().unwrap();
        let a = Identity::self_signed(&dir.path().join("a"), &names()).unwrap();
        Identity::self_signed(&dir.path().join("b"), &names()).unwrap();
        let other_key = dir.path().join("b").join(SELF_SIGNED_KEY);
        let err = Identity::load(a.cert_path(), &other_key)
            .err()
            .expect("a foreign key is refused");
        let text = err.to_string();
        assert!(
            text.contains("a/cert.pem") && text.contains("b/key.pem"),
            "{text}"
        );
    }

    #[test]
    fn files_without_pem_are_refused_with_what_they_should_hold() {
        let dir = tempfile::tempdir().unwrap();
        let junk = dir.path().join("junk.pem");
        std::fs::write(&junk, "not pem").unwrap();
        let err = Trust::from_file(&junk).err().expect("junk is refused");
        assert!(matches!(err, TlsError::NoCertificate { .. }), "{err}");
        let missing = Trust::from_file(&dir.path().join("missing.pem")).err();
        assert!(matches!(missing, Some(TlsError::Read { .. })));
    }
}
