//! Use cases, one module each. They take an [`App`] and plain values and never see HTTP,
//! SQLite or AWS types.

pub mod artifact;
pub mod batch;
pub mod cancel;
pub mod crawl;
mod document;
#[cfg(test)]
mod fakes;
mod frontier;
mod hold;
pub mod map;
pub mod model;
pub mod monitor;
mod page;
mod places;
mod polite;
pub mod query;
mod runtime;
pub mod scrape;
pub mod search;
pub mod settle;
mod submit;
pub mod sweep;
pub mod task;
pub mod upload;
pub mod webhook;
pub mod worker;

use crate::domain::validate::Problem;
use crate::domain::JobId;
use crate::engine::fetch::Fetcher;
use crate::engine::pool::WorkPool;
use crate::ports::{
    BlobStore, Clock, Gates, IdempotencyStore, JobStore, LanguageModel, MonitorStore, Renderer,
    SearchProvider, SigningKeyStore, Store, StoreError, WorkQueue,
};
use std::sync::Arc;
use std::time::Duration;

pub use runtime::Runtime;

/// Tunables of the application.
#[derive(Debug, Clone)]
pub struct Config {
    /// Whether `render: true` is accepted: a browser renders here, or render tasks go to
    /// workers that have one.
    pub render_available: bool,
    /// How long a per-user slot stays held unless the sweep renews it (it does while the job
    /// makes progress or waits for its turn); longer than the sweep's interval.
    pub slot_lease: Duration,
    /// How long an active job may go without progress before the sweep queues its pages
    /// again, and in the end fails it; never less than [`Config::task_lease`] and a minute,
    /// so a page held by a worker that died comes back first.
    pub stall_after: Duration,
    /// Receives after which a task is given up and its page recorded as failed.
    pub max_receives: u32,
    /// How long a worker holds a page it fetches before another may take it over; at least
    /// the work queue's visibility timeout.
    pub task_lease: Duration,
    /// Requests to one host at once, across all jobs and every process of the deployment.
    pub per_host_concurrency: u32,
    /// Largest result JSON returned inline by `GET /api/jobs/{id}`.
    pub inline_result_bytes: usize,
    /// Active jobs per user of the kinds without a slot of their own (map, search, upload).
    pub max_active_jobs: u32,
    /// Shortest interval between a monitor's checks, in seconds.
    pub monitor_min_interval: u64,
    /// Longest the CPU-heavy work of one item (extracting a page or a document, a monitor's
    /// diff) may take before the item fails with `TIMEOUT`.
    pub work_limit: Duration,
    /// The pauses before each retry of a webhook delivery (jittered; a `Retry-After` of the
    /// receiver's may lengthen one); a delivery is tried once more than there are pauses.
    pub webhook_retries: Vec<Duration>,
}

impl Config {
    /// The configuration of workers whose queue redelivers an unacknowledged task after
    /// `visibility`: a page is held that long before another delivery may take it over.
    pub fn with_visibility(mut self, visibility: Duration) -> Self {
        self.task_lease = visibility;
        self
    }

    /// The stall after which the sweep steps in: [`Config::stall_after`], but at least the
    /// task lease and a minute.
    pub fn stall(&self) -> Duration {
        self.stall_after
            .max(self.task_lease + Duration::from_secs(60))
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            render_available: false,
            slot_lease: Duration::from_secs(15 * 60),
            stall_after: Duration::from_secs(30 * 60),
            max_receives: 5,
            task_lease: Duration::from_secs(15 * 60),
            per_host_concurrency: 8,
            inline_result_bytes: 1024 * 1024,
            max_active_jobs: 10,
            monitor_min_interval: 60,
            work_limit: Duration::from_secs(10),
            webhook_retries: webhook::RETRY_SCHEDULE
                .iter()
                .map(|s| Duration::from_secs(*s))
                .collect(),
        }
    }
}

