//! Monitors on DynamoDB: item `MON#<id>`, `MON` holding the monitor as JSON and its `version`;
//! `GSI1PK = MONS#<user>` lists a user's monitors (index `ByUser`), and while a monitor can
//! become due `GSI3PK = DUE`, `GSI3SK` = when (index `ByDue`), which the scheduler queries.
//! Every write after the first is conditioned on the version it read.

use crate::dynamo::{conditional, get_item, get_n, get_s, key, n, s, DynamoStore};
use crate::errors::sdk;
use crate::wire::SendBy;
use async_trait::async_trait;
use aws_sdk_dynamodb::types::AttributeValue;
use chrono::{DateTime, Utc};
use sarvcrawl_core::domain::{Monitor, MonitorId, UserId};
use sarvcrawl_core::ports::{MonitorStore, StoreError, StoreResult};
use std::collections::HashMap;

type Item = HashMap<String, AttributeValue>;

const DUE_INDEX: &str = "ByDue";
const USER_INDEX: &str = "ByUser";

fn pk(id: &MonitorId) -> String {
    format!("MON#{id}")
}

fn due(t: DateTime<Utc>) -> String {
    format!("{:015}", t.timestamp_millis().max(0))
}

fn item(m: &Monitor, version: u64) -> StoreResult<Item> {
    let mut item = key(pk(&m.monitor_id), "MON".into());
    item.insert("user_id".into(), s(m.user_id.as_str()));
    item.insert("version".into(), n(version));
    item.insert(
        "body".into(),
        s(serde_json::to_string(m).map_err(StoreError::new)?),
    );
    item.insert("GSI1PK".into(), s(format!("MONS#{}", m.user_id)));
    item.insert("GSI1SK".into(), s(m.monitor_id.as_str()));
    if let Some(at) = m.due_at() {
        item.insert("GSI3PK".into(), s("DUE"));
        item.insert("GSI3SK".into(), s(due(at)));
    }
    Ok(item)
}

fn monitor(item: &Item) -> StoreResult<Monitor> {
    let body = get_s(item, "body").ok_or_else(|| StoreError::permanent("monitor without body"))?;
    let mut m: Monitor = serde_json::from_str(body).map_err(StoreError::new)?;
    m.version = get_n(item, "version").unwrap_or(0);
    Ok(m)
}

impl DynamoStore {
    async fn query_monitors(
        &self,
        index: &str,
        condition: &str,
        values: Vec<(&str, AttributeValue)>,
        forward: bool,
        max: Option<u32>,
    ) -> StoreResult<Vec<Monitor>> {
        let mut out = Vec::new();
        let mut start: Option<Item> = None;
        loop {
            let mut q = self
                .client
                .query()
                .table_name(&self.table)
                .index_name(index)
                .key_condition_expression(condition)
                .scan_index_forward(forward)
                .set_exclusive_start_key(start);
            for (k, v) in &values {
                q = q.expression_attribute_values(*k, v.clone());
            }
            if let Some(m) = max {
                q = q.limit(m as i32);
            }
            let page = q.send_by(self.client.wire()).await.map_err(sdk)?;
            for i in page.items() {
                out.push(monitor(i)?);
            }
            start = page.last_evaluated_key;
            let full = max.is_some_and(|m| out.len() >= m as usize);
            if start.is_none() || full {
                return Ok(out);
            }
        }
    }
}

#[async_trait]
impl MonitorStore for DynamoStore {
    async fn insert_monitor(&self, m: &Monitor) -> StoreResult<()> {
        let r = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(item(m, 0)?))
            .condition_expression("attribute_not_exists(PK)")
            .send_by(self.client.wire())
            .await;
        if conditional(r)? {
            Ok(())
        } else {
            Err(StoreError::transient("monitor id taken"))
        }
    }

    async fn get_monitor(&self, user: &UserId, id: &MonitorId) -> StoreResult<Option<Monitor>> {
        match get_item(&self.client, &self.table, key(pk(id), "MON".into())).await? {
            Some(i) if get_s(&i, "user_id") == Some(user.as_str()) => monitor(&i).map(Some),
            _ => Ok(None),
        }
    }

    async fn list_monitors(&self, user: &UserId) -> StoreResult<Vec<Monitor>> {
        self.query_monitors(
            USER_INDEX,
            "GSI1PK = :u",
            vec![(":u", s(format!("MONS#{user}")))],
            false,
            None,
        )
        .await
    }

    async fn save_monitor(&self, m: &Monitor) -> StoreResult<bool> {
        let r = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(item(m, m.version + 1)?))
            .condition_expression("version = :v AND user_id = :u")
            .expression_attribute_values(":v", n(m.version))
            .expression_attribute_values(":u", s(m.user_id.as_str()))
            .send_by(self.client.wire())
            .await;
        conditional(r)
    }

    async fn delete_monitor(&self, user: &UserId, id: &MonitorId) -> StoreResult<bool> {
        let r = self
            .client
            .delete_item()
            .table_name(&self.table)
            .set_key(Some(key(pk(id), "MON".into())))
            .condition_expression("user_id = :u")
            .expression_attribute_values(":u", s(user.as_str()))
            .send_by(self.client.wire())
            .await;
        conditional(r)
    }

    async fn due_monitors(&self, now: DateTime<Utc>, max: u32) -> StoreResult<Vec<Monitor>> {
        // The index is eventually consistent: a claim re-checks the version it read.
        self.query_monitors(
            DUE_INDEX,
            "GSI3PK = :d AND GSI3SK <= :t",
            vec![(":d", s("DUE")), (":t", s(due(now)))],
            true,
            Some(max),
        )
        .await
    }
}
