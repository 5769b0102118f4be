//! The narrow traits the core needs from the outside world. The embedded server implements
//! them over SQLite and files; the AWS deployment over DynamoDB, SQS and S3.
//!
//! Every method that can race is specified as one conditional write, so any adapter that
//! honours the contract keeps the per-user slot, URL claims, counters and final status exact.

use crate::domain::{
    Job, JobError, JobId, JobKind, JobStatus, Monitor, MonitorId, ScreenshotOptions, SigningKeys,
    UserId,
};
use crate::engine::fetch::{FetchError, Fetched};
use async_trait::async_trait;
use bytes::Bytes;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;

/// A storage, queue, blob or provider failure. It keeps the error that caused it, and says
/// whether trying again may help: a task that met a transient one is retried later, one that
/// met a permanent one is given up at once.
#[derive(Debug, thiserror::Error)]
#[error("storage: {message}")]
pub struct StoreError {
    message: String,
    retryable: bool,
    #[source]
    source: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
}

impl StoreError {
    /// The failure `cause`, which may pass (the network, a throttle, a conflict, a timeout).
    pub fn new(cause: impl std::error::Error + Send + Sync + 'static) -> Self {
        StoreError {
            message: cause.to_string(),
            retryable: true,
            source: Some(Box::new(cause)),
        }
    }

    /// A failure described by `message` that may pass.
    pub fn transient(message: impl Into<String>) -> Self {
        StoreError {
            message: message.into(),
            retryable: true,
            source: None,
        }
    }

    /// A failure that trying again will not mend (data that cannot be read, a refused
    /// request).
    pub fn permanent(message: impl Into<String>) -> Self {
        StoreError {
            message: message.into(),
            retryable: false,
            source: None,
        }
    }

    /// The same failure, marked as one that trying again will not mend.
    pub fn for_good(mut self) -> Self {
        self.retryable = false;
        self
    }

    /// Whether trying again may succeed.
    pub fn is_retryable(&self) -> bool {
        self.retryable
    }
}

pub type StoreResult<T> = Result<T, StoreError>;

/// The per-user slot a job takes when it is created.
#[derive(Debug, Clone)]
pub struct SlotClaim {
    /// `scrape` or `crawl`: each user holds at most one slot of each.
    pub kind: JobKind,
    /// Until when the slot counts as held unless renewed.
    pub lease_until: DateTime<Utc>,
}

/// What a new job counts against: its kind's own slot, the user's cap on active jobs of the
/// capped kinds, or nothing.
#[derive(Debug, Clone)]
pub enum Claim {
    Slot(SlotClaim),
    /// At most `max` active jobs of the capped kinds per user.
    Active {
        max: u32,
    },
    /// Nothing (a monitor's check: its monitor runs one at a time).
    Free,
}

/// What `create_job` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CreateOutcome {
    Created,
    /// Another job holds the slot (or the user's active jobs reached the cap; this is one of
    /// them); nothing was written.
    SlotBusy {
        active_job_id: JobId,
    },
}

/// Status of one URL in a job's discovery tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NodeStatus {
    Queued,
    Running,
    Completed,
    Failed,
    Skipped,
    Cancelled,
}

impl NodeStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            NodeStatus::Queued => "queued",
            NodeStatus::Running => "running",
            NodeStatus::Completed => "completed",
            NodeStatus::Failed => "failed",
            NodeStatus::Skipped => "skipped",
            NodeStatus::Cancelled => "cancelled",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "queued" => NodeStatus::Queued,
            "running" => NodeStatus::Running,
            "completed" => NodeStatus::Completed,
            "failed" => NodeStatus::Failed,
            "skipped" => NodeStatus::Skipped,
            "cancelled" => NodeStatus::Cancelled,
            _ => return None,
        })
    }

    /// Still owes work: counts in `pages_queued`.
    pub fn is_pending(self) -> bool {
        matches!(self, NodeStatus::Queued | NodeStatus::Running)
    }
}

/// Why a discovered URL is not fetched.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SkipReason {
    Robots,
    Filtered,
    External,
    Depth,
    Limit,
}

