//! Group commit: writes of one kind to one job that arrive while such a write is under way
//! wait for it and then go together in one request. A worker busy with several pages of a job
//! thus completes them in one transaction (one update of the job's counters for all of them)
//! and writes their log lines in one item, without waiting for anything but the write before.

use sarvcrawl_core::ports::{StoreError, StoreResult};
use std::collections::HashMap;
use std::future::Future;
use std::sync::Mutex;
use tokio::sync::oneshot;

type Waiter<T, R> = (T, oneshot::Sender<StoreResult<R>>);

/// Writes gathered per key (a job's partition).
pub(crate) struct Group<T, R> {
    keys: Mutex<HashMap<String, Vec<Waiter<T, R>>>>,
}

impl<T, R> Default for Group<T, R> {
    fn default() -> Self {
        Group {
            keys: Mutex::new(HashMap::new()),
        }
    }
}

/// Gives the key up if its writer is dropped mid-write: those waiting on it are answered
/// with an error (their tasks come back later) and the next caller writes again.
struct Leading<'a, T, R> {
    group: &'a Group<T, R>,
    key: &'a str,
    done: bool,
}

impl<T, R> Drop for Leading<'_, T, R> {
    fn drop(&mut self) {
        if !self.done {
            self.group.lock().remove(self.key);
        }
    }
}

impl<T, R> Group<T, R> {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Vec<Waiter<T, R>>>> {
        self.keys.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Writes `item` under `key`: when no write of the key is under way, this call writes it
    /// with `commit` (and then, in turn, what arrived meanwhile); otherwise it waits for the
    /// writer to take it. `commit` answers each item of a batch, in order.
    pub(crate) async fn write<F, Fut>(&self, key: &str, item: T, commit: F) -> StoreResult<R>
    where
        F: Fn(Vec<T>) -> Fut,
        Fut: Future<Output = Vec<StoreResult<R>>>,
    {
        let (tx, rx) = oneshot::channel();
        let leads = {
            let mut keys = self.lock();
            match keys.get_mut(key) {
                Some(waiting) => {
                    waiting.push((item, tx));
                    None
                }
                None => {
                    keys.insert(key.to_string(), Vec::new());
                    Some((item, tx))
                }
            }
        };
        let Some(first) = leads else {
            return rx.await.unwrap_or_else(|_| {
                Err(StoreError::transient(
                    "the write this one joined was given up",
                ))
            });
        };
        let mut leading = Leading {
            group: self,
            key,
            done: false,
        };
        let mut batch = vec![first];
        loop {
            let (items, answers): (Vec<T>, Vec<_>) = batch.into_iter().unzip();
            let results = commit(items).await;
            let mut results = results.into_iter();
            for answer in answers {
                let r = results
                    .next()
                    .unwrap_or_else(|| Err(StoreError::transient("no answer for this write")));
                let _ = answer.send(r);
            }
            let next = {
                let mut keys = self.lock();
                let next = keys.get_mut(key).map(std::mem::take).unwrap_or_default();
                if next.is_empty() {
                    keys.remove(key);
                }
                next
            };
            if next.is_empty() {
                leading.done = true;
                break;
            }
            batch = next;
        }
        rx.await
            .unwrap_or_else(|_| Err(StoreError::transient("the write was given up")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    #[tokio::test]
    async fn writes_arriving_during_a_write_go_together_and_each_gets_its_answer() {
        let group: Arc<Group<u32, u32>> = Arc::default();
        let commits = Arc::new(AtomicUsize::new(0));
        let mut calls = Vec::new();
        for i in 0..10u32 {
            let (group, commits) = (group.clone(), commits.clone());
            calls.push(tokio::spawn(async move {
                group
                    .write("job", i, |items| {
                        let commits = commits.clone();
                        async move {
                            commits.fetch_add(1, Ordering::SeqCst);
                            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                            items.into_iter().map(|i| Ok(i * 2)).collect()
                        }
                    })
                    .await
            }));
        }
        for (i, call) in calls.into_iter().enumerate() {
            assert_eq!(call.await.unwrap().unwrap(), i as u32 * 2);
        }
        let n = commits.load(Ordering::SeqCst);
        assert!(n < 10, "{n} commits for 10 writes arriving together");
        assert!(group.lock().is_empty());
    }

    #[tokio::test]
    async fn a_writer_given_up_mid_write_lets_the_next_one_write() {
        let group: Arc<Group<u32, u32>> = Arc::default();
        let stuck = {
            let group = group.clone();
            tokio::spawn(async move {
                group
                    .write("job", 1, |_| async {
                        tokio::time::sleep(std::time::Duration::from_secs(60)).await;
                        vec![Ok(0)]
                    })
                    .await
            })
        };
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        let waiting = {
            let group = group.clone();
            tokio::spawn(async move { group.write("job", 2, |_| async { vec![Ok(9)] }).await })
        };
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        stuck.abort();
        assert!(waiting.await.unwrap().is_err(), "its writer was given up");
        let again = group
            .write("job", 3, |i| async move { vec![Ok(i[0])] })
            .await;
        assert_eq!(again.unwrap(), 3);
    }
}
