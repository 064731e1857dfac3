//! What a platform keeps in its data directory besides the store and the node's files: the
//! files the CLI reads (the admin token, the URL the node advertises) and the node's instance
//! id.

use crate::error::PlatformError;
use std::path::Path;

/// The file in a data directory that holds the admin token made on first start.
pub const ADMIN_TOKEN_FILE: &str = "admin.token";

/// The file in a data directory that holds the URL the node advertises.
pub const NODE_URL_FILE: &str = "url";

/// The file in a data directory that keeps the cluster secret a node made for itself.
pub const CLUSTER_SECRET_FILE: &str = "cluster.secret";

/// The file in a data directory that keeps the node's instance id.
const INSTANCE_ID_FILE: &str = "node-id";

/// Writes the URL this node advertises to `DATA/url`, where the CLI looks before it sends the
/// admin token to a server that is not on loopback. Whole or not at all (a rename), so that a
/// command never reads half of it.
pub(crate) fn write_url(data: &Path, url: &str) -> Result<(), PlatformError> {
    let path = data.join(NODE_URL_FILE);
    let partial = data.join(format!("{NODE_URL_FILE}.partial"));
    // With `--store URL` nothing else may have made the data directory yet.
    std::fs::create_dir_all(data)
        .and_then(|()| std::fs::write(&partial, format!("{url}\n")))
        .and_then(|()| std::fs::rename(&partial, &path))
        .map_err(|source| PlatformError::File {
            what: "write the node's URL to",
            path,
            source,
        })
}

/// This node's instance id, kept in `DATA/node-id` (made on first start): a restart on the
/// same data takes its name back at once, wherever it listens now.
pub(crate) fn instance_id(data: &Path) -> Result<String, PlatformError> {
    let path = data.join(INSTANCE_ID_FILE);
    match std::fs::read_to_string(&path) {
        Ok(id) if !id.trim().is_empty() => Ok(id.trim().to_owned()),
        _ => {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos());
            let id = format!("{:x}-{:x}", nanos, std::process::id());
            std::fs::create_dir_all(data)
                .and_then(|()| std::fs::write(&path, &id))
                .map_err(|source| PlatformError::File {
                    what: "write the node's id to",
                    path: path.clone(),
                    source,
                })?;
            Ok(id)
        }
    }
}
