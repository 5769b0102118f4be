//! SarvCrawl's embedded adapters: the job store and the work queue on SQLite (WAL), documents
//! as files. One process owns a data directory at a time.

mod blobs;
mod db;
mod gates;
mod idempotency;
mod monitors;
mod queue;
mod segment;
mod signing;
mod store;
mod writer;

pub use blobs::FsBlobs;
pub use queue::SqliteQueue;
pub use store::SqliteStore;

use sarvcrawl_core::ports::Clock;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// Why the data directory could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("cannot use data directory {0}: {1}")]
    Io(PathBuf, std::io::Error),
    #[error("data directory {0} is in use by another sarvcrawl process")]
    Locked(PathBuf),
    #[error("database: {0}")]
    Db(#[from] rusqlite::Error),
}

/// The adapters over one data directory, and the lock that keeps it this process's own.
pub struct Local {
    pub store: Arc<SqliteStore>,
    pub queue: Arc<SqliteQueue>,
    pub blobs: Arc<FsBlobs>,
    _lock: File,
}

/// Opens (creating when needed) a data directory: `sarvcrawl.db` and `documents/`.
/// Tasks that a previous process had received but not finished are made visible again. Every
/// time the adapters use (leases, visibility, log times) comes from `clock`.
pub fn open(
    dir: &Path,
    visibility_timeout: Duration,
    clock: Arc<dyn Clock>,
) -> Result<Local, OpenError> {
    let io = |e| OpenError::Io(dir.to_path_buf(), e);
    std::fs::create_dir_all(dir).map_err(io)?;
    let lock = File::create(dir.join("lock")).map_err(io)?;
    if lock.try_lock().is_err() {
        return Err(OpenError::Locked(dir.to_path_buf()));
    }
    let db = Arc::new(db::Db::open(&dir.join("sarvcrawl.db"))?);
    let queue = Arc::new(SqliteQueue::new(
        db.clone(),
        visibility_timeout,
        clock.clone(),
    ));
    queue.release_all()?;
    Ok(Local {
        store: Arc::new(SqliteStore::new(db, queue.clone(), clock)),
        queue,
        blobs: Arc::new(FsBlobs::new(dir.join("documents"))),
        _lock: lock,
    })
}