impl SkipReason {
    pub fn as_str(self) -> &'static str {
        match self {
            SkipReason::Robots => "robots",
            SkipReason::Filtered => "filtered",
            SkipReason::External => "external",
            SkipReason::Depth => "depth",
            SkipReason::Limit => "limit",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "robots" => SkipReason::Robots,
            "filtered" => SkipReason::Filtered,
            "external" => SkipReason::External,
            "depth" => SkipReason::Depth,
            "limit" => SkipReason::Limit,
            _ => return None,
        })
    }
}

/// A URL found while working on a job: to fetch (`skip: None`) or to record as skipped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewNode {
    /// The normalised URL; a job records each once.
    pub url: String,
    pub depth: u32,
    pub skip: Option<SkipReason>,
}

impl NewNode {
    /// Why it is skipped once the job's `limit` of claimed URLs is reached: its own reason, or
    /// `limit` for a URL that would have been fetched.
    pub fn skip_at_limit(&self, limit_reached: bool) -> Option<SkipReason> {
        match self.skip {
            None if limit_reached => Some(SkipReason::Limit),
            other => other,
        }
    }
}

/// A node of the discovery tree as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeRow {
    pub url: String,
    pub parent: Option<String>,
    pub depth: u32,
    pub status: NodeStatus,
    pub status_code: Option<u16>,
    pub reason: Option<SkipReason>,
}

/// How fetching one page ended.
#[derive(Debug, Clone)]
pub struct PageOutcome {
    /// `Completed`, `Failed` or `Cancelled`.
    pub status: NodeStatus,
    pub status_code: Option<u16>,
    /// Where the page's document is stored, if one was written.
    pub document_key: Option<String>,
    /// Tokens a language model took to read the page, added to the job's.
    pub tokens: u64,
    /// The page's log lines: written with the completion (in its transaction on SQLite), and
    /// only when it applies, so a duplicate delivery adds none.
    pub log: Vec<NewLog>,
}

/// What `complete_node` saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Completion {
    /// This call moved the node out of `queued`/`running` (false for a duplicate delivery).
    pub applied: bool,
    /// Nodes of the job still queued or running after this call.
    pub pending: u64,
    /// Of those, the ones in the frontier, waiting for [`JobStore::advance`].
    pub waiting: u64,
}

/// Severity of a job log entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LogLevel {
    Info,
    Warn,
    Error,
}

impl LogLevel {
    /// Its name, as stored and shown.
    pub fn as_str(self) -> &'static str {
        match self {
            LogLevel::Info => "info",
            LogLevel::Warn => "warn",
            LogLevel::Error => "error",
        }
    }

    /// The level a stored name stands for (`info` for anything unknown).
    pub fn parse(s: &str) -> Self {
        match s {
            "warn" => LogLevel::Warn,
            "error" => LogLevel::Error,
            _ => LogLevel::Info,
        }
    }
}

/// A time as the stores keep it: RFC 3339 in UTC, to the microsecond.
pub fn stored_time(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
}

/// A time kept by [`stored_time`].
pub fn parse_stored_time(s: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(s)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

/// A log entry to append.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewLog {
    pub level: LogLevel,
    pub message: String,
    pub url: Option<String>,
}

impl NewLog {
    pub fn info(message: impl Into<String>) -> Self {
        NewLog {
            level: LogLevel::Info,
            message: message.into(),
            url: None,
        }
    }

    pub fn warn(message: impl Into<String>) -> Self {
        NewLog {
            level: LogLevel::Warn,
            message: message.into(),
            url: None,
        }
    }

    pub fn at(mut self, url: impl Into<String>) -> Self {
        self.url = Some(url.into());
        self
    }
}

/// A stored log entry, as `/logs` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogEntry {
    pub seq: u64,
    pub at: DateTime<Utc>,
    pub level: LogLevel,
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
}

/// Filters and paging of a user's job list.
#[derive(Debug, Clone, Default)]
pub struct JobQuery {
    pub kind: Option<JobKind>,
    pub status: Option<JobStatus>,
    pub limit: u32,
    /// Only jobs older than this one (the previous page's last job).
    pub before: Option<JobId>,
}

