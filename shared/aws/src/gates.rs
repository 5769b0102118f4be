//! Gates and paces on DynamoDB. A gate's places are items `GATE#<gate>`, `PLACE#<n>` holding
//! their holder and lease; taking one is a put conditioned on the place being free or its
//! lease over, so a holder that died frees its place when the lease runs out. A pace is one
//! item `PACE#<pace>`, `PACE` with the next free start, moved on by a write conditioned on the
//! value read. Items carry `expires_at` for the table's TTL.

use crate::conflicts;
use crate::dynamo::{conditional, get_item, get_n, get_s, key, n, s, DynamoStore};
use crate::errors::sdk;
use crate::wire::SendBy;
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sarvcrawl_core::ports::{Gates, StoreError, StoreResult};
use std::collections::HashSet;
use std::time::Duration;

/// How long gate and pace items outlive their last use before TTL removes them.
const KEPT_SECS: i64 = 24 * 60 * 60;

/// Tries of a booking that keeps losing races.
const BOOKING_TRIES: u32 = 20;

fn expiry(t: DateTime<Utc>) -> aws_sdk_dynamodb::types::AttributeValue {
    n(t.timestamp() + KEPT_SECS)
}

#[async_trait]
impl Gates for DynamoStore {
    async fn enter(
        &self,
        gate: &str,
        capacity: u32,
        holder: &str,
        until: DateTime<Utc>,
    ) -> StoreResult<Option<u32>> {
        let pk = format!("GATE#{gate}");
        let now = self.clock.now().timestamp_millis();
        // A race lost means the place tried is now held, so each look sees one more place
        // taken: after `capacity` losses every place is held and `None` is the true answer.
        for _ in 0..=capacity {
            let held = self.held_places(&pk, now).await?;
            // One free place, chosen at random, is tried: processes entering at once do not
            // all race for the first.
            let free: Vec<u32> = (0..capacity).filter(|p| !held.contains(p)).collect();
            let Some(&place) = free.get(getrandom::u64().unwrap_or(0) as usize % free.len().max(1))
            else {
                return Ok(None);
            };
            let r = conflicts::write(|| {
                self.client
                    .put_item()
                    .table_name(&self.table)
                    .item("PK", s(pk.clone()))
                    .item("SK", s(format!("PLACE#{place}")))
                    .item("holder", s(holder))
                    .item("lease_until", n(until.timestamp_millis()))
                    .item("expires_at", expiry(until))
                    .condition_expression("attribute_not_exists(PK) OR lease_until < :now")
                    .expression_attribute_values(":now", n(now))
                    .send_by(self.client.wire())
            })
            .await;
            if conditional(r)? {
                return Ok(Some(place));
            }
        }
        Ok(None)
    }

    async fn leave(&self, gate: &str, place: u32, holder: &str) -> StoreResult<()> {
        let r = conflicts::write(|| {
            self.client
                .delete_item()
                .table_name(&self.table)
                .set_key(Some(key(format!("GATE#{gate}"), format!("PLACE#{place}"))))
                .condition_expression("holder = :me")
                .expression_attribute_values(":me", s(holder))
                .send_by(self.client.wire())
        })
        .await;
        conditional(r).map(|_| ())
    }

    async fn book(
        &self,
        pace: &str,
        spacing: Duration,
        now: DateTime<Utc>,
    ) -> StoreResult<DateTime<Utc>> {
        let item_key = key(format!("PACE#{pace}"), "PACE".into());
        let spacing = spacing.as_millis() as i64;
        let now_ms = now.timestamp_millis();
        for _ in 0..BOOKING_TRIES {
            let seen: Option<i64> = get_item(&self.client, &self.table, item_key.clone())
                .await?
                .as_ref()
                .and_then(|i| get_n(i, "next_at"));
            let start = seen.map_or(now_ms, |next| next.max(now_ms));
            let next = start + spacing;
            let mut put = self
                .client
                .put_item()
                .table_name(&self.table)
                .set_item(Some(item_key.clone()))
                .item("next_at", n(next))
                .item(
                    "expires_at",
                    expiry(DateTime::from_timestamp_millis(next).unwrap_or(now)),
                );
            put = match seen {
                Some(old) => put
                    .condition_expression("next_at = :seen")
                    .expression_attribute_values(":seen", n(old)),
                None => put.condition_expression("attribute_not_exists(PK)"),
            };
            if conditional(conflicts::write(|| put.clone().send_by(self.client.wire())).await)? {
                return Ok(DateTime::from_timestamp_millis(start).unwrap_or(now));
            }
        }
        Err(StoreError::transient("the pace kept changing; try again"))
    }
}

impl DynamoStore {
    /// The places of gate item `pk` whose lease has not run out at `now` (ms).
    async fn held_places(&self, pk: &str, now: i64) -> StoreResult<HashSet<u32>> {
        let page = self
            .client
            .query()
            .table_name(&self.table)
            .consistent_read(true)
            .key_condition_expression("PK = :pk")
            .expression_attribute_values(":pk", s(pk.to_string()))
            .send_by(self.client.wire())
            .await
            .map_err(sdk)?;
        Ok(page
            .items()
            .iter()
            .filter(|i| get_n::<i64>(i, "lease_until").is_some_and(|l| l >= now))
            .filter_map(|i| get_s(i, "SK")?.strip_prefix("PLACE#")?.parse().ok())
            .collect())
    }
}
