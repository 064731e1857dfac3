//! What `mote up` sets up for access control: whether tokens are required (always off loopback
//! unless `--insecure`), the admin token made on first start (`DATA/admin.token`), the cluster
//! secret when a node alone needs one, and the token table as the store holds it at start.

use super::client::ADMIN_TOKEN_FILE;
use anyhow::Context;
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

/// The file in a data directory that keeps the cluster secret a node made for itself.
const CLUSTER_SECRET_FILE: &str = "cluster.secret";

/// What the operator chose.
pub struct AccessOptions {
    /// Whether requests need tokens ([`tokens_required`]).
    pub tokens_required: bool,
    /// Failed authentications allowed per client address and minute.
    pub failures_per_minute: u32,
    /// The `Host` names the node answers to.
    pub hosts: HostAllowList,
}

/// Whether a node listening on `listen` requires tokens: always off loopback, unless
/// `insecure`, which it says loudly.
pub fn tokens_required(listen: SocketAddr, require: bool, insecure: bool) -> bool {
    let loopback = listen.ip().is_loopback();
    if insecure && !loopback {
        tracing::warn!(%listen, "--insecure: this node takes requests without tokens from anyone who reaches it");
        println!(
            "WARNING: --insecure: anyone who can reach {listen} may deploy and run code on this node without a token"
        );
    }
    require || (!loopback && !insecure)
}

/// Sets up the node's access control, and where its tokens are kept; `node` names the admin
/// token it makes.
pub async fn set_up(
    options: AccessOptions,
    data: &Path,
    store: &EtcdStore,
    node: &str,
    grants: Arc<Grants>,
) -> anyhow::Result<(Arc<Access>, TokenStore)> {
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
            .context("cannot make the admin token")?;
        write_private(&admin, token.expose())?;
        println!("made the admin token `{name}` in {}", admin.display());
        println!("{}", how_the_cli_finds_it(data));
    }
    // Loaded before the node serves, so that no good token is refused at start; the node's
    // watch keeps it current from then on (`mote_peers`, which follows the token records).
    tokens
        .load(&grants)
        .await
        .context("cannot read the token records")?;
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
    match data == Path::new(super::client::DEFAULT_DATA_DIR) {
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
pub fn own_secret(data: &Path) -> anyhow::Result<ClusterSecret> {
    let path = data.join(CLUSTER_SECRET_FILE);
    if !path.exists() {
        let token = mote_access::Token::generate();
        write_private(&path, &token.expose()[mote_access::Token::PREFIX.len()..])?;
        println!(
            "made a cluster secret in {}: start the other nodes of this cluster with --cluster-secret-file pointing to a copy of it",
            path.display()
        );
    }
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("cannot read the cluster secret from {}", path.display()))?;
    ClusterSecret::new(&text).with_context(|| format!("the cluster secret in {}", path.display()))
}

/// Writes `text` to a new file only its owner may read.
fn write_private(path: &Path, text: &str) -> anyhow::Result<()> {
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
    write().with_context(|| format!("cannot write {}", path.display()))
}
