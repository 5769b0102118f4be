//! Settling jobs: a job whose last page is done gets its final status (and frees its slot), a
//! pending page of a finished job is marked cancelled, and a task given up is recorded as a
//! failed page so its job can end.

use super::page::document_key;
use super::{document, webhook, App};
use crate::domain::{ErrorCode, Job, JobError, JobKind, JobStatus};
use crate::ports::{NewLog, NodeStatus, PageOutcome, SkipReason, StoreError, StoreResult, Task};
use bytes::Bytes;
use std::collections::BTreeMap;

/// Whether another delivery is fetching the task's page under a live lease: a task is not
/// given up while it runs. Otherwise the lease is taken here (one that ran out because its
/// worker died or panicked on the page, or the first of a page no delivery started), so the
/// task can be given up and no later copy of it takes the page for new (see
/// [`JobStore::start_task_node`](crate::ports::JobStore::start_task_node)).
pub(crate) async fn held(app: &App, task: &Task) -> bool {
    let node = app
        .jobs
        .get_node(&task.user_id, &task.job_id, &task.url)
        .await;
    if !matches!(node, Ok(Some(n)) if n.status.is_pending()) {
        return false;
    }
    let holder = ulid::Ulid::new().to_string();
    let until = app.clock.now() + task_lease(app);
    matches!(
        app.jobs
            .start_node(&task.user_id, &task.job_id, &task.url, &holder, until)
            .await,
        Ok(false)
    )
}

pub(crate) fn task_lease(app: &App) -> chrono::Duration {
    chrono::Duration::from_std(app.config.task_lease).unwrap_or(chrono::Duration::minutes(15))
}

/// Marks a still-pending node of a finished job as cancelled.
pub(crate) async fn settle_cancelled(
    app: &App,
    task: &Task,
    status: NodeStatus,
) -> StoreResult<()> {
    if status.is_pending() {
        let outcome = PageOutcome {
            status: NodeStatus::Cancelled,
            status_code: None,
            document_key: None,
            tokens: 0,
            log: Vec::new(),
        };
        app.jobs
            .complete_node(&task.user_id, &task.job_id, &task.url, &outcome)
            .await?;
    }
    Ok(())
}

/// The reason a task that used up its `attempts` is given up for.
pub fn gave_up_after(attempts: u32) -> String {
    format!("gave up after {attempts} attempts")
}

/// Records a task given up for `reason` as a failed page, so its job can end and free its slot
/// (I5). Used for a task received too often or interrupted too often, and by the dead-letter
/// queue's consumer. False, recording nothing, while another delivery still fetches the page
/// under a live lease: try again later.
pub async fn abandon(app: &App, task: &Task, reason: &str) -> StoreResult<bool> {
    if task.webhook {
        // Not a page: the job's webhook pump, which must not be lost.
        webhook::requeue(app, task).await?;
        return Ok(true);
    }
    if held(app, task).await {
        return Ok(false);
    }
    let Some(job) = app.jobs.get_job(&task.user_id, &task.job_id).await? else {
        return Ok(true);
    };
    let error = JobError::new(ErrorCode::Internal, reason);
    // The failure is recorded even when its document cannot be stored: that may be the
    // very fault that made the task fail.
    let key = document_key(task);
    let doc = document::failed(&task.url, None, None, &error);
    let body = serde_json::to_vec(&doc).map_err(StoreError::new)?;
    let stored = app.blobs.put(&key, Bytes::from(body)).await.is_ok();
    let outcome = PageOutcome {
        status: NodeStatus::Failed,
        status_code: None,
        document_key: stored.then_some(key),
        tokens: 0,
        log: vec![
            NewLog::warn(format!("failed: INTERNAL ({})", error.message)).at(task.url.clone()),
        ],
    };
    let c = app
        .jobs
        .complete_node(&task.user_id, &task.job_id, &task.url, &outcome)
        .await?;
    if job.status.is_final() {
        return Ok(true);
    }
    if c.pending == 0 {
        finish(app, &job, Some(&error)).await?;
    } else if c.waiting > 0 {
        // The page given up was in flight: the next waiting one takes its place.
        if let Ok(req) = crate::domain::JobRequest::of(&job) {
            super::frontier::advance(app, &job, &req).await?;
        }
    }
    Ok(true)
}

/// Sets the final status of a job whose last page is done, and logs the totals. When no page
/// completed, the job fails with `page_error` (the error of the page that ended it) or else
/// the error of its first failed page.
pub(crate) async fn finish(app: &App, job: &Job, page_error: Option<&JobError>) -> StoreResult<()> {
    let (user, job_id) = (&job.user_id, &job.job_id);
    let Some(current) = app.jobs.get_job(user, job_id).await? else {
        return Ok(());
    };
    if current.status.is_final() {
        return Ok(());
    }
    let p = current.page_progress();
    let (status, error) = if p.pages_completed > 0 {
        (JobStatus::Completed, None)
    } else {
        let error = match page_error {
            Some(e) => e.clone(),
            None => first_page_error(app, job).await?,
        };
        (JobStatus::Failed, Some(error))
    };
    if !app
        .jobs
        .finish_job(user, job_id, status, error.clone(), app.clock.now())
        .await?
    {
        return Ok(());
    }
    app.runtime.forget(job_id);
    webhook::nudge(app, &current).await;
    let mut skipped: BTreeMap<SkipReason, u64> = BTreeMap::new();
    if job.kind == JobKind::Crawl {
        for row in app.jobs.tree(user, job_id, u32::MAX).await? {
            if let Some(reason) = row.reason {
                *skipped.entry(reason).or_default() += 1;
            }
        }
    }
    let mut summary = format!(
        "{}: {} pages completed, {} failed",
        status.as_str(),
        p.pages_completed,
        p.pages_failed
    );
    if !skipped.is_empty() {
        let parts: Vec<String> = skipped
            .iter()
            .map(|(r, n)| format!("{} {n}", r.as_str()))
            .collect();
        summary.push_str(&format!("; links skipped: {}", parts.join(", ")));
    }
    if let Some(e) = &error {
        summary.push_str(&format!("; {}", e.message));
    }
    app.jobs
        .append_logs(user, job_id, &[NewLog::info(summary)])
        .await
}

/// The error of the job's first failed page, which becomes the job's error when no page
/// completed.
async fn first_page_error(app: &App, job: &Job) -> StoreResult<JobError> {
    let fallback = JobError::new(ErrorCode::FetchFailed, "no page could be fetched");
    let page = app.jobs.results(&job.user_id, &job.job_id, None, 1).await?;
    let Some(key) = page.entries.first().map(|e| &e.key) else {
        return Ok(fallback);
    };
    let doc: Option<serde_json::Value> = app
        .blobs
        .get(key)
        .await?
        .and_then(|b| serde_json::from_slice(&b).ok());
    Ok(doc
        .and_then(|d| serde_json::from_value(d["error"].clone()).ok())
        .unwrap_or(fallback))
}
