//! A job's frontier on DynamoDB, and what the sweep reads and writes. Claimed URLs are
//! numbered in claim order (`SEQ`, index `BySeq`) without gaps among the claimed ones, since a
//! claim numbers its URLs in the transaction that moves the job's `nodes` counter. The
//! frontier is then a cursor: `released`, the number up to which every claimed URL has been
//! let go to the queue. Letting URLs go moves the cursor and counts them in `in_flight` in one
//! write conditioned on the cursor read and on `in_flight` staying under the job's
//! `max_concurrency`, so racing workers never let one URL go twice nor exceed the bound.

use super::claims::lease_sk;
use super::items::{
    activity, conditional, count_key, get_n, get_s, job_pk, key, n, parse_activity, s, Item,
};
use super::{DynamoStore, ACTIVE_INDEX, SEQ_INDEX};
use crate::conflicts;
use crate::errors::sdk;
use crate::wire::{PagesBy, SendBy};
use chrono::{DateTime, Utc};
use sarvcrawl_core::domain::{JobId, JobKind, UserId};
use sarvcrawl_core::ports::{ActiveJob, NewNode, NodeRow, NodeStatus, StoreResult};
use std::collections::{HashMap, HashSet};

/// Rounds of letting URLs go that keep losing to other workers before this one leaves it to
/// them.
const ADVANCE_ROUNDS: u32 = 5;

/// What a move of the frontier reads of the job item and its counters.
const MOVE_READS: &[&str] = &[
    "user_id",
    "status",
    "released",
    "nodes",
    "in_flight",
    "pending",
];

fn claimed(item: &Item) -> Option<(u64, NewNode)> {
    if get_s(item, "status") == Some("skipped") {
        return None;
    }
    Some((
        get_n(item, "SEQ")?,
        NewNode {
            url: get_s(item, "url")?.to_string(),
            depth: get_n(item, "depth")?,
            skip: None,
        },
    ))
}

impl DynamoStore {
    /// The job's nodes numbered from `from` to `to`, in order, at most `max` of them.
    async fn numbered(&self, pk: &str, from: u64, to: u64, max: usize) -> StoreResult<Vec<Item>> {
        let mut out = Vec::new();
        let mut pages = self
            .client
            .query()
            .table_name(&self.table)
            .index_name(SEQ_INDEX)
            .consistent_read(true)
            .key_condition_expression("PK = :pk AND SEQ BETWEEN :from AND :to")
            .expression_attribute_values(":pk", s(pk))
            .expression_attribute_values(":from", n(from))
            .expression_attribute_values(":to", n(to))
            .limit(max.clamp(1, 1000) as i32)
            .pages_by(self.client.wire());
        while let Some(item) = pages.next().await {
            out.push(item.map_err(sdk)?);
            if out.len() >= max {
                break;
            }
        }
        Ok(out)
    }

    /// [`JobStore::advance`](sarvcrawl_core::ports::JobStore::advance). Calls for one job
    /// that arrive while this process moves its frontier wait for that move and then move it
    /// once for all of them (see `group`); the first of them gets what was let go.
    pub(crate) async fn advance_frontier(
        &self,
        user: &UserId,
        job: &JobId,
        max_in_flight: u32,
    ) -> StoreResult<Vec<NewNode>> {
        let pk = job_pk(user, job);
        let key = pk.as_str();
        self.advances
            .write(key, max_in_flight, |batch| async move {
                let max = batch.iter().copied().max().unwrap_or(max_in_flight);
                let mut answers = vec![self.move_frontier(user, job, max).await];
                answers.extend(batch.iter().skip(1).map(|_| Ok(Vec::new())));
                answers
            })
            .await
    }

