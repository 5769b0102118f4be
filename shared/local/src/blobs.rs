//! Documents as files under the data directory, written atomically.

use async_trait::async_trait;
use bytes::Bytes;
use sarvcrawl_core::ports::{BlobStore, StoreError, StoreResult};
use sarvcrawl_core::stages;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};

/// Turns at writing, by directory (several directories to one turn).
const TURNS: usize = 16;

/// Blob store over a directory.
pub struct FsBlobs {
    root: PathBuf,
    /// The files of one directory are written one at a time: a job's documents share a
    /// directory, whose lock the kernel takes for each file made in it, and a writer waiting
    /// for it spins on the CPU.
    turns: [tokio::sync::Mutex<()>; TURNS],
}

impl FsBlobs {
    pub fn new(root: PathBuf) -> Self {
        FsBlobs {
            root,
            turns: Default::default(),
        }
    }

    /// The turn of the directory `path` is written in.
    fn turn(&self, path: &Path) -> &tokio::sync::Mutex<()> {
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        path.parent().hash(&mut hasher);
        &self.turns[hasher.finish() as usize % TURNS]
    }

    /// The file of a key; keys are made by the core, but are still checked to stay inside.
    fn path(&self, key: &str) -> StoreResult<PathBuf> {
        let safe = !key.is_empty()
            && key
                .split('/')
                .all(|part| !part.is_empty() && part != "." && part != "..")
            && key
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"/_-.".contains(&b));
        if !safe {
            return Err(StoreError::permanent(format!("invalid blob key {key:?}")));
        }
        Ok(self.root.join(key))
    }
}

#[async_trait]
impl BlobStore for FsBlobs {
    async fn put(&self, key: &str, body: Bytes) -> StoreResult<()> {
        let path = self.path(key)?;
        let stage = stages::current();
        let _turn = self.turn(&path).lock().await;
        // One trip off the runtime for the directory, the file and its rename.
        tokio::task::spawn_blocking(move || {
            let _in = stages::enter(stage);
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir)?;
            }
            let tmp = path.with_extension(format!("tmp-{}", ulid::Ulid::new()));
            std::fs::write(&tmp, &body)?;
            std::fs::rename(&tmp, &path)
        })
        .await
        .map_err(StoreError::new)?
        .map_err(StoreError::new)
    }

    async fn get(&self, key: &str) -> StoreResult<Option<Bytes>> {
        let path = self.path(key)?;
        match tokio::fs::read(&path).await {
            Ok(b) => Ok(Some(Bytes::from(b))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(StoreError::new(e)),
        }
    }

    async fn delete(&self, key: &str) -> StoreResult<()> {
        let path = self.path(key)?;
        match tokio::fs::remove_file(&path).await {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(StoreError::new(e)),
            _ => Ok(()),
        }
    }
}
