//! `Idempotency-Key` records on SQLite. Writes are serialised, so a read and a write in one
//! transaction reserve a key atomically.

use crate::db::{exec, one_row};
use crate::store::SqliteStore;
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use rusqlite::{params, OptionalExtension};
use sarvcrawl_core::domain::UserId;
use sarvcrawl_core::ports::{IdempotencyStore, Reservation, StoreResult};

#[async_trait]
impl IdempotencyStore for SqliteStore {
    async fn reserve(
        &self,
        user: &UserId,
        key: &str,
        hash: &str,
        now: DateTime<Utc>,
        until: DateTime<Utc>,
    ) -> StoreResult<Reservation> {
        let (user, key, hash) = (user.0.clone(), key.to_string(), hash.to_string());
        let (now, until) = (now.timestamp_millis(), until.timestamp_millis());
        self.db
            .write(move |tx| {
                let live: Option<(String, Option<String>)> = one_row(
                        tx,
                        "SELECT hash, response FROM idempotency
                         WHERE user_id = ?1 AND key = ?2 AND expires_at >= ?3",
                        params![user, key, now],
                        |r| Ok((r.get(0)?, r.get(1)?)),
                    )
                    .optional()?;
                Ok(match live {
                    Some((hash, Some(response))) => Reservation::Done { hash, response },
                    Some((hash, None)) => Reservation::Pending { hash },
                    None => {
                        exec(
                            tx,
                            "INSERT OR REPLACE INTO idempotency (user_id, key, hash, response, expires_at)
                             VALUES (?1, ?2, ?3, NULL, ?4)",
                            params![user, key, hash, until],
                        )?;
                        Reservation::Reserved
                    }
                })
            })
            .await
    }

    async fn complete(
        &self,
        user: &UserId,
        key: &str,
        response: &str,
        until: DateTime<Utc>,
    ) -> StoreResult<()> {
        let (user, key, response) = (user.0.clone(), key.to_string(), response.to_string());
        let until = until.timestamp_millis();
        self.db
            .write(move |tx| {
                exec(
                    tx,
                    "UPDATE idempotency SET response = ?1, expires_at = ?2 WHERE user_id = ?3 AND key = ?4",
                    params![response, until, user, key],
                )?;
                Ok(())
            })
            .await
    }

    async fn release(&self, user: &UserId, key: &str) -> StoreResult<()> {
        let (user, key) = (user.0.clone(), key.to_string());
        self.db
            .write(move |tx| {
                exec(
                    tx,
                    "DELETE FROM idempotency WHERE user_id = ?1 AND key = ?2 AND response IS NULL",
                    params![user, key],
                )?;
                Ok(())
            })
            .await
    }
}
