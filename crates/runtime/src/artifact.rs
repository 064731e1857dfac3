//! Compiled artefacts on disk, keyed by the module's sha256 and the engine's compatibility hash,
//! so that a restart or a second deploy of the same bytes loads machine code instead of compiling.
//!
//! A file is wasmtime's serialized module followed by a trailer: the xxh3-64 checksum of the
//! module bytes and a magic tag. Loading maps the file as executable code, so nothing may be
//! mapped that is not what this engine wrote:
//!
//! - Writes go to a temporary file that is synced to disk before it is renamed into place, so
//!   after a crash or a power loss the name holds either nothing or the whole file.
//! - Loads check the trailer first, reading the file through a buffer kept per thread (no
//!   mapping, no allocation), and map it only if the checksum matches. A torn or damaged file
//!   is reported as unusable and the caller compiles the module again; it is never run. The
//!   check reads the whole file once, which a cold start pays (measured in
//!   docs/benchmarks/microseconds.md).
//! - wasmtime checks the header and the engine settings again when it maps the file.

use crate::error::{CompileError, RuntimeError};
use sha2::{Digest, Sha256};
use std::cell::RefCell;
use std::fs::File;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use wasmtime::component::Component;
use wasmtime::{Engine, Module};
use xxhash_rust::xxh3::Xxh3;

/// Ends every artefact this cache writes, after the checksum.
const MAGIC: &[u8; 8] = b"motexxh3";
/// The checksum and the magic tag.
const TRAILER: usize = 16;
/// How much of a file one read takes while checking it.
const CHUNK: usize = 64 << 10;

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

    /// Where the artefact of the module with this sha256 lives.
    pub fn path(&self, sha256: &str) -> PathBuf {
        self.dir.join(format!("{sha256}-{}.cwasm", self.engine_tag))
    }

    /// Where the artefact of the component with this sha256 lives: a name of its own, so a
    /// module's cold start never opens a file to learn which kind it has.
    pub fn component_path(&self, sha256: &str) -> PathBuf {
        self.dir
            .join(format!("{sha256}-{}.component.cwasm", self.engine_tag))
    }

    /// Loads the artefact for `sha256`, or `None` if there is none or it is unusable (in which
    /// case the caller compiles again and overwrites it).
    pub fn load(&self, engine: &Engine, sha256: &str) -> Option<Module> {
        let path = self.path(sha256);
        let file = self.verified(&path)?;
        // SAFETY: the file holds what `store` wrote from a module this engine compiled, under a
        // name that includes the engine's compatibility hash: `verified` checked its checksum
        // just now, so it is whole and unchanged since. Only mote writes this directory, and
        // wasmtime checks the header and engine settings again.
        match unsafe { Module::deserialize_open_file(engine, file) } {
            Ok(module) => Some(module),
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "discarding unusable compiled artefact");
                None
            }
        }
    }

    /// Loads the artefact of the component `sha256`, like [`ArtifactCache::load`].
    pub fn load_component(&self, engine: &Engine, sha256: &str) -> Option<Component> {
        let path = self.component_path(sha256);
        self.verified(&path)?;
        // SAFETY: as in `load`: `verified` checked that the file is whole and what `store`
        // wrote from a component this engine compiled; only mote writes this directory.
        match unsafe { Component::deserialize_file(engine, &path) } {
            Ok(component) => Some(component),
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "discarding unusable compiled artefact");
                None
            }
        }
    }

    /// Whether a whole, unchanged artefact for `sha256` is on disk.
    pub fn is_stored(&self, sha256: &str) -> bool {
        self.verified(&self.path(sha256)).is_some()
    }

    /// Whether a whole, unchanged artefact for the component `sha256` is on disk.
    pub fn is_stored_component(&self, sha256: &str) -> bool {
        self.verified(&self.component_path(sha256)).is_some()
    }

    /// The artefact at `path`, opened, if its checksum matches its contents.
    fn verified(&self, path: &Path) -> Option<File> {
        // Opening is the existence check: a separate `stat` would cost a system call on every
        // cold start.
        let mut file = match File::open(path) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "cannot open compiled artefact");
                return None;
            }
        };
        match check(&mut file) {
            Ok(()) => Some(file),
            Err(problem) => {
                tracing::warn!(path = %path.display(), %problem, "compiled artefact is damaged; compiling the module again");
                None
            }
        }
    }

    /// Writes the artefact of `module` under `sha256`: to a temporary file, synced, then
    /// renamed into place.
    pub fn store(&self, sha256: &str, module: &Module) -> Result<(), CompileError> {
        self.write(self.path(sha256), module.serialize())
    }

    /// Writes the artefact of `component` under `sha256`, like [`ArtifactCache::store`].
    pub fn store_component(&self, sha256: &str, component: &Component) -> Result<(), CompileError> {
        self.write(self.component_path(sha256), component.serialize())
    }

    fn write(&self, path: PathBuf, bytes: wasmtime::Result<Vec<u8>>) -> Result<(), CompileError> {
        let io = |source| CompileError::Cache {
            path: path.clone(),
            source,
        };
        let bytes = bytes.map_err(|e| io(std::io::Error::other(e.to_string())))?;
        let mut tmp = tempfile::NamedTempFile::new_in(&self.dir).map_err(io)?;
        tmp.write_all(&bytes).map_err(io)?;
        tmp.write_all(&trailer(&bytes)).map_err(io)?;
        tmp.as_file().sync_all().map_err(io)?;
        tmp.persist(&path).map_err(|e| io(e.error))?;
        Ok(())
    }

    /// Deletes the artefact for `sha256`, if any.
    pub fn remove(&self, sha256: &str) {
        let _ = std::fs::remove_file(self.path(sha256));
        let _ = std::fs::remove_file(self.component_path(sha256));
    }
}

