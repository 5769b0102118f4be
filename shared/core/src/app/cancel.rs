//! Cancelling a job: final at once, slot freed in the same write; no fetch starts after it.

use super::{query, webhook, App, AppError};
use crate::domain::{Job, JobStatus, UserId};
use crate::ports::NewLog;

/// Cancels the caller's job. Cancelling a cancelled job is a no-op; a completed or failed job
/// answers `JobFinished`.
pub async fn cancel(app: &App, user: &UserId, id: &str) -> Result<Job, AppError> {
    let job = query::job(app, user, id).await?;
    match job.status {
        JobStatus::Cancelled => return Ok(job),
        s if s.is_final() => return Err(AppError::JobFinished),
        _ => {}
    }
    let now = app.clock.now();
    let changed = app
        .jobs
        .finish_job(user, &job.job_id, JobStatus::Cancelled, None, now)
        .await?;
    let after = query::job(app, user, id).await?;
    if !changed && after.status != JobStatus::Cancelled {
        return Err(AppError::JobFinished);
    }
    if changed {
        app.runtime.forget(&job.job_id);
        app.jobs
            .append_logs(user, &job.job_id, &[NewLog::info("cancelled by the user")])
            .await?;
        webhook::nudge(app, &after).await;
    }
    Ok(after)
}
