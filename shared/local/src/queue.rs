//! The work queue on SQLite, with SQS's semantics: at-least-once delivery, a visibility
//! timeout, a receive count, acknowledgement by receipt.

use crate::db::{exec, one_row, Db};
use async_trait::async_trait;
use rusqlite::{params, Connection};
use sarvcrawl_core::ports::{Clock, Delivery, StoreResult, Task, WorkQueue};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;

/// SQLite-backed [`WorkQueue`].
pub struct SqliteQueue {
    db: Arc<Db>,
    visibility: Duration,
    arrived: Notify,
    clock: Arc<dyn Clock>,
}

impl SqliteQueue {
    pub(crate) fn new(db: Arc<Db>, visibility: Duration, clock: Arc<dyn Clock>) -> Self {
        SqliteQueue {
            db,
            visibility,
            arrived: Notify::new(),
            clock,
        }
    }

    fn now_ms(&self) -> i64 {
        self.clock.now().timestamp_millis()
    }

    /// Makes every received-but-unacknowledged task visible again, and the pages they were
    /// fetching free to take; a task that was being worked on when the process ended counts
    /// that delivery as interrupted. Only sound while no other process works this data
    /// directory, which its lock guarantees.
    pub(crate) fn release_all(&self) -> rusqlite::Result<usize> {
        self.db.write_now(|c| {
            exec(
                c,
                "UPDATE nodes SET status = 'queued', lease_until = NULL WHERE status = 'running'",
                [],
            )?;
            exec(
                c,
                "UPDATE queue SET interrupted = interrupted + 1 WHERE receipt IS NOT NULL",
                [],
            )?;
            exec(
                c,
                "UPDATE queue SET visible_at = 0, receipt = NULL WHERE receipt IS NOT NULL",
                [],
            )
        })
    }

    /// Wakes the receivers waiting for a task: a write that added some has committed.
    pub(crate) fn sent(&self) {
        self.arrived.notify_waiters();
    }

    /// Tasks waiting or in flight.
    pub async fn depth(&self) -> StoreResult<u64> {
        self.db
            .read(|c| one_row(c, "SELECT COUNT(*) FROM queue", [], |r| r.get(0)))
            .await
    }

    async fn try_receive(&self, max: usize) -> StoreResult<Vec<Delivery>> {
        let visibility = self.visibility.as_millis() as i64;
        let now = self.now_ms();
        let (deliveries, broken) = self
            .db
            .write(move |tx| {
                let mut pick = tx.prepare_cached(
                    "SELECT id FROM queue WHERE visible_at <= ?1 ORDER BY visible_at, id LIMIT ?2",
                )?;
                let ids: Vec<i64> = pick
                    .query_map(params![now, max as i64], |r| r.get(0))?
                    .collect::<Result<_, _>>()?;
                let mut take = tx.prepare_cached(
                    "UPDATE queue SET visible_at = ?1, receipt = ?2, receives = receives + 1
                     WHERE id = ?3 RETURNING body, receives, interrupted",
                )?;
                let mut out = Vec::with_capacity(ids.len());
                let mut broken = Vec::new();
                for id in ids {
                    let receipt = format!("{id}:{}", ulid::Ulid::new());
                    let (body, receives, interrupted): (String, u32, u32) = take
                        .query_row(params![now + visibility, receipt, id], |r| {
                            Ok((r.get(0)?, r.get(1)?, r.get(2)?))
                        })?;
                    match serde_json::from_str::<Task>(&body) {
                        Ok(task) => out.push(Delivery {
                            receipt,
                            receive_count: receives,
                            interrupted,
                            task,
                        }),
                        Err(_) => broken.push(id),
                    }
                }
                for id in &broken {
                    exec(tx, "DELETE FROM queue WHERE id = ?1", [id])?;
                }
                Ok((out, broken.len()))
            })
            .await?;
        if broken > 0 {
            tracing::error!(count = broken, "dropped unreadable queue entries");
        }
        Ok(deliveries)
    }

    /// Runs `update` (`?1` the time `delay` from now, `?2` the receipt) on a received task.
    async fn visible_after(
        &self,
        update: &'static str,
        receipt: &str,
        delay: Duration,
    ) -> StoreResult<()> {
        let (receipt, at) = (
            receipt.to_string(),
            self.now_ms() + delay.as_millis() as i64,
        );
        self.db
            .write(move |tx| {
                exec(tx, update, params![at, receipt])?;
                Ok(())
            })
            .await
    }
}

/// Tasks as the queue keeps them, ready to be added in a write.
pub(crate) struct Bodies(Vec<String>);

impl Bodies {
    pub(crate) fn of(tasks: &[Task]) -> StoreResult<Self> {
        tasks
            .iter()
            .map(serde_json::to_string)
            .collect::<Result<_, _>>()
            .map(Bodies)
            .map_err(sarvcrawl_core::ports::StoreError::new)
    }

    /// Adds the tasks to the queue in `tx`, to be delivered from `visible_at` (ms; 0: now).
    /// [`SqliteQueue::sent`] wakes the receivers once `tx` has committed.
    pub(crate) fn insert(&self, tx: &Connection, visible_at: i64) -> rusqlite::Result<()> {
        let mut insert =
            tx.prepare_cached("INSERT INTO queue (body, visible_at) VALUES (?1, ?2)")?;
        for b in &self.0 {
            insert.execute(params![b, visible_at])?;
        }
        Ok(())
    }
}

#[async_trait]
impl WorkQueue for SqliteQueue {
    async fn send(&self, tasks: &[Task]) -> StoreResult<()> {
        self.send_later(tasks, Duration::ZERO).await
    }

    async fn send_later(&self, tasks: &[Task], delay: Duration) -> StoreResult<()> {
        let bodies = Bodies::of(tasks)?;
        let visible_at = if delay.is_zero() {
            0
        } else {
            self.now_ms() + delay.as_millis() as i64
        };
        self.db
            .write(move |tx| bodies.insert(tx, visible_at))
            .await?;
        self.sent();
        Ok(())
    }

    async fn receive(&self, max: usize, wait: Duration) -> StoreResult<Vec<Delivery>> {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            let notified = self.arrived.notified();
            let got = self.try_receive(max).await?;
            let now = tokio::time::Instant::now();
            if !got.is_empty() || now >= deadline {
                return Ok(got);
            }
            // Wake on a send, or now and then for tasks whose visibility ran out.
            let nap = (deadline - now).min(Duration::from_millis(250));
            let _ = tokio::time::timeout(nap, notified).await;
        }
    }

    async fn ack(&self, receipt: &str) -> StoreResult<()> {
        let receipt = receipt.to_string();
        self.db
            .write(move |tx| {
                exec(tx, "DELETE FROM queue WHERE receipt = ?1", [receipt])?;
                Ok(())
            })
            .await
    }

    async fn defer(&self, receipt: &str, delay: Duration) -> StoreResult<()> {
        // The task is no longer being worked on: it waits for its next delivery.
        self.visible_after(
            "UPDATE queue SET visible_at = ?1, receipt = NULL WHERE receipt = ?2",
            receipt,
            delay,
        )
        .await
    }

    async fn extend(&self, receipt: &str, visibility: Duration) -> StoreResult<()> {
        self.visible_after(
            "UPDATE queue SET visible_at = ?1 WHERE receipt = ?2",
            receipt,
            visibility,
        )
        .await
    }
}
