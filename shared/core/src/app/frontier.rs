//! A job's frontier: its claimed pages wait in the store until the job may fetch them
//! (`max_concurrency` in flight); what is let go is queued here.

use super::App;
use crate::domain::{Job, JobRequest};
use crate::ports::{NewNode, StoreResult, Task};

/// Lets the job's frontier move on as far as its `max_concurrency` allows, and queues what it
/// let go; how many pages that was.
pub(crate) async fn advance(app: &App, job: &Job, req: &JobRequest) -> StoreResult<usize> {
    let max = match req {
        JobRequest::Crawl(r) => r.max_concurrency.clamp(1, u64::from(u32::MAX)) as u32,
        JobRequest::Batch(r) => r.max_concurrency.clamp(1, u64::from(u32::MAX)) as u32,
        _ => 1,
    };
    let next = app.jobs.advance(&job.user_id, &job.job_id, max).await?;
    queue(app, job, req, next).await
}

/// Queues again the job's pages let go but never started (their tasks may have been lost
/// with a process that stopped between letting them go and queuing them), and lets its
/// frontier move on; how many pages were queued. A page queued twice is fetched once.
pub(crate) async fn requeue_unstarted(
    app: &App,
    job: &Job,
    req: &JobRequest,
) -> StoreResult<usize> {
    let lost = app
        .jobs
        .released_unstarted(&job.user_id, &job.job_id)
        .await?;
    Ok(queue(app, job, req, lost).await? + advance(app, job, req).await?)
}

/// Queues the tasks of the job's `nodes`; how many.
async fn queue(app: &App, job: &Job, req: &JobRequest, nodes: Vec<NewNode>) -> StoreResult<usize> {
    let tasks: Vec<Task> = nodes
        .into_iter()
        .map(|n| Task::new(&job.user_id, &job.job_id, n.url, n.depth, req.renders()))
        .collect();
    for chunk in tasks.chunks(100) {
        app.queue.send(chunk).await?;
    }
    Ok(tasks.len())
}
