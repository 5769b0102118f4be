//! What only the embedded adapters do, on a real database on disk: the SQLite work queue's
//! visibility and receive counts, a data directory's lock, tasks a dead process left behind,
//! schema migrations, and document keys that must stay inside the data directory. The store
//! ports' contract, which both backends share, is tested on both in `tests/tests/store.rs`.

use chrono::{DateTime, Utc};
use sarvcrawl_core::domain::{Job, JobKind, UserId};
use sarvcrawl_core::ports::{BlobStore, Clock, SystemClock, Task, WorkQueue};
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

#[tokio::test]
async fn blobs_round_trip_and_refuse_escaping_keys() {
    let dir = tempfile::tempdir().unwrap();
    let local = open(dir.path(), Duration::from_secs(1)).unwrap();
    let blobs: Arc<dyn BlobStore> = local.blobs.clone();
    blobs
        .put("u/job/doc.json", bytes::Bytes::from_static(b"{}"))
        .await
        .unwrap();
    assert_eq!(
        blobs.get("u/job/doc.json").await.unwrap().unwrap(),
        &b"{}"[..]
    );
    assert!(blobs.get("u/job/none.json").await.unwrap().is_none());
    for bad in ["../x", "u/../../x", "/abs", "a//b", ""] {
        assert!(blobs.put(bad, bytes::Bytes::new()).await.is_err(), "{bad}");
    }
}
