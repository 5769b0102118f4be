//! Processing one task: fetch one page of one job, store its document, claim the links it
//! leads to, and finish the job when it was the last page. Safe to run twice for one task.

use super::document::{self, Built};
use super::runtime::{HostGate, JobRuntime};
use super::{crawl, map, monitor, search, upload, App};
use crate::domain::{
    CheckRequest, CrawlRequest, ErrorCode, Job, JobError, JobKind, JobStatus, MapRequest,
    PageOptions, ScrapeRequest, SearchRequest, UploadRequest,
};
use crate::engine::fetch::{FetchError, Fetched};
use crate::engine::robots::{fetch_robots, Robots};
use crate::engine::urls::Scope;
use crate::ports::{
    Delivery, NewLog, NewNode, NodeStatus, PageOutcome, RenderRequest, SkipReason, StoreError,
    StoreResult, Task,
};
use bytes::Bytes;
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use url::Url;

/// What to do with a delivery after processing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Disposition {
    /// Done (or nothing to do): acknowledge it.
    Ack,
    /// A transient failure: deliver it again soon.
    Retry,
    /// Another delivery of the same task is fetching the page: look again later.
    Wait,
}

impl Disposition {
    /// How long a task to deliver again stays invisible, growing with its deliveries: short
    /// after a failure, and long enough while waiting that a slow page (up to the longest
    /// `timeout_ms`) is done before the deliveries run out.
    pub fn delay(self, receive_count: u32) -> Duration {
        let doubling = 1u64 << receive_count.clamp(1, 8).saturating_sub(1);
        Duration::from_secs(match self {
            Disposition::Ack => 0,
            Disposition::Retry => doubling.min(30),
            Disposition::Wait => (5 * doubling).min(60),
        })
    }
}

/// Deliveries of a task that may end with their process before it is given up: a task that
/// took the server down is not run into another crash.
const MAX_INTERRUPTED: u32 = 2;

/// Tries on a page answering 429 or 503.
const BUSY_TRIES: u32 = 3;
/// Longest `Retry-After` honoured within one task.
const MAX_PAUSE: Duration = Duration::from_secs(30);

enum Request {
    Scrape(ScrapeRequest),
    Crawl(CrawlRequest),
    Map(MapRequest),
    Search(SearchRequest),
    Upload(UploadRequest),
    Check(CheckRequest),
}

impl Request {
    fn of(job: &Job) -> Result<Self, serde_json::Error> {
        let r = job.request.clone();
        Ok(match job.kind {
            JobKind::Scrape => Request::Scrape(serde_json::from_value(r)?),
            JobKind::Crawl => Request::Crawl(serde_json::from_value(r)?),
            JobKind::Map => Request::Map(serde_json::from_value(r)?),
            JobKind::Search => Request::Search(serde_json::from_value(r)?),
            JobKind::Upload => Request::Upload(serde_json::from_value(r)?),
            JobKind::Monitor => Request::Check(serde_json::from_value(r)?),
        })
    }

    fn renders(&self) -> bool {
        match self {
            Request::Scrape(r) => r.page.render,
            Request::Crawl(r) => r.page.render,
            Request::Search(r) => r.scrape && r.page.render,
            Request::Check(r) => r.page.render,
            Request::Map(_) | Request::Upload(_) => false,
        }
    }
}

/// Whether the pages of `job` are loaded in a headless browser.
pub(crate) fn renders(job: &Job) -> bool {
    Request::of(job).is_ok_and(|r| r.renders())
}

/// What the one task of a job, or one page of a crawl, produced.
pub(crate) struct Produced {
    /// The document (or result) stored for it.
    pub doc: serde_json::Value,
    pub status_code: Option<u16>,
    pub error: Option<JobError>,
    /// Links to follow (crawls only).
    pub links: Vec<Url>,
}

impl Produced {
    /// A result of a job kind that ends in one document, or its failure.
    pub(crate) fn result(name: &str, r: Result<serde_json::Value, JobError>) -> Produced {
        let (doc, error) = match r {
            Ok(doc) => (doc, None),
            Err(e) => (document::failed(name, None, None, &e), Some(e)),
        };
        Produced {
            doc,
            status_code: None,
            error,
            links: Vec::new(),
        }
    }

