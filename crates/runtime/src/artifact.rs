//! Compiled artefacts on disk, keyed by the module's sha256 and the engine's compatibility hash,
//! so that a restart or a second deploy of the same bytes loads machine code instead of compiling.
//!
//! Invariant: a file named `<sha256>-<engine>.cwasm` in the directory is complete and was written
//! by this engine configuration from the module with that sha256. Files are written to a
//! temporary name and renamed into place, so a crash leaves either nothing or a whole file.

use crate::error::{CompileError, RuntimeError};
use sha2::{Digest, Sha256};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::{Path, PathBuf};
use wasmtime::{Engine, Module};

/// The directory of compiled artefacts.
pub struct ArtifactCache {
    dir: PathBuf,
    engine_tag: String,
}

impl ArtifactCache {
    /// Opens (creating if needed) the cache in `dir` for artefacts of `engine`.
    pub fn open(dir: &Path, engine: &Engine) -> Result<Self, RuntimeError> {
        std::fs::create_dir_all(dir).map_err(|source| RuntimeError::CacheDir {
            path: dir.to_owned(),
            source,
        })?;
        let mut h = DefaultHasher::new();
        engine.precompile_compatibility_hash().hash(&mut h);
        Ok(Self {
            dir: dir.to_owned(),
            engine_tag: format!("{:016x}", h.finish()),
        })
    }

    /// The lowercase hex sha256 of `bytes`.
    pub fn digest(bytes: &[u8]) -> String {
        hex::encode(Sha256::digest(bytes))
    }

    fn path(&self, sha256: &str) -> PathBuf {
        self.dir.join(format!("{sha256}-{}.cwasm", self.engine_tag))
    }

    /// Loads the artefact for `sha256`, or `None` if there is none or it is unusable (in which
    /// case the caller compiles again and overwrites it).
    pub fn load(&self, engine: &Engine, sha256: &str) -> Option<Module> {
        let path = self.path(sha256);
        // Opening is the existence check: a separate `stat` would cost a system call on every
        // cold start.
        let file = match std::fs::File::open(&path) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "cannot open compiled artefact");
                return None;
            }
        };
        // SAFETY: the file was written by `store` below from a module this engine compiled, under
        // a name that includes the engine's compatibility hash, and only mote writes this
        // directory. wasmtime additionally checks the header and engine settings.
        match unsafe { Module::deserialize_open_file(engine, file) } {
            Ok(module) => Some(module),
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "discarding unusable compiled artefact");
                None
            }
        }
    }

    /// Writes the artefact of `module` under `sha256`, atomically.
    pub fn store(&self, sha256: &str, module: &Module) -> Result<(), CompileError> {
        let path = self.path(sha256);
        let io = |source| CompileError::Cache {
            path: path.clone(),
            source,
        };
        let bytes = module
            .serialize()
            .map_err(|e| io(std::io::Error::other(e.to_string())))?;
        let mut tmp = tempfile::NamedTempFile::new_in(&self.dir).map_err(io)?;
        std::io::Write::write_all(&mut tmp, &bytes).map_err(io)?;
        tmp.persist(&path).map_err(|e| io(e.error))?;
        Ok(())
    }

    /// Deletes the artefact for `sha256`, if any.
    pub fn remove(&self, sha256: &str) {
        let _ = std::fs::remove_file(self.path(sha256));
    }
}
