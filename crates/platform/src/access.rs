//! What a platform sets up for access control: whether tokens are required (always off loopback
//! unless `--insecure`), the admin token made on first start (`DATA/admin.token`), the cluster
//! secret when a node alone needs one, and the token table as the store holds it at start.
//! What it made, it reports as [`Notice`]s for whoever started it to show.

use crate::config::DEFAULT_DATA_DIR;
use crate::data_dir::{ADMIN_TOKEN_FILE, CLUSTER_SECRET_FILE};
use crate::error::PlatformError;
use crate::notice::Notice;
use mote_access::{FailureLimiter, Grants, HostAllowList, Scope, TokenName, TokenStore};
use mote_gateway::Access;
use mote_state::EtcdStore;
use mote_types::ClusterSecret;
use std::io::Write;
use std::net::SocketAddr;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// What the operator chose.
pub(crate) struct AccessOptions {
    /// Whether requests need tokens ([`tokens_required`]).
    pub tokens_required: bool,
    /// Failed authentications allowed per client address and minute.
    pub failures_per_minute: u32,
    /// The `Host` names the node answers to.
    pub hosts: HostAllowList,
}

/// Whether a node listening on `listen` requires tokens: always off loopback, unless
/// `insecure`, which it says loudly (in `notices`).
pub(crate) fn tokens_required(
    listen: SocketAddr,
    require: bool,
    insecure: bool,
    notices: &mut Vec<Notice>,
) -> bool {
    let loopback = listen.ip().is_loopback();
    if insecure && !loopback {
        tracing::warn!(%listen, "--insecure: this node takes requests without tokens from anyone who reaches it");
        notices.push(Notice::Insecure { listen });
    }
    require || (!loopback && !insecure)
}

/// Sets up the node's access control, and where its tokens are kept; `node` names the admin
/// token it makes.
pub(crate) async fn set_up(
    options: AccessOptions,
    data: &Path,
    store: &EtcdStore,
    node: &str,
    grants: Arc<Grants>,
    notices: &mut Vec<Notice>,
) -> Result<(Arc<Access>, TokenStore), PlatformError> {
    let tokens = TokenStore::new(store.clone());
    let admin = data.join(ADMIN_TOKEN_FILE);
    if !admin.exists() {
        let name = TokenName::new(format!("admin-{node}"))
            .or_else(|_| TokenName::new("admin"))
            .expect("`admin` is a token name");
        let scopes = [Scope::Admin].into_iter().collect();
        let (token, _) = tokens
            .create(name.clone(), scopes, true)
            .await
            .map_err(|source| PlatformError::Tokens {
                what: "make the admin token",
                source,
            })?;
        write_private(&admin, token.expose())?;
        notices.push(Notice::AdminToken {
            name: name.to_string(),
            path: admin.clone(),
            cli: how_the_cli_finds_it(data),
        });
    }
    // Loaded before the node serves, so that no good token is refused at start; the node's
    // watch keeps it current from then on (`mote_peers`, which follows the token records).
    tokens
        .load(&grants)
        .await
        .map_err(|source| PlatformError::Tokens {
            what: "read the token records",
            source,
        })?;
    let access = Access {
        tokens_required: options.tokens_required,
        grants,
        failures: FailureLimiter::new(options.failures_per_minute, Duration::from_secs(60)),
        hosts: options.hosts,
    };
    Ok((Arc::new(access), tokens))
}

/// How the CLI comes to send the admin token in `data`: it looks in its own `--data-dir`,
/// which is `./mote.data` unless it is told otherwise.
fn how_the_cli_finds_it(data: &Path) -> String {
    match data == Path::new(DEFAULT_DATA_DIR) {
        true => "the CLI sends it to this node when run from this directory, or give it in \
                 MOTE_TOKEN"
            .to_owned(),
        false => format!(
            "the CLI sends it to this node with MOTE_DATA={0} (or --data-dir {0}), or give it in \
             MOTE_TOKEN",
            data.display()
        ),
    }
}

/// `DATA/cluster.secret`, made on first use: internal routes need a secret once tokens are
/// required, and a node alone calls its own (its jobs do), so it makes one its peers then share.
pub(crate) fn own_secret(
    data: &Path,
    notices: &mut Vec<Notice>,
) -> Result<ClusterSecret, PlatformError> {
    let path = data.join(CLUSTER_SECRET_FILE);
    if !path.exists() {
        let token = mote_access::Token::generate();
        write_private(&path, &token.expose()[mote_access::Token::PREFIX.len()..])?;
        notices.push(Notice::ClusterSecret { path: path.clone() });
    }
    let text = std::fs::read_to_string(&path).map_err(|source| PlatformError::File {
        what: "read the cluster secret from",
        path: path.clone(),
        source,
    })?;
    ClusterSecret::new(&text).map_err(|source| PlatformError::Secret {
        at: path.display().to_string(),
        source,
    })
}

/// Writes `text` to a new file only its owner may read.
fn write_private(path: &Path, text: &str) -> Result<(), PlatformError> {
    let write = || -> std::io::Result<()> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(path)?;
        writeln!(file, "{text}")?;
        file.sync_all()
    };
    write().map_err(|source| PlatformError::File {
        what: "write",
        path: path.to_owned(),
        source,
    })
}
