//! Webhook signing keys on SQLite: one row per user, the keys as JSON, written only over the
//! version read.

use crate::db::exec;
use crate::store::SqliteStore;
use async_trait::async_trait;
use rusqlite::{params, OptionalExtension};
use sarvcrawl_core::domain::{SigningKeys, UserId};
use sarvcrawl_core::ports::{SigningKeyStore, StoreError, StoreResult};

#[async_trait]
impl SigningKeyStore for SqliteStore {
    async fn signing_keys(&self, user: &UserId) -> StoreResult<Option<SigningKeys>> {
        let user = user.0.clone();
        let row: Option<(String, u64)> = self
            .db
            .read(move |c| {
                c.prepare_cached("SELECT body, version FROM signing_keys WHERE user_id = ?1")?
                    .query_row(params![user], |r| Ok((r.get(0)?, r.get(1)?)))
                    .optional()
            })
            .await?;
        row.map(|(body, version)| {
            let keys: SigningKeys = serde_json::from_str(&body).map_err(StoreError::new)?;
            Ok(SigningKeys { version, ..keys })
        })
        .transpose()
    }

    async fn save_signing_keys(&self, user: &UserId, keys: &SigningKeys) -> StoreResult<bool> {
        let user = user.0.clone();
        let body = serde_json::to_string(keys).map_err(StoreError::new)?;
        let version = keys.version;
        self.db
            .write(move |tx| {
                let changed = if version == 0 {
                    exec(
                        tx,
                        "INSERT OR IGNORE INTO signing_keys (user_id, version, body) VALUES (?1, 1, ?2)",
                        params![user, body],
                    )?
                } else {
                    exec(
                        tx,
                        "UPDATE signing_keys SET version = version + 1, body = ?2
                         WHERE user_id = ?1 AND version = ?3",
                        params![user, body, version],
                    )?
                };
                Ok(changed == 1)
            })
            .await
    }
}