    pub(crate) fn page(url: &str, page: Page) -> Produced {
        match page {
            Ok((fetched, built)) => Produced {
                doc: built.doc,
                status_code: Some(fetched.status),
                error: None,
                links: built.links,
            },
            Err(Failure { error, fetched }) => {
                let final_url = fetched.as_ref().map(|f| &f.url);
                let status = fetched.as_ref().map(|f| f.status);
                Produced {
                    doc: document::failed(url, final_url, status, &error),
                    status_code: status,
                    error: Some(error),
                    links: Vec::new(),
                }
            }
        }
    }
}

/// Processes one delivery; never panics on what the task or the page contains. A task to be
/// delivered again is made visible after [`Disposition::delay`].
pub async fn process(app: &App, d: &Delivery) -> Disposition {
    let disposition = attempt(app, d).await;
    if disposition != Disposition::Ack {
        let delay = disposition.delay(d.receive_count);
        if let Err(e) = app.queue.defer(&d.receipt, delay).await {
            tracing::warn!(error = %e, "could not shorten the wait before the next delivery");
        }
    }
    disposition
}

async fn attempt(app: &App, d: &Delivery) -> Disposition {
    let given_up = if d.interrupted >= MAX_INTERRUPTED {
        Some(format!(
            "gave up: the worker stopped {} times while processing this page",
            d.interrupted
        ))
    } else if d.receive_count > app.config.max_receives {
        Some(gave_up_after(d.receive_count - 1))
    } else {
        None
    };
    if let Some(reason) = given_up {
        return match abandon(app, &d.task, &reason).await {
            Ok(true) => Disposition::Ack,
            Ok(false) => Disposition::Wait,
            Err(_) => Disposition::Retry,
        };
    }
    match run(app, &d.task).await {
        Ok(disposition) => disposition,
        Err(e) => {
            let t = &d.task;
            tracing::warn!(job = %t.job_id, url = %t.url, error = %e, "task will be retried");
            // Best effort: the next delivery may start at once instead of waiting out the lease.
            let _ = app.jobs.release_node(&t.user_id, &t.job_id, &t.url).await;
            Disposition::Retry
        }
    }
}

/// Whether another delivery is fetching the task's page under a live lease: a task is not
/// given up while it runs. A lease that ran out (its worker died, or panicked on the page) is
/// taken over here, so the task can be given up.
async fn held(app: &App, task: &Task) -> bool {
    let node = app
        .jobs
        .get_node(&task.user_id, &task.job_id, &task.url)
        .await;
    if !matches!(node, Ok(Some(n)) if n.status == NodeStatus::Running) {
        return false;
    }
    let holder = ulid::Ulid::new().to_string();
    let until = app.clock.now() + task_lease(app);
    matches!(
        app.jobs
            .start_node(&task.user_id, &task.job_id, &task.url, &holder, until)
            .await,
        Ok(false)
    )
}

fn task_lease(app: &App) -> chrono::Duration {
    chrono::Duration::from_std(app.config.task_lease).unwrap_or(chrono::Duration::minutes(15))
}

/// The document key of a page of a job.
fn document_key(task: &Task) -> String {
    let digest = Sha256::digest(task.url.as_bytes());
    let hex: String = digest[..16].iter().map(|b| format!("{b:02x}")).collect();
    format!("{}/{}/{hex}.json", task.user_id, task.job_id)
}