/// The trailer of an artefact whose module bytes are `bytes`.
fn trailer(bytes: &[u8]) -> [u8; TRAILER] {
    let mut trailer = [0; TRAILER];
    trailer[..8].copy_from_slice(&xxhash_rust::xxh3::xxh3_64(bytes).to_le_bytes());
    trailer[8..].copy_from_slice(MAGIC);
    trailer
}

thread_local! {
    /// The buffer [`check`] reads through, one per thread that loads: a fresh one would be zeroed
    /// on every cold start, which costs about as much as hashing a small artefact.
    static CHUNK_BUFFER: RefCell<Box<[u8]>> = RefCell::new(vec![0; CHUNK].into_boxed_slice());
}

/// Reads `file` from its start and checks that its trailer matches the bytes before it.
fn check(file: &mut File) -> Result<(), String> {
    let len = file
        .metadata()
        .map_err(|e| format!("cannot read its size: {e}"))?
        .len();
    let (len, body) = usize::try_from(len)
        .ok()
        .and_then(|len| Some((len, len.checked_sub(TRAILER)?)))
        .ok_or_else(|| format!("{len} bytes is too short to hold a checksum"))?;
    let mut hasher = Xxh3::new();
    let mut tail = [0u8; TRAILER];
    CHUNK_BUFFER.with_borrow_mut(|chunk| {
        let mut at = 0;
        while at < len {
            let read = &mut chunk[..(len - at).min(CHUNK)];
            file.read_exact(read).map_err(|e| match e.kind() {
                std::io::ErrorKind::UnexpectedEof => {
                    format!("it was cut short while being read (it had {len} bytes)")
                }
                _ => format!("cannot read it: {e}"),
            })?;
            let in_body = body.saturating_sub(at).min(read.len());
            hasher.update(&read[..in_body]);
            let rest = &read[in_body..];
            if !rest.is_empty() {
                let from = at + in_body - body;
                tail[from..from + rest.len()].copy_from_slice(rest);
            }
            at += read.len();
        }
        Ok::<_, String>(())
    })?;
    if &tail[8..] != MAGIC {
        return Err("it has no checksum trailer".into());
    }
    let stored = u64::from_le_bytes(tail[..8].try_into().expect("8 bytes"));
    let actual = hasher.digest();
    if stored != actual {
        return Err(format!(
            "its checksum is {actual:016x}, but it was written with {stored:016x}"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Writes `contents` to a file and checks it.
    fn checked(contents: &[u8]) -> Result<(), String> {
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(contents).unwrap();
        std::io::Seek::rewind(&mut file).unwrap();
        check(&mut file)
    }

    #[test]
    fn whole_files_pass_and_any_damage_is_found() {
        // Sizes around the read chunk, so the trailer straddles a chunk boundary.
        for size in [0, 1, CHUNK - 8, CHUNK, CHUNK + 3, 3 * CHUNK + 100] {
            let body: Vec<u8> = (0..size).map(|i| (i * 31 + i / 7) as u8).collect();
            let mut file = body.clone();
            file.extend_from_slice(&trailer(&body));
            assert_eq!(checked(&file), Ok(()), "size {size}");
            if size > 0 {
                let mut flipped = file.clone();
                flipped[size / 2] ^= 0x10;
                let err = checked(&flipped).unwrap_err();
                assert!(err.contains("checksum is"), "size {size}: {err}");
            }
            let torn = &file[..file.len() / 2];
            assert!(checked(torn).is_err(), "size {size}: a torn file passed");
        }
        assert!(checked(b"short").unwrap_err().contains("too short"));
        let no_trailer = vec![7u8; 100];
        assert!(checked(&no_trailer).unwrap_err().contains("no checksum"));
    }
}
