//! The SQLite database: schema, pragmas, checkpoints, and running statements off the async
//! runtime.

use crate::writer::{failure, Write, Writer, LINGER};
use rusqlite::config::DbConfig;
use rusqlite::{Connection, Transaction};
use sarvcrawl_core::engine::pool::lowered;
use sarvcrawl_core::ports::{StoreError, StoreResult};
use sarvcrawl_core::stages::{self, Stage};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

const SCHEMA: &str = r#"
CREATE TABLE IF NOT EXISTS jobs (
    job_id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    status TEXT NOT NULL,
    created_at TEXT NOT NULL,
    started_at TEXT,
    finished_at TEXT,
    request TEXT NOT NULL,
    error TEXT,
    discovered INTEGER NOT NULL DEFAULT 0,
    completed INTEGER NOT NULL DEFAULT 0,
    failed INTEGER NOT NULL DEFAULT 0,
    pending INTEGER NOT NULL DEFAULT 0,
    nodes INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS jobs_by_user ON jobs (user_id, job_id);
CREATE TABLE IF NOT EXISTS monitors (
    monitor_id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL,
    version INTEGER NOT NULL,
    due_at INTEGER,
    body TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS idempotency (
    user_id TEXT NOT NULL,
    key TEXT NOT NULL,
    hash TEXT NOT NULL,
    response TEXT,
    expires_at INTEGER NOT NULL,
    PRIMARY KEY (user_id, key)
);
CREATE INDEX IF NOT EXISTS monitors_by_user ON monitors (user_id, monitor_id);
CREATE INDEX IF NOT EXISTS monitors_by_due ON monitors (due_at) WHERE due_at IS NOT NULL;
CREATE TABLE IF NOT EXISTS slots (
    user_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    job_id TEXT NOT NULL,
    lease_until INTEGER NOT NULL,
    PRIMARY KEY (user_id, kind)
);
CREATE TABLE IF NOT EXISTS nodes (
    job_id TEXT NOT NULL,
    url TEXT NOT NULL,
    seq INTEGER NOT NULL,
    parent TEXT,
    depth INTEGER NOT NULL,
    status TEXT NOT NULL,
    status_code INTEGER,
    reason TEXT,
    lease_until INTEGER,
    holder TEXT,
    PRIMARY KEY (job_id, url)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS results (
    job_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    doc_key TEXT NOT NULL,
    PRIMARY KEY (job_id, seq)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS logs (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id TEXT NOT NULL,
    at TEXT NOT NULL,
    level TEXT NOT NULL,
    message TEXT NOT NULL,
    url TEXT
);
CREATE INDEX IF NOT EXISTS logs_by_job ON logs (job_id, seq);
CREATE TABLE IF NOT EXISTS queue (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    body TEXT NOT NULL,
    visible_at INTEGER NOT NULL,
    receipt TEXT,
    receives INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS queue_by_visibility ON queue (visible_at, id);
CREATE INDEX IF NOT EXISTS queue_by_receipt ON queue (receipt);
"#;

/// Changes to [`SCHEMA`], in order: a database at `user_version` n has the first n applied.
const MIGRATIONS: &[&str] = &[
    // Deliveries of a task that ended with the process (the server stopped mid-task).
    "ALTER TABLE queue ADD COLUMN interrupted INTEGER NOT NULL DEFAULT 0",
    // The frontier: a claimed node waits (`released = 0`) until its job may fetch it; the job
    // counts its nodes let go and not done (`in_flight`), its last progress (`activity`, ms)
    // and the repairs since (`repairs`). Gates and paces hold rules across processes.
    "ALTER TABLE nodes ADD COLUMN released INTEGER NOT NULL DEFAULT 1;
     ALTER TABLE jobs ADD COLUMN in_flight INTEGER NOT NULL DEFAULT 0;
     ALTER TABLE jobs ADD COLUMN activity INTEGER NOT NULL DEFAULT 0;
     ALTER TABLE jobs ADD COLUMN repairs INTEGER NOT NULL DEFAULT 0;
     CREATE INDEX nodes_waiting ON nodes (job_id, seq) WHERE released = 0 AND status = 'queued';
     CREATE INDEX jobs_active ON jobs (activity) WHERE status IN ('queued', 'running');
     CREATE TABLE gates (
         gate TEXT NOT NULL,
         place INTEGER NOT NULL,
         holder TEXT NOT NULL,
         lease_until INTEGER NOT NULL,
         PRIMARY KEY (gate, place)
     ) WITHOUT ROWID;
     CREATE TABLE paces (
         pace TEXT PRIMARY KEY,
         next_at INTEGER NOT NULL,
         expires_at INTEGER NOT NULL
     ) WITHOUT ROWID;
     CREATE INDEX paces_by_expiry ON paces (expires_at)",
    // Each user's webhook signing keys.
    "CREATE TABLE signing_keys (
         user_id TEXT PRIMARY KEY,
         version INTEGER NOT NULL,
         body TEXT NOT NULL
     )",
    // Tokens a language model took to read a job's pages.
    "ALTER TABLE jobs ADD COLUMN extract_tokens INTEGER NOT NULL DEFAULT 0",
    // Nodes kept in the order they were found: a crawl changes the nodes it has in flight, a
    // few neighbouring ones, where keyed by URL each change rewrote a page of the table
    // somewhere else (and the index by parent, which nothing read, on every change of status).
    "CREATE TABLE nodes_in_order (
         job_id TEXT NOT NULL,
         seq INTEGER NOT NULL,
         url TEXT NOT NULL,
         parent TEXT,
         depth INTEGER NOT NULL,
         status TEXT NOT NULL,
         status_code INTEGER,
         reason TEXT,
         lease_until INTEGER,
         holder TEXT,
         released INTEGER NOT NULL DEFAULT 1,
         PRIMARY KEY (job_id, seq)
     ) WITHOUT ROWID;
     INSERT INTO nodes_in_order
         SELECT job_id, seq, url, parent, depth, status, status_code, reason, lease_until, holder,
                released
         FROM nodes;
     DROP TABLE nodes;
     ALTER TABLE nodes_in_order RENAME TO nodes;
     CREATE UNIQUE INDEX nodes_by_url ON nodes (job_id, url);
     CREATE INDEX nodes_waiting ON nodes (job_id, seq) WHERE released = 0 AND status = 'queued'",
];

/// Creates the schema and brings it up to date.
fn migrate(conn: &Connection) -> rusqlite::Result<()> {
    conn.execute_batch(SCHEMA)?;
    let version: usize = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    for (n, change) in MIGRATIONS.iter().enumerate().skip(version) {
        conn.execute_batch(&format!(
            "BEGIN; {change}; PRAGMA user_version = {}; COMMIT;",
            n + 1
        ))?;
    }
    Ok(())
}

/// A SQLite failure as a store error: a busy or locked database (or a failing disk) may pass;
/// anything else (a row that cannot be read, a broken statement) will not.
fn sqlite(e: rusqlite::Error) -> StoreError {
    use rusqlite::ErrorCode;
    let transient = matches!(
        e.sqlite_error_code(),
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked | ErrorCode::SystemIoFailure)
    );
    let error = StoreError::new(e);
    if transient {
        error
    } else {
        error.for_good()
    }
}

/// One writer connection (on a thread of its own) and one reader connection (WAL lets reads
/// run beside writes).
pub(crate) struct Db {
    writer: Arc<Writer>,
    reader: Mutex<Connection>,
    /// Dropped with the database, which ends the checkpoints' thread.
    checkpoints: Option<mpsc::Sender<()>>,
}

impl Drop for Db {
    fn drop(&mut self) {
        self.writer.close();
    }
}

/// A write of [`Db::write`] waiting for the writer thread, and where its answer goes.
struct Pending<T, F> {
    f: Option<F>,
    stage: Option<Stage>,
    out: Option<rusqlite::Result<T>>,
    reply: Box<dyn FnOnce(rusqlite::Result<T>) + Send>,
}

impl<T, F> Write for Pending<T, F>
where
    T: Send + 'static,
    F: FnOnce(&Transaction) -> rusqlite::Result<T> + Send + 'static,
{
    fn run(&mut self, tx: &Transaction) -> bool {
        let Some(f) = self.f.take() else {
            return false;
        };
        let _in = stages::enter(self.stage);
        let out = catch_unwind(AssertUnwindSafe(|| f(tx)))
            .unwrap_or_else(|_| Err(failure("a write of the database panicked")));
        let kept = out.is_ok();
        self.out = Some(out);
        kept
    }

    fn end(self: Box<Self>, group: Option<&rusqlite::Error>) {
        let out = match (group, self.out) {
            (Some(rusqlite::Error::SqliteFailure(code, message)), _) => {
                Err(rusqlite::Error::SqliteFailure(*code, message.clone()))
            }
            (Some(other), _) => Err(failure(other.to_string())),
            (None, Some(out)) => out,
            (None, None) => Err(failure("a write of the database did not run")),
        };
        (self.reply)(out);
    }
}

impl<T, F> Pending<T, F> {
    fn new(f: F, reply: impl FnOnce(rusqlite::Result<T>) + Send + 'static) -> Box<Self> {
        Box::new(Pending {
            f: Some(f),
            stage: stages::current(),
            out: None,
            reply: Box::new(reply),
        })
    }
}

/// Runs a statement through the connection's cache of prepared statements (compiling the same
/// SQL again for every page costs more than running it).
pub(crate) fn exec(c: &Connection, sql: &str, p: impl rusqlite::Params) -> rusqlite::Result<usize> {
    c.prepare_cached(sql)?.execute(p)
}

/// The one row a query answers, through the cache of prepared statements.
pub(crate) fn one_row<T>(
    c: &Connection,
    sql: &str,
    p: impl rusqlite::Params,
    f: impl FnOnce(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
) -> rusqlite::Result<T> {
    c.prepare_cached(sql)?.query_row(p, f)
}

/// Distinct statements each connection keeps prepared (more than the store runs).
const PREPARED: usize = 128;

/// How long a statement waits for a lock another connection holds.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

fn connect(path: &Path) -> rusqlite::Result<Connection> {
    let conn = Connection::open(path)?;
    conn.set_prepared_statement_cache_capacity(PREPARED);
    // A statement's plan does not depend on the values bound to it. Without this, SQLite
    // compiles a statement with `LIMIT ?` again each time a value is bound to it
    // (the store's page reads, the queue's pick, the frontier's move). Every partial index's
    // condition is written as literals in the statements that use it, so none is lost.
    conn.set_db_config(DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG, true)?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    conn.busy_timeout(BUSY_TIMEOUT)?;
    Ok(conn)
}

/// How often the WAL is copied back into the database.
const CHECKPOINT_EVERY: Duration = Duration::from_millis(200);
/// The WAL's length (pages) past which a checkpoint holds the writer for a moment to finish
/// the copy and start the WAL over (the copies beside the writer never catch up with a busy
/// one, and the WAL would grow without end).
const RESTART_AFTER: i64 = 4_096;
/// How long a restart waits for readers still on the WAL before trying again later.
const RESTART_WAIT: Duration = Duration::from_millis(100);

/// Starts the thread that checkpoints the WAL on `conn` every [`CHECKPOINT_EVERY`], passively
/// (beside the writer, never holding it up), and asks the writer thread to [`restart`] once the
/// WAL is [`RESTART_AFTER`] long, until the returned sender is dropped. None when the system
/// refuses the thread: the writer then checkpoints as SQLite does by default.
fn checkpoints(conn: Connection, writer: Arc<Writer>) -> Option<mpsc::Sender<()>> {
    let (stop, stopped) = mpsc::channel::<()>();
    let spawned = std::thread::Builder::new()
        .name("sarvcrawl-checkpoint".into())
        .spawn(move || {
            while let Err(mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(CHECKPOINT_EVERY)
            {
                if let Err(e) = checkpoint(&conn, &writer) {
                    tracing::warn!(error = %e, "cannot checkpoint the database's WAL");
                }
            }
        });
    match spawned {
        Ok(_) => Some(stop),
        Err(e) => {
            tracing::error!(error = %e, "cannot start the checkpoints' thread");
            None
        }
    }
}

/// The WAL's length in pages after a checkpoint of `mode` on `conn`.
fn wal_pages(mode: &str, conn: &Connection) -> rusqlite::Result<i64> {
    conn.query_row(&format!("PRAGMA wal_checkpoint({mode})"), [], |r| {
        r.get::<_, i64>(1)
    })
}

/// One round of [`checkpoints`].
fn checkpoint(conn: &Connection, writer: &Writer) -> rusqlite::Result<()> {
    let _in = stages::enter(Some(Stage::Bookkeeping));
    if wal_pages("PASSIVE", conn)? >= RESTART_AFTER {
        writer.ask_restart();
    }
    Ok(())
}

/// Copies the rest of the WAL back and starts it over, on the writer's connection between two
/// of its transactions (so no write can add to the WAL meanwhile).
fn restart(writer: &Connection) -> rusqlite::Result<()> {
    let _in = stages::enter(Some(Stage::Bookkeeping));
    writer.busy_timeout(RESTART_WAIT)?;
    let restarted = wal_pages("RESTART", writer);
    writer.busy_timeout(BUSY_TIMEOUT)?;
    restarted.map(drop)
}

impl Db {
    pub(crate) fn open(path: &Path) -> rusqlite::Result<Self> {
        let writer = connect(path)?;
        migrate(&writer)?;
        // The writer's commits only append to the WAL: copying it back into the database (and
        // the fsyncs that takes, tens of milliseconds on a busy disk) is the checkpoints'
        // thread's work, and a write waits behind it only while the WAL starts over.
        writer.pragma_update(None, "wal_autocheckpoint", 0)?;
        let (checkpointer, reader) = (connect(path)?, connect(path)?);
        let writer = Writer::start(writer, restart, LINGER).map_err(io_error)?;
        let db = Db {
            checkpoints: checkpoints(checkpointer, writer.clone()),
            writer,
            reader: Mutex::new(reader),
        };
        if db.checkpoints.is_none() {
            db.write_now(|c| c.pragma_update(None, "wal_autocheckpoint", 1000))?;
        }
        Ok(db)
    }

    /// Runs `f` on the writer thread, in an IMMEDIATE transaction that it may share with other
    /// writes (in a savepoint of its own: when `f` fails, only its changes are undone); a caller
    /// at the API's priority (not [`lowered`]) goes before the background's waiting writes.
    /// The answer comes once the transaction is committed.
    pub(crate) async fn write<T, F>(&self, f: F) -> StoreResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&Transaction) -> rusqlite::Result<T> + Send + 'static,
    {
        let (reply, answer) = tokio::sync::oneshot::channel();
        let write = Pending::new(f, move |out| {
            let _ = reply.send(out);
        });
        self.writer.submit(!lowered(), write);
        answer.await.map_err(StoreError::new)?.map_err(sqlite)
    }

    /// Runs `f` on the reader, off the async runtime.
    pub(crate) async fn read<T, F>(self: &Arc<Self>, f: F) -> StoreResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> rusqlite::Result<T> + Send + 'static,
    {
        let db = self.clone();
        stages::spawn_blocking(move || {
            let conn = db.reader.lock().unwrap_or_else(|p| p.into_inner());
            f(&conn)
        })
        .await
        .map_err(StoreError::new)?
        .map_err(sqlite)
    }

    /// Runs `f` in a transaction of the writer, waiting for it outside the runtime (start-up
    /// work).
    pub(crate) fn write_now<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Transaction) -> rusqlite::Result<T> + Send + 'static,
    ) -> rusqlite::Result<T> {
        let (reply, answer) = mpsc::channel();
        let write = Pending::new(f, move |out| {
            let _ = reply.send(out);
        });
        self.writer.submit(true, write);
        answer
            .recv()
            .unwrap_or_else(|_| Err(failure("the database's writer stopped")))
    }
}

/// A thread the system refused, as a SQLite error of opening the database.
fn io_error(e: std::io::Error) -> rusqlite::Error {
    failure(format!("cannot start the database's writer: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rusqlite::{params, StatementStatus};

    #[tokio::test]
    async fn a_write_that_panics_fails_alone_and_the_writer_goes_on() {
        let dir = tempfile::tempdir().unwrap();
        let db = Arc::new(Db::open(&dir.path().join("t.db")).unwrap());
        let log = |message: &'static str| {
            move |tx: &Transaction| {
                exec(
                    tx,
                    "INSERT INTO logs (job_id, at, level, message) VALUES ('j', '', 'info', ?1)",
                    [message],
                )?;
                if message == "panics" {
                    panic!("a bug in a write");
                }
                Ok(())
            }
        };
        let (kept, panicked, after) = tokio::join!(
            db.write(log("kept")),
            db.write(log("panics")),
            db.write(log("after")),
        );
        kept.unwrap();
        after.unwrap();
        let error = panicked.unwrap_err();
        assert!(!error.is_retryable(), "{error}");
        let messages: Vec<String> = db
            .read(|c| {
                c.prepare("SELECT message FROM logs ORDER BY seq")?
                    .query_map([], |r| r.get(0))?
                    .collect()
            })
            .await
            .unwrap();
        assert_eq!(messages, ["kept", "after"]);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_wal_starts_over_while_writes_go_on_and_nothing_is_lost() {
        let dir = tempfile::tempdir().unwrap();
        let db = Arc::new(Db::open(&dir.path().join("t.db")).unwrap());
        // Six times the WAL's length before a restart, in 64 KiB rows, at up to 50 MB/s.
        let row = "x".repeat(64 * 1024);
        let rows = 6 * RESTART_AFTER as usize * 4096 / row.len();
        let wal_len = || std::fs::metadata(dir.path().join("t.db-wal")).map_or(0, |m| m.len());
        let mut longest = 0;
        for n in 0..rows {
            let row = row.clone();
            db.write(move |tx| {
                exec(
                    tx,
                    "INSERT INTO logs (job_id, at, level, message) VALUES ('j', '', 'info', ?1)",
                    [row],
                )
            })
            .await
            .unwrap();
            if n % 8 == 0 {
                longest = longest.max(wal_len());
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
        let written = (rows * row.len()) as u64;
        assert!(
            longest < written / 2,
            "the WAL grew to {longest} bytes for {written} written"
        );
        let count: usize = db
            .read(|c| c.query_row("SELECT count(*) FROM logs", [], |r| r.get(0)))
            .await
            .unwrap();
        assert_eq!(count, rows);
        drop(db);
        let reopened = Db::open(&dir.path().join("t.db")).unwrap();
        let count: usize = reopened
            .write_now(|c| c.query_row("SELECT count(*) FROM logs", [], |r| r.get(0)))
            .unwrap();
        assert_eq!(count, rows);
    }

    #[tokio::test]
    async fn a_statement_with_a_bound_limit_is_compiled_once() {
        let dir = tempfile::tempdir().unwrap();
        let db = Arc::new(Db::open(&dir.path().join("t.db")).unwrap());
        let sql = "SELECT seq FROM logs WHERE job_id = ?1 AND seq > ?2 ORDER BY seq LIMIT ?3";
        let recompiled = |c: &Connection| -> rusqlite::Result<i32> {
            for limit in 1..=5 {
                c.prepare_cached(sql)?
                    .query_map(params!["j", 0, limit], |r| r.get::<_, i64>(0))?
                    .for_each(drop);
            }
            Ok(c.prepare_cached(sql)?
                .get_status(StatementStatus::RePrepare))
        };
        assert_eq!(db.read(recompiled).await.unwrap(), 0, "on a reader");
        let on_writer = db.write(move |tx| recompiled(tx)).await.unwrap();
        assert_eq!(on_writer, 0, "on the writer");
    }

    #[test]
    fn the_frontier_reads_only_waiting_nodes() {
        let dir = tempfile::tempdir().unwrap();
        let conn = connect(&dir.path().join("t.db")).unwrap();
        migrate(&conn).unwrap();
        let plan: Vec<String> = conn
            .prepare(&format!("EXPLAIN QUERY PLAN {}", crate::store::WAITING))
            .unwrap()
            .query_map(params!["j", 8], |r| r.get(3))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(plan, ["SEARCH nodes USING INDEX nodes_waiting (job_id=?)"]);
    }
}