/// One stored document of a job, and the cursor that reads on after it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResultEntry {
    pub key: String,
    pub cursor: String,
}

/// A page of the stored document references of a job.
#[derive(Debug, Clone, Default)]
pub struct ResultPage {
    pub entries: Vec<ResultEntry>,
    /// Opaque: pass it back to read the next page.
    pub next_cursor: Option<String>,
    pub total: u64,
}

/// An active job, as the sweeper sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActiveJob {
    pub user_id: UserId,
    pub job_id: JobId,
    pub kind: JobKind,
    /// Its last progress: created, started, a page done, or repaired.
    pub activity: DateTime<Utc>,
    /// Pages queued or running.
    pub pending: u64,
    /// Repairs since its last page was done.
    pub repairs: u32,
}

/// Most URLs one job's tree records (SECURITY.md V4); `add_nodes` drops what comes after.
pub const MAX_NODES_PER_JOB: u64 = 200_000;

/// Jobs, per-user slots, discovery trees, results index and logs.
#[async_trait]
pub trait JobStore: Send + Sync {
    /// Writes the job and its root node (queued, depth 0) and takes its claim, all in one
    /// atomic write. A held slot whose lease has not run out, or a full cap, makes it write
    /// nothing. `finish_job` gives the claim back. `log`: the job's first log lines, written
    /// with it where the store can (in the same transaction on SQLite); a store that writes
    /// them apart may lose them, never the job.
    async fn create_job(
        &self,
        job: &Job,
        root_url: &str,
        claim: Claim,
        log: &[NewLog],
    ) -> StoreResult<CreateOutcome>;

    /// [`JobStore::create_job`] with the job's first `tasks` sent to the work queue in the same
    /// write, for a store that shares its transactions with the queue (the embedded server's):
    /// one write a submit, and never a job without its tasks. `None` from a store that cannot,
    /// having written nothing: the caller creates the job, then sends the tasks.
    async fn create_job_queued(
        &self,
        job: &Job,
        root_url: &str,
        claim: Claim,
        log: &[NewLog],
        tasks: &[Task],
    ) -> StoreResult<Option<CreateOutcome>> {
        let _ = (job, root_url, claim, log, tasks);
        Ok(None)
    }

    /// The job, if it exists and belongs to `user`.
    async fn get_job(&self, user: &UserId, job: &JobId) -> StoreResult<Option<Job>>;

    /// The job's status alone, read as [`JobStore::get_job`] reads it: the check just before
    /// each fetch, which needs neither the request nor the counters.
    async fn job_status(&self, user: &UserId, job: &JobId) -> StoreResult<Option<JobStatus>> {
        Ok(self.get_job(user, job).await?.map(|j| j.status))
    }

    /// The user's jobs, newest first.
    async fn list_jobs(&self, user: &UserId, query: &JobQuery) -> StoreResult<Vec<Job>>;

    /// `queued -> running`; false when the job was not queued.
    async fn start_job(&self, user: &UserId, job: &JobId, at: DateTime<Utc>) -> StoreResult<bool>;

    /// Sets a final status once and frees the job's slot in the same write; false when the job
    /// was already final.
    async fn finish_job(
        &self,
        user: &UserId,
        job: &JobId,
        status: JobStatus,
        error: Option<JobError>,
        at: DateTime<Utc>,
    ) -> StoreResult<bool>;

    /// Extends the lease of the slot held by `job`.
    async fn renew_slot(
        &self,
        user: &UserId,
        job: &JobId,
        kind: JobKind,
        lease_until: DateTime<Utc>,
    ) -> StoreResult<()>;

    /// Records URLs found on `parent`. A URL the job knows already is left alone. A URL to
    /// fetch is claimed (`queued`, counted in `pages_discovered`) while fewer than `limit` are
    /// claimed, and recorded as skipped for `limit` after that. A claimed URL joins the job's
    /// frontier: it is fetched once [`JobStore::advance`] lets it go. Returns the URLs this
    /// call claimed.
    async fn add_nodes(
        &self,
        user: &UserId,
        job: &JobId,
        parent: &str,
        nodes: &[NewNode],
        limit: u64,
    ) -> StoreResult<Vec<NewNode>>;

