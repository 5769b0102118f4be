//! Acknowledgements of SQS messages gathered into batch deletes: an `ack` waits a moment for
//! others to join it, so a busy worker deletes up to ten messages per request.

use crate::{SendBy, Sqs};
use sarvcrawl_core::ports::{StoreError, StoreResult};
use std::sync::OnceLock;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};

/// How long an acknowledgement waits for others to share its request.
const LINGER: Duration = Duration::from_millis(20);
/// SQS's most entries per batch delete.
const BATCH: usize = 10;

type Ack = (String, oneshot::Sender<StoreResult<()>>);

/// The batcher of one queue; its task starts with the first acknowledgement.
pub(crate) struct Acks {
    client: Sqs,
    url: String,
    sender: OnceLock<mpsc::UnboundedSender<Ack>>,
}

impl Acks {
    pub(crate) fn new(client: Sqs, url: &str) -> Self {
        Acks {
            client,
            url: url.to_string(),
            sender: OnceLock::new(),
        }
    }

    /// Deletes the message of `receipt`, in a batch with the acknowledgements that come
    /// within [`LINGER`].
    pub(crate) async fn ack(&self, receipt: &str) -> StoreResult<()> {
        let sender = self.sender.get_or_init(|| {
            let (tx, rx) = mpsc::unbounded_channel();
            tokio::spawn(deletes(self.client.clone(), self.url.clone(), rx));
            tx
        });
        let (done, answer) = oneshot::channel();
        sender
            .send((receipt.to_string(), done))
            .map_err(|_| StoreError::transient("the acknowledgement batcher stopped"))?;
        answer
            .await
            .map_err(|_| StoreError::transient("the acknowledgement batcher stopped"))?
    }
}

async fn deletes(client: Sqs, url: String, mut rx: mpsc::UnboundedReceiver<Ack>) {
    while let Some(first) = rx.recv().await {
        let mut batch = vec![first];
        let until = tokio::time::Instant::now() + LINGER;
        while batch.len() < BATCH {
            match tokio::time::timeout_at(until, rx.recv()).await {
                Ok(Some(ack)) => batch.push(ack),
                _ => break,
            }
        }
        let results = delete(&client, &url, &batch).await;
        for ((_, done), result) in batch.into_iter().zip(results) {
            let _ = done.send(result);
        }
    }
}

/// Deletes the batch's messages; the outcome of each, in order.
async fn delete(client: &Sqs, url: &str, batch: &[Ack]) -> Vec<StoreResult<()>> {
    let mut entries = Vec::with_capacity(batch.len());
    for (i, (receipt, _)) in batch.iter().enumerate() {
        match aws_sdk_sqs::types::DeleteMessageBatchRequestEntry::builder()
            .id(i.to_string())
            .receipt_handle(receipt)
            .build()
        {
            Ok(e) => entries.push(e),
            Err(e) => {
                let e = e.to_string();
                return batch
                    .iter()
                    .map(|_| Err(StoreError::permanent(e.clone())))
                    .collect();
            }
        }
    }
    let out = match client
        .delete_message_batch()
        .queue_url(url)
        .set_entries(Some(entries))
        .send_by(client.wire())
        .await
    {
        Ok(out) => out,
        Err(e) => {
            let e = crate::errors::sdk(e);
            return batch
                .iter()
                .map(|_| Err(StoreError::transient(e.to_string())))
                .collect();
        }
    };
    let failed: Vec<&str> = out.failed().iter().map(|f| f.id()).collect();
    (0..batch.len())
        .map(|i| match failed.contains(&i.to_string().as_str()) {
            true => Err(StoreError::transient("the message was not deleted")),
            false => Ok(()),
        })
        .collect()
}
