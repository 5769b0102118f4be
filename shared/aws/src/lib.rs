//! SarvCrawl on AWS: the core's ports over DynamoDB (jobs, slots, trees, logs, keys), SQS (work)
//! and S3 (documents); creating those resources from `template.yaml`; and, with the `lambda`
//! feature, the Lambda entry points.

pub mod bootstrap;
pub mod dynamo;
mod errors;
mod idempotency;
pub mod keys;
#[cfg(feature = "lambda")]
pub mod lambda;
mod monitors;
mod s3;
pub(crate) mod sqs;

pub use dynamo::DynamoStore;
pub use keys::KeyStore;
pub use s3::S3Blobs;
pub use sqs::SqsQueue;

use sarvcrawl_core::ports::Clock;
use std::sync::Arc;

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
    pub async fn from_env() -> Self {
        // A call that hangs must fail instead, so its task is retried.
        let timeouts = aws_config::timeout::TimeoutConfig::builder()
            .connect_timeout(std::time::Duration::from_secs(5))
            .operation_attempt_timeout(std::time::Duration::from_secs(20))
            .operation_timeout(std::time::Duration::from_secs(60))
            .build();
        let config = aws_config::from_env().timeout_config(timeouts).load().await;
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
