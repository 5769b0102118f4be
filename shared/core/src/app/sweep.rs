//! The sweep, run every few seconds by `serve` and every minute by the scheduler function. It
//! renews the slots of jobs that are alive (working, or waiting for their turn in the queue),
//! and steps in for a job that made no progress for [`Config::stall`](super::Config::stall):
//! its pages let go to the queue but never started are queued again (their tasks may have been
//! lost), up to [`MAX_REPAIRS`] times, and after that the job fails and frees its slot; a job
//! whose every page is done gets its final status.
//! Every write is conditioned on what the sweep read, so a job that moved meanwhile is left
//! alone.

use super::frontier::requeue_unstarted;
use super::settle::finish;
use super::{webhook, App};
use crate::domain::{ErrorCode, JobError, JobRequest};
use crate::ports::{ActiveJob, NewLog, StoreResult};

/// Repairs of a job without progress before it is failed.
pub const MAX_REPAIRS: u32 = 3;

/// Active jobs looked at per sweep.
const MAX_SWEPT: u32 = 10_000;

/// What one sweep did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Swept {
    /// Slots whose lease was renewed.
    pub renewed: usize,
    /// Stalled jobs whose pages were queued again.
    pub repaired: usize,
    /// Stalled jobs failed.
    pub failed: usize,
    /// Stalled jobs whose every page was done, given their final status.
    pub finished: usize,
}

/// Sweeps every active job once.
pub async fn sweep(app: &App) -> StoreResult<Swept> {
    let now = app.clock.now();
    let stall = chrono::Duration::from_std(app.config.stall()).unwrap_or(chrono::Duration::MAX);
    let lease =
        chrono::Duration::from_std(app.config.slot_lease).unwrap_or(chrono::Duration::minutes(15));
    let mut swept = Swept::default();
    for job in app.jobs.active_jobs(MAX_SWEPT).await? {
        if now - job.activity < stall {
            if job.kind.has_own_slot() {
                app.jobs
                    .renew_slot(&job.user_id, &job.job_id, job.kind, now + lease)
                    .await?;
                swept.renewed += 1;
            }
            continue;
        }
        if job.pending == 0 {
            // Every page is done; the process that did the last one stopped before the end.
            if let Some(full) = app.jobs.get_job(&job.user_id, &job.job_id).await? {
                finish(app, &full, None).await?;
                swept.finished += 1;
            }
            continue;
        }
        let minutes = (now - job.activity).num_minutes();
        if job.repairs < MAX_REPAIRS && repair(app, &job, minutes).await? {
            swept.repaired += 1;
            continue;
        }
        let error = JobError::new(
            ErrorCode::Internal,
            format!("no progress for {minutes} minutes"),
        );
        let (user, id) = (&job.user_id, &job.job_id);
        if app
            .jobs
            .fail_if_idle(user, id, job.activity, error.clone(), now)
            .await?
        {
            app.runtime.forget(id);
            let log = NewLog::warn(format!("failed: {}", error.message));
            app.jobs.append_logs(user, id, &[log]).await?;
            if let Some(full) = app.jobs.get_job(user, id).await? {
                webhook::nudge(app, &full).await;
            }
            swept.failed += 1;
        }
    }
    Ok(swept)
}

/// Queues again the pages of a stalled job that were let go but never started, and lets its
/// frontier move on; false when there was nothing to queue.
async fn repair(app: &App, active: &ActiveJob, minutes: i64) -> StoreResult<bool> {
    let (user, id) = (&active.user_id, &active.job_id);
    let Some(job) = app.jobs.get_job(user, id).await? else {
        return Ok(false);
    };
    let Ok(req) = JobRequest::of(&job) else {
        return Ok(false);
    };
    let queued = requeue_unstarted(app, &job, &req).await?;
    if queued == 0 {
        return Ok(false);
    }
    if !app
        .jobs
        .note_repair(user, id, active.activity, app.clock.now())
        .await?
    {
        // It moved meanwhile: what was queued again is fetched once all the same.
        return Ok(true);
    }
    let log = NewLog::warn(format!(
        "no progress for {minutes} minutes: {queued} pages queued again"
    ));
    app.jobs.append_logs(user, id, &[log]).await?;
    Ok(true)
}
