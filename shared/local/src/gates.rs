//! Gates and paces on SQLite: each a single transaction, so SQLite's one writer settles every
//! race between the worker loops.

use crate::db::{exec, one_row};
use crate::store::SqliteStore;
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use rusqlite::{params, OptionalExtension};
use sarvcrawl_core::ports::{Gates, StoreResult};
use std::time::Duration;

/// How long a pace is kept after its last booked start.
const PACE_KEPT_MS: i64 = 60 * 60 * 1000;

#[async_trait]
impl Gates for SqliteStore {
    async fn enter(
        &self,
        gate: &str,
        capacity: u32,
        holder: &str,
        until: DateTime<Utc>,
    ) -> StoreResult<Option<u32>> {
        let (gate, holder) = (gate.to_string(), holder.to_string());
        let now = self.now_ms();
        self.db
            .write(move |tx| {
                let held: Vec<u32> = tx
                    .prepare_cached(
                        "SELECT place FROM gates WHERE gate = ?1 AND lease_until >= ?2 ORDER BY place",
                    )?
                    .query_map(params![gate, now], |r| r.get(0))?
                    .collect::<Result<_, _>>()?;
                let Some(place) = (0..capacity).find(|p| !held.contains(p)) else {
                    return Ok(None);
                };
                exec(
                    tx,
                    "INSERT OR REPLACE INTO gates (gate, place, holder, lease_until) VALUES (?1, ?2, ?3, ?4)",
                    params![gate, place, holder, until.timestamp_millis()],
                )?;
                Ok(Some(place))
            })
            .await
    }

    async fn leave(&self, gate: &str, place: u32, holder: &str) -> StoreResult<()> {
        let (gate, holder) = (gate.to_string(), holder.to_string());
        self.db
            .write(move |tx| {
                exec(
                    tx,
                    "DELETE FROM gates WHERE gate = ?1 AND place = ?2 AND holder = ?3",
                    params![gate, place, holder],
                )?;
                Ok(())
            })
            .await
    }

    async fn book(
        &self,
        pace: &str,
        spacing: Duration,
        now: DateTime<Utc>,
    ) -> StoreResult<DateTime<Utc>> {
        let pace = pace.to_string();
        let (now, spacing) = (now.timestamp_millis(), spacing.as_millis() as i64);
        self.db
            .write(move |tx| {
                exec(tx, "DELETE FROM paces WHERE expires_at < ?1", [now])?;
                let next: Option<i64> = one_row(
                    tx,
                    "SELECT next_at FROM paces WHERE pace = ?1",
                    [&pace],
                    |r| r.get(0),
                )
                .optional()?;
                let start = next.map_or(now, |n| n.max(now));
                exec(
                    tx,
                    "INSERT OR REPLACE INTO paces (pace, next_at, expires_at) VALUES (?1, ?2, ?3)",
                    params![pace, start + spacing, start + spacing + PACE_KEPT_MS],
                )?;
                Ok(DateTime::from_timestamp_millis(start).unwrap_or_default())
            })
            .await
    }
}
