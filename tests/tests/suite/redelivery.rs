//! SECURITY.md I3: every task delivered twice changes nothing. The application runs in process
//! over the real SQLite adapters and fixture site; only the queue is wrapped so that every
//! send enqueues each task twice.

use async_trait::async_trait;
use e2e::{tree_paths, tree_site, Site};
use sarvcrawl_core::app::{crawl, worker, App, Config};
use sarvcrawl_core::domain::{JobId, UserId};
use sarvcrawl_core::engine::fetch::{FetchConfig, Fetcher};
use sarvcrawl_core::engine::guard::AddressPolicy;
use sarvcrawl_core::ports::{
    BlobStore, Delivery, Store, StoreResult, SystemClock, Task, WorkQueue,
};
use std::sync::Arc;
use std::time::{Duration, Instant};

struct Twice(Arc<dyn WorkQueue>);

#[async_trait]
impl WorkQueue for Twice {
    async fn send(&self, tasks: &[Task]) -> StoreResult<()> {
        self.send_later(tasks, Duration::ZERO).await
    }
    async fn send_later(&self, tasks: &[Task], delay: Duration) -> StoreResult<()> {
        self.0.send_later(tasks, delay).await?;
        self.0.send_later(tasks, delay).await
    }
    async fn receive(&self, max: usize, wait: Duration) -> StoreResult<Vec<Delivery>> {
        self.0.receive(max, wait).await
    }
    async fn ack(&self, receipt: &str) -> StoreResult<()> {
        self.0.ack(receipt).await
    }
    async fn defer(&self, receipt: &str, delay: Duration) -> StoreResult<()> {
        self.0.defer(receipt, delay).await
    }
    async fn extend(&self, receipt: &str, visibility: Duration) -> StoreResult<()> {
        self.0.extend(receipt, visibility).await
    }
}

type Ports = (
    Arc<dyn Store>,
    Arc<dyn WorkQueue>,
    Arc<dyn BlobStore>,
    Box<dyn std::any::Any>,
);

/// The backend under test: SQLite and files, or (with `SARVCRAWL_TEST_BACKEND=aws`) fresh
/// DynamoDB, SQS and S3 resources on the emulator.
async fn ports(dir: &std::path::Path) -> Ports {
    if e2e::server::aws_backend() {
        let (clients, names) = crate::emulator::resources().await;
        let aws = sarvcrawl_aws::Aws::new(&clients, &names, Arc::new(SystemClock));
        return (
            aws.store.clone(),
            aws.queue.clone(),
            aws.blobs.clone(),
            Box::new(()),
        );
    }
    let local = sarvcrawl_local::open(dir, Duration::from_secs(30), Arc::new(SystemClock)).unwrap();
    (
        local.store.clone(),
        local.queue.clone(),
        local.blobs.clone(),
        Box::new(local),
    )
}

/// Runs one crawl of `site` to its end; returns (job, result URLs, log messages).
async fn crawl(
    site: &Site,
    duplicate: bool,
) -> (sarvcrawl_core::domain::Job, Vec<String>, Vec<String>) {
    let dir = tempfile::tempdir().unwrap();
    let (store, queue, blobs, _hold) = ports(dir.path()).await;
    let queue: Arc<dyn WorkQueue> = if duplicate {
        Arc::new(Twice(queue))
    } else {
        queue
    };
    let policy = AddressPolicy::new(vec!["127.0.0.1/32".parse().unwrap()]);
    let fetcher = Fetcher::new(policy, FetchConfig::default()).unwrap();
    let app = Arc::new(App::new(
        store,
        queue,
        blobs,
        Arc::new(SystemClock),
        Arc::new(fetcher),
        Config::default(),
    ));
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let workers = tokio::spawn(worker::run_workers(app.clone(), 2, stopped));
    let user = UserId("u".into());
    let body = serde_json::json!({"url": site.url("/"), "use_sitemap": false, "limit": 1000});
    let job = crawl::submit(&app, &user, body.to_string().as_bytes())
        .await
        .unwrap();
    let id: JobId = job.job_id;
    if duplicate {
        // The SQLite store queues a job's first task in the job's own write, past the wrapper:
        // send the root's task again so that it too is delivered more than once.
        let root = Task::new(&user, &id, site.url("/"), 0, false);
        app.queue.send(&[root]).await.unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(120);
    let job = loop {
        let j = app.jobs.get_job(&user, &id).await.unwrap().unwrap();
        if j.status.is_final() {
            break j;
        }
        if Instant::now() > deadline {
            let pending: Vec<_> = app
                .jobs
                .tree(&user, &id, u32::MAX)
                .await
                .unwrap()
                .into_iter()
                .filter(|n| n.status.is_pending())
                .map(|n| (n.url, n.status))
                .collect();
            panic!(
                "crawl did not finish: {:?}; pending {pending:?}",
                j.progress
            );
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    // Let the duplicates drain, then read everything.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let after = app.jobs.get_job(&user, &id).await.unwrap().unwrap();
    assert_eq!(after.status, job.status, "a final status never changes");
    assert_eq!(after.progress, job.progress);
    let page = app.jobs.results(&user, &id, None, 10_000).await.unwrap();
    let mut urls = Vec::new();
    for key in page.entries.into_iter().map(|e| e.key) {
        let doc: serde_json::Value =
            serde_json::from_slice(&app.blobs.get(&key).await.unwrap().unwrap()).unwrap();
        urls.push(doc["url"].as_str().unwrap().to_string());
    }
    urls.sort();
    let logs = app.jobs.logs(&user, &id, None, 100_000).await.unwrap();
    let _ = stop.send(true);
    let _ = workers.await;
    (job, urls, logs.into_iter().map(|e| e.message).collect())
}

#[tokio::test(flavor = "multi_thread")]
async fn every_task_delivered_twice_changes_nothing() {
    const PAGES: usize = 121;
    let site = Site::start(tree_site(PAGES)).await;
    let (once, once_urls, _) = crawl(&site, false).await;
    let (twice, twice_urls, logs) = crawl(&site, true).await;
    let mut expected: Vec<String> = tree_paths(PAGES, 4).iter().map(|p| site.url(p)).collect();
    expected.sort();
    assert_eq!(once_urls, expected);
    assert_eq!(twice_urls, expected, "same pages, each once");
    assert_eq!(once.progress, twice.progress, "same counts");
    assert_eq!(twice.progress.pages_completed, PAGES as u64);
    assert_eq!(twice.progress.pages_queued, 0);
    let finals = logs.iter().filter(|m| m.starts_with("completed:")).count();
    assert_eq!(finals, 1, "one final status");
    let fetched = logs.iter().filter(|m| m.starts_with("fetched")).count();
    assert_eq!(fetched, PAGES, "each page logged once");
    // Each crawl asked the site for each page once: a copy of a task never fetched its page
    // again.
    for path in tree_paths(PAGES, 4) {
        assert_eq!(site.hits_of(&path), 2, "{path} fetched once a crawl");
    }
}