/// Does the task's work. `Wait` when another delivery of the same task is fetching the page
/// right now: this one comes back later and finds the page done.
async fn run(app: &App, task: &Task) -> StoreResult<Disposition> {
    let (user, job_id) = (&task.user_id, &task.job_id);
    // T3: the job is re-read with the task's user; a task naming another user's job finds none.
    let Some(job) = app.jobs.get_job(user, job_id).await? else {
        return Ok(Disposition::Ack);
    };
    let Some(node) = app.jobs.get_node(user, job_id, &task.url).await? else {
        return Ok(Disposition::Ack);
    };
    if job.status.is_final() {
        settle_cancelled(app, task, node.status).await?;
        return Ok(Disposition::Ack);
    }
    let req = match Request::of(&job) {
        Ok(r) => r,
        Err(e) => {
            let error = JobError::new(ErrorCode::Internal, "the stored request is unreadable");
            tracing::error!(job = %job_id, error = %e, "unreadable request");
            app.jobs
                .finish_job(
                    user,
                    job_id,
                    JobStatus::Failed,
                    Some(error),
                    app.clock.now(),
                )
                .await?;
            return Ok(Disposition::Ack);
        }
    };
    if !node.status.is_pending() {
        // A duplicate of a finished task: only make sure the job's end was recorded.
        let outcome = PageOutcome {
            status: node.status,
            status_code: node.status_code,
            document_key: None,
        };
        let c = app
            .jobs
            .complete_node(user, job_id, &task.url, &outcome)
            .await?;
        if c.pending == 0 {
            finish(app, &job, None).await?;
        }
        return Ok(Disposition::Ack);
    }
    if job.status == JobStatus::Queued && app.jobs.start_job(user, job_id, app.clock.now()).await? {
        app.jobs
            .append_logs(
                user,
                job_id,
                &[NewLog::info(format!("started {}", job.kind.as_str()))],
            )
            .await?;
    }

    if !app
        .jobs
        .start_node(
            user,
            job_id,
            &task.url,
            &ulid::Ulid::new().to_string(),
            app.clock.now() + task_lease(app),
        )
        .await?
    {
        return Ok(Disposition::Wait);
    }
    let (max_concurrency, delay) = match &req {
        Request::Crawl(r) => (r.max_concurrency as usize, r.delay_ms),
        Request::Search(_) => (search::CONCURRENCY, 0),
        Request::Map(_) => (map::CONCURRENCY, 0),
        _ => (1, 0),
    };
    let rt = app
        .runtime
        .job(job_id, max_concurrency, Duration::from_millis(delay));
    let mut logs = Vec::new();
    let produced = match &req {
        Request::Scrape(r) => fetch_page(app, &job, &r.page, true, &rt, &task.url, &mut logs)
            .await?
            .map(|p| Produced::page(&task.url, p)),
        Request::Crawl(r) => fetch_page(
            app,
            &job,
            &r.page,
            r.respect_robots,
            &rt,
            &task.url,
            &mut logs,
        )
        .await?
        .map(|p| Produced::page(&task.url, p)),
        Request::Map(r) => map::run(app, &job, r, &rt, &mut logs).await?,
        Request::Search(r) => search::run(app, &job, r, &rt, &mut logs).await?,
        Request::Upload(r) => Some(upload::run(app, r).await?),
        Request::Check(r) => monitor::run_check(app, &job, r, &rt, &mut logs).await?,
    };
    let Some(Produced {
        doc,
        status_code,
        error,
        links,
    }) = produced
    else {
        // Cancelled while waiting for a turn.
        app.jobs.append_logs(user, job_id, &logs).await?;
        settle_cancelled(app, task, NodeStatus::Running).await?;
        return Ok(Disposition::Ack);
    };

    let key = document_key(task);
    let body = serde_json::to_vec(&doc).map_err(StoreError::new)?;
    app.blobs.put(&key, Bytes::from(body)).await?;

    if let (Request::Crawl(r), None) = (&req, &error) {
        discover(app, &job, r, &rt, task, links, &mut logs).await?;
    }

    let outcome = PageOutcome {
        status: if error.is_some() {
            NodeStatus::Failed
        } else {
            NodeStatus::Completed
        },
        status_code,
        document_key: Some(key),
    };
    let c = app
        .jobs
        .complete_node(user, job_id, &task.url, &outcome)
        .await?;
    if c.applied {
        logs.push(match (&error, status_code) {
            (None, _) if !matches!(req, Request::Scrape(_) | Request::Crawl(_)) => {
                NewLog::info(format!("{} done", job.kind.as_str()))
            }
            (None, Some(code)) => NewLog::info(format!("fetched ({code})")).at(task.url.clone()),
            (Some(e), _) => NewLog::warn(format!("failed: {} ({})", e.code.as_str(), e.message))
                .at(task.url.clone()),
            (None, None) => NewLog::info("fetched").at(task.url.clone()),
        });
    }
    app.jobs.append_logs(user, job_id, &logs).await?;
    if c.pending == 0 {
        finish(app, &job, error.as_ref()).await?;
    } else if rt.renewal_due(Duration::from_secs(60)) {
        let lease = chrono::Duration::from_std(app.config.slot_lease)
            .unwrap_or(chrono::Duration::minutes(15));
        app.jobs
            .renew_slot(user, job_id, job.kind, app.clock.now() + lease)
            .await?;
    }
    Ok(Disposition::Ack)
}

/// A page that could not be turned into a document.
pub(crate) struct Failure {
    error: JobError,
    fetched: Option<Fetched>,
}

impl Failure {
    fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Failure {
            error: JobError::new(code, message),
            fetched: None,
        }
    }
}

impl From<FetchError> for Failure {
    fn from(e: FetchError) -> Self {
        Failure::new(e.code(), e.to_string())
    }
}

