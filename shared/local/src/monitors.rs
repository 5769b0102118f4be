//! Monitors on SQLite: one row each, the monitor as JSON, with the columns that queries need.

use crate::db::exec;
use crate::store::SqliteStore;
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use rusqlite::{params, OptionalExtension};
use sarvcrawl_core::domain::{Monitor, MonitorId, UserId};
use sarvcrawl_core::ports::{MonitorStore, StoreError, StoreResult};

fn encode(m: &Monitor) -> StoreResult<String> {
    serde_json::to_string(m).map_err(StoreError::new)
}

fn decode(body: &str) -> rusqlite::Result<Monitor> {
    serde_json::from_str(body).map_err(|e| {
        rusqlite::Error::FromSqlConversionFailure(0, rusqlite::types::Type::Text, Box::new(e))
    })
}

/// A monitor from a `body, version` row.
fn monitor_row(r: &rusqlite::Row) -> rusqlite::Result<Monitor> {
    let mut m = decode(&r.get::<_, String>(0)?)?;
    m.version = r.get(1)?;
    Ok(m)
}

fn due_ms(m: &Monitor) -> Option<i64> {
    m.due_at().map(|t| t.timestamp_millis())
}

#[async_trait]
impl MonitorStore for SqliteStore {
    async fn insert_monitor(&self, m: &Monitor) -> StoreResult<()> {
        let (id, user, due, body) = (
            m.monitor_id.0.clone(),
            m.user_id.0.clone(),
            due_ms(m),
            encode(m)?,
        );
        self.db
            .write(move |tx| {
                exec(
                    tx,
                    "INSERT INTO monitors (monitor_id, user_id, version, due_at, body) VALUES (?1, ?2, 0, ?3, ?4)",
                    params![id, user, due, body],
                )?;
                Ok(())
            })
            .await
    }

    async fn get_monitor(&self, user: &UserId, id: &MonitorId) -> StoreResult<Option<Monitor>> {
        let (user, id) = (user.0.clone(), id.0.clone());
        self.db
            .read(move |c| {
                c.prepare_cached(
                    "SELECT body, version FROM monitors WHERE monitor_id = ?1 AND user_id = ?2",
                )?
                .query_row(params![id, user], monitor_row)
                .optional()
            })
            .await
    }

    async fn list_monitors(&self, user: &UserId) -> StoreResult<Vec<Monitor>> {
        let user = user.0.clone();
        self.db
            .read(move |c| {
                c.prepare_cached(
                    "SELECT body, version FROM monitors WHERE user_id = ?1 ORDER BY monitor_id DESC",
                )?
                .query_map([user], monitor_row)?
                .collect()
            })
            .await
    }

    async fn save_monitor(&self, m: &Monitor) -> StoreResult<bool> {
        let (id, user, version, due, body) = (
            m.monitor_id.0.clone(),
            m.user_id.0.clone(),
            m.version,
            due_ms(m),
            encode(m)?,
        );
        self.db
            .write(move |tx| {
                let n = exec(
                    tx,
                    "UPDATE monitors SET version = version + 1, due_at = ?1, body = ?2
                     WHERE monitor_id = ?3 AND user_id = ?4 AND version = ?5",
                    params![due, body, id, user, version],
                )?;
                Ok(n == 1)
            })
            .await
    }

    async fn delete_monitor(&self, user: &UserId, id: &MonitorId) -> StoreResult<bool> {
        let (user, id) = (user.0.clone(), id.0.clone());
        self.db
            .write(move |tx| {
                let n = exec(
                    tx,
                    "DELETE FROM monitors WHERE monitor_id = ?1 AND user_id = ?2",
                    params![id, user],
                )?;
                Ok(n == 1)
            })
            .await
    }

    async fn due_monitors(&self, now: DateTime<Utc>, max: u32) -> StoreResult<Vec<Monitor>> {
        let now = now.timestamp_millis();
        self.db
            .read(move |c| {
                c.prepare_cached(
                    "SELECT body, version FROM monitors WHERE due_at IS NOT NULL AND due_at <= ?1
                     ORDER BY due_at LIMIT ?2",
                )?
                .query_map(params![now, max], monitor_row)?
                .collect()
            })
            .await
    }
}
