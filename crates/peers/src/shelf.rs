//! Module storage beside the peers: object storage (`mote up --s3-endpoint`) that keeps a copy
//! of every module deployed on a node, as `SHA256.wasm` in one bucket, for nodes that adopt a
//! record when no peer holds its module. What comes back from it, or from a peer, is only
//! taken if it hashes to the name asked for ([`checked`]).

use mote_objects::Objects;
use sha2::{Digest, Sha256};
use std::sync::Arc;

/// The largest module a peer or the shelf may send: the largest a deploy accepts is a flag of
/// the deploying node's, so this only keeps a broken source from filling this node's memory.
pub(crate) const MAX_MODULE_BYTES: u64 = 1 << 30;

/// Object storage that keeps every deployed module, as `SHA256.wasm` in one bucket.
#[derive(Clone)]
pub(crate) struct ModuleShelf {
    pub objects: Arc<Objects>,
    pub bucket: String,
}

impl ModuleShelf {
    fn key(sha256: &str) -> String {
        format!("{sha256}.wasm")
    }

    /// Puts a copy of the module `wasm`, whose sha256 is `sha256`.
    pub(crate) async fn keep(
        &self,
        sha256: &str,
        wasm: bytes::Bytes,
    ) -> Result<(), mote_objects::ObjectError> {
        self.objects
            .put(&self.bucket, &Self::key(sha256), wasm)
            .await
    }

    /// The module whose sha256 is `sha256`, checked.
    pub(crate) async fn fetch(&self, sha256: &str) -> Result<Vec<u8>, String> {
        let got = self
            .objects
            .get(&self.bucket, &Self::key(sha256), MAX_MODULE_BYTES)
            .await;
        let bytes = got.map_err(|e| e.to_string())?;
        checked(bytes.to_vec(), sha256)
    }
}

/// `bytes` if they hash to `sha256`.
pub(crate) fn checked(bytes: Vec<u8>, sha256: &str) -> Result<Vec<u8>, String> {
    let found = hex::encode(Sha256::digest(&bytes));
    match found == sha256 {
        true => Ok(bytes),
        false => Err(format!(
            "sent {} bytes that hash to {found}, not to {sha256}; refused",
            bytes.len()
        )),
    }
}
