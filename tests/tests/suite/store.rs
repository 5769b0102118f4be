//! The store ports' contract, run against both adapters: SQLite on disk and DynamoDB (and S3)
//! on the AWS emulator. Time comes from a clock the tests move, so leases expire without
//! waiting. Every test runs on both; a failure names the adapter.

use e2e::clock::TestClock;
use sarvcrawl_core::domain::{
    Job, JobKind, JobStatus, Monitor, MonitorId, MonitorStatus, PageOptions, UserId,
};
use sarvcrawl_core::ports::{
    BlobStore, Claim, Clock, CreateOutcome, JobQuery, NewLog, NewNode, NodeStatus, PageOutcome,
    Reservation, SkipReason, SlotClaim, Store,
};
use std::sync::Arc;

/// One adapter under test.
struct Subject {
    name: &'static str,
    store: Arc<dyn Store>,
    blobs: Arc<dyn BlobStore>,
    clock: Arc<TestClock>,
    _hold: Box<dyn std::any::Any>,
}

fn clock() -> Arc<TestClock> {
    Arc::new(TestClock::now_at_start())
}

fn sqlite() -> Subject {
    let dir = tempfile::tempdir().unwrap();
    let clock = clock();
    let local = sarvcrawl_local::open(
        dir.path(),
        std::time::Duration::from_secs(30),
        clock.clone(),
    )
    .unwrap();
    Subject {
        name: "sqlite",
        store: local.store.clone(),
        blobs: local.blobs.clone(),
        clock,
        _hold: Box::new((local, dir)),
    }
}

async fn dynamo() -> Subject {
    let (clients, names) = crate::emulator::resources().await;
    let clock = clock();
    let aws = sarvcrawl_aws::Aws::new(&clients, &names, clock.clone());
    Subject {
        name: "dynamodb",
        store: aws.store.clone(),
        blobs: aws.blobs.clone(),
        clock,
        _hold: Box::new(()),
    }
}

async fn subjects() -> Vec<Subject> {
    vec![sqlite(), dynamo().await]
}

fn user(name: &str) -> UserId {
    UserId(name.into())
}

fn job_of(s: &Subject, u: &UserId, kind: JobKind) -> Job {
    Job::new(u.clone(), kind, serde_json::json!({}), s.clock.now())
}

fn slot(s: &Subject, minutes: i64) -> Claim {
    Claim::Slot(SlotClaim {
        kind: JobKind::Crawl,
        lease_until: s.clock.now() + chrono::Duration::minutes(minutes),
    })
}

fn node(url: &str, skip: Option<SkipReason>) -> NewNode {
    NewNode {
        url: url.into(),
        depth: 1,
        skip,
    }
}

const ROOT: &str = "https://e.com/";