    /// Lets go as many of the job's claimed URLs as `max_in_flight` allows.
    async fn move_frontier(
        &self,
        user: &UserId,
        job: &JobId,
        max_in_flight: u32,
    ) -> StoreResult<Vec<NewNode>> {
        let pk = job_pk(user, job);
        for _ in 0..ADVANCE_ROUNDS {
            let (Some(item), Some(counts)) = self.job_items(&pk, Some(MOVE_READS)).await? else {
                return Ok(Vec::new());
            };
            let active = matches!(get_s(&item, "status"), Some("queued" | "running"));
            if get_s(&item, "user_id") != Some(user.as_str()) || !active {
                return Ok(Vec::new());
            }
            let count = |k: &str| get_n::<u64>(&counts, k).unwrap_or(0);
            let (released, numbered, in_flight) =
                (count("released"), count("nodes"), count("in_flight"));
            let room = u64::from(max_in_flight).saturating_sub(in_flight) as usize;
            if room == 0 || count("pending") <= in_flight || released >= numbered {
                return Ok(Vec::new());
            }
            // The next claimed URLs after the cursor (skipped ones in between are passed).
            let mut let_go = Vec::new();
            let mut cursor = released;
            let mut from = released + 1;
            while let_go.len() < room && from <= numbered {
                let page = self.numbered(&pk, from, numbered, room + 50).await?;
                for item in &page {
                    if let_go.len() == room {
                        break;
                    }
                    let seq: u64 = get_n(item, "SEQ").unwrap_or(cursor);
                    if let Some((_, node)) = claimed(item) {
                        let_go.push(node);
                    }
                    cursor = cursor.max(seq);
                }
                if page.is_empty() || let_go.len() == room {
                    break;
                }
                from = cursor + 1;
            }
            if let_go.len() < room {
                // Every claimed URL up to the last number is let go (unclaimed numbers are
                // skipped URLs still being written).
                cursor = cursor.max(numbered);
            }
            let r = conflicts::write(|| {
                self.client
                    .update_item()
                    .table_name(&self.table)
                    .set_key(Some(count_key(&pk)))
                    .update_expression("SET released = :to ADD in_flight :k")
                    .condition_expression("released = :from AND in_flight <= :most")
                    .expression_attribute_values(":to", n(cursor))
                    .expression_attribute_values(":from", n(released))
                    .expression_attribute_values(":k", n(let_go.len()))
                    .expression_attribute_values(
                        ":most",
                        n(u64::from(max_in_flight).saturating_sub(let_go.len() as u64)),
                    )
                    .send_by(self.client.wire())
            })
            .await;
            if conditional(r)? {
                return Ok(let_go);
            }
            // Another worker moved the frontier first: look again.
        }
        Ok(Vec::new())
    }

    /// [`JobStore::released_unstarted`](sarvcrawl_core::ports::JobStore::released_unstarted):
    /// claimed URLs up to the cursor that are still queued and under no live lease.
    pub(crate) async fn unstarted(&self, user: &UserId, job: &JobId) -> StoreResult<Vec<NewNode>> {
        let pk = job_pk(user, job);
        let released = self.counter(&pk, "released").await?;
        let queued: Vec<NewNode> = self
            .numbered(&pk, 1, released, usize::MAX)
            .await?
            .iter()
            .filter(|i| get_s(i, "status") == Some("queued"))
            .filter_map(claimed)
            .map(|(_, node)| node)
            .collect();
        let leased = self
            .live_leases(&pk, queued.iter().map(|n| n.url.as_str()))
            .await?;
        Ok(queued
            .into_iter()
            .filter(|node| !leased.contains(&lease_sk(&node.url)))
            .collect())
    }

    /// The lease items (by sort key) of the job's `urls` whose lease has not run out.
    async fn live_leases(
        &self,
        pk: &str,
        urls: impl Iterator<Item = &str>,
    ) -> StoreResult<HashSet<String>> {
        let keys: Vec<Item> = urls.map(|u| key(pk.to_string(), lease_sk(u))).collect();
        if keys.is_empty() {
            return Ok(HashSet::new());
        }
        let now = self.clock.now().timestamp_millis();
        Ok(self
            .batch_get(keys, true)
            .await?
            .iter()
            .filter(|l| get_n::<i64>(l, "lease_until").is_some_and(|until| until >= now))
            .filter_map(|l| get_s(l, "SK").map(String::from))
            .collect())
    }

