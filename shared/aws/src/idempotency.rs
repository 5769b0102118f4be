//! `Idempotency-Key` records on DynamoDB: item `USER#<user>`, `IDEM#<sha256 of the key>` with
//! the request's fingerprint, the answer once there is one, and `expires_at` (the table's TTL
//! attribute, epoch seconds). A reservation is a put conditioned on no live record.

use crate::dynamo::{conditional, get_item, get_s, key, n, s, DynamoStore};
use crate::errors::sdk;
use crate::wire::SendBy;
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sarvcrawl_core::domain::UserId;
use sarvcrawl_core::ports::{IdempotencyStore, Reservation, StoreResult};
use sha2::{Digest, Sha256};

fn item_key(
    user: &UserId,
    idem: &str,
) -> std::collections::HashMap<String, aws_sdk_dynamodb::types::AttributeValue> {
    let d = Sha256::digest(idem.as_bytes());
    let hex: String = d.iter().map(|b| format!("{b:02x}")).collect();
    key(format!("USER#{user}"), format!("IDEM#{hex}"))
}

#[async_trait]
impl IdempotencyStore for DynamoStore {
    async fn reserve(
        &self,
        user: &UserId,
        idem: &str,
        hash: &str,
        now: DateTime<Utc>,
        until: DateTime<Utc>,
    ) -> StoreResult<Reservation> {
        let mut item = item_key(user, idem);
        item.insert("hash".into(), s(hash));
        item.insert("expires_at".into(), n(until.timestamp()));
        for _ in 0..3 {
            let r = self
                .client
                .put_item()
                .table_name(&self.table)
                .set_item(Some(item.clone()))
                .condition_expression("attribute_not_exists(PK) OR expires_at < :now")
                .expression_attribute_values(":now", n(now.timestamp()))
                .send_by(self.client.wire())
                .await;
            if conditional(r)? {
                return Ok(Reservation::Reserved);
            }
            // Gone meanwhile (released): try to reserve again.
            let Some(found) = get_item(&self.client, &self.table, item_key(user, idem)).await?
            else {
                continue;
            };
            let hash = get_s(&found, "hash").unwrap_or_default().to_string();
            return Ok(match get_s(&found, "response") {
                Some(r) => Reservation::Done {
                    hash,
                    response: r.to_string(),
                },
                None => Reservation::Pending { hash },
            });
        }
        Ok(Reservation::Pending {
            hash: hash.to_string(),
        })
    }

    async fn complete(
        &self,
        user: &UserId,
        idem: &str,
        response: &str,
        until: DateTime<Utc>,
    ) -> StoreResult<()> {
        self.client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(item_key(user, idem)))
            .update_expression("SET #r = :r, expires_at = :e")
            .expression_attribute_names("#r", "response")
            .expression_attribute_values(":r", s(response))
            .expression_attribute_values(":e", n(until.timestamp()))
            .send_by(self.client.wire())
            .await
            .map_err(sdk)?;
        Ok(())
    }

    async fn release(&self, user: &UserId, idem: &str) -> StoreResult<()> {
        let r = self
            .client
            .delete_item()
            .table_name(&self.table)
            .set_key(Some(item_key(user, idem)))
            .condition_expression("attribute_not_exists(#r)")
            .expression_attribute_names("#r", "response")
            .send_by(self.client.wire())
            .await;
        conditional(r).map(|_| ())
    }
}
