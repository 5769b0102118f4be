//! Lambda entry points. Each function's `main` builds what it needs once per process (clients,
//! configuration, the application) and hands events to one of these handlers.

pub mod authorizer;
pub mod dlq;
pub mod http;
pub mod scheduler;
pub mod worker;

use crate::{Aws, Clients, Names, SqsQueue};
use ipnet::IpNet;
use sarvcrawl_core::app::model::ModelSettings;
use sarvcrawl_core::app::{App, Config};
use sarvcrawl_core::engine::fetch::{FetchConfig, Fetcher};
use sarvcrawl_core::engine::guard::AddressPolicy;
use sarvcrawl_core::ports::{Clock, Renderer, SystemClock};
use std::sync::Arc;

pub use lambda_runtime::Error;

/// JSON logs, as CloudWatch expects from a function configured with `LogFormat: JSON`.
pub fn init_tracing() {
    tracing_subscriber::fmt()
        .json()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_current_span(false)
        .without_time()
        .init();
}

/// Networks opened by `SARVCRAWL_ALLOW_NETS` (comma-separated CIDRs; empty in production).
fn allow_nets() -> Result<Vec<IpNet>, Error> {
    let raw = std::env::var("SARVCRAWL_ALLOW_NETS").unwrap_or_default();
    raw.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.parse()
                .map_err(|e| format!("SARVCRAWL_ALLOW_NETS: {s}: {e}").into())
        })
        .collect()
}

/// The configuration from the environment the template sets: `SARVCRAWL_MAX_ACTIVE_JOBS`
/// (active map, search and upload jobs per user, 10), `SARVCRAWL_MONITOR_MIN_INTERVAL`
/// (seconds, 60), `SARVCRAWL_VISIBILITY_TIMEOUT` (seconds: how long a worker holds a page, the
/// queue's visibility timeout), `SARVCRAWL_MAX_RECEIVES` (deliveries of a task before it is
/// given up, the queue's `maxReceiveCount`), `SARVCRAWL_PER_HOST_CONCURRENCY` (requests to one
/// host at once, 8), `SARVCRAWL_SLOT_LEASE` (seconds, 900), `SARVCRAWL_STALLED_MINUTES`
/// (30) and `SARVCRAWL_WEBHOOK_RETRIES` (seconds before each retry of a webhook delivery,
/// comma-separated).
fn config() -> Result<Config, Error> {
    fn number<T: std::str::FromStr>(name: &str) -> Result<Option<T>, Error>
    where
        T::Err: std::fmt::Display,
    {
        match std::env::var(name) {
            Ok(v) if !v.trim().is_empty() => v
                .trim()
                .parse()
                .map(Some)
                .map_err(|e| format!("{name}: {v}: {e}").into()),
            _ => Ok(None),
        }
    }
    let secs = std::time::Duration::from_secs;
    let mut config = Config::default();
    if let Some(max) = number("SARVCRAWL_MAX_ACTIVE_JOBS")? {
        config.max_active_jobs = max;
    }
    if let Some(min) = number("SARVCRAWL_MONITOR_MIN_INTERVAL")? {
        config.monitor_min_interval = min;
    }
    if let Some(max) = number::<u32>("SARVCRAWL_MAX_RECEIVES")? {
        config.max_receives = max.max(1);
    }
    if let Some(n) = number::<u32>("SARVCRAWL_PER_HOST_CONCURRENCY")? {
        config.per_host_concurrency = n.max(1);
    }
    if let Some(lease) = number::<u64>("SARVCRAWL_SLOT_LEASE")? {
        config.slot_lease = secs(lease.max(1));
    }
    if let Some(minutes) = number::<u64>("SARVCRAWL_STALLED_MINUTES")? {
        config.stall_after = secs(minutes.max(1) * 60);
    }
    if let Ok(v) = std::env::var("SARVCRAWL_WEBHOOK_RETRIES") {
        config.webhook_retries = sarvcrawl_core::app::webhook::parse_retries(&v)
            .map_err(|e| format!("SARVCRAWL_WEBHOOK_RETRIES: {e}"))?;
    }
    // The work queue's visibility timeout (template.yaml sets it), as `serve` has its own.
    if let Some(visibility) = number("SARVCRAWL_VISIBILITY_TIMEOUT")? {
        config = config.with_visibility(secs(visibility));
    }
    Ok(config)
}

/// Runs a function that consumes SQS batches with `handle` until the runtime stops it;
/// `handle` is given what is left of the invocation's time.
pub(crate) async fn on_sqs<H, F>(deployment: Deployment, handle: H) -> Result<(), Error>
where
    H: Fn(Arc<App>, aws_lambda_events::sqs::SqsEvent, std::time::Duration) -> F
        + Clone
        + Send
        + 'static,
    F: std::future::Future<Output = aws_lambda_events::sqs::SqsBatchResponse> + Send,
{
    let app = deployment.app.clone();
    lambda_runtime::run(lambda_runtime::service_fn(
        move |event: lambda_runtime::LambdaEvent<aws_lambda_events::sqs::SqsEvent>| {
            let (app, handle) = (app.clone(), handle.clone());
            let left = time_left(event.context.deadline);
            async move { Ok::<_, Error>(handle(app, event.payload, left).await) }
        },
    ))
    .await
}

