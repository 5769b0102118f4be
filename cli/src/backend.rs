//! The storage a server runs on: SQLite and files on this machine, or DynamoDB, SQS and S3.

use clap::ValueEnum;
use sarvcrawl_core::ports::{BlobStore, Clock, KeyDirectory, Store, WorkQueue};
use std::any::Any;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// Where jobs, tasks and documents live.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Kind {
    /// SQLite (WAL) and files under --data-dir.
    Local,
    /// DynamoDB, SQS and S3 named by SARVCRAWL_TABLE, SARVCRAWL_QUEUE_URL, SARVCRAWL_DLQ_URL
    /// and SARVCRAWL_BUCKET (needs a build with the `aws` feature).
    Aws,
}

/// The ports of one backend.
pub struct Backend {
    /// Jobs, monitors and idempotency records.
    pub store: Arc<dyn Store>,
    pub queue: Arc<dyn WorkQueue>,
    pub blobs: Arc<dyn BlobStore>,
    /// Tasks that exhausted their deliveries, to be recorded as failed.
    pub dead_letters: Option<Arc<dyn WorkQueue>>,
    /// API keys kept by the backend itself.
    pub keys: Option<Arc<dyn KeyDirectory>>,
    /// Whatever must live as long as the backend (the data directory lock).
    _hold: Box<dyn Any + Send + Sync>,
}

/// Opens the backend; its adapters take the time from `clock`.
pub async fn open(
    kind: Kind,
    data_dir: &Path,
    visibility: Duration,
    clock: Arc<dyn Clock>,
) -> Result<Backend, String> {
    match kind {
        Kind::Local => {
            let local =
                sarvcrawl_local::open(data_dir, visibility, clock).map_err(|e| e.to_string())?;
            Ok(Backend {
                store: local.store.clone(),
                queue: local.queue.clone(),
                blobs: local.blobs.clone(),
                dead_letters: None,
                keys: None,
                _hold: Box::new(local),
            })
        }
        Kind::Aws => open_aws(visibility, clock).await,
    }
}

#[cfg(feature = "aws")]
async fn open_aws(visibility: Duration, clock: Arc<dyn Clock>) -> Result<Backend, String> {
    use sarvcrawl_aws::{Aws, Clients, Names, SqsQueue};
    let names = Names::from_env()?;
    let clients = Clients::from_env().await;
    let aws = Aws::new(&clients, &names, clock);
    let queue = SqsQueue::new(clients.sqs.clone(), &names.queue_url).with_visibility(visibility);
    let dead_letters = names
        .dlq_url
        .as_deref()
        .map(|url| Arc::new(SqsQueue::new(clients.sqs.clone(), url)) as Arc<dyn WorkQueue>);
    Ok(Backend {
        store: aws.store.clone(),
        queue: Arc::new(queue),
        blobs: aws.blobs.clone(),
        dead_letters,
        keys: Some(Arc::new(aws.keys.clone())),
        _hold: Box::new(()),
    })
}

#[cfg(not(feature = "aws"))]
async fn open_aws(_visibility: Duration, _clock: Arc<dyn Clock>) -> Result<Backend, String> {
    Err("this build has no AWS support: build with `--features aws`".into())
}
