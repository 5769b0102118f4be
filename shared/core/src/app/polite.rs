//! Politeness that holds across every process of a deployment, kept through the store's
//! gates: at most `per_host_concurrency` requests to one host at once across all jobs, a job's
//! requests to an origin spaced by its `delay_ms` and the origin's `Crawl-delay`, and each
//! origin's robots.txt fetched once per job.

use super::places::{Held, SERVE_AT_MOST};
use super::runtime::JobRuntime;
use super::App;
use crate::domain::Job;
use crate::engine::robots::{fetch_robots, Robots, RobotsFile};
use crate::ports::{BlobStore, Clock, Gates, NewLog, StoreError, StoreResult};
use bytes::Bytes;
use chrono::{DateTime, Utc};
use sha2::{Digest, Sha256};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;
use url::Url;

/// Longest a request waits for a place at its host before its task is tried again later.
const HOST_WAIT: Duration = Duration::from_secs(60);
/// How long a place is held past the request's own deadline: a holder that died frees it then.
const PLACE_MARGIN: Duration = Duration::from_secs(30);
/// How far ahead a booked start may lie for a task to wait for it; a task whose start lies
/// further waits in the queue instead.
/// (A spacing of 5 s, booked with [`LATE`] to spare, is still waited for.)
pub(crate) const MAX_PACE_WAIT: Duration = Duration::from_secs(6);
/// How long before its booked start a fetch checks that its job is still active.
const CHECK_LEAD: Duration = Duration::from_millis(100);
/// How late past its booked start a fetch may begin; one later books a new start. Starts are
/// booked this much further apart than the spacing asks, so a fetch that begins late by up to
/// this still keeps the spacing from the next.
pub(crate) const LATE: Duration = Duration::from_millis(15);
/// How long one process may fetch an origin's robots.txt for a job before another takes over.
const ROBOTS_LEASE: Duration = Duration::from_secs(60);

/// A pause of up to `ceiling`, chosen at random (full jitter), so waiting processes do not
/// knock at once.
pub(crate) fn jitter(ceiling: Duration) -> Duration {
    let r = getrandom::u64().unwrap_or(0);
    let ms = ceiling.as_millis().max(1) as u64;
    Duration::from_millis(r % ms + 1)
}

pub(crate) fn chrono_of(d: Duration) -> chrono::Duration {
    chrono::Duration::from_std(d).unwrap_or(chrono::Duration::MAX)
}

