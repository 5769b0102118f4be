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
mod wire;

pub use dynamo::DynamoStore;
pub use keys::KeyStore;
pub use s3::S3Blobs;
pub use sqs::SqsQueue;
pub use wire::{Dynamo, SendBy, Sqs, Wire, WithWire};

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

/// SDK clients with the wire that sends the stores' requests, built once per process from the
/// environment (`AWS_ENDPOINT_URL` honoured; S3 uses path-style addressing when an endpoint is
/// overridden).
#[derive(Clone)]
pub struct Clients {
    pub dynamo: Dynamo,
    pub sqs: Sqs,
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
    /// backoff and full jitter (the SDK's standard retry mode, and the wire's). A retried write
    /// is one the stores made safe to repeat: conditional, idempotent, or carrying a client
    /// token. HTTPS is rustls with the ring provider.
    pub async fn load(loader: aws_config::ConfigLoader) -> Self {
        Self::load_with(loader, &Timeouts::DEPLOYED).await
    }

    async fn load_with(loader: aws_config::ConfigLoader, limits: &Timeouts) -> Self {
        let timeouts = aws_config::timeout::TimeoutConfig::builder()
            .connect_timeout(limits.connect)
            .operation_attempt_timeout(limits.attempt)
            .operation_timeout(limits.operation)
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
        // DynamoDB's and SQS's answers are read whole within the call, which the attempt
        // timeout bounds: the SDK's watch for stalled streams (a timer polled along every
        // body) is left to S3, whose documents are streamed.
        let dynamo_config = aws_sdk_dynamodb::config::Builder::from(&config)
            .stalled_stream_protection(
                aws_sdk_dynamodb::config::StalledStreamProtectionConfig::disabled(),
            )
            .build();
        let sqs_config = aws_sdk_sqs::config::Builder::from(&config)
            .stalled_stream_protection(
                aws_sdk_sqs::config::StalledStreamProtectionConfig::disabled(),
            )
            .build();
        let wire = wire::Wire::new(
            &config,
            &wire::Limits {
                attempts: ATTEMPTS,
                connect: limits.connect,
                attempt: limits.attempt,
                operation: limits.operation,
            },
        );
        Clients {
            dynamo: Dynamo::new(
                aws_sdk_dynamodb::Client::from_conf(dynamo_config),
                wire.clone(),
            ),
            sqs: Sqs::new(aws_sdk_sqs::Client::from_conf(sqs_config), wire.clone()),
            s3: aws_sdk_s3::Client::from_conf(s3_config),
        }
    }
}

/// Tries of one AWS call (the first included) before its failure is reported.
pub const ATTEMPTS: u32 = 6;

/// How long an AWS call may take: to connect, per try (the answer's body read whole
/// included), and in all.
struct Timeouts {
    connect: Duration,
    attempt: Duration,
    operation: Duration,
}

impl Timeouts {
    const DEPLOYED: Timeouts = Timeouts {
        connect: Duration::from_secs(5),
        attempt: Duration::from_secs(20),
        operation: Duration::from_secs(60),
    };
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
            blobs: Arc::new(S3Blobs::new(
                clients.s3.clone(),
                clients.dynamo.wire().clone(),
                &names.bucket,
            )),
            keys: KeyStore::new(clients.dynamo.clone(), &names.table),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::SendBy;
    use aws_sdk_dynamodb::types::AttributeValue;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A DynamoDB answer whose body stops halfway fails within the timeouts (a try's, then the
    /// call's with its retries), through the SDK and through the wire: the clients go without
    /// the SDK's stalled-stream watch, so nothing else would end the call.
    #[tokio::test]
    async fn an_answer_that_stalls_halfway_fails_within_the_timeouts() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let mut open = Vec::new();
            while let Ok((mut conn, _)) = listener.accept().await {
                let mut request = [0u8; 4096];
                let _ = conn.read(&mut request).await;
                let head = "HTTP/1.1 200 OK\r\ncontent-type: application/x-amz-json-1.0\r\n\
                            content-length: 1000\r\n\r\n{\"Item\": {";
                let _ = conn.write_all(head.as_bytes()).await;
                open.push(conn);
            }
        });
        let loader = aws_config::defaults(aws_config::BehaviorVersion::latest())
            .endpoint_url(format!("http://{addr}"))
            .region(aws_config::Region::new("us-east-1"))
            .credentials_provider(aws_sdk_dynamodb::config::Credentials::new(
                "id", "secret", None, None, "test",
            ));
        let limits = Timeouts {
            connect: Duration::from_secs(1),
            attempt: Duration::from_millis(200),
            operation: Duration::from_secs(2),
        };
        let clients = Clients::load_with(loader, &limits).await;
        let request = clients
            .dynamo
            .get_item()
            .table_name("t")
            .key("PK", AttributeValue::S("k".into()));
        let answer = tokio::time::timeout(Duration::from_secs(10), request.clone().send()).await;
        assert!(
            matches!(answer, Ok(Err(_))),
            "a stalled answer must fail within the call's timeouts (SDK)"
        );
        let started = std::time::Instant::now();
        let call = request.send_by(clients.dynamo.wire());
        let answer = tokio::time::timeout(Duration::from_secs(10), call).await;
        assert!(
            matches!(
                answer,
                Ok(Err(aws_sdk_dynamodb::error::SdkError::TimeoutError(_)))
            ),
            "a stalled answer must fail within the call's timeouts (wire): {answer:?}"
        );
        assert!(started.elapsed() < Duration::from_secs(3));
    }
}
