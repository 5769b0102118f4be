//! Documents under the data directory: a directory's small blobs appended to its segment
//! file, larger ones each a file of its own, written atomically.

use crate::segment::{self, Segment, Slot};
use async_trait::async_trait;
use bytes::Bytes;
use sarvcrawl_core::ports::{BlobStore, StoreError, StoreResult};
use sarvcrawl_core::stages;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use tokio::sync::{Mutex as Turn, OwnedMutexGuard};

/// How many directories' segments are kept loaded (their index and an open file) when none
/// is in use.
const LOADED: usize = 64;

/// A directory's segment, loaded on first use. Its turn is held while it is loaded or
/// written, and while a record is looked up.
type Shared = Arc<Turn<Option<Segment>>>;

/// Blob store over a directory.
pub struct FsBlobs {
    root: PathBuf,
    segments: Mutex<HashMap<PathBuf, Shared>>,
}

impl FsBlobs {
    pub fn new(root: PathBuf) -> Self {
        FsBlobs {
            root,
            segments: Mutex::default(),
        }
    }

    /// The directory and the name of a key; keys are made by the core, but are still
    /// checked to stay inside.
    fn place(&self, key: &str) -> StoreResult<(PathBuf, String)> {
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
        Ok(match key.rsplit_once('/') {
            Some((dir, name)) => (self.root.join(dir), name.to_owned()),
            None => (self.root.clone(), key.to_owned()),
        })
    }

    /// The loaded segment of `dir`, its turn taken.
    async fn segment(&self, dir: &Path) -> StoreResult<OwnedMutexGuard<Option<Segment>>> {
        let shared = {
            let mut segments = self.segments.lock().unwrap_or_else(|e| e.into_inner());
            if segments.len() >= LOADED && !segments.contains_key(dir) {
                segments.retain(|_, s| Arc::strong_count(s) > 1);
            }
            segments.entry(dir.to_path_buf()).or_default().clone()
        };
        let mut turn = shared.lock_owned().await;
        if turn.is_none() {
            let dir = dir.to_path_buf();
            turn = blocking(move || {
                *turn = Some(Segment::load(&dir)?);
                Ok(turn)
            })
            .await?;
        }
        Ok(turn)
    }
}

/// Runs blocking file work off the runtime, its CPU counted in the caller's stage.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> std::io::Result<T> + Send + 'static,
) -> StoreResult<T> {
    let stage = stages::current();
    tokio::task::spawn_blocking(move || {
        let _in = stages::enter(stage);
        work()
    })
    .await
    .map_err(StoreError::new)?
    .map_err(StoreError::new)
}

/// The segment a turn guards; it is loaded before the turn is handed out.
fn loaded(turn: &mut Option<Segment>) -> std::io::Result<&mut Segment> {
    turn.as_mut()
        .ok_or_else(|| std::io::Error::other("segment not loaded"))
}

#[async_trait]
impl BlobStore for FsBlobs {
    async fn put(&self, key: &str, body: Bytes) -> StoreResult<()> {
        let (dir, name) = self.place(key)?;
        let mut turn = self.segment(&dir).await?;
        blocking(move || {
            let segment = loaded(&mut turn)?;
            if body.len() <= segment::MAX_BODY {
                return segment.append(&name, Some(&body));
            }
            std::fs::create_dir_all(&dir)?;
            let path = dir.join(&name);
            let tmp = path.with_extension(format!("tmp-{}", ulid::Ulid::new()));
            std::fs::write(&tmp, &body)?;
            std::fs::rename(&tmp, &path)?;
            // A body kept in the segment before would be found first.
            if matches!(segment.find(&name), Some(Slot::Blob { .. })) {
                segment.append(&name, None)?;
            }
            Ok(())
        })
        .await
    }

    async fn get(&self, key: &str) -> StoreResult<Option<Bytes>> {
        let (dir, name) = self.place(key)?;
        let (slot, file) = {
            let mut turn = self.segment(&dir).await?;
            let segment = loaded(&mut turn).map_err(StoreError::new)?;
            (segment.find(&name), segment.file())
        };
        blocking(move || match (slot, file) {
            (Some(Slot::Blob { at, len }), Some(file)) => {
                segment::read_record(&file, at, len).map(|body| Some(Bytes::from(body)))
            }
            // A blob too large for the segment, or one written before segments were.
            _ => match std::fs::read(dir.join(&name)) {
                Ok(body) => Ok(Some(Bytes::from(body))),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
                Err(e) => Err(e),
            },
        })
        .await
    }

    async fn delete(&self, key: &str) -> StoreResult<()> {
        let (dir, name) = self.place(key)?;
        let mut turn = self.segment(&dir).await?;
        blocking(move || {
            let segment = loaded(&mut turn)?;
            if matches!(segment.find(&name), Some(Slot::Blob { .. })) {
                segment.append(&name, None)?;
            }
            match std::fs::remove_file(dir.join(&name)) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
                _ => Ok(()),
            }
        })
        .await
    }
}