/// The ports, the fetcher and the configuration: everything a use case needs.
pub struct App {
    pub jobs: Arc<dyn JobStore>,
    pub monitors: Arc<dyn MonitorStore>,
    pub idempotency: Arc<dyn IdempotencyStore>,
    pub gates: Arc<dyn Gates>,
    pub signing: Arc<dyn SigningKeyStore>,
    pub queue: Arc<dyn WorkQueue>,
    pub blobs: Arc<dyn BlobStore>,
    pub clock: Arc<dyn Clock>,
    pub fetcher: Arc<Fetcher>,
    pub config: Config,
    /// The web search engine of `search` jobs, when one is configured.
    pub search: Option<Arc<dyn SearchProvider>>,
    /// The headless browser of this process's workers, when it has one.
    pub renderer: Option<Arc<dyn Renderer>>,
    /// The language model of `extract` with a prompt or a JSON Schema, when one is configured.
    pub model: Option<model::Model>,
    pub(crate) runtime: Runtime,
    /// Places at hosts this process keeps between its requests.
    pub(crate) places: Arc<places::Places>,
    /// The threads that parse, extract and diff, off the async runtime.
    pub(crate) work: WorkPool,
}

impl App {
    pub fn new(
        store: Arc<dyn Store>,
        queue: Arc<dyn WorkQueue>,
        blobs: Arc<dyn BlobStore>,
        clock: Arc<dyn Clock>,
        fetcher: Arc<Fetcher>,
        config: Config,
    ) -> Self {
        App {
            jobs: store.clone(),
            monitors: store.clone(),
            idempotency: store.clone(),
            signing: store.clone(),
            gates: store,
            queue,
            blobs,
            clock,
            fetcher,
            config,
            search: None,
            renderer: None,
            model: None,
            runtime: Runtime::default(),
            places: Arc::default(),
            work: WorkPool::per_core(),
        }
    }

    /// Gives back the places at hosts this process keeps for its next requests: at the end of
    /// a Lambda invocation (which may not run again for a long while), or of a worker.
    pub async fn give_back_places(&self) {
        self.places.give_back_all(&self.gates).await;
    }

    /// Uses `provider` for `search` jobs.
    pub fn with_search(mut self, provider: Option<Arc<dyn SearchProvider>>) -> Self {
        self.search = provider;
        self
    }

    /// Reads pages for `extract` with a prompt or a JSON Schema with `llm`, within `settings`.
    pub fn with_model(
        mut self,
        llm: Option<Arc<dyn LanguageModel>>,
        settings: model::ModelSettings,
    ) -> Self {
        self.model = llm.map(|l| model::Model::new(l, settings));
        self
    }

    /// Renders `render: true` pages with `renderer`.
    pub fn with_renderer(mut self, renderer: Option<Arc<dyn Renderer>>) -> Self {
        self.renderer = renderer;
        self
    }
}

/// Why a use case refused or failed; mapped to API.md's codes at the HTTP edge.
#[derive(Debug, thiserror::Error)]
pub enum AppError {
    #[error("the request is invalid")]
    Invalid(Vec<Problem>),
    #[error("not found")]
    NotFound,
    #[error("no such route")]
    NoRoute,
    #[error("the job has already finished")]
    JobFinished,
    #[error("an active {limit} job already exists")]
    ConcurrencyLimit {
        limit: &'static str,
        active_job_id: JobId,
    },
    #[error("rendering is not available on this deployment")]
    RenderUnavailable,
    #[error("no search provider is configured")]
    SearchUnavailable,
    #[error("no language model is configured for extraction")]
    ExtractUnavailable,
    #[error("the body is larger than {0} bytes")]
    TooLarge(usize),
    #[error("{0}")]
    UnsupportedMediaType(String),
    #[error("the Idempotency-Key was used with another request")]
    IdempotencyKeyReused,
    #[error(transparent)]
    Store(#[from] StoreError),
}
