//! Per-process working state of jobs: a cache of each job's robots rules (the store holds them
//! for every process), the concurrency of a job kind that fetches several pages within one
//! task (map, search), and running crawls as last read. The rules that must hold across
//! processes (a job's pages in flight, its pacing, the cap per host, whether a job was
//! cancelled) live in the store, not here.

use crate::domain::{Job, JobId, JobKind, JobStatus, UserId};
use crate::engine::robots::Robots;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Jobs kept before the cache is dropped wholesale (it refills on demand).
const MAX_ENTRIES: usize = 10_000;

/// Running jobs kept before that cache is dropped wholesale: each holds its request (up to
/// the API's body limit), so few.
const MAX_RUNNING: usize = 64;

/// Working state shared by all workers of a process.
#[derive(Default)]
pub struct Runtime {
    jobs: Mutex<HashMap<JobId, Arc<JobRuntime>>>,
    running: Mutex<HashMap<JobId, Arc<Job>>>,
}

/// One job's state in this process.
pub(crate) struct JobRuntime {
    /// Robots rules per origin, as read from the store.
    pub(crate) robots: tokio::sync::Mutex<HashMap<String, Arc<Robots>>>,
    /// Pages of one task fetched at once.
    permits: Arc<Semaphore>,
    cancelled: AtomicBool,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Runtime {
    /// The job's state; `per_task` pages of one task are fetched at once.
    pub(crate) fn job(&self, id: &JobId, per_task: usize) -> Arc<JobRuntime> {
        let mut jobs = lock(&self.jobs);
        if jobs.len() > MAX_ENTRIES {
            jobs.clear();
        }
        jobs.entry(id.clone())
            .or_insert_with(|| {
                Arc::new(JobRuntime {
                    robots: tokio::sync::Mutex::new(HashMap::new()),
                    permits: Arc::new(Semaphore::new(per_task.max(1))),
                    cancelled: AtomicBool::new(false),
                })
            })
            .clone()
    }

    /// The user's crawl as this process last read it while it ran. What a page's task
    /// takes from it does not change while a job runs (its request, its owner); that it still
    /// runs is read again from the store just before each fetch, so a cancel is seen there.
    pub(crate) fn running(&self, user: &UserId, id: &JobId) -> Option<Arc<Job>> {
        lock(&self.running)
            .get(id)
            .filter(|j| &j.user_id == user)
            .cloned()
    }

    /// Keeps a job just read for [`Runtime::running`] when it is a running crawl.
    pub(crate) fn read(&self, job: Job) -> Arc<Job> {
        let job = Arc::new(job);
        if job.kind == JobKind::Crawl && job.status == JobStatus::Running {
            let mut running = lock(&self.running);
            if running.len() >= MAX_RUNNING {
                running.clear();
            }
            running.insert(job.job_id.clone(), job.clone());
        }
        job
    }

    /// Forgets a finished job; a page of it still waiting for its turn here will not start.
    pub(crate) fn forget(&self, id: &JobId) {
        lock(&self.running).remove(id);
        if let Some(job) = lock(&self.jobs).remove(id) {
            job.cancelled.store(true, Ordering::SeqCst);
        }
    }
}

impl JobRuntime {
    /// Waits for this task's turn to fetch one more page; `None` when the job ended in this
    /// process meanwhile.
    pub(crate) async fn turn(&self) -> Option<OwnedSemaphorePermit> {
        let permit = self.permits.clone().acquire_owned().await.ok()?;
        (!self.cancelled.load(Ordering::SeqCst)).then_some(permit)
    }

    /// Whether the job ended in this process.
    pub(crate) fn cancelled(&self) -> bool {
        self.cancelled.load(Ordering::SeqCst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(user: &str, kind: JobKind, status: JobStatus) -> Job {
        let mut job = Job::new(
            UserId(user.into()),
            kind,
            serde_json::json!({}),
            chrono::Utc::now(),
        );
        job.status = status;
        job
    }

    #[test]
    fn remembers_running_crawls_for_their_owner_only() {
        let rt = Runtime::default();
        let running = rt.read(job("u1", JobKind::Crawl, JobStatus::Running));
        let id = running.job_id.clone();
        assert!(rt.running(&UserId("u1".into()), &id).is_some());
        assert!(rt.running(&UserId("u2".into()), &id).is_none());
        rt.forget(&id);
        assert!(rt.running(&UserId("u1".into()), &id).is_none());
    }

    #[test]
    fn does_not_remember_other_jobs() {
        let rt = Runtime::default();
        let u = UserId("u1".into());
        for (kind, status) in [
            (JobKind::Crawl, JobStatus::Queued),
            (JobKind::Crawl, JobStatus::Cancelled),
            (JobKind::Crawl, JobStatus::Completed),
            (JobKind::Batch, JobStatus::Running),
            (JobKind::Scrape, JobStatus::Running),
            (JobKind::Map, JobStatus::Running),
            (JobKind::Search, JobStatus::Running),
            (JobKind::Upload, JobStatus::Running),
            (JobKind::Monitor, JobStatus::Running),
        ] {
            let j = rt.read(job("u1", kind, status));
            assert!(rt.running(&u, &j.job_id).is_none(), "{kind:?} {status:?}");
        }
    }

    #[test]
    fn keeps_at_most_a_bounded_number() {
        let rt = Runtime::default();
        for _ in 0..MAX_RUNNING * 3 {
            rt.read(job("u1", JobKind::Crawl, JobStatus::Running));
        }
        assert!(lock(&rt.running).len() <= MAX_RUNNING);
    }
}
