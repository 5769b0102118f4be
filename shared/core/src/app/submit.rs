//! Submitting a job: validate, store the job with its slot and root node, queue the work.

use super::{App, AppError};
use crate::domain::validate::Problem;
use crate::domain::{
    CrawlRequest, ErrorCode, Job, JobError, JobKind, JobStatus, ScrapeRequest, UserId,
};
use crate::engine::urls::normalise;
use crate::ports::{CreateOutcome, NewLog, SlotClaim, Task};
use url::Url;

/// Validates `body` as a request of `kind`, stores the job and queues its first task.
pub async fn submit(app: &App, user: &UserId, kind: JobKind, body: &[u8]) -> Result<Job, AppError> {
    let (request, url, render) = match kind {
        JobKind::Scrape => {
            let r = ScrapeRequest::parse(body).map_err(AppError::Invalid)?;
            let render = r.page.render;
            (serde_json::to_value(&r), r.url, render)
        }
        JobKind::Crawl => {
            let r = CrawlRequest::parse(body).map_err(AppError::Invalid)?;
            let render = r.page.render;
            (serde_json::to_value(&r), r.url, render)
        }
    };
    if render && !app.config.render_available {
        return Err(AppError::RenderUnavailable);
    }
    let request = request.map_err(|e| AppError::Store(crate::ports::StoreError::new(e)))?;
    let root = Url::parse(&url)
        .map(|u| normalise(&u).to_string())
        .map_err(|e| {
            AppError::Invalid(vec![Problem {
                field: "url".into(),
                problem: e.to_string(),
            }])
        })?;
    let now = app.clock.now();
    let job = Job::new(user.clone(), kind, request, now);
    let lease =
        chrono::Duration::from_std(app.config.slot_lease).unwrap_or(chrono::Duration::minutes(15));
    let slot = SlotClaim {
        kind,
        lease_until: now + lease,
    };
    match app.jobs.create_job(&job, &root, Some(slot)).await? {
        CreateOutcome::Created => {}
        CreateOutcome::SlotBusy { active_job_id } => {
            return Err(AppError::ConcurrencyLimit {
                limit: kind.as_str(),
                active_job_id,
            })
        }
    }
    let task = Task {
        user_id: user.clone(),
        job_id: job.job_id.clone(),
        url: root.clone(),
        depth: 0,
    };
    if let Err(e) = app.queue.send(&[task]).await {
        // Never leave a queued job that no task will ever run: fail it and free the slot.
        let error = JobError::new(ErrorCode::Internal, "the job could not be queued");
        app.jobs
            .finish_job(
                user,
                &job.job_id,
                JobStatus::Failed,
                Some(error),
                app.clock.now(),
            )
            .await?;
        return Err(AppError::Store(e));
    }
    app.jobs
        .append_logs(
            user,
            &job.job_id,
            &[NewLog::info(format!("{} of {root} queued", kind.as_str())).at(root.clone())],
        )
        .await?;
    Ok(job)
}
