//! API keys in DynamoDB: only the SHA-256 digest is stored, under `KEY#<hex digest>`. A marker
//! item (`KEYS`) records that the table holds keys, so a server can tell at once whether it
//! must ask for them.

use crate::dynamo::{get_item, get_s, key, read_item, s};
use crate::errors::sdk;
use crate::wire::SendBy;
use sarvcrawl_core::auth::key_digest;
use sarvcrawl_core::domain::UserId;
use sarvcrawl_core::ports::{KeyDirectory, StoreResult};

/// Reads and writes API key records.
#[derive(Clone)]
pub struct KeyStore {
    client: crate::Dynamo,
    table: String,
}

/// The key of the item that says the table holds keys.
const MARKER: &str = "KEYS";

fn key_pk(api_key: &str) -> String {
    let hex: String = key_digest(api_key)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("KEY#{hex}")
}

impl KeyStore {
    pub fn new(client: crate::Dynamo, table: &str) -> Self {
        KeyStore {
            client,
            table: table.to_string(),
        }
    }

    /// Stores a key's digest for `user` (and the marker that keys exist).
    pub async fn add(&self, user: &UserId, api_key: &str) -> StoreResult<()> {
        self.client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(key(MARKER.into(), MARKER.into())))
            .send_by(self.client.wire())
            .await
            .map_err(sdk)?;
        let mut item = key(key_pk(api_key), "KEY".into());
        item.insert("user_id".into(), s(user.as_str()));
        item.insert("created_at".into(), s(chrono::Utc::now().to_rfc3339()));
        self.client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(item))
            .send_by(self.client.wire())
            .await
            .map_err(sdk)?;
        Ok(())
    }
}

#[async_trait::async_trait]
impl KeyDirectory for KeyStore {
    async fn user_of(&self, api_key: &str) -> StoreResult<Option<UserId>> {
        // Keys change rarely: an eventually consistent read is enough.
        let at = key(key_pk(api_key), "KEY".into());
        let item = read_item(&self.client, &self.table, at, false).await?;
        Ok(item
            .as_ref()
            .and_then(|i| get_s(i, "user_id"))
            .map(|u| UserId(u.to_string())))
    }

    async fn has_keys(&self) -> StoreResult<bool> {
        let item = get_item(&self.client, &self.table, key(MARKER.into(), MARKER.into())).await?;
        Ok(item.is_some())
    }
}

/// A new random API key: 32 bytes from the operating system's generator, hex-encoded.
pub fn generate_key() -> Result<String, getrandom::Error> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes)?;
    Ok(format!(
        "sc_{}",
        bytes.iter().map(|b| format!("{b:02x}")).collect::<String>()
    ))
}
