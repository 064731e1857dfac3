//! Module bytes stored by content: `<dir>/<sha256>.wasm`. Writes go to a temporary file that is
//! synced and renamed into place, and the directory is synced after the rename, so a blob that
//! exists is whole and stays after a crash, and writing the same bytes twice is a no-op.

use crate::StateError;
use sha2::{Digest, Sha256};
use std::io::Write;
use std::path::{Path, PathBuf};

/// A directory of content-addressed module blobs.
#[derive(Clone, Debug)]
pub struct ModuleBlobs {
    dir: PathBuf,
}

impl ModuleBlobs {
    /// Opens (creating if needed) the blob directory.
    pub fn open(dir: &Path) -> Result<Self, StateError> {
        std::fs::create_dir_all(dir).map_err(|source| StateError::Blob {
            path: dir.display().to_string(),
            source,
        })?;
        Ok(Self {
            dir: dir.to_owned(),
        })
    }

    fn path(&self, sha256: &str) -> PathBuf {
        self.dir.join(format!("{sha256}.wasm"))
    }

    /// Stores `bytes` and returns their sha256.
    pub fn put(&self, bytes: &[u8]) -> Result<String, StateError> {
        let sha256 = hex::encode(Sha256::digest(bytes));
        let path = self.path(&sha256);
        if path.exists() {
            return Ok(sha256);
        }
        let err = |source| StateError::Blob {
            path: path.display().to_string(),
            source,
        };
        let mut tmp = tempfile::NamedTempFile::new_in(&self.dir).map_err(err)?;
        tmp.write_all(bytes).map_err(err)?;
        tmp.as_file().sync_all().map_err(err)?;
        tmp.persist(&path).map_err(|e| err(e.error))?;
        // The rename is durable only once the directory is: a record written after this
        // returns must never point at a blob a power loss could take back.
        std::fs::File::open(&self.dir)
            .and_then(|dir| dir.sync_all())
            .map_err(err)?;
        Ok(sha256)
    }

    /// Reads the blob with this sha256.
    pub fn get(&self, sha256: &str) -> std::io::Result<Vec<u8>> {
        std::fs::read(self.path(sha256))
    }

    /// Whether the blob with this sha256 is here.
    pub fn contains(&self, sha256: &str) -> bool {
        self.path(sha256).exists()
    }

    /// Deletes the blob with this sha256, if present.
    pub fn remove(&self, sha256: &str) {
        let _ = std::fs::remove_file(self.path(sha256));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_addressed_and_idempotent() {
        let dir = tempfile::tempdir().unwrap();
        let blobs = ModuleBlobs::open(dir.path()).unwrap();
        let a = blobs.put(b"abc").unwrap();
        assert_eq!(
            a,
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(blobs.put(b"abc").unwrap(), a);
        assert_eq!(blobs.get(&a).unwrap(), b"abc");
        blobs.remove(&a);
        assert!(blobs.get(&a).is_err());
    }
}
