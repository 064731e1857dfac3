//! Why a platform could not start or stop ([`PlatformError`]): each names the thing that failed
//! and what to change.

use std::net::SocketAddr;
use std::path::PathBuf;

/// Why a platform could not start, or stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum PlatformError {
    /// A setting cannot work, alone or with the others; the message says which to change.
    #[error("{0}")]
    Config(String),
    /// A listener could not be bound.
    #[error("cannot listen on {addr} for {what} ({fix})")]
    Listen {
        /// The address.
        addr: SocketAddr,
        /// What would have listened there.
        what: &'static str,
        /// Which setting chooses another.
        fix: &'static str,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A file in the data directory, or one the configuration names, could not be read or
    /// written.
    #[error("cannot {what} {}", path.display())]
    File {
        /// What the platform was doing with it.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The TLS certificate, key or trusted certificates could not be loaded or made.
    #[error(transparent)]
    Tls(#[from] mote_tls::TlsError),
    /// The cluster secret is not one.
    #[error("the cluster secret in {at}")]
    Secret {
        /// Where it was read from.
        at: String,
        /// Why.
        #[source]
        source: mote_types::SecretError,
    },
    /// The state store could not be reached.
    #[error(
        "cannot reach the state store (point --store at a running etcd-API endpoint, or leave it out to embed one)"
    )]
    State(#[source] mote_state::StateError),
    /// The embedded store could not open its data.
    #[error("cannot open the embedded store in {} (is another `mote up` using it?)", dir.display())]
    EmbeddedStore {
        /// Its directory.
        dir: PathBuf,
        /// Why.
        #[source]
        source: mote_store::StoreError,
    },
    /// The embedded store's server failed.
    #[error("the embedded store's server failed")]
    StoreServer(#[source] tonic::transport::Error),
    /// The object store could not be set up.
    #[error("cannot set up the object store")]
    Objects(#[source] mote_objects::ObjectError),
    /// The node could not start on its data.
    #[error("cannot start the node on {}", data.display())]
    Node {
        /// The data directory.
        data: PathBuf,
        /// Why.
        #[source]
        source: mote_node::DeployError,
    },
    /// The node could not join its cluster.
    #[error("cannot join the cluster")]
    Join(#[source] mote_peers::JoinError),
    /// A `--allow-host` entry is not a host.
    #[error("--allow-host takes host names, `*.domain` patterns and IP addresses")]
    Hosts(#[source] mote_access::HostError),
    /// The token records could not be made or read.
    #[error("cannot {what}")]
    Tokens {
        /// What the platform was doing.
        what: &'static str,
        /// Why.
        #[source]
        source: mote_access::TokenStoreError,
    },
    /// Job threads could not be confined.
    #[error("confining job threads (or start with --seccomp off)")]
    Confine(#[source] mote_confine::ConfineError),
    /// The job engine could not start.
    #[error("starting the job engine")]
    Jobs(#[source] mote_job_service::JobServiceError),
    /// An example function could not be deployed.
    #[error("deploying the example `{name}`")]
    Example {
        /// The example.
        name: &'static str,
        /// Why.
        #[source]
        source: mote_node::DeployError,
    },
    /// A listener failed while serving.
    #[error("the {what} listener failed")]
    Serve {
        /// Which (`API`, `dashboard`).
        what: &'static str,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A task of the platform panicked.
    #[error("the {0} panicked (a bug in mote: please report it)")]
    Panicked(&'static str),
}
