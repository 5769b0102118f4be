//! The work queue on SQS.

use crate::acks::Acks;
use crate::{SendBy, Sqs};
use async_trait::async_trait;
use aws_sdk_sqs::types::{MessageSystemAttributeName, SendMessageBatchRequestEntry};
use sarvcrawl_core::ports::{Delivery, StoreError, StoreResult, Task, WorkQueue};
use std::time::Duration;

/// SQS's longest delay of a message.
const MAX_DELAY_SECS: u64 = 900;

/// SQS-backed [`WorkQueue`]: tasks go to the work queue, or to the render queue when they
/// render and the deployment has one; receipts belong to the queue this process consumes.
pub struct SqsQueue {
    client: Sqs,
    /// The queue received from, acknowledged on and deferred on.
    url: String,
    /// Where new tasks go.
    work_url: String,
    render_url: Option<String>,
    visibility: Option<Duration>,
    acks: Acks,
}

impl SqsQueue {
    pub fn new(client: Sqs, url: &str) -> Self {
        let acks = Acks::new(client.clone(), url);
        SqsQueue {
            client,
            url: url.to_string(),
            work_url: url.to_string(),
            render_url: None,
            visibility: None,
            acks,
        }
    }

    /// Sends tasks of rendered pages to `url` (the render worker's queue) when given.
    pub fn with_render_queue(mut self, url: Option<&str>) -> Self {
        self.render_url = url.map(str::to_string);
        self
    }

    /// Receives from (and acknowledges and defers on) `url`, the render worker's own queue;
    /// new tasks are still sent where they belong.
    pub fn consuming(mut self, url: &str) -> Self {
        self.url = url.to_string();
        self.acks = Acks::new(self.client.clone(), url);
        self
    }

    /// Overrides the queue's visibility timeout for what this client receives.
    pub fn with_visibility(mut self, visibility: Duration) -> Self {
        self.visibility = Some(visibility);
        self
    }

    /// Sends `tasks` to `queue`, ten to a batch, each delivered no sooner than `delay`.
    async fn send_to(&self, queue: &str, tasks: &[&Task], delay: Duration) -> StoreResult<()> {
        let delay = delay.as_secs().min(MAX_DELAY_SECS) as i32;
        for chunk in tasks.chunks(10) {
            let mut entries = Vec::with_capacity(chunk.len());
            for (i, t) in chunk.iter().enumerate() {
                let body = serde_json::to_string(t).map_err(StoreError::new)?;
                entries.push(
                    SendMessageBatchRequestEntry::builder()
                        .id(i.to_string())
                        .message_body(body)
                        .delay_seconds(delay)
                        .build()
                        .map_err(StoreError::new)?,
                );
            }
            let out = self
                .client
                .send_message_batch()
                .queue_url(queue)
                .set_entries(Some(entries))
                .send_by(self.client.wire())
                .await
                .map_err(crate::errors::sdk)?;
            if !out.failed().is_empty() {
                return Err(StoreError::transient(format!(
                    "{} messages not sent",
                    out.failed().len()
                )));
            }
        }
        Ok(())
    }
}

/// Parses a message body into a task (shared with the Lambda worker).
pub(crate) fn parse_task(body: &str) -> Option<Task> {
    serde_json::from_str(body).ok()
}

#[async_trait]
impl WorkQueue for SqsQueue {
    async fn send(&self, tasks: &[Task]) -> StoreResult<()> {
        self.send_later(tasks, Duration::ZERO).await
    }

    async fn send_later(&self, tasks: &[Task], delay: Duration) -> StoreResult<()> {
        let (render, work): (Vec<&Task>, Vec<&Task>) = tasks
            .iter()
            .partition(|t| t.render && self.render_url.is_some());
        self.send_to(&self.work_url, &work, delay).await?;
        if let Some(url) = &self.render_url {
            self.send_to(url, &render, delay).await?;
        }
        Ok(())
    }

    async fn receive(&self, max: usize, wait: Duration) -> StoreResult<Vec<Delivery>> {
        let out = self
            .client
            .receive_message()
            .queue_url(&self.url)
            .max_number_of_messages(max.clamp(1, 10) as i32)
            .wait_time_seconds(wait.as_secs().min(20) as i32)
            .set_visibility_timeout(self.visibility.map(|v| v.as_secs().min(43_200) as i32))
            .message_system_attribute_names(MessageSystemAttributeName::ApproximateReceiveCount)
            // (The wire adds a long poll's wait to the call's timeouts.)
            .send_by(self.client.wire())
            .await
            .map_err(crate::errors::sdk)?;
        if out.messages().is_empty() && wait.as_secs() == 0 {
            // A short poll found nothing: wait out the rest instead of asking again at once.
            tokio::time::sleep(wait).await;
        }
        let mut deliveries = Vec::new();
        for m in out.messages() {
            let Some(receipt) = m.receipt_handle() else {
                continue;
            };
            let receive_count = m
                .attributes()
                .and_then(|a| a.get(&MessageSystemAttributeName::ApproximateReceiveCount))
                .and_then(|c| c.parse().ok())
                .unwrap_or(1);
            match m.body().and_then(parse_task) {
                Some(task) => deliveries.push(Delivery {
                    receipt: receipt.to_string(),
                    receive_count,
                    interrupted: 0,
                    task,
                }),
                None => {
                    tracing::error!("dropping an unreadable message");
                    self.ack(receipt).await?;
                }
            }
        }
        Ok(deliveries)
    }

    async fn ack(&self, receipt: &str) -> StoreResult<()> {
        self.acks.ack(receipt).await
    }

    async fn defer(&self, receipt: &str, delay: Duration) -> StoreResult<()> {
        self.extend(receipt, delay).await
    }

    async fn extend(&self, receipt: &str, visibility: Duration) -> StoreResult<()> {
        self.client
            .change_message_visibility()
            .queue_url(&self.url)
            .receipt_handle(receipt)
            .visibility_timeout(visibility.as_secs().min(43_200) as i32)
            .send_by(self.client.wire())
            .await
            .map_err(crate::errors::sdk)?;
        Ok(())
    }
}
