//! The scheduler: on an EventBridge schedule, starts the checks of due monitors, and fails
//! jobs that stopped making progress (their tasks lost between a claim and a send, say),
//! freeing their slots.

use crate::DynamoStore;
use sarvcrawl_core::app::App;
use sarvcrawl_core::domain::{ErrorCode, JobError, JobStatus};
use sarvcrawl_core::ports::{JobStore, NewLog, StoreResult};
use std::time::Duration;

/// Fails every active job with no progress for `stalled_after`; returns how many it failed.
pub async fn sweep(app: &App, store: &DynamoStore, stalled_after: Duration) -> StoreResult<usize> {
    let now = app.clock.now();
    let cutoff =
        now - chrono::Duration::from_std(stalled_after).unwrap_or(chrono::Duration::minutes(30));
    let mut failed = 0;
    for (user, job) in store.stalled_jobs(cutoff).await? {
        let minutes = stalled_after.as_secs() / 60;
        let error = JobError::new(
            ErrorCode::Internal,
            format!("no progress for {minutes} minutes"),
        );
        if store
            .finish_job(&user, &job, JobStatus::Failed, Some(error.clone()), now)
            .await?
        {
            store
                .append_logs(
                    &user,
                    &job,
                    &[NewLog::warn(format!("failed: {}", error.message))],
                )
                .await?;
            failed += 1;
        }
    }
    Ok(failed)
}

/// Minutes without progress after which a job is failed (`SARVCRAWL_STALLED_MINUTES`, 30).
fn stalled_after() -> Duration {
    let minutes = std::env::var("SARVCRAWL_STALLED_MINUTES")
        .ok()
        .and_then(|m| m.parse().ok())
        .unwrap_or(30u64);
    Duration::from_secs(minutes.max(1) * 60)
}

/// Runs the scheduler function until the runtime stops it.
pub async fn run() -> Result<(), super::Error> {
    super::init_tracing();
    let deployment = super::Deployment::from_env().await?;
    let app = deployment.app.clone();
    let store = deployment.aws.store.clone();
    lambda_runtime::run(lambda_runtime::service_fn(
        move |_event: lambda_runtime::LambdaEvent<serde_json::Value>| {
            let (app, store) = (app.clone(), store.clone());
            async move {
                let checks = sarvcrawl_core::app::monitor::tick(&app).await?;
                let failed = sweep(&app, &store, stalled_after()).await?;
                tracing::info!(checks, failed, "schedule done");
                Ok::<_, super::Error>(serde_json::json!({"checks": checks, "failed": failed}))
            }
        },
    ))
    .await
}
