//! What a starting platform made or chose that its operator should hear of ([`Notice`]): the
//! library says it, whoever started the platform shows it (`mote up` prints each as a line).

use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;

/// Something the operator should know about the platform that started.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Notice {
    /// It takes requests without tokens beyond loopback (`insecure`).
    Insecure {
        /// The address anyone may reach.
        listen: SocketAddr,
    },
    /// It made the admin token on first start.
    AdminToken {
        /// The token's name.
        name: String,
        /// The file that holds it.
        path: PathBuf,
        /// How the CLI comes to send it.
        cli: String,
    },
    /// It made a cluster secret for itself, which its peers must share.
    ClusterSecret {
        /// The file that holds it.
        path: PathBuf,
    },
}

impl fmt::Display for Notice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Insecure { listen } => write!(
                f,
                "WARNING: --insecure: anyone who can reach {listen} may deploy and run code on this node without a token"
            ),
            Self::AdminToken { name, path, cli } => {
                write!(
                    f,
                    "made the admin token `{name}` in {}\n{cli}",
                    path.display()
                )
            }
            Self::ClusterSecret { path } => write!(
                f,
                "made a cluster secret in {}: start the other nodes of this cluster with --cluster-secret-file pointing to a copy of it",
                path.display()
            ),
        }
    }
}
