//! What only the embedded adapters do, on a real database on disk: the SQLite work queue's
//! visibility and receive counts, a data directory's lock, tasks a dead process left behind,
//! and schema migrations (the documents are `documents.rs`'s). The store ports' contract,
//! which both backends share, is tested on both in `tests/tests/suite/store.rs`.

use chrono::{DateTime, Utc};
use sarvcrawl_core::domain::{Job, JobKind, UserId};
use sarvcrawl_core::ports::{
    Claim, Clock, CreateOutcome, JobStore, NewNode, SlotClaim, SystemClock, Task, WorkQueue,
};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

fn user(name: &str) -> UserId {
    UserId(name.into())
}

fn crawl_job(u: &UserId) -> Job {
    Job::new(u.clone(), JobKind::Crawl, serde_json::json!({}), Utc::now())
}

/// A task of a new crawl of user `u`.
fn task() -> Task {
    Task::new(
        &user("u"),
        &crawl_job(&user("u")).job_id,
        "https://e.com/",
        0,
        false,
    )
}

/// A clock that stands still until the test moves it.
struct TestClock(Mutex<DateTime<Utc>>);

impl Clock for TestClock {
    fn now(&self) -> DateTime<Utc> {
        *self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

fn open(
    dir: &Path,
    visibility: Duration,
) -> Result<sarvcrawl_local::Local, sarvcrawl_local::OpenError> {
    sarvcrawl_local::open(dir, visibility, Arc::new(SystemClock))
}

#[tokio::test(flavor = "multi_thread")]
async fn queue_redelivers_after_the_visibility_timeout_until_acked() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(TestClock(Mutex::new(Utc::now())));
    let local = sarvcrawl_local::open(dir.path(), Duration::from_secs(60), clock.clone()).unwrap();
    let q = local.queue.clone();
    let task = task();
    q.send(std::slice::from_ref(&task)).await.unwrap();
    let first = q.receive(10, Duration::from_millis(100)).await.unwrap();
    assert_eq!(first.len(), 1);
    assert_eq!((first[0].receive_count, &first[0].task), (1, &task));
    assert!(
        q.receive(10, Duration::from_millis(100))
            .await
            .unwrap()
            .is_empty(),
        "invisible while in flight"
    );
    *clock.0.lock().unwrap() += chrono::Duration::seconds(61);
    let second = q.receive(10, Duration::from_secs(3)).await.unwrap();
    assert_eq!(second[0].receive_count, 2);
    q.ack(&first[0].receipt).await.unwrap();
    assert_eq!(
        q.depth().await.unwrap(),
        1,
        "a stale receipt acknowledges nothing"
    );
    q.ack(&second[0].receipt).await.unwrap();
    assert_eq!(q.depth().await.unwrap(), 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_new_jobs_first_tasks_are_queued_in_its_own_write_and_a_refused_job_queues_none() {
    let dir = tempfile::tempdir().unwrap();
    let local = open(dir.path(), Duration::from_secs(60)).unwrap();
    let (store, q, u) = (&local.store, &local.queue, user("u"));
    let slot = || {
        Claim::Slot(SlotClaim {
            kind: JobKind::Crawl,
            lease_until: Utc::now() + chrono::Duration::minutes(15),
        })
    };
    let job = crawl_job(&u);
    let tasks = [
        Task::new(&u, &job.job_id, "https://e.com/", 0, false),
        Task::new(&u, &job.job_id, "https://e.com/", 0, true),
    ];
    let created = store
        .create_job_queued(&job, "https://e.com/", slot(), &[], &tasks)
        .await
        .unwrap();
    assert_eq!(created, Some(CreateOutcome::Created));
    assert!(store.get_job(&u, &job.job_id).await.unwrap().is_some());
    let got = q.receive(10, Duration::from_secs(3)).await.unwrap();
    let got: Vec<Task> = got.into_iter().map(|d| d.task).collect();
    assert_eq!(
        got, tasks,
        "the tasks, in order, once the job's write returns"
    );

    // The user's crawl slot is taken: nothing is written, no task either.
    let refused = crawl_job(&u);
    let again = [Task::new(&u, &refused.job_id, "https://e.com/", 0, false)];
    let busy = store
        .create_job_queued(&refused, "https://e.com/", slot(), &[], &again)
        .await
        .unwrap();
    assert!(
        matches!(busy, Some(CreateOutcome::SlotBusy { .. })),
        "{busy:?}"
    );
    assert!(store.get_job(&u, &refused.job_id).await.unwrap().is_none());
    assert_eq!(q.depth().await.unwrap(), 2, "only the first job's tasks");
}

#[tokio::test(flavor = "multi_thread")]
async fn reopening_releases_tasks_in_flight_and_locks_the_directory() {
    let dir = tempfile::tempdir().unwrap();
    let task = task();
    {
        let local = open(dir.path(), Duration::from_secs(600)).unwrap();
        assert!(
            open(dir.path(), Duration::from_secs(600)).is_err(),
            "one process per directory"
        );
        local.queue.send(std::slice::from_ref(&task)).await.unwrap();
        assert_eq!(
            local.queue.receive(1, Duration::ZERO).await.unwrap().len(),
            1
        );
    }
    let local = open(dir.path(), Duration::from_secs(600)).unwrap();
    let again = local.queue.receive(1, Duration::ZERO).await.unwrap();
    assert_eq!((again.len(), again[0].receive_count), (1, 2));
    // The delivery that ended with its process counts as interrupted; one handed back on
    // purpose (deferred) does not.
    assert_eq!(again[0].interrupted, 1);
    local
        .queue
        .defer(&again[0].receipt, Duration::ZERO)
        .await
        .unwrap();
    drop(local);
    let local = open(dir.path(), Duration::from_secs(600)).unwrap();
    let third = local.queue.receive(1, Duration::ZERO).await.unwrap();
    assert_eq!((third[0].receive_count, third[0].interrupted), (3, 1));
    drop(local);
    let local = open(dir.path(), Duration::from_secs(600)).unwrap();
    let fourth = local.queue.receive(1, Duration::ZERO).await.unwrap();
    assert_eq!((fourth[0].receive_count, fourth[0].interrupted), (4, 2));
}

#[tokio::test]
async fn a_database_of_the_first_schema_is_migrated() {
    let dir = tempfile::tempdir().unwrap();
    {
        let conn = rusqlite::Connection::open(dir.path().join("sarvcrawl.db")).unwrap();
        conn.execute_batch(
            "CREATE TABLE queue (id INTEGER PRIMARY KEY AUTOINCREMENT, body TEXT NOT NULL,
             visible_at INTEGER NOT NULL, receipt TEXT, receives INTEGER NOT NULL DEFAULT 0);",
        )
        .unwrap();
    }
    let local = open(dir.path(), Duration::from_secs(600)).unwrap();
    let task = task();
    local.queue.send(&[task]).await.unwrap();
    let got = local.queue.receive(1, Duration::ZERO).await.unwrap();
    assert_eq!(got[0].interrupted, 0);
}

/// The nodes table as it was up to schema version 4: keyed by URL, indexed by order and by
/// parent (`released` came with version 2).
const NODES_BY_URL: &str = "
    CREATE TABLE nodes (
        job_id TEXT NOT NULL, url TEXT NOT NULL, seq INTEGER NOT NULL, parent TEXT,
        depth INTEGER NOT NULL, status TEXT NOT NULL, status_code INTEGER, reason TEXT,
        lease_until INTEGER, holder TEXT, released INTEGER NOT NULL DEFAULT 1,
        PRIMARY KEY (job_id, url)
    ) WITHOUT ROWID;
    CREATE INDEX nodes_by_seq ON nodes (job_id, seq);
    CREATE INDEX nodes_by_parent ON nodes (job_id, parent, status);
    CREATE INDEX nodes_waiting ON nodes (job_id, seq) WHERE released = 0 AND status = 'queued';";

#[tokio::test]
async fn a_crawl_stored_with_nodes_keyed_by_url_is_migrated_whole() {
    let dir = tempfile::tempdir().unwrap();
    let (u, root) = (user("u"), "https://e.com/");
    let job = crawl_job(&u);
    let node = |url: &str| NewNode {
        url: url.into(),
        depth: 1,
        skip: None,
    };
    let found = [node("https://e.com/b"), node("https://e.com/a")];
    {
        let local = open(dir.path(), Duration::from_secs(600)).unwrap();
        let store = &local.store;
        store
            .create_job(&job, root, Claim::Free, &[])
            .await
            .unwrap();
        store
            .add_nodes(&u, &job.job_id, root, &found, 10)
            .await
            .unwrap();
    }
    // The same rows in the table of version 4.
    {
        let conn = rusqlite::Connection::open(dir.path().join("sarvcrawl.db")).unwrap();
        conn.execute_batch(&format!(
            "BEGIN;
             CREATE TABLE current AS SELECT job_id, url, seq, parent, depth, status,
                 status_code, reason, lease_until, holder, released FROM nodes;
             DROP TABLE nodes;
             {NODES_BY_URL}
             INSERT INTO nodes SELECT * FROM current;
             DROP TABLE current;
             PRAGMA user_version = 4;
             COMMIT;"
        ))
        .unwrap();
    }
    let local = open(dir.path(), Duration::from_secs(600)).unwrap();
    let store = &local.store;
    let tree = store.tree(&u, &job.job_id, 10).await.unwrap();
    let urls: Vec<&str> = tree.iter().map(|n| n.url.as_str()).collect();
    assert_eq!(urls, [root, "https://e.com/b", "https://e.com/a"]);
    // Still one node a URL: a known link is not claimed again, a new one is.
    let more = [node("https://e.com/a"), node("https://e.com/c")];
    let claimed = store
        .add_nodes(&u, &job.job_id, root, &more, 10)
        .await
        .unwrap();
    assert_eq!(claimed, [node("https://e.com/c")]);
    // Waiting in the order found.
    let next = store.advance(&u, &job.job_id, 10).await.unwrap();
    let next: Vec<&str> = next.iter().map(|n| n.url.as_str()).collect();
    assert_eq!(
        next,
        ["https://e.com/b", "https://e.com/a", "https://e.com/c"]
    );
    let conn = rusqlite::Connection::open(dir.path().join("sarvcrawl.db")).unwrap();
    let indexes: Vec<String> = conn
        .prepare("SELECT name FROM pragma_index_list('nodes') ORDER BY name")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(
        indexes,
        ["nodes_by_url", "nodes_waiting", "sqlite_autoindex_nodes_1"]
    );
}
