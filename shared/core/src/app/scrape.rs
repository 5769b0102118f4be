//! A scrape job: one page, fetched (or rendered) and turned into one document.

use super::page::{fetch_page, Pacing, Produced, Step};
use super::runtime::JobRuntime;
use super::{submit, App, AppError};
use crate::domain::{Job, JobKind, ScrapeRequest, UserId};
use crate::ports::{NewLog, StoreResult};

/// `POST /api/scrape`: validates the body, stores the job and queues its page.
pub async fn submit(app: &App, user: &UserId, body: &[u8]) -> Result<Job, AppError> {
    let req = ScrapeRequest::parse(body).map_err(AppError::Invalid)?;
    let root = submit::root_url(&req.url)?;
    submit::new_job(app, user, JobKind::Scrape, &req, root, req.page.render).await
}

/// The scrape's one step: its page, robots.txt obeyed.
pub(crate) async fn run(
    app: &App,
    job: &Job,
    req: &ScrapeRequest,
    rt: &JobRuntime,
    url: &str,
    logs: &mut Vec<NewLog>,
) -> StoreResult<Step<Produced>> {
    let pacing = Pacing::default();
    Ok(fetch_page(app, job, &req.page, true, rt, url, pacing, logs)
        .await?
        .map(|p| Produced::page(url, p)))
}
