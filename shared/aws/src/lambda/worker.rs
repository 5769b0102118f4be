//! The worker: an SQS batch of page tasks, processed concurrently; transient failures are
//! reported as batch item failures so only those messages come back.

use crate::sqs::parse_task;
use aws_lambda_events::sqs::{SqsBatchResponse, SqsEvent};
use sarvcrawl_core::app::task::{process_within, Disposition};
use sarvcrawl_core::app::App;
use sarvcrawl_core::ports::Delivery;
use std::time::Duration;

/// What each task of a batch leaves of its invocation's time: enough to hand its page back
/// and answer before the function times out.
pub const MARGIN: Duration = Duration::from_secs(15);

/// Processes a batch within `time` (what is left of the invocation) and names the messages
/// to retry. Every task ends [`MARGIN`] before `time` runs out, done or handed back.
pub async fn handle(app: &App, event: SqsEvent, time: Duration) -> SqsBatchResponse {
    let budget = time.saturating_sub(MARGIN);
    let work = event.records.into_iter().map(|m| async move {
        let id = m.message_id.clone().unwrap_or_default();
        let Some(task) = m.body.as_deref().and_then(parse_task) else {
            tracing::error!(message = %id, "dropping an unreadable task");
            return None;
        };
        let delivery = Delivery {
            receipt: m.receipt_handle.clone().unwrap_or_default(),
            receive_count: m
                .attributes
                .get("ApproximateReceiveCount")
                .and_then(|c| c.parse().ok())
                .unwrap_or(1),
            interrupted: 0,
            task,
        };
        (process_within(app, &delivery, budget).await != Disposition::Ack).then_some(id)
    });
    let again: Vec<String> = futures::future::join_all(work)
        .await
        .into_iter()
        .flatten()
        .collect();
    // The invocation may be the container's last for a long while.
    app.give_back_places().await;
    super::retry_these(again)
}

/// Runs the worker function until the runtime stops it.
pub async fn run() -> Result<(), super::Error> {
    super::init_tracing();
    serve(super::Deployment::from_env().await?).await
}

/// Runs the render worker function (the render queue's tasks, pages loaded in the browser
/// `make` builds) until the runtime stops it.
pub async fn run_rendering(make: super::MakeRenderer) -> Result<(), super::Error> {
    super::init_tracing();
    serve(super::Deployment::rendering_from_env(make).await?).await
}

async fn serve(deployment: super::Deployment) -> Result<(), super::Error> {
    super::on_sqs(deployment, |app, event, time| async move {
        handle(&app, event, time).await
    })
    .await
}
