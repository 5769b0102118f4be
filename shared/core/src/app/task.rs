//! Processing one delivered task: read the job, take the page, run the job kind's step, store
//! what it produced, and settle the job when it was the last page. Safe to run twice for one
//! task.

use super::page::{document_key, Produced};
use super::settle::{abandon, finish, gave_up_after, settle_cancelled, task_lease};
use super::{crawl, map, monitor, scrape, search, upload, App};
use crate::domain::{ErrorCode, JobError, JobRequest, JobStatus};
use crate::ports::{Delivery, NewLog, NodeStatus, PageOutcome, StoreError, StoreResult, Task};
use bytes::Bytes;
use std::time::Duration;
use tracing::Instrument;

/// What to do with a delivery after processing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Disposition {
    /// Done (or nothing to do): acknowledge it.
    Ack,
    /// A transient failure: deliver it again soon.
    Retry,
    /// Another delivery of the same task is fetching the page: look again later.
    Wait,
}

impl Disposition {
    /// How long a task to deliver again stays invisible, growing with its deliveries: short
    /// after a failure, and long enough while waiting that a slow page (up to the longest
    /// `timeout_ms`) is done before the deliveries run out.
    pub fn delay(self, receive_count: u32) -> Duration {
        let doubling = 1u64 << receive_count.clamp(1, 8).saturating_sub(1);
        Duration::from_secs(match self {
            Disposition::Ack => 0,
            Disposition::Retry => doubling.min(30),
            Disposition::Wait => (5 * doubling).min(60),
        })
    }
}

/// Deliveries of a task that may end with their process before it is given up: a task that
/// took the server down is not run into another crash.
const MAX_INTERRUPTED: u32 = 2;

/// Processes one delivery; never panics on what the task or the page contains. A task to be
/// delivered again is made visible after [`Disposition::delay`].
pub async fn process(app: &App, d: &Delivery) -> Disposition {
    let t = &d.task;
    let span = tracing::info_span!(
        "task",
        job = %t.job_id,
        user = %t.user_id,
        url = %t.url,
        delivery = d.receive_count
    );
    process_in(app, d).instrument(span).await
}

async fn process_in(app: &App, d: &Delivery) -> Disposition {
    let disposition = attempt(app, d).await;
    if disposition != Disposition::Ack {
        let delay = disposition.delay(d.receive_count);
        if let Err(e) = app.queue.defer(&d.receipt, delay).await {
            tracing::warn!(error = %e, "could not shorten the wait before the next delivery");
        }
    }
    disposition
}

async fn attempt(app: &App, d: &Delivery) -> Disposition {
    let given_up = if d.interrupted >= MAX_INTERRUPTED {
        Some(format!(
            "gave up: the worker stopped {} times while processing this page",
            d.interrupted
        ))
    } else if d.receive_count > app.config.max_receives {
        Some(gave_up_after(d.receive_count - 1))
    } else {
        None
    };
    if let Some(reason) = given_up {
        return match abandon(app, &d.task, &reason).await {
            Ok(true) => Disposition::Ack,
            Ok(false) => Disposition::Wait,
            Err(_) => Disposition::Retry,
        };
    }
    match run(app, &d.task).await {
        Ok(disposition) => disposition,
        Err(e) => {
            let t = &d.task;
            // Best effort: the next delivery may start at once instead of waiting out the lease.
            let _ = app.jobs.release_node(&t.user_id, &t.job_id, &t.url).await;
            if e.is_retryable() {
                tracing::warn!(error = %e, "task will be retried");
                return Disposition::Retry;
            }
            // Trying again would fail the same way: the page fails now (the details stay in
            // the operator's log).
            tracing::error!(error = %e, "task failed for good");
            let reason = "gave up: a storage error that trying again would not mend";
            match abandon(app, t, reason).await {
                Ok(true) => Disposition::Ack,
                Ok(false) => Disposition::Wait,
                Err(_) => Disposition::Retry,
            }
        }
    }
}