pub(crate) type Page = Result<(Fetched, Built), Failure>;

/// Robots, the concurrency gates, a last cancel check, the fetch and the extraction.
/// `None` when the job was cancelled before the fetch started.
pub(crate) async fn fetch_page(
    app: &App,
    job: &Job,
    opts: &PageOptions,
    respect_robots: bool,
    rt: &JobRuntime,
    url: &str,
    logs: &mut Vec<NewLog>,
) -> StoreResult<Option<Page>> {
    let Ok(url) = Url::parse(url) else {
        return Ok(Some(Err(Failure::new(
            ErrorCode::FetchFailed,
            "invalid URL",
        ))));
    };
    let mut crawl_delay = None;
    if respect_robots {
        let robots = robots_for(app, rt, &url, logs).await;
        if let Robots::Unreachable(e) = robots.as_ref() {
            return Ok(Some(Err(Failure::from(e.clone()))));
        }
        if !robots.allows(&url) {
            return Ok(Some(Err(Failure::new(
                ErrorCode::BlockedByRobots,
                "robots.txt does not allow this page",
            ))));
        }
        crawl_delay = robots.crawl_delay();
    }
    let host = app.runtime.host(url.host_str().unwrap_or_default());
    let Some(_permit) = app.runtime.acquire(rt, &host).await else {
        return Ok(None);
    };
    // The last moment before a fetch starts: a cancelled job fetches nothing more.
    match app.jobs.get_job(&job.user_id, &job.job_id).await? {
        Some(j) if !j.status.is_final() => {}
        _ => return Ok(None),
    }
    // The job's pacing comes last, so `delay_ms` separates the requests themselves; a cancel
    // that this process handles meanwhile still stops the fetch.
    if !rt
        .pace(&url.origin().ascii_serialization(), crawl_delay)
        .await
    {
        return Ok(None);
    }
    let fetched = if opts.render {
        render(app, &url, opts, logs).await
    } else {
        fetch_politely(app, &host, &url, &opts.headers, opts.timeout_ms, logs).await
    };
    let fetched = match fetched {
        Ok(f) => f,
        Err(e) => return Ok(Some(Err(e))),
    };
    let (opts, requested, now) = (opts.clone(), url.to_string(), app.clock.now());
    let shared = Arc::new(fetched);
    let page = shared.clone();
    let built = app
        .work
        .run(app.config.work_limit, move |budget| {
            Ok(document::build(&page, &requested, &opts, now, budget))
        })
        .await
        .unwrap_or_else(|e| Err(e.into()));
    // The work thread let go of the response when it finished (or it is given up on).
    let fetched = Arc::try_unwrap(shared).unwrap_or_else(|a| (*a).clone());
    Ok(Some(match built {
        Ok(b) => Ok((fetched, b)),
        Err(error) => Err(Failure {
            error,
            fetched: Some(fetched),
        }),
    }))
}

/// [`fetch_page`] for several URLs at once (as the job's gates allow), robots obeyed; each
/// page's log lines are added in the order of `urls`. `None` when the job was cancelled.
pub(crate) async fn fetch_pages(
    app: &App,
    job: &Job,
    opts: &PageOptions,
    rt: &JobRuntime,
    urls: &[&str],
    logs: &mut Vec<NewLog>,
) -> StoreResult<Option<Vec<Page>>> {
    let fetched = futures::future::join_all(urls.iter().map(|u| async move {
        let mut l = Vec::new();
        let p = fetch_page(app, job, opts, true, rt, u, &mut l).await;
        (p, l)
    }))
    .await;
    let mut pages = Vec::with_capacity(fetched.len());
    for (page, l) in fetched {
        logs.extend(l);
        match page? {
            Some(p) => pages.push(p),
            None => return Ok(None),
        }
    }
    Ok(Some(pages))
}

/// Loads the page in the headless browser; the requests it refused are logged (S9).
async fn render(
    app: &App,
    url: &Url,
    opts: &PageOptions,
    logs: &mut Vec<NewLog>,
) -> Result<Fetched, Failure> {
    let Some(renderer) = &app.renderer else {
        return Err(Failure::new(
            ErrorCode::RenderUnavailable,
            "no headless browser renders pages here",
        ));
    };
    app.fetcher.check_destination(url).await?;
    let rendered = renderer
        .render(RenderRequest {
            url,
            headers: &opts.headers,
            timeout: Duration::from_millis(opts.timeout_ms),
            wait_for: opts.wait_for.as_deref(),
            wait_ms: opts.wait_ms,
        })
        .await;
    logs.extend(rendered.blocked.iter().map(|b| {
        NewLog::warn(format!(
            "{}: the page's request to {b} was refused",
            ErrorCode::BlockedAddress.as_str()
        ))
        .at(url.as_str())
    }));
    Ok(rendered.page?)
}

