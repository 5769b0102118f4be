//! Webhook signing keys on DynamoDB: item `USER#<user>`, `SIGNING` holding the keys as JSON
//! and their `version`; a first write is conditioned on no item, a later one on the version it
//! read.

use crate::dynamo::{conditional, get_item, get_n, get_s, key, n, s, DynamoStore};
use crate::wire::SendBy;
use async_trait::async_trait;
use sarvcrawl_core::domain::{SigningKeys, UserId};
use sarvcrawl_core::ports::{SigningKeyStore, StoreError, StoreResult};

fn item_key(
    user: &UserId,
) -> std::collections::HashMap<String, aws_sdk_dynamodb::types::AttributeValue> {
    key(format!("USER#{user}"), "SIGNING".into())
}

#[async_trait]
impl SigningKeyStore for DynamoStore {
    async fn signing_keys(&self, user: &UserId) -> StoreResult<Option<SigningKeys>> {
        let Some(item) = get_item(&self.client, &self.table, item_key(user)).await? else {
            return Ok(None);
        };
        let body =
            get_s(&item, "body").ok_or_else(|| StoreError::permanent("keys without body"))?;
        let keys: SigningKeys = serde_json::from_str(body).map_err(StoreError::new)?;
        Ok(Some(SigningKeys {
            version: get_n(&item, "version").unwrap_or(1),
            ..keys
        }))
    }

    async fn save_signing_keys(&self, user: &UserId, keys: &SigningKeys) -> StoreResult<bool> {
        let mut item = item_key(user);
        item.insert("version".into(), n(keys.version + 1));
        item.insert(
            "body".into(),
            s(serde_json::to_string(keys).map_err(StoreError::new)?),
        );
        let put = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(item));
        let put = if keys.version == 0 {
            put.condition_expression("attribute_not_exists(PK)")
        } else {
            put.condition_expression("version = :v")
                .expression_attribute_values(":v", n(keys.version))
        };
        conditional(put.send_by(self.client.wire()).await)
    }
}
