//! An S3-compatible server on loopback for runs without a remote one: s3s-fs serving a
//! temporary directory, each bucket a subdirectory of it.

use crate::process::{KilledOnDrop, free_ports};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How long s3s-fs may take to listen after it is started, on a loaded machine.
const LISTEN_WITHIN: Duration = Duration::from_secs(10);

/// An s3s-fs server on a free loopback port, serving a temporary directory with one bucket;
/// killed, and its directory removed, when dropped.
#[derive(Debug)]
pub struct LocalS3 {
    // Declared before `dir`, so the server stops before its directory goes.
    _process: KilledOnDrop,
    dir: tempfile::TempDir,
    url: String,
}

/// Why a [`LocalS3`] did not start. Each message carries its cause, so there is no separate
/// source to print twice.
#[derive(Debug, thiserror::Error)]
pub enum LocalS3Error {
    /// The directory to serve, or its bucket, could not be created.
    #[error("cannot create the directory s3s-fs would serve: {0}")]
    Dir(std::io::Error),
    /// No loopback port could be picked.
    #[error("cannot find a free loopback port for s3s-fs: {0}")]
    Port(std::io::Error),
    /// The binary could not be run.
    #[error("cannot run s3s-fs at {}: {error}; build it with ./scripts/s3s-fs", .binary.display())]
    Spawn {
        /// The binary that was started.
        binary: PathBuf,
        /// Why it did not start.
        error: std::io::Error,
    },
    /// It started but did not accept connections in time.
    #[error("s3s-fs did not listen on port {port} within {} s", LISTEN_WITHIN.as_secs())]
    NotListening {
        /// The port it was told to listen on.
        port: u16,
    },
}

impl LocalS3 {
    /// The region requests to it are signed for.
    pub const REGION: &str = "us-east-1";
    /// Its access key id.
    pub const ACCESS_KEY: &str = "mote";
    /// Its secret access key.
    pub const SECRET_KEY: &str = "mote-secret";

    /// Starts `binary` (s3s-fs 0.14.1, built by `scripts/s3s-fs`) with `bucket` created, and
    /// waits until it accepts connections.
    pub fn start(binary: &Path, bucket: &str) -> Result<Self, LocalS3Error> {
        let dir = tempfile::tempdir().map_err(LocalS3Error::Dir)?;
        std::fs::create_dir(dir.path().join(bucket)).map_err(LocalS3Error::Dir)?;
        let port = free_ports(1).map_err(LocalS3Error::Port)?[0];
        let child = Command::new(binary)
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .args(["--access-key", Self::ACCESS_KEY])
            .args(["--secret-key", Self::SECRET_KEY])
            .arg(dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|error| LocalS3Error::Spawn {
                binary: binary.into(),
                error,
            })?;
        let server = Self {
            _process: KilledOnDrop::new(child),
            dir,
            url: format!("http://127.0.0.1:{port}"),
        };
        let deadline = Instant::now() + LISTEN_WITHIN;
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            if Instant::now() >= deadline {
                return Err(LocalS3Error::NotListening { port });
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(server)
    }

    /// Where it listens, such as `http://127.0.0.1:40123`; buckets are addressed by path.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The directory it serves: bucket `b` is its subdirectory `b`.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_binary_is_named_with_the_fix() {
        let err = LocalS3::start(Path::new("/nonexistent/s3s-fs"), "b").unwrap_err();
        assert!(matches!(err, LocalS3Error::Spawn { .. }), "{err:?}");
        let message = err.to_string();
        assert!(message.contains("/nonexistent/s3s-fs"), "{message}");
        assert!(message.contains("./scripts/s3s-fs"), "{message}");
    }
}
