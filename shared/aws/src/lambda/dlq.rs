//! The dead-letter consumer: a task that exhausted its deliveries is recorded as a failed page,
//! so its job ends and frees the user's slot.

use crate::sqs::parse_task;
use aws_lambda_events::sqs::{SqsBatchResponse, SqsEvent};
use sarvcrawl_core::app::settle::{abandon, gave_up_after};
use sarvcrawl_core::app::App;

/// Records each dead letter; names the ones to see again (their recording failed, or their
/// page is still being fetched under a live lease).
pub async fn handle(app: &App, event: SqsEvent) -> SqsBatchResponse {
    let mut again = Vec::new();
    for m in event.records {
        let id = m.message_id.clone().unwrap_or_default();
        let Some(task) = m.body.as_deref().and_then(parse_task) else {
            tracing::error!(message = %id, "dropping an unreadable dead letter");
            continue;
        };
        let reason = gave_up_after(app.config.max_receives);
        let recorded = match abandon(app, &task, &reason).await {
            Ok(recorded) => recorded,
            Err(e) => {
                tracing::warn!(error = %e, "dead letter not recorded; will retry");
                false
            }
        };
        if !recorded {
            again.push(id);
        }
    }
    super::retry_these(again)
}

/// Runs the dead-letter function until the runtime stops it.
pub async fn run() -> Result<(), super::Error> {
    super::init_tracing();
    let deployment = super::Deployment::from_env().await?;
    super::on_sqs(deployment, |app, event, _time| async move {
        handle(&app, event).await
    })
    .await
}