/// A short stable name for an origin inside a key.
fn digest(text: &str) -> String {
    Sha256::digest(text.as_bytes())[..12]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The host a gate counts requests to: the name and port of `url` (servers on other ports of
/// one machine are other hosts).
fn host_of(url: &Url) -> String {
    match url.port_or_known_default() {
        Some(port) => format!("{}:{port}", url.host_str().unwrap_or_default()),
        None => url.host_str().unwrap_or_default().to_string(),
    }
}

/// Runs `request` (which takes at most `deadline`) holding a place among the requests to
/// `url`'s host: one this process kept from its last request there, or one taken at the gate.
/// A transient error when no place came free within [`HOST_WAIT`].
pub(crate) async fn at_host<T>(
    app: &App,
    url: &Url,
    deadline: Duration,
    request: impl Future<Output = T>,
) -> StoreResult<T> {
    let gate = format!("host:{}", host_of(url));
    let held = enter(app, url, &gate, deadline).await?;
    let out = request.await;
    app.places.keep(&app.gates, &gate, held);
    Ok(out)
}

/// Takes a place at `gate` for a request taking at most `deadline` (one this process keeps,
/// or one from the store), waiting up to [`HOST_WAIT`] for one to come free: a place this
/// process lets go is taken at once, one let go elsewhere at the next look (backing off).
async fn enter(app: &App, url: &Url, gate: &str, deadline: Duration) -> StoreResult<Held> {
    let holder = ulid::Ulid::new().to_string();
    let capacity = app.config.per_host_concurrency.max(1);
    let started = Instant::now();
    let mut pause = Duration::from_millis(20);
    // When to ask the store next; a place kept here wakes the wait sooner.
    let mut look = started;
    loop {
        // Listening before looking: a place kept meanwhile is not missed.
        let freed = app.places.freed();
        tokio::pin!(freed);
        freed.as_mut().enable();
        let needed = app.clock.now() + chrono_of(deadline + PLACE_MARGIN / 2);
        if let Some(held) = app.places.take(gate, needed) {
            return Ok(held);
        }
        if Instant::now() >= look {
            // Leased for as long as this process may lend it to its next requests too.
            let until = app.clock.now() + chrono_of(deadline + PLACE_MARGIN + SERVE_AT_MOST);
            if let Some(place) = app.gates.enter(gate, capacity, &holder, until).await? {
                return Ok(Held {
                    place,
                    holder,
                    until,
                    taken: Instant::now(),
                });
            }
            if started.elapsed() >= HOST_WAIT {
                return Err(StoreError::transient(format!(
                    "every place at {} stayed taken",
                    host_of(url)
                )));
            }
            look = Instant::now() + jitter(pause);
            pause = (pause * 2).min(Duration::from_secs(1));
        }
        tokio::select! {
            _ = tokio::time::sleep_until(look) => {}
            _ = freed => {}
        }
    }
}

/// When a job's request to an origin may start.
pub(crate) enum Turn {
    /// At once (no pacing applies).
    Now,
    /// At this booked time (perhaps already come), within [`MAX_PACE_WAIT`]: wait for it.
    At(DateTime<Utc>),
    /// At this booked time, further ahead: the task waits in the queue.
    Later(DateTime<Utc>),
}

/// Books the start of `job`'s next request to `url`'s origin, spaced `spacing` from the
/// job's previous one there; `booked` is a start booked earlier for this task.
pub(crate) async fn turn(
    app: &App,
    job: &Job,
    url: &Url,
    spacing: Duration,
    booked: Option<DateTime<Utc>>,
) -> StoreResult<Turn> {
    let now = app.clock.now();
    let start = match booked {
        Some(t) => t,
        None if spacing.is_zero() => return Ok(Turn::Now),
        None => {
            let pace = format!(
                "{}/{}/{}",
                job.user_id,
                job.job_id,
                digest(&url.origin().ascii_serialization())
            );
            app.gates.book(&pace, spacing + LATE, now).await?
        }
    };
    Ok(if start - now > chrono_of(MAX_PACE_WAIT) {
        Turn::Later(start)
    } else {
        Turn::At(start)
    })
}

/// Sleeps until shortly before `start`, so the last check before a fetch can run and the
/// fetch still start on time.
pub(crate) async fn until_check(app: &App, start: DateTime<Utc>) {
    let lead = start - chrono_of(CHECK_LEAD) - app.clock.now();
    if let Ok(wait) = lead.to_std() {
        tokio::time::sleep(wait).await;
    }
}

/// Sleeps until `start`.
pub(crate) async fn until(app: &App, start: DateTime<Utc>) {
    if let Ok(wait) = (start - app.clock.now()).to_std() {
        tokio::time::sleep(wait).await;
    }
}

/// The robots rules of `url`'s origin for `job`: fetched by the first process that needs them,
/// kept in the blob store for the job's other pages and processes, and logged once.
pub(crate) async fn robots_for(
    app: &App,
    job: &Job,
    rt: &JobRuntime,
    url: &Url,
    logs: &mut Vec<NewLog>,
) -> StoreResult<Arc<Robots>> {
    let origin = url.origin().ascii_serialization();
    let mut cache = rt.robots.lock().await;
    if let Some(r) = cache.get(&origin) {
        return Ok(r.clone());
    }
    let key = format!(
        "{}/{}/robots/{}.json",
        job.user_id,
        job.job_id,
        digest(&origin)
    );
    let fetch = || {
        at_host(
            app,
            url,
            Duration::from_secs(15),
            fetch_robots(&app.fetcher, url),
        )
    };
    let (file, fetched) = shared_robots(&*app.gates, &*app.blobs, &*app.clock, &key, fetch).await?;
    if fetched {
        logs.push(NewLog::info(file.rules().describe()).at(format!("{origin}/robots.txt")));
    }
    let robots = Arc::new(file.rules());
    cache.insert(origin, robots.clone());
    Ok(robots)
}

/// The robots record kept under `key`, or, when there is none yet, the one `fetch` gets:
/// fetched by one process at a time under a leased gate, and read again once inside it (the
/// holder before may have stored it between this process's read and its turn). `true` when
/// this call fetched it.
async fn shared_robots<F, Fut>(
    gates: &dyn Gates,
    blobs: &dyn BlobStore,
    clock: &dyn Clock,
    key: &str,
    fetch: F,
) -> StoreResult<(RobotsFile, bool)>
where
    F: FnOnce() -> Fut,
    Fut: Future<Output = StoreResult<RobotsFile>>,
{
    let gate = format!("robots:{key}");
    let holder = ulid::Ulid::new().to_string();
    let mut pause = Duration::from_millis(50);
    let started = Instant::now();
    loop {
        if let Some(file) = stored_robots(blobs, key).await {
            return Ok((file, false));
        }
        let until = clock.now() + chrono_of(ROBOTS_LEASE);
        if let Some(place) = gates.enter(&gate, 1, &holder, until).await? {
            let outcome = match stored_robots(blobs, key).await {
                Some(file) => Ok((file, false)),
                None => fetch().await.map(|file| (file, true)),
            };
            if let Ok((file, true)) = &outcome {
                store_robots(blobs, key, file).await;
            }
            let _ = gates.leave(&gate, place, &holder).await;
            return outcome;
        }
        if started.elapsed() > ROBOTS_LEASE * 2 {
            return Err(StoreError::transient("robots.txt is still being fetched"));
        }
        tokio::time::sleep(jitter(pause)).await;
        pause = (pause * 2).min(Duration::from_secs(1));
    }
}

/// The robots record under `key`. The record is shared for politeness only: when it cannot be
/// read, the caller goes on as if there were none.
async fn stored_robots(blobs: &dyn BlobStore, key: &str) -> Option<RobotsFile> {
    match blobs.get(key).await {
        Ok(Some(body)) => match serde_json::from_slice::<RobotsFile>(&body) {
            Ok(file) => Some(file),
            Err(_) => {
                tracing::warn!(key, "unreadable robots record; fetching again");
                None
            }
        },
        Ok(None) => None,
        Err(e) => {
            tracing::warn!(error = %e, "robots record not readable");
            None
        }
    }
}

/// Keeps `file` under `key` for the job's other processes; when it cannot, they fetch it too.
async fn store_robots(blobs: &dyn BlobStore, key: &str, file: &RobotsFile) {
    let stored = match serde_json::to_vec(file) {
        Ok(body) => blobs.put(key, Bytes::from(body)).await,
        Err(e) => Err(StoreError::new(e)),
    };
    if let Err(e) = stored {
        tracing::warn!(error = %e, "robots record not stored; other processes fetch it too");
    }
}

#[cfg(test)]
mod tests {
    use super::super::fakes::OnePlace;
    use super::*;
    use crate::ports::SystemClock;
    use async_trait::async_trait;
    use std::collections::HashMap;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Mutex;

    /// Blobs in memory. `late` is stored by "another process" just after the first read
    /// misses, as when that process finishes its fetch between this one's read and its turn.
    #[derive(Default)]
    struct Blobs {
        kept: Mutex<HashMap<String, Bytes>>,
        late: Mutex<Option<(String, Bytes)>>,
    }

    #[async_trait]
    impl BlobStore for Blobs {
        async fn put(&self, key: &str, body: Bytes) -> StoreResult<()> {
            self.kept.lock().unwrap().insert(key.to_string(), body);
            Ok(())
        }

        async fn get(&self, key: &str) -> StoreResult<Option<Bytes>> {
            let found = self.kept.lock().unwrap().get(key).cloned();
            if let Some((k, body)) = self.late.lock().unwrap().take() {
                self.kept.lock().unwrap().insert(k, body);
            }
            Ok(found)
        }

        async fn delete(&self, key: &str) -> StoreResult<()> {
            self.kept.lock().unwrap().remove(key);
            Ok(())
        }
    }

    fn rules(body: &str) -> RobotsFile {
        RobotsFile::Rules { body: body.into() }
    }

    #[tokio::test]
    async fn a_record_stored_while_waiting_for_the_gate_is_not_fetched_again() {
        let theirs = serde_json::to_vec(&rules("User-agent: *\nDisallow: /a")).unwrap();
        let blobs = Blobs {
            late: Mutex::new(Some(("k".into(), Bytes::from(theirs)))),
            ..Blobs::default()
        };
        let gates = OnePlace::default();
        let fetches = AtomicUsize::new(0);
        let (file, fetched) = shared_robots(&gates, &blobs, &SystemClock, "k", || async {
            fetches.fetch_add(1, Ordering::SeqCst);
            Ok(rules("User-agent: *\nDisallow: /b"))
        })
        .await
        .unwrap();
        assert_eq!(fetches.load(Ordering::SeqCst), 0, "fetched a second time");
        assert!(!fetched);
        assert_eq!(file, rules("User-agent: *\nDisallow: /a"));
        assert_eq!(
            gates.left.load(Ordering::SeqCst),
            1,
            "the gate is given back"
        );
    }

    #[tokio::test]
    async fn the_first_process_fetches_stores_and_gives_the_gate_back() {
        let blobs = Blobs::default();
        let gates = OnePlace::default();
        let (file, fetched) = shared_robots(&gates, &blobs, &SystemClock, "k", || async {
            Ok(RobotsFile::AllowAll)
        })
        .await
        .unwrap();
        assert!(fetched);
        assert_eq!(file, RobotsFile::AllowAll);
        assert_eq!(stored_robots(&blobs, "k").await, Some(RobotsFile::AllowAll));
        assert_eq!(gates.left.load(Ordering::SeqCst), 1);

        let (again, fetched) = shared_robots(&gates, &blobs, &SystemClock, "k", || async {
            unreachable!("the record is kept")
        })
        .await
        .unwrap();
        assert!(!fetched);
        assert_eq!(again, RobotsFile::AllowAll);
    }

    #[tokio::test]
    async fn a_fetch_that_fails_gives_the_gate_back_and_stores_nothing() {
        let blobs = Blobs::default();
        let gates = OnePlace::default();
        let out = shared_robots(&gates, &blobs, &SystemClock, "k", || async {
            Err(StoreError::transient("no place at the host"))
        })
        .await;
        assert!(out.is_err());
        assert_eq!(
            gates.left.load(Ordering::SeqCst),
            1,
            "the next process need not wait"
        );
        assert_eq!(stored_robots(&blobs, "k").await, None);
    }
}
