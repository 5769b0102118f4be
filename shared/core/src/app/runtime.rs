//! Per-process working state of jobs: robots.txt cache, concurrency gates and pacing.
//! Nothing here is needed for correctness across processes; it makes one process polite.

use crate::domain::JobId;
use crate::engine::robots::Robots;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

/// Entries kept before the caches are dropped wholesale (they refill on demand).
const MAX_ENTRIES: usize = 10_000;

/// Working state shared by all workers of a process.
pub struct Runtime {
    jobs: Mutex<HashMap<JobId, Arc<JobRuntime>>>,
    hosts: Mutex<HashMap<String, Arc<HostGate>>>,
    per_host: usize,
}

/// One job's state in this process.
pub(crate) struct JobRuntime {
    /// Robots rules per origin, fetched once per job.
    pub(crate) robots: tokio::sync::Mutex<HashMap<String, Arc<Robots>>>,
    /// The job's `max_concurrency`.
    permits: Arc<Semaphore>,
    delay: Duration,
    next_start: Mutex<Instant>,
    /// When the next fetch from an origin with a `Crawl-delay` may start.
    origin_next: Mutex<HashMap<String, Instant>>,
    last_renewal: Mutex<Option<Instant>>,
    cancelled: AtomicBool,
}

/// One host's gate: a concurrency cap and a back-off deadline.
pub(crate) struct HostGate {
    permits: Arc<Semaphore>,
    not_before: Mutex<Instant>,
}

/// Held while a fetch runs.
pub(crate) struct FetchPermit {
    _job: OwnedSemaphorePermit,
    _host: OwnedSemaphorePermit,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Runtime {
    pub fn new(per_host: usize) -> Self {
        Runtime {
            jobs: Mutex::new(HashMap::new()),
            hosts: Mutex::new(HashMap::new()),
            per_host: per_host.max(1),
        }
    }

    pub(crate) fn job(
        &self,
        id: &JobId,
        max_concurrency: usize,
        delay: Duration,
    ) -> Arc<JobRuntime> {
        let mut jobs = lock(&self.jobs);
        if jobs.len() > MAX_ENTRIES {
            jobs.clear();
        }
        jobs.entry(id.clone())
            .or_insert_with(|| {
                Arc::new(JobRuntime {
                    robots: tokio::sync::Mutex::new(HashMap::new()),
                    permits: Arc::new(Semaphore::new(max_concurrency.max(1))),
                    delay,
                    next_start: Mutex::new(Instant::now()),
                    origin_next: Mutex::new(HashMap::new()),
                    last_renewal: Mutex::new(None),
                    cancelled: AtomicBool::new(false),
                })
            })
            .clone()
    }

    /// Forgets a finished job; a fetch of it still waiting for its turn will not start.
    pub(crate) fn forget(&self, id: &JobId) {
        if let Some(job) = lock(&self.jobs).remove(id) {
            job.cancelled.store(true, Ordering::SeqCst);
        }
    }

    pub(crate) fn host(&self, host: &str) -> Arc<HostGate> {
        let mut hosts = lock(&self.hosts);
        if hosts.len() > MAX_ENTRIES {
            hosts.clear();
        }
        hosts
            .entry(host.to_string())
            .or_insert_with(|| {
                Arc::new(HostGate {
                    permits: Arc::new(Semaphore::new(self.per_host)),
                    not_before: Mutex::new(Instant::now()),
                })
            })
            .clone()
    }

    /// Waits for a free place in the job's and the host's caps and the host's back-off.
    pub(crate) async fn acquire(&self, job: &JobRuntime, host: &HostGate) -> Option<FetchPermit> {
        let job_permit = job.permits.clone().acquire_owned().await.ok()?;
        let host_permit = host.permits.clone().acquire_owned().await.ok()?;
        let not_before = *lock(&host.not_before);
        tokio::time::sleep_until(not_before).await;
        Some(FetchPermit {
            _job: job_permit,
            _host: host_permit,
        })
    }
}

impl HostGate {
    /// Holds every fetch to this host back for `pause`.
    pub(crate) fn back_off(&self, pause: Duration) {
        let mut nb = lock(&self.not_before);
        *nb = (*nb).max(Instant::now() + pause);
    }
}

impl JobRuntime {
    /// Waits for this fetch's turn under the job's `delay_ms` and the `Crawl-delay` of the
    /// page's origin; false when the job ended in this process meanwhile.
    pub(crate) async fn pace(&self, origin: &str, crawl_delay: Option<Duration>) -> bool {
        let now = Instant::now();
        let mut start = now;
        if !self.delay.is_zero() {
            let mut next = lock(&self.next_start);
            start = (*next).max(now);
            *next = start + self.delay;
        }
        if let Some(delay) = crawl_delay {
            let mut origins = lock(&self.origin_next);
            let next = origins.entry(origin.to_string()).or_insert(now);
            start = start.max(*next);
            *next = start + delay;
        }
        tokio::time::sleep_until(start).await;
        !self.cancelled.load(Ordering::SeqCst)
    }

    /// True at most once per `every`: time to renew the job's slot lease.
    pub(crate) fn renewal_due(&self, every: Duration) -> bool {
        let mut last = lock(&self.last_renewal);
        let due = last.is_none_or(|t| t.elapsed() >= every);
        if due {
            *last = Some(Instant::now());
        }
        due
    }
}