    /// Lets URLs of the job's frontier go to the queue, in discovery order, while fewer than
    /// `max_in_flight` of its URLs are let go and not yet done (the root counts from the
    /// start); returns those let go now, which the caller queues. Nothing while the job is
    /// final. Racing callers never let one URL go twice or exceed the bound.
    async fn advance(
        &self,
        user: &UserId,
        job: &JobId,
        max_in_flight: u32,
    ) -> StoreResult<Vec<NewNode>>;

    /// URLs let go to the queue that no worker has started: queued again when a job stalls,
    /// in case their tasks were lost.
    async fn released_unstarted(&self, user: &UserId, job: &JobId) -> StoreResult<Vec<NewNode>>;

    /// Jobs not yet final, at most `max`, with their last progress.
    async fn active_jobs(&self, max: u32) -> StoreResult<Vec<ActiveJob>>;

    /// Fails a job whose last progress is still `activity` (nothing happened since the caller
    /// looked), freeing its slot; false when it progressed or ended meanwhile.
    async fn fail_if_idle(
        &self,
        user: &UserId,
        job: &JobId,
        activity: DateTime<Utc>,
        error: JobError,
        at: DateTime<Utc>,
    ) -> StoreResult<bool>;

    /// Counts a repair of a job whose last progress is still `activity` and makes `at` its
    /// last progress; false when it progressed or ended meanwhile.
    async fn note_repair(
        &self,
        user: &UserId,
        job: &JobId,
        activity: DateTime<Utc>,
        at: DateTime<Utc>,
    ) -> StoreResult<bool>;

    /// Takes a node for fetching on behalf of `holder` (one attempt's id): `queued`, or
    /// `running` under a lease that ran out or that `holder` already holds (a retried write),
    /// becomes `running` until `lease_until`. False when another attempt holds it or it is
    /// done, so a duplicated task does not fetch the page again.
    async fn start_node(
        &self,
        user: &UserId,
        job: &JobId,
        url: &str,
        holder: &str,
        lease_until: DateTime<Utc>,
    ) -> StoreResult<bool>;

    /// [`start_node`](Self::start_node) for a task's own page, by a caller that has read the
    /// job under the task's user and found it not final. A store may then take a node that
    /// was never leased as pending without reading it: a node leaves `queued` without a lease
    /// only when its job has ended (which the job's read just before a fetch catches) or
    /// through `abandon`, which takes the lease first.
    async fn start_task_node(
        &self,
        user: &UserId,
        job: &JobId,
        url: &str,
        holder: &str,
        lease_until: DateTime<Utc>,
    ) -> StoreResult<bool> {
        self.start_node(user, job, url, holder, lease_until).await
    }

    /// Gives a `running` node back (`queued`) after a failed attempt, so its next delivery
    /// need not wait out the lease.
    async fn release_node(&self, user: &UserId, job: &JobId, url: &str) -> StoreResult<()>;

    /// Moves a node from queued/running to its outcome, counts it once, and indexes its
    /// document. A node already done is left alone (`applied: false`).
    async fn complete_node(
        &self,
        user: &UserId,
        job: &JobId,
        url: &str,
        outcome: &PageOutcome,
    ) -> StoreResult<Completion>;

    /// The node, if the job has it.
    async fn get_node(&self, user: &UserId, job: &JobId, url: &str)
        -> StoreResult<Option<NodeRow>>;

    /// The discovery tree in discovery order, at most `max` nodes.
    async fn tree(&self, user: &UserId, job: &JobId, max: u32) -> StoreResult<Vec<NodeRow>>;

    /// Document keys of the job in completion order, from after `cursor` (a `next_cursor` of
    /// an earlier page; anything else yields an empty page).
    async fn results(
        &self,
        user: &UserId,
        job: &JobId,
        cursor: Option<&str>,
        limit: u32,
    ) -> StoreResult<ResultPage>;

    async fn append_logs(&self, user: &UserId, job: &JobId, entries: &[NewLog]) -> StoreResult<()>;

