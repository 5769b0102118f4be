//! The one SQLite writer: a thread of its own owns the writer connection and runs the writes
//! handed to it, the API's before the background's, several to a transaction (group commit),
//! each in a savepoint of its own so that one that fails undoes only itself.
//!
//! The thread keeps the priority of the thread that opened the database (the API's), so a
//! background write that holds the writer is never the one a busy machine leaves waiting for a
//! core while a submit waits behind it.

use rusqlite::{Connection, Transaction, TransactionBehavior};
use sarvcrawl_core::stages::{self, Stage};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// A write handed to the writer thread.
pub(crate) trait Write: Send {
    /// Runs in the group's transaction; false when it failed (its changes are then undone).
    fn run(&mut self, tx: &Transaction) -> bool;
    /// Tells the caller how it ended: `group` is the error that undid the whole transaction,
    /// if one did (a failed commit, say), in which case nothing of it was kept.
    fn end(self: Box<Self>, group: Option<&rusqlite::Error>);
}

/// A failure of the writer itself, as a SQLite error (SQLITE_INTERNAL: trying again will not
/// help).
pub(crate) fn failure(message: impl Into<String>) -> rusqlite::Error {
    rusqlite::Error::SqliteFailure(
        rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_INTERNAL),
        Some(message.into()),
    )
}

/// How long a group takes more of the background's writes before it commits.
const GROUP_TIME: Duration = Duration::from_millis(4);
/// The most writes one transaction holds.
const GROUP_MAX: usize = 128;
/// How long after a commit a group of only the background's writes waits for more before it
/// commits: each commit writes out again every page its writes changed, and the background's
/// share a few (the queue's, the job's, its logs'), so fewer, fuller commits write the WAL less.
/// A group with a write of the API's commits at once; so does the first write after a pause.
pub(crate) const LINGER: Duration = Duration::from_millis(1);

#[derive(Default)]
struct Lanes {
    first: VecDeque<Box<dyn Write>>,
    other: VecDeque<Box<dyn Write>>,
    closed: bool,
}

impl Lanes {
    /// The next write: the first lane's before the other's (only the first lane's when
    /// `first_only`).
    fn pop(&mut self, first_only: bool) -> Option<(bool, Box<dyn Write>)> {
        if let Some(w) = self.first.pop_front() {
            return Some((true, w));
        }
        if first_only {
            return None;
        }
        self.other.pop_front().map(|w| (false, w))
    }
}

