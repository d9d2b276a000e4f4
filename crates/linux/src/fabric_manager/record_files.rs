//! The fabric's persisted allocations and desired state: one small JSON file per object under
//! `<state_dir>/fabric/<kind>/`, so a restart neither forgets an allocation nor rewrites
//! everything on each call.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::error::LinuxError;
use osac_model::hash::fnv1a64;

/// Directory-backed record store.
#[derive(Debug, Clone)]
pub struct RecordStore {
    root: PathBuf,
}

fn state_err(path: &Path, e: impl std::fmt::Display) -> LinuxError {
    LinuxError::State {
        path: path.display().to_string(),
        message: e.to_string(),
    }
}

impl RecordStore {
    /// A store rooted at `root` (created on first write).
    pub fn new(root: PathBuf) -> Self {
        RecordStore { root }
    }

    fn path(&self, kind: &str, id: &str) -> PathBuf {
        self.root
            .join(kind)
            .join(format!("{:016x}.json", fnv1a64(id.bytes())))
    }

    /// Writes one record atomically and durably: temp file, fsync, rename, fsync of the
    /// directory. Without the two syncs a power loss after the rename may leave the old
    /// content (or none) while the kernel already used the new one — e.g. an external address
    /// handed out again.
    pub async fn put<T: Serialize>(
        &self,
        kind: &str,
        id: &str,
        value: &T,
    ) -> Result<(), LinuxError> {
        let path = self.path(kind, id);
        let text = serde_json::to_vec_pretty(value).map_err(|e| state_err(&path, e))?;
        self.put_text(kind, id, text).await
    }

    /// Writes one record's text, as [`RecordStore::put`] does.
    pub async fn put_text(&self, kind: &str, id: &str, text: Vec<u8>) -> Result<(), LinuxError> {
        let path = self.path(kind, id);
        let dir = self.root.join(kind);
        tokio::fs::create_dir_all(&dir)
            .await
            .map_err(|e| state_err(&dir, e))?;
        let tmp = path.with_extension("tmp");
        let (tmp2, path2, dir2) = (tmp.clone(), path.clone(), dir.clone());
        tokio::task::spawn_blocking(move || -> Result<(), LinuxError> {
            use std::io::Write;
            let mut f = std::fs::File::create(&tmp2).map_err(|e| state_err(&tmp2, e))?;
            f.write_all(&text).map_err(|e| state_err(&tmp2, e))?;
            f.sync_all().map_err(|e| state_err(&tmp2, e))?;
            std::fs::rename(&tmp2, &path2).map_err(|e| state_err(&path2, e))?;
            std::fs::File::open(&dir2)
                .and_then(|d| d.sync_all())
                .map_err(|e| state_err(&dir2, e))
        })
        .await
        .map_err(|e| state_err(&tmp, e))?
    }

    /// Removes one record; a missing record is success.
    pub async fn delete(&self, kind: &str, id: &str) -> Result<(), LinuxError> {
        let path = self.path(kind, id);
        match tokio::fs::remove_file(&path).await {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(state_err(&path, e)),
        }
    }

    /// The text of every record of `kind` (none when the kind has no directory).
    pub async fn load_texts(&self, kind: &str) -> Result<Vec<(PathBuf, Vec<u8>)>, LinuxError> {
        let dir = self.root.join(kind);
        let mut out = Vec::new();
        let mut entries = match tokio::fs::read_dir(&dir).await {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
            Err(e) => return Err(state_err(&dir, e)),
        };
        while let Some(entry) = entries.next_entry().await.map_err(|e| state_err(&dir, e))? {
            let path = entry.path();
            if path.extension().and_then(|e| e.to_str()) != Some("json") {
                continue;
            }
            let text = tokio::fs::read(&path)
                .await
                .map_err(|e| state_err(&path, e))?;
            out.push((path, text));
        }
        Ok(out)
    }

    /// Every record of `kind`, by `key_of`.
    pub async fn load<T: DeserializeOwned>(
        &self,
        kind: &str,
        key_of: impl Fn(&T) -> String,
    ) -> Result<BTreeMap<String, T>, LinuxError> {
        let mut out = BTreeMap::new();
        for (path, text) in self.load_texts(kind).await? {
            let value: T = serde_json::from_slice(&text).map_err(|e| state_err(&path, e))?;
            out.insert(key_of(&value), value);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn roundtrip_and_delete() {
        let dir = tempfile::tempdir().unwrap();
        let store = RecordStore::new(dir.path().to_path_buf());
        store.put("k", "a", &("a".to_string(), 1)).await.unwrap();
        store.put("k", "b", &("b".to_string(), 2)).await.unwrap();
        let all: BTreeMap<String, (String, i32)> = store
            .load("k", |v: &(String, i32)| v.0.clone())
            .await
            .unwrap();
        assert_eq!(all.len(), 2);
        store.delete("k", "a").await.unwrap();
        store.delete("k", "a").await.unwrap();
        let all: BTreeMap<String, (String, i32)> = store
            .load("k", |v: &(String, i32)| v.0.clone())
            .await
            .unwrap();
        assert_eq!(all.keys().collect::<Vec<_>>(), vec!["b"]);
        let none: BTreeMap<String, (String, i32)> = store
            .load("missing", |v: &(String, i32)| v.0.clone())
            .await
            .unwrap();
        assert!(none.is_empty());
    }
}