    /// Log entries with `seq` greater than `after`, in order.
    async fn logs(
        &self,
        user: &UserId,
        job: &JobId,
        after: Option<u64>,
        limit: u32,
    ) -> StoreResult<Vec<LogEntry>>;
}

/// One unit of work: fetch one page of one job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Task {
    pub user_id: UserId,
    pub job_id: JobId,
    pub url: String,
    pub depth: u32,
    /// Whether the page is loaded in a headless browser; such tasks may go to a queue of
    /// their own.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub render: bool,
    /// The start booked for this page's fetch under its job's pacing, when the task was put
    /// back to wait for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_before: Option<DateTime<Utc>>,
    /// Not a page: the job's webhook deliveries are due (`url` is empty).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub webhook: bool,
}

impl Task {
    /// The task of page `url` (at `depth`) of `user`'s `job`.
    pub fn new(
        user: &UserId,
        job: &JobId,
        url: impl Into<String>,
        depth: u32,
        render: bool,
    ) -> Self {
        Task {
            user_id: user.clone(),
            job_id: job.clone(),
            url: url.into(),
            depth,
            render,
            not_before: None,
            webhook: false,
        }
    }
}

/// A received task; `receipt` acknowledges it.
#[derive(Debug, Clone)]
pub struct Delivery {
    pub receipt: String,
    /// How many times this task has been received, this time included.
    pub receive_count: u32,
    /// How many earlier deliveries ended with their process while they ran (the process
    /// died, or was killed, mid-task). Queues that cannot tell (SQS) say 0.
    pub interrupted: u32,
    pub task: Task,
}

/// At-least-once work queue with a visibility timeout: a received task that is not
/// acknowledged in time is delivered again.
#[async_trait]
pub trait WorkQueue: Send + Sync {
    async fn send(&self, tasks: &[Task]) -> StoreResult<()>;
    /// Sends `tasks` to be delivered no sooner than `delay` from now (at most 15 minutes).
    async fn send_later(&self, tasks: &[Task], delay: Duration) -> StoreResult<()>;
    /// Up to `max` tasks, waiting at most `wait` for the first.
    async fn receive(&self, max: usize, wait: Duration) -> StoreResult<Vec<Delivery>>;
    async fn ack(&self, receipt: &str) -> StoreResult<()>;
    /// Makes a received task visible again after `delay` rather than at the end of its
    /// visibility timeout (a retry that should not wait long).
    async fn defer(&self, receipt: &str, delay: Duration) -> StoreResult<()>;
    /// Keeps a received task that is still being worked on invisible for `visibility` from
    /// now, so that it is not delivered again meanwhile.
    async fn extend(&self, receipt: &str, visibility: Duration) -> StoreResult<()>;
}

/// Documents, keyed by path-like strings.
#[async_trait]
pub trait BlobStore: Send + Sync {
    async fn put(&self, key: &str, body: Bytes) -> StoreResult<()>;
    async fn get(&self, key: &str) -> StoreResult<Option<Bytes>>;
    /// Removes a blob; a missing one is no error.
    async fn delete(&self, key: &str) -> StoreResult<()>;

    /// A URL where a client may PUT the blob `key` itself (exactly `bytes` bytes of
    /// `content_type`) until `ttl` has passed; `None` for a store that takes no such uploads
    /// (files: the API takes the bytes itself).
    async fn upload_url(
        &self,
        _key: &str,
        _content_type: &str,
        _bytes: u64,
        _ttl: Duration,
    ) -> StoreResult<Option<String>> {
        Ok(None)
    }

    /// A URL where a client may GET the blob `key` itself until `ttl` has passed; `None` for
    /// a store that gives no such links (files: the API answers the bytes), and for a blob
    /// that does not exist.
    async fn download_url(&self, _key: &str, _ttl: Duration) -> StoreResult<Option<String>> {
        Ok(None)
    }
}

/// API keys kept outside the process (the AWS table): key -> user.
#[async_trait]
pub trait KeyDirectory: Send + Sync {
    /// The user a presented key belongs to.
    async fn user_of(&self, api_key: &str) -> StoreResult<Option<UserId>>;
    /// Whether any key has ever been stored.
    async fn has_keys(&self) -> StoreResult<bool>;
}

