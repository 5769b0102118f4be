//! SarvCrawl on AWS: the core's ports over DynamoDB (jobs, slots, trees, logs, keys), SQS (work)
//! and S3 (documents); creating those resources from `template.yaml`; and, with the `lambda`
//! feature, the Lambda entry points.

mod acks;
pub mod bootstrap;
mod conflicts;
pub mod dynamo;
mod errors;
mod gates;
mod idempotency;
pub mod keys;
#[cfg(feature = "lambda")]
pub mod lambda;
mod monitors;
mod s3;
mod signing;
pub(crate) mod sqs;

pub use dynamo::DynamoStore;
pub use keys::KeyStore;
pub use s3::S3Blobs;
pub use sqs::SqsQueue;

use aws_smithy_http_client::tls;
use sarvcrawl_core::ports::Clock;
use std::sync::Arc;
use std::time::Duration;

/// The names of the deployment's resources, read from the environment.
#[derive(Debug, Clone)]
pub struct Names {
    /// `SARVCRAWL_TABLE`
    pub table: String,
    /// `SARVCRAWL_QUEUE_URL`
    pub queue_url: String,
    /// `SARVCRAWL_DLQ_URL` (only the DLQ function and bootstrap need it)
    pub dlq_url: Option<String>,
    /// `SARVCRAWL_BUCKET`
    pub bucket: String,
    /// `SARVCRAWL_RENDER_QUEUE_URL`: the render worker's queue, when the deployment has one
    /// (tasks of `render: true` pages go there).
    pub render_queue_url: Option<String>,
}

impl Names {
    /// Reads the resource names; says which variable is missing.
    pub fn from_env() -> Result<Self, String> {
        let var = |name: &str| {
            std::env::var(name)
                .ok()
                .filter(|v| !v.is_empty())
                .ok_or_else(|| format!("{name} is not set"))
        };
        Ok(Names {
            table: var("SARVCRAWL_TABLE")?,
            queue_url: var("SARVCRAWL_QUEUE_URL")?,
            dlq_url: var("SARVCRAWL_DLQ_URL").ok(),
            bucket: var("SARVCRAWL_BUCKET")?,
            render_queue_url: var("SARVCRAWL_RENDER_QUEUE_URL").ok(),
        })
    }
}

/// SDK clients, built once per process from the environment (`AWS_ENDPOINT_URL` honoured;
/// S3 uses path-style addressing when an endpoint is overridden).
#[derive(Clone)]
pub struct Clients {
    pub dynamo: aws_sdk_dynamodb::Client,
    pub sqs: aws_sdk_sqs::Client,
    pub s3: aws_sdk_s3::Client,
}

impl Clients {
    /// Clients of the environment's configuration (`AWS_ENDPOINT_URL`, region and credentials).
    pub async fn from_env() -> Self {
        Self::load(aws_config::from_env()).await
    }

    /// Clients of `loader`'s configuration, with the deployment's timeouts and retries: a call
    /// that hangs fails instead (so its task is retried), and throttling, 5xx answers and
    /// dropped connections are tried again up to [`ATTEMPTS`] times, with exponential
    /// backoff and full jitter (the SDK's standard retry mode). A retried write is one the
    /// stores made safe to repeat: conditional, idempotent, or carrying a client token. HTTPS
    /// is rustls with the ring provider.
    pub async fn load(loader: aws_config::ConfigLoader) -> Self {
        let timeouts = aws_config::timeout::TimeoutConfig::builder()
            .connect_timeout(Duration::from_secs(5))
            .operation_attempt_timeout(Duration::from_secs(20))
            .operation_timeout(Duration::from_secs(60))
            .build();
        let retries = aws_config::retry::RetryConfig::standard()
            .with_max_attempts(ATTEMPTS)
            .with_initial_backoff(Duration::from_millis(50))
            .with_max_backoff(Duration::from_secs(5));
        let https = aws_smithy_http_client::Builder::new()
            .tls_provider(tls::Provider::Rustls(
                tls::rustls_provider::CryptoMode::Ring,
            ))
            .build_https();
        let config = loader
            .http_client(https)
            .timeout_config(timeouts)
            .retry_config(retries)
            .load()
            .await;
        let overridden = std::env::var("AWS_ENDPOINT_URL").is_ok_and(|v| !v.is_empty())
            || std::env::var("AWS_ENDPOINT_URL_S3").is_ok_and(|v| !v.is_empty());
        let s3_config = aws_sdk_s3::config::Builder::from(&config)
            .force_path_style(overridden)
            .build();
        Clients {
            dynamo: aws_sdk_dynamodb::Client::new(&config),
            sqs: aws_sdk_sqs::Client::new(&config),
            s3: aws_sdk_s3::Client::from_conf(s3_config),
        }
    }
}

/// Tries of one AWS call (the first included) before its failure is reported.
pub const ATTEMPTS: u32 = 6;

/// The adapters of one deployment.
pub struct Aws {
    pub store: Arc<DynamoStore>,
    pub queue: Arc<SqsQueue>,
    pub blobs: Arc<S3Blobs>,
    pub keys: KeyStore,
}

impl Aws {
    /// The adapters over `names`' resources; every time they use comes from `clock`.
    pub fn new(clients: &Clients, names: &Names, clock: Arc<dyn Clock>) -> Self {
        Aws {
            store: Arc::new(DynamoStore::new(
                clients.dynamo.clone(),
                &names.table,
                clock,
            )),
            queue: Arc::new(
                SqsQueue::new(clients.sqs.clone(), &names.queue_url)
                    .with_render_queue(names.render_queue_url.as_deref()),
            ),
            blobs: Arc::new(S3Blobs::new(clients.s3.clone(), &names.bucket)),
            keys: KeyStore::new(clients.dynamo.clone(), &names.table),
        }
    }
}
