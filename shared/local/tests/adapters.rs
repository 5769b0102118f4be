//! The SQLite adapters against their port contracts, on a real database on disk.

use chrono::Utc;
use sarvcrawl_core::domain::{Job, JobKind, JobStatus, UserId};
use sarvcrawl_core::ports::{
    BlobStore, Claim, CreateOutcome, JobStore, NewNode, NodeStatus, PageOutcome, SkipReason,
    SlotClaim, Task, WorkQueue,
};
use std::sync::Arc;
use std::time::Duration;

fn user(name: &str) -> UserId {
    UserId(name.into())
}

fn crawl_job(u: &UserId) -> Job {
    Job::new(u.clone(), JobKind::Crawl, serde_json::json!({}), Utc::now())
}

fn slot() -> SlotClaim {
    SlotClaim {
        kind: JobKind::Crawl,
        lease_until: Utc::now() + chrono::Duration::minutes(15),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn one_slot_per_user_and_kind_under_a_race() {
    let dir = tempfile::tempdir().unwrap();
    let local = sarvcrawl_local::open(dir.path(), Duration::from_secs(30)).unwrap();
    let store = local.store.clone();
    let u = user("u");
    let attempts = (0..20).map(|_| {
        let store = store.clone();
        let job = crawl_job(&u);
        tokio::spawn(async move {
            store
                .create_job(&job, "https://e.com/", Claim::Slot(slot()))
                .await
        })
    });
    let outcomes: Vec<CreateOutcome> = futures_join(attempts).await;
    let created = outcomes
        .iter()
        .filter(|o| **o == CreateOutcome::Created)
        .count();
    assert_eq!(created, 1);

    // Another user is independent; a finished job frees the slot.
    let other = crawl_job(&user("v"));
    assert_eq!(
        store
            .create_job(&other, "https://e.com/", Claim::Slot(slot()))
            .await
            .unwrap(),
        CreateOutcome::Created
    );
    let CreateOutcome::SlotBusy { active_job_id } = store
        .create_job(&crawl_job(&u), "https://e.com/", Claim::Slot(slot()))
        .await
        .unwrap()
    else {
        panic!("slot should be busy");
    };
    assert!(store
        .finish_job(&u, &active_job_id, JobStatus::Cancelled, None, Utc::now())
        .await
        .unwrap());
    assert!(
        !store
            .finish_job(&u, &active_job_id, JobStatus::Completed, None, Utc::now())
            .await
            .unwrap(),
        "final once"
    );
    assert_eq!(
        store
            .create_job(&crawl_job(&u), "https://e.com/", Claim::Slot(slot()))
            .await
            .unwrap(),
        CreateOutcome::Created
    );
}

async fn futures_join<T: Send + 'static>(
    handles: impl Iterator<Item = tokio::task::JoinHandle<Result<T, sarvcrawl_core::ports::StoreError>>>,
) -> Vec<T> {
    let mut out = Vec::new();
    for h in handles.collect::<Vec<_>>() {
        out.push(h.await.unwrap().unwrap());
    }
    out
}

#[tokio::test(flavor = "multi_thread")]
async fn an_expired_lease_frees_a_stuck_slot() {
    let dir = tempfile::tempdir().unwrap();
    let local = sarvcrawl_local::open(dir.path(), Duration::from_secs(30)).unwrap();
    let u = user("u");
    let stuck = crawl_job(&u);
    let expired = SlotClaim {
        kind: JobKind::Crawl,
        lease_until: Utc::now() - chrono::Duration::seconds(1),
    };
    local
        .store
        .create_job(&stuck, "https://e.com/", Claim::Slot(expired))
        .await
        .unwrap();
    assert_eq!(
        local
            .store
            .create_job(&crawl_job(&u), "https://e.com/", Claim::Slot(slot()))
            .await
            .unwrap(),
        CreateOutcome::Created
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn claims_respect_the_limit_and_count_each_page_once() {
    let dir = tempfile::tempdir().unwrap();
    let local = sarvcrawl_local::open(dir.path(), Duration::from_secs(30)).unwrap();
    let (store, u) = (local.store.clone(), user("u"));
    let job = crawl_job(&u);
    let root = "https://e.com/";
    store
        .create_job(&job, root, Claim::Slot(slot()))
        .await
        .unwrap();
    let node = |url: &str, skip| NewNode {
        url: url.into(),
        depth: 1,
        skip,
    };
    let nodes = vec![
        node("https://e.com/a", None),
        node("https://e.com/b", None),
        node("https://other.org/", Some(SkipReason::External)),
        node("https://e.com/c", None),
    ];
    let owed = store
        .add_nodes(&u, &job.job_id, root, &nodes, 3)
        .await
        .unwrap();
    let owed: Vec<&str> = owed.iter().map(|n| n.url.as_str()).collect();
    assert_eq!(
        owed,
        ["https://e.com/a", "https://e.com/b"],
        "root + 2 = limit 3"
    );
    // Seen again (a redelivered page): nothing new is claimed, still-queued children are owed.
    let again = store
        .add_nodes(&u, &job.job_id, root, &nodes, 3)
        .await
        .unwrap();
    assert_eq!(again.len(), 2);
    let tree = store.tree(&u, &job.job_id, 100).await.unwrap();
    let c = tree.iter().find(|n| n.url == "https://e.com/c").unwrap();
    assert_eq!(
        (c.status, c.reason),
        (NodeStatus::Skipped, Some(SkipReason::Limit))
    );

    let done = PageOutcome {
        status: NodeStatus::Completed,
        status_code: Some(200),
        document_key: Some("k/a".into()),
    };
    let first = store
        .complete_node(&u, &job.job_id, "https://e.com/a", &done)
        .await
        .unwrap();
    let dup = store
        .complete_node(&u, &job.job_id, "https://e.com/a", &done)
        .await
        .unwrap();
    assert!(first.applied && !dup.applied);
    assert_eq!((first.pending, dup.pending), (2, 2));
    let got = store.get_job(&u, &job.job_id).await.unwrap().unwrap();
    assert_eq!(
        (
            got.progress.pages_discovered,
            got.progress.pages_completed,
            got.progress.pages_queued
        ),
        (3, 1, 2)
    );
    assert_eq!(
        store
            .results(&u, &job.job_id, None, 10)
            .await
            .unwrap()
            .total,
        1
    );
    // Another user's id reaches nothing.
    assert!(store
        .get_job(&user("x"), &job.job_id)
        .await
        .unwrap()
        .is_none());
    assert!(store
        .add_nodes(&user("x"), &job.job_id, root, &nodes, 100)
        .await
        .unwrap()
        .is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn queue_redelivers_after_the_visibility_timeout_until_acked() {
    let dir = tempfile::tempdir().unwrap();
    let local = sarvcrawl_local::open(dir.path(), Duration::from_secs(1)).unwrap();
    let q = local.queue.clone();
    let task = Task {
        user_id: user("u"),
        job_id: crawl_job(&user("u")).job_id,
        url: "https://e.com/".into(),
        depth: 0,
        render: false,
    };
    q.send(std::slice::from_ref(&task)).await.unwrap();
    let first = q.receive(10, Duration::from_millis(100)).await.unwrap();
    assert_eq!(first.len(), 1);
    assert_eq!((first[0].receive_count, &first[0].task), (1, &task));
    assert!(
        q.receive(10, Duration::from_millis(300))
            .await
            .unwrap()
            .is_empty(),
        "invisible while in flight"
    );
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
    let task = Task {
        user_id: user("u"),
        job_id: crawl_job(&user("u")).job_id,
        url: "https://e.com/".into(),
        depth: 0,
        render: false,
    };
    {
        let local = sarvcrawl_local::open(dir.path(), Duration::from_secs(600)).unwrap();
        assert!(
            sarvcrawl_local::open(dir.path(), Duration::from_secs(600)).is_err(),
            "one process per directory"
        );
        local.queue.send(std::slice::from_ref(&task)).await.unwrap();
        assert_eq!(
            local.queue.receive(1, Duration::ZERO).await.unwrap().len(),
            1
        );
    }
    let local = sarvcrawl_local::open(dir.path(), Duration::from_secs(600)).unwrap();
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
    let local = sarvcrawl_local::open(dir.path(), Duration::from_secs(600)).unwrap();
    let third = local.queue.receive(1, Duration::ZERO).await.unwrap();
    assert_eq!((third[0].receive_count, third[0].interrupted), (3, 1));
    drop(local);
    let local = sarvcrawl_local::open(dir.path(), Duration::from_secs(600)).unwrap();
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
    let local = sarvcrawl_local::open(dir.path(), Duration::from_secs(600)).unwrap();
    let task = Task {
        user_id: user("u"),
        job_id: crawl_job(&user("u")).job_id,
        url: "https://e.com/".into(),
        depth: 0,
        render: false,
    };
    local.queue.send(&[task]).await.unwrap();
    let got = local.queue.receive(1, Duration::ZERO).await.unwrap();
    assert_eq!(got[0].interrupted, 0);
}

#[tokio::test]
async fn blobs_round_trip_and_refuse_escaping_keys() {
    let dir = tempfile::tempdir().unwrap();
    let local = sarvcrawl_local::open(dir.path(), Duration::from_secs(1)).unwrap();
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
