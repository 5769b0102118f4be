//! Documents under the data directory: a directory's small blobs appended to its segment
//! file, larger ones each a file of its own, written atomically.

use crate::segment::{self, Index, Segment, Slot};
use async_trait::async_trait;
use bytes::Bytes;
use sarvcrawl_core::ports::{BlobStore, StoreError, StoreResult};
use sarvcrawl_core::stages;
use std::collections::HashMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use tokio::sync::{Mutex as Turn, OwnedMutexGuard};

/// How many directories' segments are kept loaded (their index and an open file) when none
/// is in use.
const LOADED: usize = 64;

/// Blob store over a directory.
pub struct FsBlobs {
    root: PathBuf,
    dirs: Mutex<HashMap<PathBuf, Arc<Dir>>>,
}

/// A directory's segment, loaded on first use.
#[derive(Default)]
struct Dir {
    /// Held to load the segment and to write to it: one writer at a time.
    turn: Arc<Turn<Option<Segment>>>,
    /// What readers look up, without the turn: set when the segment is loaded, changed after
    /// each record is written.
    view: RwLock<Option<View>>,
}

struct View {
    file: Option<Arc<File>>,
    index: Index,
}

impl Dir {
    /// Where `name`'s latest record is and the file to read it from; `None` until loaded.
    fn find(&self, name: &str) -> Option<(Option<Slot>, Option<Arc<File>>)> {
        let view = self.view.read().unwrap_or_else(|e| e.into_inner());
        let view = view.as_ref()?;
        Some((view.index.get(name).copied(), view.file.clone()))
    }

    /// Whether `name` has a body in the segment.
    fn holds(&self, name: &str) -> bool {
        matches!(self.find(name), Some((Some(Slot::Blob { .. }), _)))
    }

    /// Appends a record of `name` (a body, or its deletion) and shows it to readers; compacts
    /// the segment when most of it no longer counts.
    fn append(
        &self,
        segment: &mut Segment,
        name: &str,
        body: Option<&[u8]>,
    ) -> std::io::Result<()> {
        let before = self.find(name).and_then(|(slot, _)| slot);
        let slot = segment.append(name, body, before)?;
        {
            let mut view = self.view.write().unwrap_or_else(|e| e.into_inner());
            let Some(view) = view.as_mut() else {
                return Ok(());
            };
            view.file = segment.file();
            view.index.insert(name.to_owned(), slot);
        }
        if segment.wasteful() {
            // Readers go on reading the old file while the new one is written; they see the
            // new one and its index together. The record is written: a compaction that fails
            // leaves the segment as it was, to be tried again at the next write.
            let compacted = match &*self.view.read().unwrap_or_else(|e| e.into_inner()) {
                Some(view) => segment.compact(&view.index),
                None => return Ok(()),
            };
            match compacted {
                Ok(index) => {
                    let view = View {
                        file: segment.file(),
                        index,
                    };
                    *self.view.write().unwrap_or_else(|e| e.into_inner()) = Some(view);
                }
                Err(e) => tracing::warn!(error = %e, "segment: compaction failed"),
            }
        }
        Ok(())
    }
}

impl FsBlobs {
    /// The store of the blobs under `root`.
    pub fn new(root: PathBuf) -> Self {
        FsBlobs {
            root,
            dirs: Mutex::default(),
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

    /// The entry of the directory `path`, made on first use; idle entries are let go once
    /// [`LOADED`] are kept.
    fn dir(&self, path: &Path) -> Arc<Dir> {
        let mut dirs = self.dirs.lock().unwrap_or_else(|e| e.into_inner());
        if dirs.len() >= LOADED && !dirs.contains_key(path) {
            dirs.retain(|_, d| Arc::strong_count(d) > 1);
        }
        dirs.entry(path.to_path_buf()).or_default().clone()
    }

    /// The segment of `path`, loaded, and its turn taken.
    async fn turn(&self, path: &Path) -> StoreResult<(Arc<Dir>, OwnedMutexGuard<Option<Segment>>)> {
        let dir = self.dir(path);
        let mut turn = dir.turn.clone().lock_owned().await;
        if turn.is_none() {
            let (loading, path) = (dir.clone(), path.to_path_buf());
            turn = blocking(move || {
                let (segment, index) = Segment::load(&path)?;
                let view = View {
                    file: segment.file(),
                    index,
                };
                *loading.view.write().unwrap_or_else(|e| e.into_inner()) = Some(view);
                *turn = Some(segment);
                Ok(turn)
            })
            .await?;
        }
        Ok((dir, turn))
    }

    /// Where `name`'s latest record in the segment of `path` is, and the file to read it from.
    async fn find(
        &self,
        path: &Path,
        name: &str,
    ) -> StoreResult<(Option<Slot>, Option<Arc<File>>)> {
        let dir = self.dir(path);
        if let Some(found) = dir.find(name) {
            return Ok(found);
        }
        let (dir, _turn) = self.turn(path).await?;
        Ok(dir.find(name).unwrap_or_default())
    }
}

/// Runs blocking file work off the runtime, its errors as the store's.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> std::io::Result<T> + Send + 'static,
) -> StoreResult<T> {
    stages::spawn_blocking(work)
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
        let (path, name) = self.place(key)?;
        let (dir, mut turn) = self.turn(&path).await?;
        blocking(move || {
            let segment = loaded(&mut turn)?;
            if body.len() <= segment::MAX_BODY {
                dir.append(segment, &name, Some(&body))?;
                // A large body written before under the name is a file no read reaches now.
                return remove_if_there(&path.join(&name));
            }
            std::fs::create_dir_all(&path)?;
            let file = path.join(&name);
            let tmp = file.with_extension(format!("tmp-{}", ulid::Ulid::new()));
            std::fs::write(&tmp, &body)?;
            std::fs::rename(&tmp, &file)?;
            // A body kept in the segment before would be found first.
            if dir.holds(&name) {
                dir.append(segment, &name, None)?;
            }
            Ok(())
        })
        .await
    }

    async fn get(&self, key: &str) -> StoreResult<Option<Bytes>> {
        let (path, name) = self.place(key)?;
        let found = self.find(&path, &name).await?;
        blocking(move || match found {
            (Some(Slot::Blob { at, len }), Some(file)) => {
                segment::read_record(&file, at, len).map(Some)
            }
            // A blob too large for the segment, or one written before segments were.
            _ => match std::fs::read(path.join(&name)) {
                Ok(body) => Ok(Some(Bytes::from(body))),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
                Err(e) => Err(e),
            },
        })
        .await
    }

    async fn delete(&self, key: &str) -> StoreResult<()> {
        let (path, name) = self.place(key)?;
        let (dir, mut turn) = self.turn(&path).await?;
        blocking(move || {
            let segment = loaded(&mut turn)?;
            if dir.holds(&name) {
                dir.append(segment, &name, None)?;
            }
            remove_if_there(&path.join(&name))
        })
        .await
    }
}

/// Removes the file at `path`, if there is one.
fn remove_if_there(path: &Path) -> std::io::Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}
