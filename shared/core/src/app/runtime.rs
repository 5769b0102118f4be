//! Per-process working state of jobs: a cache of each job's robots rules (the store holds them
//! for every process), and the concurrency of a job kind that fetches several pages within one
//! task (map, search). The rules that must hold across processes (a job's pages in flight,
//! its pacing, the cap per host) live in the store, not here.

use crate::domain::JobId;
use crate::engine::robots::Robots;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Jobs kept before the cache is dropped wholesale (it refills on demand).
const MAX_ENTRIES: usize = 10_000;

/// Working state shared by all workers of a process.
#[derive(Default)]
pub struct Runtime {
    jobs: Mutex<HashMap<JobId, Arc<JobRuntime>>>,
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

    /// Forgets a finished job; a page of it still waiting for its turn here will not start.
    pub(crate) fn forget(&self, id: &JobId) {
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
