//! Creating a job, for every kind: store the job with its claim (slot or cap), root node and
//! first log line in one write, and queue its first task (in that same write where the store
//! shares a transaction with the queue). Each kind validates its own request first.

use super::{webhook, App, AppError};
use crate::domain::validate::Problem;
use crate::domain::{
    ErrorCode, ExtractSpec, Job, JobError, JobKind, JobRequest, JobStatus, PageOptions, UserId,
};
use crate::engine::urls::normalise;
use crate::ports::{Claim, CreateOutcome, NewLog, SlotClaim, StoreError, Task};
use url::Url;

/// Stores and queues a job of `kind` for its validated `request`, whose root node is `root`.
/// A job that renders is refused on a deployment without a browser.
pub(crate) async fn new_job<R: serde::Serialize>(
    app: &App,
    user: &UserId,
    kind: JobKind,
    request: &R,
    root: String,
    renders: bool,
) -> Result<Job, AppError> {
    render_allowed(app, renders)?;
    let request = serde_json::to_value(request).map_err(StoreError::new)?;
    let job = Job::new(user.clone(), kind, request, app.clock.now());
    if let Some(page) = JobRequest::of(&job)
        .ok()
        .as_ref()
        .and_then(JobRequest::page)
    {
        model_allowed(app, page)?;
    }
    create(app, job, root, renders).await
}

/// The log line of a job just queued: "crawl of https://... queued", or for a job whose root
/// names no page (a search, an upload, a batch) "batch queued (batch:3-urls)".
fn queued_line(kind: JobKind, root: &str) -> String {
    if root.starts_with("http://") || root.starts_with("https://") {
        format!("{} of {root} queued", kind.as_str())
    } else {
        format!("{} queued ({root})", kind.as_str())
    }
}

/// [`create`] for a job whose input was stored beforehand under `input` (an upload's bytes, a
/// batch's list): when the job is refused (a slot taken, say), the input goes too.
pub(crate) async fn create_with_input(
    app: &App,
    job: Job,
    root: String,
    renders: bool,
    input: &str,
) -> Result<Job, AppError> {
    let created = create(app, job, root, renders).await;
    if created.is_err() {
        if let Err(e) = app.blobs.delete(input).await {
            tracing::warn!(error = %e, key = input, "the input of a refused job was left behind");
        }
    }
    created
}

/// Refuses a job that renders on a deployment without a browser.
pub(crate) fn render_allowed(app: &App, renders: bool) -> Result<(), AppError> {
    if renders && !app.config.render_available {
        return Err(AppError::RenderUnavailable);
    }
    Ok(())
}

/// Refuses pages read by a language model on a deployment without one.
pub(crate) fn model_allowed(app: &App, page: &PageOptions) -> Result<(), AppError> {
    let wants_model = page.extract.as_ref().is_some_and(ExtractSpec::uses_model);
    if wants_model && app.model.is_none() {
        return Err(AppError::ExtractUnavailable);
    }
    Ok(())
}

/// The normalised form of a validated URL: a job's root node.
pub(crate) fn root_url(url: &str) -> Result<String, AppError> {
    Url::parse(url)
        .map(|u| normalise(&u).to_string())
        .map_err(|e| {
            AppError::Invalid(vec![Problem {
                field: "url".into(),
                problem: e.to_string(),
            }])
        })
}

/// Stores a new job (taking its kind's slot) with its root node named `root`, and queues the
/// root's task (for the render queue when `renders`).
pub(crate) async fn create(
    app: &App,
    job: Job,
    root: String,
    renders: bool,
) -> Result<Job, AppError> {
    let (user, kind, now) = (job.user_id.clone(), job.kind, job.created_at);
    webhook::check_destination(app, &job).await?;
    let lease =
        chrono::Duration::from_std(app.config.slot_lease).unwrap_or(chrono::Duration::minutes(15));
    let claim = if kind.has_own_slot() {
        Claim::Slot(SlotClaim {
            kind,
            lease_until: now + lease,
        })
    } else if kind.is_capped() {
        Claim::Active {
            max: app.config.max_active_jobs,
        }
    } else {
        Claim::Free
    };
    // The job, its first log line and, where the store can, its tasks in one write.
    let log = [NewLog::info(queued_line(kind, &root)).at(root.clone())];
    let mut tasks = vec![Task::new(&user, &job.job_id, root.clone(), 0, renders)];
    tasks.extend(webhook::first_run(&job));
    let (outcome, queued) = match app
        .jobs
        .create_job_queued(&job, &root, claim.clone(), &log, &tasks)
        .await?
    {
        Some(outcome) => (outcome, true),
        None => (app.jobs.create_job(&job, &root, claim, &log).await?, false),
    };
    if let CreateOutcome::SlotBusy { active_job_id } = outcome {
        return Err(AppError::ConcurrencyLimit {
            limit: if kind.has_own_slot() {
                kind.as_str()
            } else {
                "jobs"
            },
            active_job_id,
        });
    }
    if !queued {
        if let Err(e) = app.queue.send(&tasks).await {
            // Never leave a queued job that no task will ever run: fail it and free the slot.
            let error = JobError::new(ErrorCode::Internal, "the job could not be queued");
            let line = NewLog::warn(error.message.clone());
            let _ = app.jobs.append_logs(&user, &job.job_id, &[line]).await;
            app.jobs
                .finish_job(
                    &user,
                    &job.job_id,
                    JobStatus::Failed,
                    Some(error),
                    app.clock.now(),
                )
                .await?;
            return Err(AppError::Store(e));
        }
    }
    Ok(job)
}