    /// [`JobStore::tree`](sarvcrawl_core::ports::JobStore::tree). A node's lease is an item
    /// apart from it: a queued node let go to the queue whose lease is live is `running`, as
    /// `get_node` says.
    pub(crate) async fn nodes(
        &self,
        user: &UserId,
        job: &JobId,
        max: u32,
    ) -> StoreResult<Vec<NodeRow>> {
        let pk = job_pk(user, job);
        let items = self.numbered(&pk, 0, u64::MAX >> 1, max as usize).await?;
        let released = self.counter(&pk, "released").await?;
        let mut rows: Vec<NodeRow> = Vec::with_capacity(items.len());
        let mut let_go = Vec::new();
        for item in &items {
            let Some(row) = super::items::node_from_item(item) else {
                continue;
            };
            let seq = get_n::<u64>(item, "SEQ").unwrap_or(u64::MAX);
            if row.status == NodeStatus::Queued && seq <= released {
                let_go.push(rows.len());
            }
            rows.push(row);
        }
        let urls = let_go.iter().map(|&i| rows[i].url.as_str());
        let leased = self.live_leases(&pk, urls).await?;
        for i in let_go {
            if leased.contains(&lease_sk(&rows[i].url)) {
                rows[i].status = NodeStatus::Running;
            }
        }
        Ok(rows)
    }

    /// [`JobStore::active_jobs`](sarvcrawl_core::ports::JobStore::active_jobs): the activity
    /// index lists them, their counters say their last progress.
    pub(crate) async fn active(&self, max: u32) -> StoreResult<Vec<ActiveJob>> {
        let mut jobs = Vec::new();
        let mut pages = self
            .client
            .query()
            .table_name(&self.table)
            .index_name(ACTIVE_INDEX)
            .key_condition_expression("GSI2PK = :a")
            .expression_attribute_values(":a", s("ACTIVE"))
            .pages_by(self.client.wire());
        while let Some(item) = pages.next().await {
            let item = item.map_err(sdk)?;
            let kind = get_s(&item, "kind").and_then(JobKind::parse);
            if let (Some(pk), Some(user), Some(kind)) =
                (get_s(&item, "PK"), get_s(&item, "user_id"), kind)
            {
                jobs.push((pk.to_string(), user.to_string(), kind));
            }
            if jobs.len() >= max as usize {
                break;
            }
        }
        let keys = jobs.iter().map(|(pk, ..)| count_key(pk)).collect();
        let counts: HashMap<String, Item> = self
            .batch_get(keys, true)
            .await?
            .into_iter()
            .filter_map(|c| Some((get_s(&c, "PK")?.to_string(), c)))
            .collect();
        Ok(jobs
            .into_iter()
            .filter_map(|(pk, user, kind)| {
                let c = counts.get(&pk)?;
                let (_, job) = pk.rsplit_once('#')?;
                Some(ActiveJob {
                    user_id: UserId(user),
                    job_id: JobId(job.into()),
                    kind,
                    activity: parse_activity(get_s(c, "act"))?,
                    pending: get_n(c, "pending").unwrap_or(0),
                    repairs: get_n(c, "repairs").unwrap_or(0),
                })
            })
            .collect())
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
                .set_key(Some(count_key(&job_pk(user, job))))
                .update_expression("SET act = :now ADD repairs :one")
                .condition_expression("act = :seen")
                .expression_attribute_values(":now", s(activity(at)))
                .expression_attribute_values(":seen", s(activity(seen)))
                .expression_attribute_values(":one", n(1))
                .send_by(self.client.wire())
        })
        .await;
        conditional(r)
    }
}
