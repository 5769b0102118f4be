//! Processing one delivered task: read the job, take the page, run the job kind's step, store
//! what it produced, and settle the job when it was the last page. Safe to run twice for one
//! task.

use super::crawl::PagePolicy;
use super::frontier::{advance, requeue_unstarted};
use super::hold::{kept, Hold};
use super::page::{document_key, Produced, Step};
use super::polite::chrono_of;
use super::settle::{abandon, finish, gave_up_after, settle_cancelled, task_lease};
use super::{batch, crawl, map, monitor, scrape, search, upload, webhook, App};
use crate::domain::{ErrorCode, Job, JobError, JobRequest, JobStatus};
use crate::ports::{Delivery, NewLog, NodeStatus, PageOutcome, StoreError, StoreResult, Task};
use crate::stages::{timed, Stage};
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

/// [`process`] within `budget`: a task still running when its budget runs out is stopped
/// there, its page handed back, and it is delivered again after a short while. (A worker
/// function gives its tasks what is left of its invocation, less a margin.)
pub async fn process_within(app: &App, d: &Delivery, budget: Duration) -> Disposition {
    if let Ok(disposition) = tokio::time::timeout(budget, process(app, d)).await {
        return disposition;
    }
    let t = &d.task;
    tracing::warn!(job = %t.job_id, url = %t.url, "task stopped at the end of its time");
    // Best effort: the next delivery need not wait out the page's lease.
    let _ = app.jobs.release_node(&t.user_id, &t.job_id, &t.url).await;
    let delay = Disposition::Retry.delay(d.receive_count);
    if let Err(e) = app.queue.defer(&d.receipt, delay).await {
        tracing::warn!(error = %e, "could not shorten the wait before the next delivery");
    }
    Disposition::Retry
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
    if d.task.webhook {
        if d.receive_count > app.config.max_receives {
            // Its deliveries ran out on errors: a fresh task takes its place.
            return match webhook::requeue(app, &d.task).await {
                Ok(()) => Disposition::Ack,
                Err(_) => Disposition::Retry,
            };
        }
        return match webhook::pump(app, &d.task).await {
            Ok(()) => Disposition::Ack,
            Err(e) if e.is_retryable() => {
                tracing::warn!(error = %e, "webhook run will be retried");
                Disposition::Retry
            }
            Err(e) => {
                tracing::error!(error = %e, "webhook run failed for good");
                Disposition::Ack
            }
        };
    }
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
    let hold = Hold::new();
    match kept(app, d, &hold, run(app, &d.task, &hold, d.receive_count > 1)).await {
        Ok(Some(disposition)) => disposition,
        // Taken over by another delivery: this one looks again later.
        Ok(None) => Disposition::Wait,
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
/// right now: this one comes back later and finds the page done. `redelivered`: this task was
/// received before.
async fn run(app: &App, task: &Task, hold: &Hold, redelivered: bool) -> StoreResult<Disposition> {
    let (user, job_id) = (&task.user_id, &task.job_id);
    // T3: the job is re-read with the task's user; a task naming another user's job finds none.
    // A page of a running crawl (below its root) starts from this process's last read of the
    // job: whether it still runs is read just before the fetch.
    let remembered = (task.depth > 0)
        .then(|| app.runtime.running(user, job_id))
        .flatten();
    let from_memory = remembered.is_some();
    let job = match remembered {
        Some(job) => job,
        None => match app.jobs.get_job(user, job_id).await? {
            Some(job) => app.runtime.read(job),
            None => return Ok(Disposition::Ack),
        },
    };
    if job.status.is_final() {
        if let Some(node) = app.jobs.get_node(user, job_id, &task.url).await? {
            settle_cancelled(app, task, node.status).await?;
        }
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
    // The page is taken for this delivery; only when it cannot be is its node read, to tell a
    // page another delivery is fetching from one already done.
    let taken = app
        .jobs
        .start_task_node(
            user,
            job_id,
            &task.url,
            hold.holder(),
            app.clock.now() + task_lease(app),
        )
        .await?;
    if !taken {
        let Some(node) = app.jobs.get_node(user, job_id, &task.url).await? else {
            return Ok(Disposition::Ack);
        };
        // A duplicate is settled as above by the job as it stands, not as it was remembered.
        if from_memory {
            match app.jobs.get_job(user, job_id).await? {
                None => return Ok(Disposition::Ack),
                Some(j) if j.status.is_final() => {
                    settle_cancelled(app, task, node.status).await?;
                    return Ok(Disposition::Ack);
                }
                Some(_) => {}
            }
        }
        if node.status.is_pending() {
            return Ok(Disposition::Wait);
        }
        // A duplicate of a finished task: only make sure the job's end was recorded, and that
        // its frontier moves on. A task received again may have lost its process after the
        // page was done: that process may have let pages go without queuing them, so those
        // are queued again, at most once per task lease for the job (duplicates of a busy
        // job's tasks would otherwise queue its pages again and again).
        let outcome = PageOutcome {
            status: node.status,
            status_code: node.status_code,
            document_key: None,
            tokens: 0,
            log: Vec::new(),
        };
        let c = app
            .jobs
            .complete_node(user, job_id, &task.url, &outcome)
            .await?;
        if c.pending == 0 {
            finish(app, &job, None).await?;
        } else if redelivered && requeue_turn(app, &job).await? {
            requeue_unstarted(app, &job, &req).await?;
        } else {
            advance(app, &job, &req).await?;
        }
        return Ok(Disposition::Ack);
    }
    hold.taken();
    if job.status == JobStatus::Queued && app.jobs.start_job(user, job_id, app.clock.now()).await? {
        app.jobs
            .append_logs(
                user,
                job_id,
                &[NewLog::info(format!("started {}", job.kind.as_str()))],
            )
            .await?;
        webhook::nudge(app, &job).await;
    }

    let per_task = match &req {
        JobRequest::Search(_) => search::CONCURRENCY,
        JobRequest::Map(_) => map::CONCURRENCY,
        _ => 1,
    };
    let rt = app.runtime.job(job_id, per_task);
    let mut logs = Vec::new();
    // The job kind's step.
    let step: Step<Produced> = match &req {
        JobRequest::Scrape(r) => scrape::run(app, &job, r, &rt, &task.url, &mut logs).await?,
        JobRequest::Crawl(r) => {
            let policy = PagePolicy::of_crawl(r);
            crawl::run(app, &job, policy, &rt, task, &mut logs).await?
        }
        JobRequest::Batch(r) if task.depth == 0 => {
            Step::Done(batch::expand(app, &job, r, task, &mut logs).await?)
        }
        JobRequest::Batch(r) => {
            let policy = PagePolicy::of_batch(r);
            crawl::run(app, &job, policy, &rt, task, &mut logs).await?
        }
        JobRequest::Map(r) => map::run(app, &job, r, &rt, &mut logs).await?.into(),
        JobRequest::Search(r) => search::run(app, &job, r, &rt, &mut logs).await?.into(),
        JobRequest::Upload(r) => upload::run(app, &job, r).await?,
        JobRequest::Check(r) => monitor::run_check(app, &job, r, &rt, &mut logs)
            .await?
            .into(),
    };
    let Produced {
        doc,
        status_code,
        error,
        links,
        tokens,
    } = match step {
        Step::Done(produced) => produced,
        Step::Cancelled => {
            hold.settling();
            app.jobs.append_logs(user, job_id, &logs).await?;
            settle_cancelled(app, task, NodeStatus::Running).await?;
            return Ok(Disposition::Ack);
        }
        Step::Later(at) => {
            // The page waits in the queue for the start its job's pacing booked, and comes back
            // a little before it: a delivery is never on the dot, and a fetch that would start
            // late books again (which, for every page of a paced job, would go on for ever).
            hold.settling();
            app.jobs.append_logs(user, job_id, &logs).await?;
            app.jobs.release_node(user, job_id, &task.url).await?;
            let wait = (at - app.clock.now() - chrono_of(BACK_EARLY))
                .to_std()
                .unwrap_or_default();
            let again = Task {
                not_before: Some(at),
                ..task.clone()
            };
            app.queue
                .send_later(&[again], wait.min(MAX_QUEUE_DELAY))
                .await?;
            return Ok(Disposition::Ack);
        }
    };

    // What the page produced is kept through a passing store error: the page is not fetched
    // again for it.
    let key = match doc {
        Some(doc) => {
            let key = document_key(task);
            let body = Bytes::from(serde_json::to_vec(&doc).map_err(StoreError::new)?);
            timed(
                Stage::Store,
                persisted(|| app.blobs.put(&key, body.clone())),
            )
            .await?;
            Some(key)
        }
        None => None,
    };

    if let (JobRequest::Crawl(r), None) = (&req, &error) {
        crawl::discover(app, &job, r, &rt, task, links, &mut logs).await?;
    }

    if key.is_some() {
        logs.push(match (&error, status_code) {
            (None, _)
                if !matches!(
                    req,
                    JobRequest::Scrape(_) | JobRequest::Crawl(_) | JobRequest::Batch(_)
                ) =>
            {
                NewLog::info(format!("{} done", job.kind.as_str()))
            }
            (None, Some(code)) => NewLog::info(format!("fetched ({code})")).at(task.url.clone()),
            (Some(e), _) => NewLog::warn(format!("failed: {} ({})", e.code.as_str(), e.message))
                .at(task.url.clone()),
            (None, None) => NewLog::info("fetched").at(task.url.clone()),
        });
    }
    // The page's lines go with its completion: a duplicate delivery's are dropped with it.
    let outcome = PageOutcome {
        status: if error.is_some() {
            NodeStatus::Failed
        } else {
            NodeStatus::Completed
        },
        status_code,
        document_key: key,
        tokens,
        log: logs,
    };
    hold.settling();
    let c = persisted(|| app.jobs.complete_node(user, job_id, &task.url, &outcome)).await?;
    if c.pending == 0 {
        finish(app, &job, error.as_ref()).await?;
    } else if redelivered && requeue_turn(app, &job).await? {
        // The process that had this task before died with it, and may have let pages go
        // without queuing them: those are queued again (at most once per task lease).
        requeue_unstarted(app, &job, &req).await?;
    } else if c.waiting > 0 {
        advance(app, &job, &req).await?;
    }
    Ok(Disposition::Ack)
}

/// Pauses before the tries again of a write that keeps a fetched page's work.
const PERSIST_PAUSES: [Duration; 3] = [
    Duration::from_millis(200),
    Duration::from_millis(600),
    Duration::from_millis(1800),
];

/// Runs a write (safe to repeat) again after a short pause while it fails with an error that
/// may pass.
async fn persisted<T, F, Fut>(mut write: F) -> StoreResult<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = StoreResult<T>>,
{
    for pause in PERSIST_PAUSES {
        match write().await {
            Err(e) if e.is_retryable() => {
                tracing::warn!(error = %e, "a page's write failed; trying it again");
                tokio::time::sleep(pause).await;
            }
            done => return done,
        }
    }
    write().await
}

/// How long before its booked start a task put back for its job's pacing is delivered again
/// (it waits out the rest: at most [`MAX_PACE_WAIT`](super::polite::MAX_PACE_WAIT)).
const BACK_EARLY: Duration = Duration::from_secs(2);

/// Longest a task is held back in the queue at once (SQS's limit); a later start is waited
/// for in several steps.
const MAX_QUEUE_DELAY: Duration = Duration::from_secs(15 * 60);

/// Whether this process may queue the job's unstarted pages again now: one process per task
/// lease, by a place at the job's requeue gate that is never given back.
async fn requeue_turn(app: &App, job: &Job) -> StoreResult<bool> {
    let gate = format!("requeue:{}/{}", job.user_id, job.job_id);
    let holder = ulid::Ulid::new().to_string();
    let until = app.clock.now() + task_lease(app);
    Ok(app.gates.enter(&gate, 1, &holder, until).await?.is_some())
}