/// What is left until `deadline`: milliseconds since the epoch, as Lambda gives it. A value
/// too small to be such an instant is the time itself (`cargo lambda watch` passes the
/// invocation's timeout there).
fn time_left(deadline: u64) -> std::time::Duration {
    /// 2001-01-01 in milliseconds since the epoch.
    const FIRST_INSTANT: u64 = 978_307_200_000;
    if deadline < FIRST_INSTANT {
        return std::time::Duration::from_millis(deadline);
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    std::time::Duration::from_millis(deadline).saturating_sub(now)
}

/// The answer to an SQS batch that names the messages to deliver again (partial batch
/// failures).
pub(crate) fn retry_these(ids: Vec<String>) -> aws_lambda_events::sqs::SqsBatchResponse {
    let mut response = aws_lambda_events::sqs::SqsBatchResponse::default();
    for id in ids {
        let mut failure = aws_lambda_events::sqs::BatchItemFailure::default();
        failure.item_identifier = id;
        response.batch_item_failures.push(failure);
    }
    response
}

/// Builds the render worker's browser for an address policy and a `User-Agent`.
pub type MakeRenderer = Box<dyn FnOnce(AddressPolicy, &str) -> Arc<dyn Renderer>>;

/// The deployment's adapters and the application over them, built from the environment.
pub struct Deployment {
    pub names: Names,
    pub clients: Clients,
    pub aws: Aws,
    pub app: Arc<App>,
}

impl Deployment {
    /// From `SARVCRAWL_*` resource names and the AWS environment.
    pub async fn from_env() -> Result<Self, Error> {
        let names = Names::from_env()?;
        let clients = Clients::from_env().await;
        Self::new(clients, names, allow_nets()?)
    }

    /// From given clients and names; `allow` opens networks blocked by default.
    pub fn new(clients: Clients, names: Names, allow: Vec<IpNet>) -> Result<Self, Error> {
        Self::build(clients, names, allow, None, Arc::new(SystemClock))
    }

    /// [`Deployment::new`] with time from `clock` (tests move a clock of their own).
    pub fn with_clock(
        clients: Clients,
        names: Names,
        allow: Vec<IpNet>,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, Error> {
        Self::build(clients, names, allow, None, clock)
    }

    /// The render worker's deployment, from the environment: it consumes the render queue
    /// (`SARVCRAWL_RENDER_QUEUE_URL`) and loads pages in the browser `make` builds.
    pub async fn rendering_from_env(make: MakeRenderer) -> Result<Self, Error> {
        let names = Names::from_env()?;
        let clients = Clients::from_env().await;
        Self::rendering(clients, names, allow_nets()?, make)
    }

    /// [`Deployment::rendering_from_env`] with given clients, names and networks.
    pub fn rendering(
        clients: Clients,
        names: Names,
        allow: Vec<IpNet>,
        make: MakeRenderer,
    ) -> Result<Self, Error> {
        Self::build(clients, names, allow, Some(make), Arc::new(SystemClock))
    }

    fn build(
        clients: Clients,
        names: Names,
        allow: Vec<IpNet>,
        make: Option<MakeRenderer>,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, Error> {
        let mut aws = Aws::new(&clients, &names, clock.clone());
        let mut fetch = FetchConfig::default();
        // `SARVCRAWL_MAX_DOCUMENT_MIB`: the largest document fetched by URL (25).
        if let Ok(mib) = std::env::var("SARVCRAWL_MAX_DOCUMENT_MIB") {
            let mib: usize = mib
                .trim()
                .parse()
                .map_err(|e| format!("SARVCRAWL_MAX_DOCUMENT_MIB: {mib}: {e}"))?;
            fetch.max_document_bytes = mib.max(1) << 20;
        }
        let fetcher = Fetcher::new(AddressPolicy::new(allow.clone()), fetch)?;
        let renderer = match make {
            Some(make) => {
                let own = names
                    .render_queue_url
                    .as_deref()
                    .ok_or("the render worker needs SARVCRAWL_RENDER_QUEUE_URL")?;
                aws.queue = Arc::new(
                    SqsQueue::new(clients.sqs.clone(), &names.queue_url)
                        .with_render_queue(Some(own))
                        .consuming(own),
                );
                Some(make(AddressPolicy::new(allow), fetcher.user_agent()))
            }
            None => None,
        };
        let search = sarvcrawl_core::engine::search::from_env()?;
        let model = sarvcrawl_core::engine::llm::from_env()?;
        let config = Config {
            render_available: names.render_queue_url.is_some(),
            ..config()?
        };
        let app = Arc::new(
            App::new(
                aws.store.clone(),
                aws.queue.clone(),
                aws.blobs.clone(),
                clock,
                Arc::new(fetcher),
                config,
            )
            .with_search(search)
            .with_model(model, ModelSettings::from_env()?)
            .with_renderer(renderer),
        );
        Ok(Deployment {
            names,
            clients,
            aws,
            app,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::time_left;
    use std::time::{Duration, SystemTime, UNIX_EPOCH};

    #[test]
    fn time_left_reads_an_instant_or_a_timeout() {
        let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
        let deadline = (now + Duration::from_secs(60)).as_millis() as u64;
        let left = time_left(deadline);
        assert!(
            left > Duration::from_secs(55) && left <= Duration::from_secs(60),
            "{left:?}"
        );
        assert_eq!(time_left(now.as_millis() as u64 - 1000), Duration::ZERO);
        assert_eq!(time_left(600_000), Duration::from_secs(600));
    }
}