/// Monitors, each written whole and only over the version it was read at (optimistic
/// concurrency: a PATCH, a scheduler's claim and a check's result never overwrite each other).
#[async_trait]
pub trait MonitorStore: Send + Sync {
    /// Stores a new monitor (version 0).
    async fn insert_monitor(&self, m: &Monitor) -> StoreResult<()>;
    /// The monitor, if it exists and belongs to `user`.
    async fn get_monitor(&self, user: &UserId, id: &MonitorId) -> StoreResult<Option<Monitor>>;
    /// The user's monitors, newest first.
    async fn list_monitors(&self, user: &UserId) -> StoreResult<Vec<Monitor>>;
    /// Writes `m` as version `m.version + 1` if the stored version is still `m.version`;
    /// false when another write came first (or the monitor is gone).
    async fn save_monitor(&self, m: &Monitor) -> StoreResult<bool>;
    /// Deletes the user's monitor; false when there was none.
    async fn delete_monitor(&self, user: &UserId, id: &MonitorId) -> StoreResult<bool>;
    /// Monitors whose [`Monitor::due_at`] is at or before `now`, soonest first, at most `max`.
    async fn due_monitors(&self, now: DateTime<Utc>, max: u32) -> StoreResult<Vec<Monitor>>;

    /// Applies `change` to the user's monitor and writes it, again over a fresh read when
    /// another write came first; `None` when the monitor does not exist.
    async fn update_monitor(
        &self,
        user: &UserId,
        id: &MonitorId,
        change: &mut (dyn for<'m> FnMut(&'m mut Monitor) + Send),
    ) -> StoreResult<Option<Monitor>> {
        for _ in 0..10 {
            let Some(mut m) = self.get_monitor(user, id).await? else {
                return Ok(None);
            };
            change(&mut m);
            if self.save_monitor(&m).await? {
                m.version += 1;
                return Ok(Some(m));
            }
        }
        Err(StoreError::transient(
            "the monitor kept changing; try again",
        ))
    }
}

/// What an `Idempotency-Key` stands for when a submit presents it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reservation {
    /// The key was free (or its record had expired): this submit runs and completes it.
    Reserved,
    /// Another submit with the key is running; `hash` is the fingerprint of its request.
    Pending { hash: String },
    /// A submit with the key answered `response`; `hash` is its request's fingerprint.
    Done { hash: String, response: String },
}

/// Records of `Idempotency-Key`s, per user, each expiring at its `expires_at`.
#[async_trait]
pub trait IdempotencyStore: Send + Sync {
    /// Takes `key` for a request with fingerprint `hash` until `until` unless a live record
    /// exists, which it returns instead. Atomic: of racing submits exactly one reserves.
    async fn reserve(
        &self,
        user: &UserId,
        key: &str,
        hash: &str,
        now: DateTime<Utc>,
        until: DateTime<Utc>,
    ) -> StoreResult<Reservation>;
    /// Stores the answer of the reserving submit, kept until `until`.
    async fn complete(
        &self,
        user: &UserId,
        key: &str,
        response: &str,
        until: DateTime<Utc>,
    ) -> StoreResult<()>;
    /// Frees a reservation whose submit did not create a job.
    async fn release(&self, user: &UserId, key: &str) -> StoreResult<()>;
}

/// Rules that hold across every process of a deployment, kept in the store: gates that at most
/// `capacity` holders pass at once (each place leased, so a holder that dies frees it when its
/// lease runs out), and starts spaced in time.
#[async_trait]
pub trait Gates: Send + Sync {
    /// Takes a free place of `gate` (one of `capacity`; a place whose lease ran out is free)
    /// for `holder` until `until`; the place taken, or `None` when every place is held. A
    /// holder that loses the race for a free place looks again, so racing holders fill every
    /// free place.
    async fn enter(
        &self,
        gate: &str,
        capacity: u32,
        holder: &str,
        until: DateTime<Utc>,
    ) -> StoreResult<Option<u32>>;