/// Fetches, backing off while the server answers 429 or 503 (C2).
async fn fetch_politely(
    app: &App,
    host: &HostGate,
    url: &Url,
    headers: &BTreeMap<String, String>,
    timeout_ms: u64,
    logs: &mut Vec<NewLog>,
) -> Result<Fetched, Failure> {
    let deadline = Duration::from_millis(timeout_ms);
    let mut attempt = 0;
    loop {
        attempt += 1;
        let f = app.fetcher.get(url, headers, deadline).await?;
        if !matches!(f.status, 429 | 503) || attempt >= BUSY_TRIES {
            return Ok(f);
        }
        let pause = f
            .retry_after
            .unwrap_or(Duration::from_secs(1 << attempt))
            .min(MAX_PAUSE);
        logs.push(
            NewLog::warn(format!(
                "server answered {}; waiting {} s before trying again",
                f.status,
                pause.as_secs()
            ))
            .at(url.as_str()),
        );
        host.back_off(pause);
        tokio::time::sleep(pause).await;
    }
}

/// The robots rules of `url`'s origin, fetched once per job and logged when first read.
pub(crate) async fn robots_for(
    app: &App,
    rt: &JobRuntime,
    url: &Url,
    logs: &mut Vec<NewLog>,
) -> Arc<Robots> {
    let origin = url.origin().ascii_serialization();
    let mut cache = rt.robots.lock().await;
    if let Some(r) = cache.get(&origin) {
        return r.clone();
    }
    let robots = Arc::new(fetch_robots(&app.fetcher, url).await);
    logs.push(NewLog::info(robots.describe()).at(format!("{origin}/robots.txt")));
    cache.insert(origin, robots.clone());
    robots
}

/// Claims the links of a crawled page (and, for the root, the sitemap's URLs) and queues the
/// ones this page owes.
async fn discover(
    app: &App,
    job: &Job,
    req: &CrawlRequest,
    rt: &JobRuntime,
    task: &Task,
    links: Vec<Url>,
    logs: &mut Vec<NewLog>,
) -> StoreResult<()> {
    let Ok(page) = Url::parse(&task.url) else {
        return Ok(());
    };
    let Ok(root) = Url::parse(&req.url) else {
        return Ok(());
    };
    let robots = if req.respect_robots {
        rt.robots
            .lock()
            .await
            .get(&page.origin().ascii_serialization())
            .cloned()
    } else {
        None
    };
    let scope = Scope::new(req, &root);
    let mut nodes = crawl::classify(&scope, req, &page, task.depth, links, robots.as_deref());
    if task.depth == 0 && req.use_sitemap {
        let (urls, read) = crawl::sitemap_urls(app, &root, robots.as_deref()).await;
        if !urls.is_empty() {
            logs.push(NewLog::info(format!(
                "sitemaps: {} URLs from {read} sitemap documents",
                urls.len()
            )));
        }
        let known: std::collections::HashSet<String> =
            nodes.iter().map(|n| n.url.clone()).collect();
        nodes.extend(
            crawl::classify(&scope, req, &page, 0, urls, robots.as_deref())
                .into_iter()
                .filter(|n| !known.contains(&n.url)),
        );
    }
    let owed = app
        .jobs
        .add_nodes(&job.user_id, &job.job_id, &task.url, &nodes, req.limit)
        .await?;
    let tasks: Vec<Task> = owed
        .into_iter()
        .filter(|n: &NewNode| n.skip.is_none())
        .map(|n| Task {
            user_id: job.user_id.clone(),
            job_id: job.job_id.clone(),
            url: n.url,
            depth: n.depth,
            render: req.page.render,
        })
        .collect();
    for chunk in tasks.chunks(100) {
        app.queue.send(chunk).await?;
    }
    Ok(())
}

/// Marks a still-pending node of a finished job as cancelled.
async fn settle_cancelled(app: &App, task: &Task, status: NodeStatus) -> StoreResult<()> {
    if status.is_pending() {
        let outcome = PageOutcome {
            status: NodeStatus::Cancelled,
            status_code: None,
            document_key: None,
        };
        app.jobs
            .complete_node(&task.user_id, &task.job_id, &task.url, &outcome)
            .await?;
    }
    Ok(())
}