#[tokio::test(flavor = "multi_thread")]
async fn one_slot_per_user_and_kind_under_a_race() {
    for s in subjects().await {
        let u = user("u");
        // Each attempt brings its first log line: only the job created has one.
        let attempts: Vec<_> = (0..20)
            .map(|i| {
                let (store, job, claim) = (
                    s.store.clone(),
                    job_of(&s, &u, JobKind::Crawl),
                    slot(&s, 15),
                );
                let line = [NewLog::info(format!("attempt {i}")).at(ROOT.to_string())];
                let id = job.job_id.clone();
                (
                    id,
                    tokio::spawn(async move { store.create_job(&job, ROOT, claim, &line).await }),
                )
            })
            .collect();
        let mut created = 0;
        for (id, a) in attempts {
            let outcome = a.await.unwrap().unwrap();
            let lines = s.store.logs(&u, &id, None, 10).await.unwrap();
            if outcome == CreateOutcome::Created {
                created += 1;
                assert_eq!(lines.len(), 1, "{}: {lines:?}", s.name);
                assert!(lines[0].message.starts_with("attempt "), "{}", s.name);
                assert_eq!(lines[0].url.as_deref(), Some(ROOT), "{}", s.name);
            } else {
                assert!(lines.is_empty(), "{}: {lines:?}", s.name);
            }
        }
        assert_eq!(created, 1, "{}", s.name);
        // Another user is independent; a finished job frees the slot.
        let other = job_of(&s, &user("v"), JobKind::Crawl);
        let r = s
            .store
            .create_job(&other, ROOT, slot(&s, 15), &[])
            .await
            .unwrap();
        assert_eq!(r, CreateOutcome::Created, "{}", s.name);
        let CreateOutcome::SlotBusy { active_job_id } = s
            .store
            .create_job(&job_of(&s, &u, JobKind::Crawl), ROOT, slot(&s, 15), &[])
            .await
            .unwrap()
        else {
            panic!("{}: the slot was not busy", s.name)
        };
        let at = s.clock.now();
        let done = s
            .store
            .finish_job(&u, &active_job_id, JobStatus::Completed, None, at);
        assert!(done.await.unwrap(), "{}", s.name);
        let next = job_of(&s, &u, JobKind::Crawl);
        let again = s.store.create_job(&next, ROOT, slot(&s, 15), &[]);
        assert_eq!(again.await.unwrap(), CreateOutcome::Created, "{}", s.name);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_slot_whose_lease_ran_out_is_taken_over() {
    for s in subjects().await {
        let u = user("u");
        let stuck = job_of(&s, &u, JobKind::Crawl);
        s.store
            .create_job(&stuck, ROOT, slot(&s, 1), &[])
            .await
            .unwrap();
        let next = || job_of(&s, &u, JobKind::Crawl);
        let busy = s
            .store
            .create_job(&next(), ROOT, slot(&s, 1), &[])
            .await
            .unwrap();
        assert!(matches!(busy, CreateOutcome::SlotBusy { .. }), "{}", s.name);
        // A renewal by its job keeps it; once the lease runs out, it is taken over.
        let until = s.clock.now() + chrono::Duration::minutes(5);
        s.store
            .renew_slot(&u, &stuck.job_id, JobKind::Crawl, until)
            .await
            .unwrap();
        s.clock.advance(chrono::Duration::minutes(3));
        let busy = s
            .store
            .create_job(&next(), ROOT, slot(&s, 1), &[])
            .await
            .unwrap();
        assert!(matches!(busy, CreateOutcome::SlotBusy { .. }), "{}", s.name);
        s.clock.advance(chrono::Duration::minutes(3));
        let taken = s
            .store
            .create_job(&next(), ROOT, slot(&s, 1), &[])
            .await
            .unwrap();
        assert_eq!(taken, CreateOutcome::Created, "{}", s.name);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn claims_respect_the_limit_and_count_each_page_once() {
    for s in subjects().await {
        let (store, u) = (s.store.clone(), user("u"));
        let job = job_of(&s, &u, JobKind::Crawl);
        store
            .create_job(&job, ROOT, slot(&s, 15), &[])
            .await
            .unwrap();
        let nodes = vec![
            node("https://e.com/a", None),
            node("https://e.com/b", None),
            node("https://other.org/", Some(SkipReason::External)),
            node("https://e.com/c", None),
        ];
        let owed = store
            .add_nodes(&u, &job.job_id, ROOT, &nodes, 3)
            .await
            .unwrap();
        let mut owed: Vec<&str> = owed.iter().map(|n| n.url.as_str()).collect();
        owed.sort();
        assert_eq!(
            owed,
            ["https://e.com/a", "https://e.com/b"],
            "{}: root + 2 = limit 3",
            s.name
        );
        // Seen again (a redelivered page): nothing new is claimed.
        let again = store
            .add_nodes(&u, &job.job_id, ROOT, &nodes, 3)
            .await
            .unwrap();
        assert!(again.is_empty(), "{}", s.name);
        // A new link among known ones is still recorded (a process's cache of the URLs it saw
        // recorded spares the lookups of the others, never this one).
        let mut more = nodes.clone();
        more.push(node("https://e.com/d", None));
        let third = store
            .add_nodes(&u, &job.job_id, ROOT, &more, 3)
            .await
            .unwrap();
        assert!(third.is_empty(), "{}", s.name);
        let tree = store.tree(&u, &job.job_id, 100).await.unwrap();
        for url in ["https://e.com/c", "https://e.com/d"] {
            let n = tree.iter().find(|n| n.url == url);
            assert_eq!(
                n.map(|n| (n.status, n.reason)),
                Some((NodeStatus::Skipped, Some(SkipReason::Limit))),
                "{}: {url}",
                s.name
            );
        }
        let done = PageOutcome {
            status: NodeStatus::Completed,
            status_code: Some(200),
            document_key: Some("k/a".into()),
            tokens: 0,
            log: vec![NewLog::info("fetched (200)").at("https://e.com/a".to_string())],
        };
        let first = store
            .complete_node(&u, &job.job_id, "https://e.com/a", &done)
            .await
            .unwrap();
        let dup = store
            .complete_node(&u, &job.job_id, "https://e.com/a", &done)
            .await
            .unwrap();
        assert!(first.applied && !dup.applied, "{}", s.name);
        assert_eq!((first.pending, dup.pending), (2, 2), "{}", s.name);
        // The page's line came with the completion that applied, and only with it.
        let lines = store.logs(&u, &job.job_id, None, 10).await.unwrap();
        let lines: Vec<_> = lines.iter().map(|l| l.message.as_str()).collect();
        assert_eq!(lines, ["fetched (200)"], "{}", s.name);
        let got = store.get_job(&u, &job.job_id).await.unwrap().unwrap();
        let p = got.progress;
        assert_eq!(
            (p.pages_discovered, p.pages_completed, p.pages_queued),
            (3, 1, 2),
            "{}",
            s.name
        );
        let results = store.results(&u, &job.job_id, None, 10).await.unwrap();
        assert_eq!(results.total, 1, "{}", s.name);
        assert_eq!(results.entries[0].key, "k/a", "{}", s.name);
    }
}

/// A second process (a store of its own, knowing none of the URLs the first saw recorded)
/// reads the table for the links it finds: it claims none the first recorded, and one it would
/// skip (found deeper than the crawl goes) leaves the page recorded as it was.
#[tokio::test(flavor = "multi_thread")]
async fn links_another_process_recorded_are_neither_claimed_again_nor_overwritten() {
    let (clients, names) = crate::emulator::resources().await;
    let clock = clock();
    let first: Arc<dyn Store> = sarvcrawl_aws::Aws::new(&clients, &names, clock.clone()).store;
    let second: Arc<dyn Store> = sarvcrawl_aws::Aws::new(&clients, &names, clock.clone()).store;
    let u = user("u");
    let job = Job::new(
        u.clone(),
        JobKind::Crawl,
        serde_json::json!({}),
        clock.now(),
    );
    let lease_until = clock.now() + chrono::Duration::minutes(15);
    let claim = Claim::Slot(SlotClaim {
        kind: JobKind::Crawl,
        lease_until,
    });
    first.create_job(&job, ROOT, claim, &[]).await.unwrap();
    let (a, b, c) = ("https://e.com/a", "https://e.com/b", "https://e.com/c");
    let owed = first
        .add_nodes(&u, &job.job_id, ROOT, &[node(a, None), node(b, None)], 10)
        .await
        .unwrap();
    assert_eq!(owed.len(), 2);
    let found = [
        node(a, Some(SkipReason::Depth)),
        node(b, None),
        node(c, None),
    ];
    let owed = second
        .add_nodes(&u, &job.job_id, b, &found, 10)
        .await
        .unwrap();
    let owed: Vec<&str> = owed.iter().map(|n| n.url.as_str()).collect();
    assert_eq!(owed, [c]);
    let tree = second.tree(&u, &job.job_id, 100).await.unwrap();
    let rows: Vec<_> = tree
        .iter()
        .map(|n| (n.url.as_str(), n.status, n.reason, n.parent.as_deref()))
        .collect();
    assert_eq!(
        rows,
        [
            (ROOT, NodeStatus::Queued, None, None),
            (a, NodeStatus::Queued, None, Some(ROOT)),
            (b, NodeStatus::Queued, None, Some(ROOT)),
            (c, NodeStatus::Queued, None, Some(b)),
        ]
    );
    let got = second.get_job(&u, &job.job_id).await.unwrap().unwrap();
    assert_eq!(got.progress.pages_discovered, 4);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_page_is_held_under_its_lease_and_taken_over_after() {
    for s in subjects().await {
        let (store, u) = (s.store.clone(), user("u"));
        let job = job_of(&s, &u, JobKind::Scrape);
        store
            .create_job(&job, ROOT, Claim::Free, &[])
            .await
            .unwrap();
        let until = |minutes| s.clock.now() + chrono::Duration::minutes(minutes);
        assert!(
            store
                .start_node(&u, &job.job_id, ROOT, "a", until(5))
                .await
                .unwrap(),
            "{}",
            s.name
        );
        // Another attempt waits; the holder may retry its own write.
        assert!(
            !store
                .start_node(&u, &job.job_id, ROOT, "b", until(5))
                .await
                .unwrap(),
            "{}",
            s.name
        );
        assert!(
            store
                .start_node(&u, &job.job_id, ROOT, "a", until(5))
                .await
                .unwrap(),
            "{}",
            s.name
        );
        s.clock.advance(chrono::Duration::minutes(6));
        assert!(
            store
                .start_node(&u, &job.job_id, ROOT, "b", until(5))
                .await
                .unwrap(),
            "{}",
            s.name
        );
        // Given back after a failed attempt, it is free at once.
        store.release_node(&u, &job.job_id, ROOT).await.unwrap();
        let n = store
            .get_node(&u, &job.job_id, ROOT)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(n.status, NodeStatus::Queued, "{}", s.name);
        assert!(
            store
                .start_node(&u, &job.job_id, ROOT, "c", until(5))
                .await
                .unwrap(),
            "{}",
            s.name
        );
    }
}

/// A task's page is taken without reading its node only when it was never leased: once a
/// delivery took it, a later copy of the task finds it done, however its lease ended.
#[tokio::test(flavor = "multi_thread")]
async fn a_page_once_taken_is_never_taken_again_for_new() {
    for s in subjects().await {
        let (store, u) = (s.store.clone(), user("u"));
        let job = job_of(&s, &u, JobKind::Crawl);
        store
            .create_job(&job, ROOT, Claim::Free, &[])
            .await
            .unwrap();
        let id = &job.job_id;
        let until = |minutes| s.clock.now() + chrono::Duration::minutes(minutes);
        let take = |holder: &'static str| {
            let store = store.clone();
            let (u, id, until) = (u.clone(), id.clone(), until(5));
            async move {
                store
                    .start_task_node(&u, &id, ROOT, holder, until)
                    .await
                    .unwrap()
            }
        };
        assert!(take("a").await, "{}: a new page is taken", s.name);
        let done = PageOutcome {
            status: NodeStatus::Completed,
            status_code: Some(200),
            document_key: None,
            tokens: 0,
            log: Vec::new(),
        };
        assert!(
            store
                .complete_node(&u, id, ROOT, &done)
                .await
                .unwrap()
                .applied
        );
        assert!(!take("b").await, "{}: under the live lease", s.name);
        s.clock.advance(chrono::Duration::minutes(6));
        assert!(!take("c").await, "{}: after the lease ran out", s.name);
        // Given back after the completion (a task that failed past it, or ran out of time).
        store.release_node(&u, id, ROOT).await.unwrap();
        assert!(
            !take("d").await,
            "{}: after the lease was given back",
            s.name
        );
        let n = store.get_node(&u, id, ROOT).await.unwrap().unwrap();
        assert_eq!(n.status, NodeStatus::Completed, "{}", s.name);
    }
}

/// A monitor of `u` as the service stores it.
fn monitor(s: &Subject, u: &UserId) -> Monitor {
    let now = s.clock.now();
    Monitor {
        monitor_id: MonitorId::generate(),
        user_id: u.clone(),
        url: ROOT.into(),
        notify_url: "https://hooks.example/".into(),
        interval_seconds: 3600,
        selector: None,
        page: PageOptions::default(),
        status: MonitorStatus::Active,
        secret: "whsec_x".into(),
        created_at: now,
        last_checked_at: None,
        last_changed_at: None,
        next_check_at: now,
        checks: 0,
        changes: 0,
        last_delivery: None,
        snapshot: None,
        running: None,
        version: 0,
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn one_users_calls_never_reach_another_users_job() {
    for s in subjects().await {
        let (store, a, b) = (s.store.clone(), user("alice"), user("bob"));
        let name = s.name;
        let job = job_of(&s, &a, JobKind::Crawl);
        let id = &job.job_id;
        store
            .create_job(&job, ROOT, slot(&s, 15), &[])
            .await
            .unwrap();
        store
            .append_logs(&a, id, &[NewLog::info("alice's")])
            .await
            .unwrap();
        let first = [node("https://e.com/a", None)];
        let claimed = store.add_nodes(&a, id, ROOT, &first, 10);
        assert_eq!(claimed.await.unwrap().len(), 1, "{name}");
        let done = PageOutcome {
            status: NodeStatus::Completed,
            status_code: Some(200),
            document_key: Some("alice/doc".into()),
            tokens: 0,
            log: Vec::new(),
        };
        store
            .complete_node(&a, id, "https://e.com/a", &done)
            .await
            .unwrap();
        let later = s.clock.now() + chrono::Duration::minutes(5);

        // Bob reads nothing of it...
        assert!(
            store.get_job(&b, id).await.unwrap().is_none(),
            "{name}: get_job"
        );
        assert_eq!(
            store.job_status(&b, id).await.unwrap(),
            None,
            "{name}: job_status"
        );
        let q = JobQuery {
            limit: 10,
            ..JobQuery::default()
        };
        assert!(
            store.list_jobs(&b, &q).await.unwrap().is_empty(),
            "{name}: list_jobs"
        );
        assert!(
            store.get_node(&b, id, ROOT).await.unwrap().is_none(),
            "{name}: get_node"
        );
        assert!(
            store.tree(&b, id, 100).await.unwrap().is_empty(),
            "{name}: tree"
        );
        let results = store.results(&b, id, None, 10).await.unwrap();
        assert!(
            results.entries.is_empty() && results.total == 0,
            "{name}: results"
        );
        assert!(
            store.logs(&b, id, None, 10).await.unwrap().is_empty(),
            "{name}: logs"
        );
        // ...and changes nothing of it.
        assert!(
            !store.start_job(&b, id, s.clock.now()).await.unwrap(),
            "{name}: start_job"
        );
        assert!(
            store
                .add_nodes(&b, id, ROOT, &[node("https://e.com/b", None)], 10)
                .await
                .unwrap()
                .is_empty(),
            "{name}: add_nodes"
        );
        assert!(
            !store.start_node(&b, id, ROOT, "bob", later).await.unwrap(),
            "{name}: start_node"
        );
        let _ = store.release_node(&b, id, ROOT).await;
        let c = store.complete_node(&b, id, ROOT, &done).await.unwrap();
        assert!(!c.applied, "{name}: complete_node");
        let _ = store.append_logs(&b, id, &[NewLog::info("bob's")]).await;
        let _ = store.renew_slot(&b, id, JobKind::Crawl, later).await;
        let finished = store.finish_job(&b, id, JobStatus::Cancelled, None, s.clock.now());
        assert!(!finished.await.unwrap(), "{name}: finish_job");

        let mine = store.get_job(&a, id).await.unwrap().unwrap();
        assert_eq!(mine.status, JobStatus::Queued, "{name}");
        assert_eq!(
            store.job_status(&a, id).await.unwrap(),
            Some(JobStatus::Queued),
            "{name}: job_status"
        );
        let p = mine.progress;
        assert_eq!(
            (p.pages_discovered, p.pages_completed, p.pages_queued),
            (2, 1, 1),
            "{name}"
        );
        let tree = store.tree(&a, id, 100).await.unwrap();
        assert_eq!(tree.len(), 2, "{name}: bob's node was added");
        let root = store.get_node(&a, id, ROOT).await.unwrap().unwrap();
        assert_eq!(
            root.status,
            NodeStatus::Queued,
            "{name}: bob moved alice's page"
        );
        let logs = store.logs(&a, id, None, 10).await.unwrap();
        let messages: Vec<&str> = logs.iter().map(|l| l.message.as_str()).collect();
        assert_eq!(messages, ["alice's"], "{name}");
        // Alice's slot is still hers.
        let busy = store
            .create_job(&job_of(&s, &a, JobKind::Crawl), ROOT, slot(&s, 15), &[])
            .await
            .unwrap();
        assert!(
            matches!(busy, CreateOutcome::SlotBusy { .. }),
            "{name}: the slot was freed"
        );

        // Monitors and idempotency keys are each user's own too.
        let m = monitor(&s, &a);
        store.insert_monitor(&m).await.unwrap();
        assert!(
            store
                .get_monitor(&b, &m.monitor_id)
                .await
                .unwrap()
                .is_none(),
            "{name}"
        );
        assert!(store.list_monitors(&b).await.unwrap().is_empty(), "{name}");
        assert!(
            !store.delete_monitor(&b, &m.monitor_id).await.unwrap(),
            "{name}"
        );
        let forged = Monitor {
            user_id: b.clone(),
            status: MonitorStatus::Paused,
            ..m.clone()
        };
        assert!(
            !store.save_monitor(&forged).await.unwrap(),
            "{name}: save_monitor"
        );
        let kept = store.get_monitor(&a, &m.monitor_id).await.unwrap().unwrap();
        assert_eq!(kept.status, MonitorStatus::Active, "{name}");
        let (now, until) = (s.clock.now(), s.clock.now() + chrono::Duration::hours(24));
        let first = store.reserve(&a, "key-1", "h1", now, until).await.unwrap();
        let other = store.reserve(&b, "key-1", "h2", now, until).await.unwrap();
        assert_eq!(
            (first, other),
            (Reservation::Reserved, Reservation::Reserved),
            "{name}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn idempotency_records_answer_until_they_expire() {
    for s in subjects().await {
        let (store, u) = (s.store.clone(), user("u"));
        let now = s.clock.now();
        let until = now + chrono::Duration::hours(24);
        assert_eq!(
            store.reserve(&u, "k", "h", now, until).await.unwrap(),
            Reservation::Reserved
        );
        let pending = store.reserve(&u, "k", "h", now, until).await.unwrap();
        assert_eq!(
            pending,
            Reservation::Pending { hash: "h".into() },
            "{}",
            s.name
        );
        store
            .complete(&u, "k", "{\"job_id\":1}", until)
            .await
            .unwrap();
        let done = store.reserve(&u, "k", "h", now, until).await.unwrap();
        let expected = Reservation::Done {
            hash: "h".into(),
            response: "{\"job_id\":1}".into(),
        };
        assert_eq!(done, expected, "{}", s.name);
        // A released reservation is free again; an expired record is forgotten.
        assert_eq!(
            store.reserve(&u, "r", "h", now, until).await.unwrap(),
            Reservation::Reserved
        );
        store.release(&u, "r").await.unwrap();
        assert_eq!(
            store.reserve(&u, "r", "h", now, until).await.unwrap(),
            Reservation::Reserved
        );
        let later = until + chrono::Duration::seconds(1);
        let again = store.reserve(&u, "k", "h2", later, later + chrono::Duration::hours(24));
        assert_eq!(again.await.unwrap(), Reservation::Reserved, "{}", s.name);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn monitors_are_written_over_the_version_they_were_read_at() {
    for s in subjects().await {
        let (store, u) = (s.store.clone(), user("u"));
        let m = monitor(&s, &u);
        store.insert_monitor(&m).await.unwrap();
        let read = store.get_monitor(&u, &m.monitor_id).await.unwrap().unwrap();
        let mut first = read.clone();
        first.checks = 1;
        assert!(store.save_monitor(&first).await.unwrap(), "{}", s.name);
        let mut stale = read;
        stale.checks = 99;
        assert!(
            !store.save_monitor(&stale).await.unwrap(),
            "{}: a stale write won",
            s.name
        );
        let now = store.get_monitor(&u, &m.monitor_id).await.unwrap().unwrap();
        assert_eq!((now.checks, now.version), (1, 1), "{}", s.name);
        let due = store.due_monitors(s.clock.now(), 10).await.unwrap();
        assert!(
            due.iter().any(|d| d.monitor_id == m.monitor_id),
            "{}",
            s.name
        );
        assert!(
            store.delete_monitor(&u, &m.monitor_id).await.unwrap(),
            "{}",
            s.name
        );
        assert!(
            store
                .get_monitor(&u, &m.monitor_id)
                .await
                .unwrap()
                .is_none(),
            "{}",
            s.name
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn documents_round_trip() {
    for s in subjects().await {
        let body = bytes::Bytes::from_static(b"{\"markdown\":\"# hi\"}");
        s.blobs.put("u/job_1/doc.json", body.clone()).await.unwrap();
        assert_eq!(
            s.blobs.get("u/job_1/doc.json").await.unwrap(),
            Some(body),
            "{}",
            s.name
        );
        assert_eq!(
            s.blobs.get("u/job_1/none.json").await.unwrap(),
            None,
            "{}",
            s.name
        );
    }
}

fn done(code: u16) -> PageOutcome {
    PageOutcome {
        status: NodeStatus::Completed,
        status_code: Some(code),
        document_key: None,
        tokens: 0,
        log: Vec::new(),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_frontier_lets_go_in_discovery_order_and_never_past_the_bound() {
    for s in subjects().await {
        let (store, u) = (s.store.clone(), user("u"));
        let job = job_of(&s, &u, JobKind::Crawl);
        let id = &job.job_id;
        store
            .create_job(&job, ROOT, slot(&s, 15), &[])
            .await
            .unwrap();
        let urls: Vec<String> = (0..6).map(|i| format!("https://e.com/{i}")).collect();
        let nodes: Vec<NewNode> = urls.iter().map(|u| node(u, None)).collect();
        assert_eq!(
            store
                .add_nodes(&u, id, ROOT, &nodes, 100)
                .await
                .unwrap()
                .len(),
            6
        );
        // The root is in flight from the start: a bound of 3 lets two more go, the first two.
        let first = store.advance(&u, id, 3).await.unwrap();
        let got: Vec<&str> = first.iter().map(|n| n.url.as_str()).collect();
        assert_eq!(got, [urls[0].as_str(), urls[1].as_str()], "{}", s.name);
        assert!(
            store.advance(&u, id, 3).await.unwrap().is_empty(),
            "{}",
            s.name
        );
        // Let go but not started: what the sweep queues again.
        let mut unstarted: Vec<String> = store
            .released_unstarted(&u, id)
            .await
            .unwrap()
            .into_iter()
            .map(|n| n.url)
            .collect();
        unstarted.sort();
        let mut expected = vec![ROOT.to_string(), urls[0].clone(), urls[1].clone()];
        expected.sort();
        assert_eq!(unstarted, expected, "{}", s.name);
        // Each page done makes room for one more, and says how many still wait.
        let c = store.complete_node(&u, id, ROOT, &done(200)).await.unwrap();
        assert_eq!((c.pending, c.waiting), (6, 4), "{}", s.name);
        let c = store
            .complete_node(&u, id, &urls[0], &done(200))
            .await
            .unwrap();
        assert_eq!((c.pending, c.waiting), (5, 4), "{}", s.name);
        // Racing workers let go exactly the room there is, each URL once.
        let racers = (0..8).map(|_| {
            let (store, u, id) = (store.clone(), u.clone(), id.clone());
            tokio::spawn(async move { store.advance(&u, &id, 3).await.unwrap() })
        });
        let mut raced: Vec<String> = futures::future::join_all(racers)
            .await
            .into_iter()
            .flat_map(|r| r.unwrap())
            .map(|n| n.url)
            .collect();
        raced.sort();
        assert_eq!(raced, [urls[2].clone(), urls[3].clone()], "{}", s.name);
        // A final job lets nothing go.
        let now = s.clock.now();
        store
            .finish_job(&u, id, JobStatus::Cancelled, None, now)
            .await
            .unwrap();
        assert_eq!(
            store.job_status(&u, id).await.unwrap(),
            Some(JobStatus::Cancelled),
            "{}",
            s.name
        );
        for url in [&urls[1], &urls[2], &urls[3]] {
            store.complete_node(&u, id, url, &done(200)).await.unwrap();
        }
        assert!(
            store.advance(&u, id, 3).await.unwrap().is_empty(),
            "{}",
            s.name
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_gate_holds_at_most_its_capacity_and_frees_a_place_whose_lease_ran_out() {
    for s in subjects().await {
        let store = s.store.clone();
        let gate = format!("host:{}.example", ulid::Ulid::new());
        let until = s.clock.now() + chrono::Duration::seconds(30);
        // Ten holders racing for three places: three get one, each a different place.
        let racers = (0..10).map(|i| {
            let (store, gate) = (store.clone(), gate.clone());
            tokio::spawn(async move { store.enter(&gate, 3, &format!("h{i}"), until).await })
        });
        let mut places: Vec<(u32, String)> = futures::future::join_all(racers)
            .await
            .into_iter()
            .enumerate()
            .filter_map(|(i, r)| r.unwrap().unwrap().map(|p| (p, format!("h{i}"))))
            .collect();
        places.sort();
        let taken: Vec<u32> = places.iter().map(|p| p.0).collect();
        assert_eq!(taken, [0, 1, 2], "{}", s.name);
        // A place given back is free; leaving someone else's place does nothing.
        let (place, holder) = places[1].clone();
        store.leave(&gate, place, "not-the-holder").await.unwrap();
        assert_eq!(
            store.enter(&gate, 3, "x", until).await.unwrap(),
            None,
            "{}",
            s.name
        );
        store.leave(&gate, place, &holder).await.unwrap();
        assert_eq!(
            store.enter(&gate, 3, "x", until).await.unwrap(),
            Some(place),
            "{}",
            s.name
        );
        // A holder that never gives its place back loses it when its lease runs out.
        s.clock.advance(chrono::Duration::seconds(31));
        let later = s.clock.now() + chrono::Duration::seconds(30);
        assert!(
            store.enter(&gate, 3, "y", later).await.unwrap().is_some(),
            "{}",
            s.name
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn racing_bookings_of_a_pace_get_starts_spaced_apart() {
    for s in subjects().await {
        let store = s.store.clone();
        let pace = format!("u/job/{}", ulid::Ulid::new());
        let now = s.clock.now();
        let spacing = std::time::Duration::from_millis(300);
        let racers = (0..8).map(|_| {
            let (store, pace) = (store.clone(), pace.clone());
            tokio::spawn(async move { store.book(&pace, spacing, now).await.unwrap() })
        });
        let mut starts: Vec<_> = futures::future::join_all(racers)
            .await
            .into_iter()
            .map(|r| r.unwrap())
            .collect();
        starts.sort();
        let ms = |t: chrono::DateTime<chrono::Utc>| t.timestamp_millis();
        assert_eq!(ms(starts[0]), ms(now), "{}", s.name);
        for pair in starts.windows(2) {
            assert_eq!(
                pair[1] - pair[0],
                chrono::Duration::milliseconds(300),
                "{}",
                s.name
            );
        }
        // Once the last booked start is past, the next one is now.
        s.clock.advance(chrono::Duration::seconds(10));
        let later = s.clock.now();
        let next = store.book(&pace, spacing, later).await.unwrap();
        assert_eq!(ms(next), ms(later), "{}", s.name);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_sweep_writes_only_over_the_activity_it_read() {
    for s in subjects().await {
        let (store, u) = (s.store.clone(), user("u"));
        let job = job_of(&s, &u, JobKind::Crawl);
        let id = &job.job_id;
        store
            .create_job(&job, ROOT, slot(&s, 15), &[])
            .await
            .unwrap();
        store
            .add_nodes(&u, id, ROOT, &[node("https://e.com/a", None)], 10)
            .await
            .unwrap();
        let seen = store
            .active_jobs(10_000)
            .await
            .unwrap()
            .into_iter()
            .find(|a| a.job_id == *id)
            .expect("listed while active");
        assert_eq!(
            (seen.kind, seen.pending, seen.repairs),
            (JobKind::Crawl, 2, 0)
        );
        // The job moves on after the sweep read it: neither the repair nor the failure lands.
        s.clock.advance(chrono::Duration::seconds(5));
        store.complete_node(&u, id, ROOT, &done(200)).await.unwrap();
        let now = s.clock.now();
        let error = sarvcrawl_core::domain::JobError::new(
            sarvcrawl_core::domain::ErrorCode::Internal,
            "no progress",
        );
        assert!(!store.note_repair(&u, id, seen.activity, now).await.unwrap());
        assert!(!store
            .fail_if_idle(&u, id, seen.activity, error.clone(), now)
            .await
            .unwrap());
        // Read again, it is: a repair counts, and failing it over the repair's time works.
        let seen = store
            .active_jobs(10_000)
            .await
            .unwrap()
            .into_iter()
            .find(|a| a.job_id == *id)
            .unwrap();
        assert_eq!(seen.pending, 1, "{}", s.name);
        s.clock.advance(chrono::Duration::seconds(5));
        let repaired_at = s.clock.now();
        assert!(store
            .note_repair(&u, id, seen.activity, repaired_at)
            .await
            .unwrap());
        assert!(store
            .fail_if_idle(&u, id, repaired_at, error, repaired_at)
            .await
            .unwrap());
        let failed = store.get_job(&u, id).await.unwrap().unwrap();
        assert_eq!(failed.status, JobStatus::Failed, "{}", s.name);
        assert!(store
            .active_jobs(10_000)
            .await
            .unwrap()
            .iter()
            .all(|a| a.job_id != *id));
        // Its slot is free.
        let next = job_of(&s, &u, JobKind::Crawl);
        assert_eq!(
            store
                .create_job(&next, ROOT, slot(&s, 15), &[])
                .await
                .unwrap(),
            CreateOutcome::Created,
            "{}",
            s.name
        );
    }
}
