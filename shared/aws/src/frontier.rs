//! A job's frontier on DynamoDB, and what the sweep reads and writes. A claimed URL gets a
//! `WAIT#<seq>` item in its job's partition; letting it go to the queue deletes that item and
//! counts it in the job's `in_flight` in one transaction conditioned on `in_flight` staying
//! under the job's `max_concurrency`, so any number of workers releasing at once never let one
//! URL go twice nor exceed the bound. Reads are strongly consistent.

use crate::conflicts;
use crate::dynamo::{
    activity, build, cancellation, conditional, get_n, get_s, job_pk, key, n, s, DynamoStore, Item,
    ACTIVE_INDEX, JOB_SK,
};
use crate::errors::sdk;
use aws_sdk_dynamodb::types::{Delete, TransactWriteItem, Update};
use chrono::{DateTime, Utc};
use sarvcrawl_core::domain::{JobId, JobKind, UserId};
use sarvcrawl_core::ports::{ActiveJob, NewNode, StoreResult};
use std::collections::HashSet;

/// The frontier item of the URL claimed as number `seq` of the job in partition `pk`.
pub(crate) fn wait_item(pk: &str, seq: u64, url: &str, depth: u32) -> Item {
    let mut item = key(pk.to_string(), format!("WAIT#{seq:012}"));
    item.insert("url".into(), s(url));
    item.insert("depth".into(), n(depth));
    item
}

fn node_of(item: &Item) -> Option<NewNode> {
    Some(NewNode {
        url: get_s(item, "url")?.to_string(),
        depth: get_n(item, "depth")?,
        skip: None,
    })
}

impl DynamoStore {
    /// Items of partition `pk` whose sort key starts with `prefix`, those with a `status` of
    /// `queued` only when `queued_only`.
    async fn items_of(&self, pk: &str, prefix: &str, queued_only: bool) -> StoreResult<Vec<Item>> {
        let mut out = Vec::new();
        let mut start: Option<Item> = None;
        loop {
            let mut q = self
                .client
                .query()
                .table_name(&self.table)
                .consistent_read(true)
                .key_condition_expression("PK = :pk AND begins_with(SK, :p)")
                .expression_attribute_values(":pk", s(pk))
                .expression_attribute_values(":p", s(prefix))
                .set_exclusive_start_key(start.take());
            if queued_only {
                q = q
                    .filter_expression("#s = :queued")
                    .expression_attribute_names("#s", "status")
                    .expression_attribute_values(":queued", s("queued"));
            }
            let page = q.send().await.map_err(sdk)?;
            out.extend(page.items().iter().cloned());
            start = page.last_evaluated_key;
            if start.is_none() {
                return Ok(out);
            }
        }
    }

    /// [`JobStore::advance`](sarvcrawl_core::ports::JobStore::advance).
    pub(crate) async fn advance_frontier(
        &self,
        user: &UserId,
        job: &JobId,
        max_in_flight: u32,
    ) -> StoreResult<Vec<NewNode>> {
        let pk = job_pk(user, job);
        let Some(item) = self.job_item(&pk).await? else {
            return Ok(Vec::new());
        };
        let active = matches!(get_s(&item, "status"), Some("queued" | "running"));
        if get_s(&item, "user_id") != Some(user.as_str()) || !active {
            return Ok(Vec::new());
        }
        let in_flight: u64 = get_n(&item, "in_flight").unwrap_or(0);
        let pending: u64 = get_n(&item, "pending").unwrap_or(0);
        let room = u64::from(max_in_flight).saturating_sub(in_flight);
        if room == 0 || pending <= in_flight {
            return Ok(Vec::new());
        }
        let page = self
            .client
            .query()
            .table_name(&self.table)
            .consistent_read(true)
            .key_condition_expression("PK = :pk AND begins_with(SK, :p)")
            .expression_attribute_values(":pk", s(pk.clone()))
            .expression_attribute_values(":p", s("WAIT#"))
            .limit(room.min(100) as i32)
            .send()
            .await
            .map_err(sdk)?;
        let mut let_go = Vec::new();
        for wait in page.items() {
            let (Some(sk), Some(node)) = (get_s(wait, "SK"), node_of(wait)) else {
                continue;
            };
            let delete = build(
                Delete::builder()
                    .table_name(&self.table)
                    .set_key(Some(key(pk.clone(), sk.to_string())))
                    .condition_expression("attribute_exists(PK)")
                    .build(),
            )?;
            let count = build(
                Update::builder()
                    .table_name(&self.table)
                    .set_key(Some(key(pk.clone(), JOB_SK.into())))
                    .update_expression("ADD in_flight :one")
                    .condition_expression("in_flight < :max AND #s IN (:q, :r) AND user_id = :u")
                    .expression_attribute_names("#s", "status")
                    .expression_attribute_values(":one", n(1))
                    .expression_attribute_values(":max", n(max_in_flight))
                    .expression_attribute_values(":q", s("queued"))
                    .expression_attribute_values(":r", s("running"))
                    .expression_attribute_values(":u", s(user.as_str()))
                    .build(),
            )?;
            let items = vec![
                TransactWriteItem::builder().delete(delete).build(),
                TransactWriteItem::builder().update(count).build(),
            ];
            match conflicts::transact(&self.client, items).await {
                Ok(()) => let_go.push(node),
                Err(e) => match cancellation(&e) {
                    // Another worker let it go first.
                    Some(c) if c.first() == Some(&true) => continue,
                    // The job is full, or ended.
                    Some(c) if c.get(1) == Some(&true) => break,
                    _ => return Err(sdk(e)),
                },
            }
        }
        Ok(let_go)
    }