    /// Gives back the place `holder` took (nothing when its lease ran out and another took it).
    async fn leave(&self, gate: &str, place: u32, holder: &str) -> StoreResult<()>;

    /// Books a start under `pace`: the earliest time at or after `now` that is at least
    /// `spacing` after the start booked before it. Racing callers get distinct starts.
    async fn book(
        &self,
        pace: &str,
        spacing: Duration,
        now: DateTime<Utc>,
    ) -> StoreResult<DateTime<Utc>>;
}

/// Each user's webhook signing keys, written only over the version read.
#[async_trait]
pub trait SigningKeyStore: Send + Sync {
    /// The user's keys, if any were made.
    async fn signing_keys(&self, user: &UserId) -> StoreResult<Option<SigningKeys>>;
    /// Stores `keys` as version `keys.version + 1` if the stored version is `keys.version`
    /// (or, for version 0, if the user has none); false when another write came first.
    async fn save_signing_keys(&self, user: &UserId, keys: &SigningKeys) -> StoreResult<bool>;
}

/// Everything a backend stores besides documents: jobs, monitors, idempotency records, gates
/// and signing keys.
pub trait Store: JobStore + MonitorStore + IdempotencyStore + Gates + SigningKeyStore {}

impl<T: JobStore + MonitorStore + IdempotencyStore + Gates + SigningKeyStore> Store for T {}

/// One hit of a web search.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SearchHit {
    pub url: String,
    pub title: String,
    pub snippet: String,
}

/// A web search engine.
#[async_trait]
pub trait SearchProvider: Send + Sync {
    /// Its name, for logs.
    fn name(&self) -> &'static str;
    /// At most `limit` hits for `query`, best first.
    async fn search(&self, query: &str, limit: usize) -> Result<Vec<SearchHit>, StoreError>;
}

/// A page to load in a headless browser.
#[derive(Debug, Clone)]
pub struct RenderRequest<'a> {
    pub url: &'a url::Url,
    /// Extra request headers of the page's own request.
    pub headers: &'a BTreeMap<String, String>,
    /// Deadline of the whole render, waits included.
    pub timeout: Duration,
    /// A CSS selector to wait for after the load.
    pub wait_for: Option<&'a str>,
    /// A pause after the load (and after `wait_for`).
    pub wait_ms: u64,
    /// A screenshot to take once the page is ready, in a window of its size.
    pub screenshot: Option<ScreenshotOptions>,
}

/// What a render produced: the page's DOM after its scripts ran, as a response whose body is
/// that HTML, its screenshot when one was asked for (or why none could be taken), and the
/// URLs of the requests the page made that the address guard refused.
#[derive(Debug)]
pub struct Rendered {
    pub page: Result<Fetched, FetchError>,
    pub screenshot: Option<Result<Screenshot, JobError>>,
    pub blocked: Vec<String>,
}

/// A PNG image of a rendered page.
#[derive(Debug, Clone)]
pub struct Screenshot {
    pub png: Bytes,
    pub width: u32,
    pub height: u32,
}

/// A headless browser that loads pages with their scripts, every request it makes checked by
/// the address guard (SECURITY.md S9).
#[async_trait]
pub trait Renderer: Send + Sync {
    async fn render(&self, req: RenderRequest<'_>) -> Rendered;
}

/// One message of a chat with a language model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChatMessage {
    pub role: String,
    pub content: String,
}

impl ChatMessage {
    pub fn new(role: &str, content: impl Into<String>) -> Self {
        ChatMessage {
            role: role.into(),
            content: content.into(),
        }
    }
}

/// A language model's answer and what it cost.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChatAnswer {
    pub content: String,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
}

/// The operator's language model (an OpenAI-compatible chat-completions endpoint).
#[async_trait]
pub trait LanguageModel: Send + Sync {
    /// Its name, for documents and logs.
    fn name(&self) -> &str;
    /// The model's answer to `messages`; why there is none otherwise.
    async fn chat(&self, messages: &[ChatMessage]) -> Result<ChatAnswer, String>;
}

/// The time, injectable for tests.
pub trait Clock: Send + Sync {
    fn now(&self) -> DateTime<Utc>;
}

/// The system clock.
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }
}