/// The writes waiting for the writer thread, and the thread.
pub(crate) struct Writer {
    lanes: Mutex<Lanes>,
    arrived: Condvar,
    /// Asked for by the checkpoints' thread: copy the WAL back and start it over, holding the
    /// writer, before the next group.
    restart: AtomicBool,
    /// [`LINGER`], or another wait in a test.
    linger: Duration,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl Writer {
    /// Starts the writer thread on `conn`; `restart` copies the WAL back and starts it over;
    /// `linger` is how long after a commit the background's writes wait for company.
    pub(crate) fn start(
        conn: Connection,
        restart: fn(&Connection) -> rusqlite::Result<()>,
        linger: Duration,
    ) -> std::io::Result<Arc<Writer>> {
        let writer = Arc::new(Writer {
            lanes: Mutex::new(Lanes::default()),
            arrived: Condvar::new(),
            restart: AtomicBool::new(false),
            linger,
            thread: Mutex::new(None),
        });
        let serving = writer.clone();
        let thread = std::thread::Builder::new()
            .name("sarvcrawl-writer".into())
            .spawn(move || serving.serve(conn, restart))?;
        *writer.thread.lock().unwrap_or_else(|p| p.into_inner()) = Some(thread);
        Ok(writer)
    }

    fn lanes(&self) -> MutexGuard<'_, Lanes> {
        self.lanes.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Hands `write` over: it runs before every waiting write of the other lane when `first`.
    /// After [`Writer::close`] it ends at once with an error.
    pub(crate) fn submit(&self, first: bool, write: Box<dyn Write>) {
        let mut lanes = self.lanes();
        if lanes.closed {
            drop(lanes);
            write.end(Some(&failure("the database is closed")));
            return;
        }
        if first {
            lanes.first.push_back(write);
        } else {
            lanes.other.push_back(write);
        }
        drop(lanes);
        self.arrived.notify_one();
    }

    /// Asks for the WAL to be started over before the next group.
    pub(crate) fn ask_restart(&self) {
        // Under the lanes' lock, so the thread cannot miss it between its look and its wait.
        let _lanes = self.lanes();
        self.restart.store(true, Ordering::Relaxed);
        self.arrived.notify_one();
    }

    /// Runs what is waiting, then ends the thread and waits for it.
    pub(crate) fn close(&self) {
        self.lanes().closed = true;
        self.arrived.notify_one();
        let thread = self.thread.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(thread) = thread {
            if thread.thread().id() != std::thread::current().id() {
                let _ = thread.join();
            }
        }
    }

    fn serve(&self, mut conn: Connection, restart: fn(&Connection) -> rusqlite::Result<()>) {
        let mut committed: Option<Instant> = None;
        loop {
            if self.restart.swap(false, Ordering::Relaxed) {
                if let Err(e) = restart(&conn) {
                    tracing::warn!(error = %e, "cannot start the database's WAL over");
                }
            }
            let next = {
                let mut lanes = self.lanes();
                loop {
                    if let Some(next) = lanes.pop(false) {
                        break Some(next);
                    }
                    if lanes.closed {
                        break None;
                    }
                    if self.restart.load(Ordering::Relaxed) {
                        break None;
                    }
                    lanes = self.arrived.wait(lanes).unwrap_or_else(|p| p.into_inner());
                }
            };
            match next {
                Some((first, write)) => {
                    let linger = committed.map(|at| at + self.linger);
                    self.group(&mut conn, first, write, linger);
                    committed = Some(Instant::now());
                }
                None if self.restart.load(Ordering::Relaxed) => continue,
                None => return,
            }
        }
    }

    /// One transaction: `write`, then more waiting writes (after one of the first lane, only
    /// the first lane's; before `linger`, those that arrive meanwhile too), then the commit,
    /// then each caller learns how it ended.
    fn group(
        &self,
        conn: &mut Connection,
        mut first: bool,
        write: Box<dyn Write>,
        linger: Option<Instant>,
    ) {
        // The group's own work (its transaction, the savepoints, the commit's writes to the
        // WAL) counts as bookkeeping; each write's statements count in its caller's stage.
        let _in = stages::enter(Some(Stage::Bookkeeping));
        let tx = match conn.transaction_with_behavior(TransactionBehavior::Immediate) {
            Ok(tx) => tx,
            Err(e) => return write.end(Some(&e)),
        };
        let started = Instant::now();
        let mut ran: Vec<Box<dyn Write>> = Vec::new();
        let mut next = Some(write);
        let mut run = || -> rusqlite::Result<()> {
            while let Some(write) = next.take() {
                ran.push(write);
                // Prepared once per connection: a savepoint's SQL is parsed once, not per write.
                tx.prepare_cached("SAVEPOINT write")?.execute([])?;
                let kept = ran.last_mut().is_some_and(|w| w.run(&tx));
                if !kept {
                    tx.prepare_cached("ROLLBACK TO write")?.execute([])?;
                }
                tx.prepare_cached("RELEASE write")?.execute([])?;
                if ran.len() >= GROUP_MAX || (!first && started.elapsed() >= GROUP_TIME) {
                    break;
                }
                if let Some((from_first, write)) = self.more(first, linger) {
                    first |= from_first;
                    next = Some(write);
                }
            }
            Ok(())
        };
        let outcome = run().and_then(|()| tx.commit());
        let group = outcome.as_ref().err();
        for write in ran {
            write.end(group);
        }
    }

    /// The group's next write: one waiting, or, for a group of only the background's writes,
    /// one that arrives before `linger` (none once the writer is asked to close or restart).
    fn more(&self, first: bool, linger: Option<Instant>) -> Option<(bool, Box<dyn Write>)> {
        let mut lanes = self.lanes();
        loop {
            if let Some(next) = lanes.pop(first) {
                return Some(next);
            }
            let left = linger?.checked_duration_since(Instant::now())?;
            if first || lanes.closed || self.restart.load(Ordering::Relaxed) {
                return None;
            }
            lanes = self
                .arrived
                .wait_timeout(lanes, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    /// A write that inserts `n` into `t`, fails when `fail`, and reports how it ended; with
    /// `hold`, it says it started and waits to be let go first.
    struct Insert {
        n: i64,
        fail: bool,
        ended: mpsc::Sender<(i64, bool)>,
        hold: Option<(mpsc::Sender<()>, mpsc::Receiver<()>)>,
    }

    impl Write for Insert {
        fn run(&mut self, tx: &Transaction) -> bool {
            if let Some((started, release)) = self.hold.take() {
                let _ = started.send(());
                let _ = release.recv();
            }
            let inserted = tx.execute("INSERT INTO t VALUES (?1)", [self.n]).is_ok();
            inserted && !self.fail
        }
        fn end(self: Box<Self>, group: Option<&rusqlite::Error>) {
            let _ = self.ended.send((self.n, group.is_none()));
        }
    }

    fn no_restart(_: &Connection) -> rusqlite::Result<()> {
        Ok(())
    }

    fn writer(dir: &tempfile::TempDir, linger: Duration) -> (Arc<Writer>, Connection) {
        let path = dir.path().join("t.db");
        let conn = Connection::open(&path).unwrap();
        conn.execute_batch("PRAGMA journal_mode = WAL; CREATE TABLE t (n INTEGER)")
            .unwrap();
        (
            Writer::start(conn, no_restart, linger).unwrap(),
            Connection::open(&path).unwrap(),
        )
    }

    fn rows(reader: &Connection) -> Vec<i64> {
        let mut stmt = reader.prepare("SELECT n FROM t ORDER BY rowid").unwrap();
        stmt.query_map([], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    }

    #[test]
    fn the_first_lane_goes_first_and_a_failed_write_undoes_only_itself() {
        let dir = tempfile::tempdir().unwrap();
        let (writer, reader) = writer(&dir, LINGER);
        let (ended, ends) = mpsc::channel();
        // The first write holds the writer until the others are waiting.
        let (started, has_started) = mpsc::channel();
        let (release, hold) = mpsc::channel();
        let insert = |n, fail, hold| {
            Box::new(Insert {
                n,
                fail,
                ended: ended.clone(),
                hold,
            })
        };
        writer.submit(false, insert(1, false, Some((started, hold))));
        has_started.recv().unwrap();
        writer.submit(false, insert(2, false, None));
        writer.submit(false, insert(3, true, None));
        writer.submit(true, insert(4, false, None));
        release.send(()).unwrap();
        let mut got: Vec<(i64, bool)> = (0..4).map(|_| ends.recv().unwrap()).collect();
        got.sort();
        assert_eq!(got, [(1, true), (2, true), (3, true), (4, true)]);
        // 4 (the API's) went before the other lane's 2 and 3; 3 failed and left nothing.
        assert_eq!(rows(&reader), [1, 4, 2]);
        writer.close();
    }

    #[test]
    fn the_backgrounds_writes_wait_after_a_commit_for_more_and_the_apis_do_not() {
        let dir = tempfile::tempdir().unwrap();
        let (writer, reader) = writer(&dir, Duration::from_secs(5));
        let (ended, ends) = mpsc::channel();
        let insert = |n| {
            Box::new(Insert {
                n,
                fail: false,
                ended: ended.clone(),
                hold: None,
            })
        };
        let soon = Duration::from_millis(2500);
        // The first write after a pause commits at once.
        let sent = Instant::now();
        writer.submit(false, insert(1));
        assert_eq!(ends.recv().unwrap(), (1, true));
        assert!(sent.elapsed() < soon);
        // The next, just after that commit, waits for company.
        writer.submit(false, insert(2));
        std::thread::sleep(Duration::from_millis(200));
        assert!(ends.try_recv().is_err());
        assert_eq!(rows(&reader), [1]);
        // One of the API's ends the wait: the two commit together, at once.
        let sent = Instant::now();
        writer.submit(true, insert(3));
        let mut got: Vec<(i64, bool)> = (0..2).map(|_| ends.recv().unwrap()).collect();
        assert!(sent.elapsed() < soon);
        got.sort();
        assert_eq!(got, [(2, true), (3, true)]);
        assert_eq!(rows(&reader), [1, 2, 3]);
        writer.close();
    }

    #[test]
    fn what_waits_at_close_still_runs_and_later_writes_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let (writer, reader) = writer(&dir, LINGER);
        let (ended, ends) = mpsc::channel();
        for n in 0..200 {
            writer.submit(
                n % 2 == 0,
                Box::new(Insert {
                    n,
                    fail: false,
                    ended: ended.clone(),
                    hold: None,
                }),
            );
        }
        writer.close();
        assert_eq!(rows(&reader).len(), 200);
        writer.submit(
            true,
            Box::new(Insert {
                n: 1000,
                fail: false,
                ended,
                hold: None,
            }),
        );
        let mut got: Vec<(i64, bool)> = ends.iter().collect();
        assert_eq!(got.len(), 201);
        assert_eq!(got.pop(), Some((1000, false)));
        assert!(got.iter().all(|(_, committed)| *committed));
    }
}