    /// [`JobStore::released_unstarted`](sarvcrawl_core::ports::JobStore::released_unstarted).
    pub(crate) async fn unstarted(&self, user: &UserId, job: &JobId) -> StoreResult<Vec<NewNode>> {
        let pk = job_pk(user, job);
        let waiting: HashSet<String> = self
            .items_of(&pk, "WAIT#", false)
            .await?
            .iter()
            .filter_map(|i| get_s(i, "url").map(String::from))
            .collect();
        Ok(self
            .items_of(&pk, "URL#", true)
            .await?
            .iter()
            .filter_map(node_of)
            .filter(|n| !waiting.contains(&n.url))
            .collect())
    }

    /// [`JobStore::active_jobs`](sarvcrawl_core::ports::JobStore::active_jobs), from the
    /// activity index (which projects what is read here).
    pub(crate) async fn active(&self, max: u32) -> StoreResult<Vec<ActiveJob>> {
        let mut out = Vec::new();
        let mut start: Option<Item> = None;
        loop {
            let page = self
                .client
                .query()
                .table_name(&self.table)
                .index_name(ACTIVE_INDEX)
                .key_condition_expression("GSI2PK = :a")
                .expression_attribute_values(":a", s("ACTIVE"))
                .set_exclusive_start_key(start.take())
                .send()
                .await
                .map_err(sdk)?;
            for item in page.items() {
                let job = get_s(item, "PK")
                    .and_then(|pk| pk.rsplit_once('#'))
                    .map(|(_, j)| j);
                let at = get_s(item, "GSI2SK")
                    .and_then(|a| a.parse::<i64>().ok())
                    .and_then(DateTime::from_timestamp_millis);
                let kind = get_s(item, "kind").and_then(JobKind::parse);
                if let (Some(u), Some(j), Some(activity), Some(kind)) =
                    (get_s(item, "user_id"), job, at, kind)
                {
                    out.push(ActiveJob {
                        user_id: UserId(u.into()),
                        job_id: JobId(j.into()),
                        kind,
                        activity,
                        pending: get_n(item, "pending").unwrap_or(0),
                        repairs: get_n(item, "repairs").unwrap_or(0),
                    });
                }
                if out.len() >= max as usize {
                    return Ok(out);
                }
            }
            start = page.last_evaluated_key;
            if start.is_none() {
                return Ok(out);
            }
        }
    }

    /// [`JobStore::note_repair`](sarvcrawl_core::ports::JobStore::note_repair).
    pub(crate) async fn repaired(
        &self,
        user: &UserId,
        job: &JobId,
        seen: DateTime<Utc>,
        at: DateTime<Utc>,
    ) -> StoreResult<bool> {
        let r = conflicts::write(|| {
            self.client
                .update_item()
                .table_name(&self.table)
                .set_key(Some(key(job_pk(user, job), JOB_SK.into())))
                .update_expression("SET GSI2SK = :now ADD repairs :one")
                .condition_expression("GSI2SK = :seen AND #s IN (:q, :r) AND user_id = :u")
                .expression_attribute_names("#s", "status")
                .expression_attribute_values(":now", s(activity(at)))
                .expression_attribute_values(":seen", s(activity(seen)))
                .expression_attribute_values(":one", n(1))
                .expression_attribute_values(":q", s("queued"))
                .expression_attribute_values(":r", s("running"))
                .expression_attribute_values(":u", s(user.as_str()))
                .send()
        })
        .await;
        conditional(r)
    }
}