/// Does the task's work. `Wait` when another delivery of the same task is fetching the page
/// right now: this one comes back later and finds the page done.
async fn run(app: &App, task: &Task) -> StoreResult<Disposition> {
    let (user, job_id) = (&task.user_id, &task.job_id);
    // T3: the job is re-read with the task's user; a task naming another user's job finds none.
    let Some(job) = app.jobs.get_job(user, job_id).await? else {
        return Ok(Disposition::Ack);
    };
    let Some(node) = app.jobs.get_node(user, job_id, &task.url).await? else {
        return Ok(Disposition::Ack);
    };
    if job.status.is_final() {
        settle_cancelled(app, task, node.status).await?;
        return Ok(Disposition::Ack);
    }
    let req = match JobRequest::of(&job) {
        Ok(r) => r,
        Err(e) => {
            let error = JobError::new(ErrorCode::Internal, "the stored request is unreadable");
            tracing::error!(error = %e, "unreadable request");
            app.jobs
                .finish_job(
                    user,
                    job_id,
                    JobStatus::Failed,
                    Some(error),
                    app.clock.now(),
                )
                .await?;
            return Ok(Disposition::Ack);
        }
    };
    if !node.status.is_pending() {
        // A duplicate of a finished task: only make sure the job's end was recorded.
        let outcome = PageOutcome {
            status: node.status,
            status_code: node.status_code,
            document_key: None,
        };
        let c = app
            .jobs
            .complete_node(user, job_id, &task.url, &outcome)
            .await?;
        if c.pending == 0 {
            finish(app, &job, None).await?;
        }
        return Ok(Disposition::Ack);
    }
    if job.status == JobStatus::Queued && app.jobs.start_job(user, job_id, app.clock.now()).await? {
        app.jobs
            .append_logs(
                user,
                job_id,
                &[NewLog::info(format!("started {}", job.kind.as_str()))],
            )
            .await?;
    }

    if !app
        .jobs
        .start_node(
            user,
            job_id,
            &task.url,
            &ulid::Ulid::new().to_string(),
            app.clock.now() + task_lease(app),
        )
        .await?
    {
        return Ok(Disposition::Wait);
    }
    let (max_concurrency, delay) = match &req {
        JobRequest::Crawl(r) => (r.max_concurrency as usize, r.delay_ms),
        JobRequest::Search(_) => (search::CONCURRENCY, 0),
        JobRequest::Map(_) => (map::CONCURRENCY, 0),
        _ => (1, 0),
    };
    let rt = app
        .runtime
        .job(job_id, max_concurrency, Duration::from_millis(delay));
    let mut logs = Vec::new();
    // The job kind's step.
    let produced = match &req {
        JobRequest::Scrape(r) => scrape::run(app, &job, r, &rt, &task.url, &mut logs).await?,
        JobRequest::Crawl(r) => crawl::run(app, &job, r, &rt, &task.url, &mut logs).await?,
        JobRequest::Map(r) => map::run(app, &job, r, &rt, &mut logs).await?,
        JobRequest::Search(r) => search::run(app, &job, r, &rt, &mut logs).await?,
        JobRequest::Upload(r) => Some(upload::run(app, r).await?),
        JobRequest::Check(r) => monitor::run_check(app, &job, r, &rt, &mut logs).await?,
    };
    let Some(Produced {
        doc,
        status_code,
        error,
        links,
    }) = produced
    else {
        // Cancelled while waiting for a turn.
        app.jobs.append_logs(user, job_id, &logs).await?;
        settle_cancelled(app, task, NodeStatus::Running).await?;
        return Ok(Disposition::Ack);
    };

    let key = document_key(task);
    let body = serde_json::to_vec(&doc).map_err(StoreError::new)?;
    app.blobs.put(&key, Bytes::from(body)).await?;

    if let (JobRequest::Crawl(r), None) = (&req, &error) {
        crawl::discover(app, &job, r, &rt, task, links, &mut logs).await?;
    }

    let outcome = PageOutcome {
        status: if error.is_some() {
            NodeStatus::Failed
        } else {
            NodeStatus::Completed
        },
        status_code,
        document_key: Some(key),
    };
    let c = app
        .jobs
        .complete_node(user, job_id, &task.url, &outcome)
        .await?;
    if c.applied {
        logs.push(match (&error, status_code) {
            (None, _) if !matches!(req, JobRequest::Scrape(_) | JobRequest::Crawl(_)) => {
                NewLog::info(format!("{} done", job.kind.as_str()))
            }
            (None, Some(code)) => NewLog::info(format!("fetched ({code})")).at(task.url.clone()),
            (Some(e), _) => NewLog::warn(format!("failed: {} ({})", e.code.as_str(), e.message))
                .at(task.url.clone()),
            (None, None) => NewLog::info("fetched").at(task.url.clone()),
        });
    }
    app.jobs.append_logs(user, job_id, &logs).await?;
    if c.pending == 0 {
        finish(app, &job, error.as_ref()).await?;
    } else if rt.renewal_due(Duration::from_secs(60)) {
        let lease = chrono::Duration::from_std(app.config.slot_lease)
            .unwrap_or(chrono::Duration::minutes(15));
        app.jobs
            .renew_slot(user, job_id, job.kind, app.clock.now() + lease)
            .await?;
    }
    Ok(Disposition::Ack)
}
