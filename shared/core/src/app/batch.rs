//! A batch job: `POST /api/batch/scrape` ([`submit`]) scrapes a list of URLs as one job. Its
//! root node stands for the list: its task claims every URL into the job's frontier
//! ([`expand`]), which lets them go `max_concurrency` at a time; each URL is then fetched as a
//! crawl's page is, robots.txt obeyed per origin, its links not followed.

use super::page::Produced;
use super::{submit, App, AppError};
use crate::domain::{BatchBody, BatchRequest, Job, JobKind, UserId};
use crate::engine::urls::normalise;
use crate::ports::{NewLog, NewNode, StoreError, StoreResult, Task};
use bytes::Bytes;
use std::collections::HashSet;

/// A batch stored and queued, and the invalid URLs its body asked to ignore.
pub struct Submitted {
    pub job: Job,
    pub invalid_urls: Vec<String>,
}

/// `POST /api/batch/scrape`: validates the body, stores its distinct URLs (in their order,
/// normalised as a crawl's links are) beside the job, and stores and queues the job.
pub async fn submit(app: &App, user: &UserId, body: &[u8]) -> Result<Submitted, AppError> {
    let body = BatchBody::parse(body).map_err(AppError::Invalid)?;
    submit::render_allowed(app, body.page.render)?;
    submit::model_allowed(app, &body.page)?;
    let mut seen = HashSet::new();
    let urls: Vec<String> = body
        .urls
        .iter()
        .map(|u| normalise(u).to_string())
        .filter(|u| seen.insert(u.clone()))
        .collect();
    let mut job = Job::new(
        user.clone(),
        JobKind::Batch,
        serde_json::Value::Null,
        app.clock.now(),
    );
    let req = BatchRequest {
        url_count: urls.len() as u64,
        duplicates: (body.urls.len() - urls.len()) as u64,
        invalid: body.invalid_urls.len() as u64,
        urls_key: format!("{}/{}/batch-urls.json", user, job.job_id),
        respect_robots: body.respect_robots,
        max_concurrency: body.max_concurrency,
        delay_ms: body.delay_ms,
        page: body.page,
        webhook: body.webhook,
    };
    job.request = serde_json::to_value(&req).map_err(StoreError::new)?;
    let list = serde_json::to_vec(&urls).map_err(StoreError::new)?;
    app.blobs.put(&req.urls_key, Bytes::from(list)).await?;
    let root = format!("batch:{}-urls", req.url_count);
    let job = submit::create_with_input(app, job, root, req.page.render, &req.urls_key).await?;
    Ok(Submitted {
        job,
        invalid_urls: body.invalid_urls,
    })
}

/// The root's step: claims every URL of the list as a child of the root. Safe to run again
/// (a URL the job knows is left alone). The root has no document.
pub(crate) async fn expand(
    app: &App,
    job: &Job,
    req: &BatchRequest,
    task: &Task,
    logs: &mut Vec<NewLog>,
) -> StoreResult<Produced> {
    let list = app
        .blobs
        .get(&req.urls_key)
        .await?
        .ok_or_else(|| StoreError::permanent("the batch's list of URLs is missing"))?;
    let urls: Vec<String> = serde_json::from_slice(&list).map_err(|e| {
        StoreError::permanent(format!("the batch's list of URLs is unreadable: {e}"))
    })?;
    let nodes: Vec<NewNode> = urls
        .into_iter()
        .map(|url| NewNode {
            url,
            depth: 1,
            skip: None,
        })
        .collect();
    // The limit counts the root, as a crawl's does.
    let limit = req.url_count + 1;
    app.jobs
        .add_nodes(&job.user_id, &job.job_id, &task.url, &nodes, limit)
        .await?;
    let mut line = format!("{} URLs to fetch", nodes.len());
    if req.duplicates > 0 {
        line.push_str(&format!(", {} duplicates fetched once", req.duplicates));
    }
    if req.invalid > 0 {
        line.push_str(&format!(", {} invalid URLs ignored", req.invalid));
    }
    logs.push(NewLog::info(line));
    Ok(Produced::nothing())
}
