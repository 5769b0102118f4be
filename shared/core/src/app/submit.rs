//! Submitting a job: validate, store the job with its slot and root node, queue the work.

use super::{search, App, AppError};
use crate::domain::validate::Problem;
use crate::domain::{
    CrawlRequest, ErrorCode, Job, JobError, JobKind, JobStatus, MapRequest, ScrapeRequest,
    SearchRequest, UserId,
};
use crate::engine::urls::normalise;
use crate::ports::{Claim, CreateOutcome, NewLog, SlotClaim, StoreError, Task};
use url::Url;

/// Validates the JSON `body` as a request of `kind`, stores the job and queues its first task.
/// (Uploads have a body of their own: [`super::upload::submit`].)
pub async fn submit(app: &App, user: &UserId, kind: JobKind, body: &[u8]) -> Result<Job, AppError> {
    let invalid = AppError::Invalid;
    let (request, root, render) = match kind {
        JobKind::Scrape => {
            let r = ScrapeRequest::parse(body).map_err(invalid)?;
            (serde_json::to_value(&r), root_url(&r.url)?, r.page.render)
        }
        JobKind::Crawl => {
            let r = CrawlRequest::parse(body).map_err(invalid)?;
            (serde_json::to_value(&r), root_url(&r.url)?, r.page.render)
        }
        JobKind::Map => {
            let r = MapRequest::parse(body).map_err(invalid)?;
            (serde_json::to_value(&r), root_url(&r.url)?, false)
        }
        JobKind::Search => {
            let r = SearchRequest::parse(body).map_err(invalid)?;
            if app.search.is_none() {
                return Err(AppError::SearchUnavailable);
            }
            let name = search::node_name(&r.query);
            (serde_json::to_value(&r), name, r.scrape && r.page.render)
        }
        JobKind::Upload | JobKind::Monitor => {
            return Err(AppError::Invalid(vec![Problem {
                field: "body".into(),
                problem: format!("a {} job is not submitted here", kind.as_str()),
            }]))
        }
    };
    if render && !app.config.render_available {
        return Err(AppError::RenderUnavailable);
    }
    let request = request.map_err(StoreError::new)?;
    let job = Job::new(user.clone(), kind, request, app.clock.now());
    create(app, job, root).await
}

/// The normalised form of a validated URL.
fn root_url(url: &str) -> Result<String, AppError> {
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
/// root's task.
pub(crate) async fn create(app: &App, job: Job, root: String) -> Result<Job, AppError> {
    let (user, kind, now) = (job.user_id.clone(), job.kind, job.created_at);
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
    match app.jobs.create_job(&job, &root, claim).await? {
        CreateOutcome::Created => {}
        CreateOutcome::SlotBusy { active_job_id } => {
            return Err(AppError::ConcurrencyLimit {
                limit: if kind.has_own_slot() {
                    kind.as_str()
                } else {
                    "jobs"
                },
                active_job_id,
            })
        }
    }
    let task = Task {
        user_id: user.clone(),
        job_id: job.job_id.clone(),
        url: root.clone(),
        depth: 0,
        render: super::process::renders(&job),
    };
    if let Err(e) = app.queue.send(&[task]).await {
        // Never leave a queued job that no task will ever run: fail it and free the slot.
        let error = JobError::new(ErrorCode::Internal, "the job could not be queued");
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
    app.jobs
        .append_logs(
            &user,
            &job.job_id,
            &[NewLog::info(format!("{} of {root} queued", kind.as_str())).at(root.clone())],
        )
        .await?;
    Ok(job)
}
