//! The embedded [`StateStore`]: one redb file. redb serialises writers and commits durably, so a
//! put that returned survives a crash; reads run on their own snapshot and never block writes.

use crate::{StateError, StateStore};
use async_trait::async_trait;
use redb::{Database, ReadableDatabase, TableDefinition};
use std::path::{Path, PathBuf};
use std::sync::Arc;

const RECORDS: TableDefinition<&str, &[u8]> = TableDefinition::new("records");

/// A redb-backed state store.
#[derive(Clone)]
pub struct EmbeddedStore {
    db: Arc<Database>,
    path: Arc<PathBuf>,
}

impl EmbeddedStore {
    /// Opens the store at `path`, creating it if needed.
    pub fn open(path: &Path) -> Result<Self, StateError> {
        let err = |e: &dyn std::fmt::Display| StateError::Storage {
            path: path.display().to_string(),
            message: e.to_string(),
        };
        let db = Database::create(path).map_err(|e| err(&e))?;
        let txn = db.begin_write().map_err(|e| err(&e))?;
        txn.open_table(RECORDS).map_err(|e| err(&e))?;
        txn.commit().map_err(|e| err(&e))?;
        Ok(Self {
            db: Arc::new(db),
            path: Arc::new(path.to_owned()),
        })
    }

    /// Runs blocking redb work off the async runtime's threads.
    async fn blocking<R: Send + 'static>(
        &self,
        work: impl FnOnce(&Database) -> Result<R, redb::Error> + Send + 'static,
    ) -> Result<R, StateError> {
        let db = self.db.clone();
        let path = self.path.clone();
        let storage = move |message: String| StateError::Storage {
            path: path.display().to_string(),
            message,
        };
        match tokio::task::spawn_blocking(move || work(&db)).await {
            Ok(result) => result.map_err(|e| storage(e.to_string())),
            Err(join) => Err(storage(format!("storage task failed: {join}"))),
        }
    }
}

#[async_trait]
impl StateStore for EmbeddedStore {
    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>, StateError> {
        let key = key.to_owned();
        self.blocking(move |db| {
            let table = db.begin_read()?.open_table(RECORDS)?;
            Ok(table.get(key.as_str())?.map(|v| v.value().to_vec()))
        })
        .await
    }

    async fn put(&self, key: &str, value: Vec<u8>) -> Result<(), StateError> {
        let key = key.to_owned();
        self.blocking(move |db| {
            let txn = db.begin_write()?;
            txn.open_table(RECORDS)?
                .insert(key.as_str(), value.as_slice())?;
            txn.commit()?;
            Ok(())
        })
        .await
    }

    async fn delete(&self, key: &str) -> Result<bool, StateError> {
        let key = key.to_owned();
        self.blocking(move |db| {
            let txn = db.begin_write()?;
            let existed = txn.open_table(RECORDS)?.remove(key.as_str())?.is_some();
            txn.commit()?;
            Ok(existed)
        })
        .await
    }

    async fn list(&self, prefix: &str) -> Result<Vec<(String, Vec<u8>)>, StateError> {
        let prefix = prefix.to_owned();
        self.blocking(move |db| {
            let table = db.begin_read()?.open_table(RECORDS)?;
            let mut out = Vec::new();
            for entry in table.range(prefix.as_str()..)? {
                let (k, v) = entry?;
                if !k.value().starts_with(prefix.as_str()) {
                    break;
                }
                out.push((k.value().to_owned(), v.value().to_vec()));
            }
            Ok(out)
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn put_get_list_delete_and_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.redb");
        {
            let s = EmbeddedStore::open(&path).unwrap();
            s.put("/f/a", b"1".to_vec()).await.unwrap();
            s.put("/f/b", b"2".to_vec()).await.unwrap();
            s.put("/g/c", b"3".to_vec()).await.unwrap();
            assert_eq!(s.get("/f/a").await.unwrap(), Some(b"1".to_vec()));
            let keys: Vec<_> = s
                .list("/f/")
                .await
                .unwrap()
                .into_iter()
                .map(|(k, _)| k)
                .collect();
            assert_eq!(keys, ["/f/a", "/f/b"]);
            assert!(s.delete("/f/a").await.unwrap());
            assert!(!s.delete("/f/a").await.unwrap());
        }
        let s = EmbeddedStore::open(&path).unwrap();
        assert_eq!(s.get("/f/a").await.unwrap(), None);
        assert_eq!(s.get("/f/b").await.unwrap(), Some(b"2".to_vec()));
        assert_eq!(s.list("/").await.unwrap().len(), 2);
    }
}
