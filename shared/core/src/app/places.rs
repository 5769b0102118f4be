//! Places at hosts' gates that this process keeps between its requests. A crawl's pages follow
//! one another at a host, so a place whose request ended is kept a moment for the process's
//! next request there instead of being given back and taken again (each of those is a write to
//! the store). A kept place still counts against the host's cap; it is given back when no
//! request wants it within [`KEEP_IDLE`], at once when it has served for [`SERVE_AT_MOST`] (so
//! other processes get their turn), or when the process gives all back (the end of a Lambda
//! invocation, a worker's stop).

use crate::ports::Gates;
use chrono::{DateTime, Utc};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Notify;
use tokio::time::Instant;

/// How long an idle place is kept for this process's next request at its host.
pub(crate) const KEEP_IDLE: Duration = Duration::from_secs(2);
/// How long after it was taken a place is still lent to a new request. While one process's
/// requests follow one another at a host, another's may wait at the gate that long (holding
/// their tasks and pages). 10 s instead cost 0.2 more calls to the store a page in
/// `bench/cost.sh` (two worker processes, one host).
pub(crate) const SERVE_AT_MOST: Duration = Duration::from_secs(30);

/// A place at a gate that this process holds.
#[derive(Debug, Clone)]
pub(crate) struct Held {
    pub place: u32,
    pub holder: String,
    /// When its lease runs out.
    pub until: DateTime<Utc>,
    /// When it was taken.
    pub taken: Instant,
}

/// The idle places this process keeps, by gate.
#[derive(Default)]
pub struct Places {
    idle: Mutex<HashMap<String, Vec<(u64, Held)>>>,
    returns: std::sync::atomic::AtomicU64,
    /// Told each time a place is kept idle, for a request of this process waiting for one.
    kept: Notify,
}

impl Places {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Vec<(u64, Held)>>> {
        self.idle.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// An idle place at `gate` whose lease lasts until at least `needed`.
    pub(crate) fn take(&self, gate: &str, needed: DateTime<Utc>) -> Option<Held> {
        let mut idle = self.lock();
        let kept = idle.get_mut(gate)?;
        let i = kept
            .iter()
            .position(|(_, h)| h.until >= needed && h.taken.elapsed() < SERVE_AT_MOST)?;
        let (_, held) = kept.swap_remove(i);
        if kept.is_empty() {
            idle.remove(gate);
        }
        Some(held)
    }

    /// Keeps `held` idle, and gives it back through `gates` unless a request takes it within
    /// [`KEEP_IDLE`]; one that has served its time goes back at once.
    pub(crate) fn keep(self: &Arc<Self>, gates: &Arc<dyn Gates>, gate: &str, held: Held) {
        if held.taken.elapsed() >= SERVE_AT_MOST {
            let (gates, gate) = (gates.clone(), gate.to_string());
            tokio::spawn(async move { give_back(&gates, &gate, &held).await });
            return;
        }
        let token = self
            .returns
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.lock()
            .entry(gate.to_string())
            .or_default()
            .push((token, held));
        self.kept.notify_waiters();
        let (places, gates, gate) = (self.clone(), gates.clone(), gate.to_string());
        tokio::spawn(async move {
            tokio::time::sleep(KEEP_IDLE).await;
            let unclaimed = {
                let mut idle = places.lock();
                let kept = idle.get_mut(&gate);
                let found = kept.and_then(|k| {
                    let i = k.iter().position(|(t, _)| *t == token)?;
                    Some(k.swap_remove(i).1)
                });
                if idle.get(&gate).is_some_and(Vec::is_empty) {
                    idle.remove(&gate);
                }
                found
            };
            if let Some(held) = unclaimed {
                give_back(&gates, &gate, &held).await;
            }
        });
    }

    /// Completes when a place is next kept idle (at any gate: the waiter looks at its own).
    pub(crate) fn freed(&self) -> tokio::sync::futures::Notified<'_> {
        self.kept.notified()
    }

    /// Gives back every idle place.
    pub async fn give_back_all(&self, gates: &Arc<dyn Gates>) {
        let all: Vec<(String, Held)> = self
            .lock()
            .drain()
            .flat_map(|(gate, kept)| kept.into_iter().map(move |(_, h)| (gate.clone(), h)))
            .collect();
        for (gate, held) in all {
            give_back(gates, &gate, &held).await;
        }
    }
}

async fn give_back(gates: &Arc<dyn Gates>, gate: &str, held: &Held) {
    if let Err(e) = gates.leave(gate, held.place, &held.holder).await {
        tracing::warn!(error = %e, "a place at a host was not given back; its lease frees it");
    }
}

#[cfg(test)]
mod tests {
    use super::super::fakes::OnePlace;
    use super::*;

    #[tokio::test]
    async fn a_place_kept_wakes_a_request_waiting_for_one_at_once() {
        let places = Arc::new(Places::default());
        let gates: Arc<dyn Gates> = Arc::new(OnePlace::default());
        let held = Held {
            place: 3,
            holder: "h".into(),
            until: Utc::now() + chrono::Duration::seconds(60),
            taken: Instant::now(),
        };
        let waiter = {
            let places = places.clone();
            tokio::spawn(async move {
                let freed = places.freed();
                tokio::pin!(freed);
                freed.as_mut().enable();
                assert!(places.take("host:a", Utc::now()).is_none());
                freed.await;
                places.take("host:a", Utc::now()).map(|h| h.place)
            })
        };
        tokio::time::sleep(Duration::from_millis(50)).await;
        places.keep(&gates, "host:a", held);
        let woken = tokio::time::timeout(Duration::from_millis(500), waiter).await;
        assert_eq!(woken.ok().and_then(Result::ok), Some(Some(3)));
    }

    #[tokio::test]
    async fn a_place_that_served_its_time_goes_back_at_once() {
        let places = Arc::new(Places::default());
        let one = Arc::new(OnePlace::default());
        let gates: Arc<dyn Gates> = one.clone();
        let until = Utc::now() + chrono::Duration::seconds(60);
        let place = gates.enter("host:a", 1, "h", until).await.ok().flatten();
        let held = Held {
            place: place.unwrap_or(u32::MAX),
            holder: "h".into(),
            until,
            taken: Instant::now()
                .checked_sub(SERVE_AT_MOST)
                .unwrap_or_else(Instant::now),
        };
        places.keep(&gates, "host:a", held);
        // Not lent again, and given back before an idle place would be.
        assert!(places.take("host:a", Utc::now()).is_none());
        tokio::time::sleep(KEEP_IDLE / 10).await;
        assert_eq!(one.left.load(std::sync::atomic::Ordering::SeqCst), 1);
    }
}