/// The reason a task that used up its `attempts` is given up for.
pub fn gave_up_after(attempts: u32) -> String {
    format!("gave up after {attempts} attempts")
}

/// Records a task given up for `reason` as a failed page, so its job can end and free its slot
/// (I5). Used for a task received too often or interrupted too often, and by the dead-letter
/// queue's consumer. False, recording nothing, while another delivery still fetches the page
/// under a live lease: try again later.
pub async fn abandon(app: &App, task: &Task, reason: &str) -> StoreResult<bool> {
    if held(app, task).await {
        return Ok(false);
    }
    let Some(job) = app.jobs.get_job(&task.user_id, &task.job_id).await? else {
        return Ok(true);
    };
    let error = JobError::new(ErrorCode::Internal, reason);
    // The failure is recorded even when its document cannot be stored: that may be the
    // very fault that made the task fail.
    let key = document_key(task);
    let doc = document::failed(&task.url, None, None, &error);
    let body = serde_json::to_vec(&doc).map_err(StoreError::new)?;
    let stored = app.blobs.put(&key, Bytes::from(body)).await.is_ok();
    let outcome = PageOutcome {
        status: NodeStatus::Failed,
        status_code: None,
        document_key: stored.then_some(key),
    };
    let c = app
        .jobs
        .complete_node(&task.user_id, &task.job_id, &task.url, &outcome)
        .await?;
    if c.applied {
        app.jobs
            .append_logs(
                &task.user_id,
                &task.job_id,
                &[
                    NewLog::warn(format!("failed: INTERNAL ({})", error.message))
                        .at(task.url.clone()),
                ],
            )
            .await?;
    }
    if c.pending == 0 && !job.status.is_final() {
        finish(app, &job, Some(&error)).await?;
    }
    Ok(true)
}

/// Sets the final status of a job whose last page is done, and logs the totals. When no page
/// completed, the job fails with `page_error` (the error of the page that ended it) or else
/// the error of its first failed page.
async fn finish(app: &App, job: &Job, page_error: Option<&JobError>) -> StoreResult<()> {
    let (user, job_id) = (&job.user_id, &job.job_id);
    let Some(current) = app.jobs.get_job(user, job_id).await? else {
        return Ok(());
    };
    if current.status.is_final() {
        return Ok(());
    }
    let p = current.progress;
    let (status, error) = if p.pages_completed > 0 {
        (JobStatus::Completed, None)
    } else {
        let error = match page_error {
            Some(e) => e.clone(),
            None => first_page_error(app, job).await?,
        };
        (JobStatus::Failed, Some(error))
    };
    if !app
        .jobs
        .finish_job(user, job_id, status, error.clone(), app.clock.now())
        .await?
    {
        return Ok(());
    }
    app.runtime.forget(job_id);
    let mut skipped: BTreeMap<SkipReason, u64> = BTreeMap::new();
    if job.kind == JobKind::Crawl {
        for row in app.jobs.tree(user, job_id, u32::MAX).await? {
            if let Some(reason) = row.reason {
                *skipped.entry(reason).or_default() += 1;
            }
        }
    }
    let mut summary = format!(
        "{}: {} pages completed, {} failed",
        status.as_str(),
        p.pages_completed,
        p.pages_failed
    );
    if !skipped.is_empty() {
        let parts: Vec<String> = skipped
            .iter()
            .map(|(r, n)| format!("{} {n}", r.as_str()))
            .collect();
        summary.push_str(&format!("; links skipped: {}", parts.join(", ")));
    }
    if let Some(e) = &error {
        summary.push_str(&format!("; {}", e.message));
    }
    app.jobs
        .append_logs(user, job_id, &[NewLog::info(summary)])
        .await
}

/// The error of the job's first failed page, which becomes the job's error when no page
/// completed.
async fn first_page_error(app: &App, job: &Job) -> StoreResult<JobError> {
    let fallback = JobError::new(ErrorCode::FetchFailed, "no page could be fetched");
    let page = app.jobs.results(&job.user_id, &job.job_id, None, 1).await?;
    let Some(key) = page.entries.first().map(|e| &e.key) else {
        return Ok(fallback);
    };
    let doc: Option<serde_json::Value> = app
        .blobs
        .get(key)
        .await?
        .and_then(|b| serde_json::from_slice(&b).ok());
    Ok(doc
        .and_then(|d| serde_json::from_value(d["error"].clone()).ok())
        .unwrap_or(fallback))
}
