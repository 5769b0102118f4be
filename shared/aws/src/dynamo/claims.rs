//! A job's nodes: claiming the links of a page (one transaction for all of them, with the job's
//! counters), taking a node for fetching under a lease, and reading nodes.

use super::items::{
    build, cancellation, conditional, conditional_output, count_key, get_item, get_n, get_s,
    job_pk, key, n, node_from_item, node_item, node_sk, s, url_digest,
};
use super::DynamoStore;
use crate::conflicts;
use crate::errors::sdk;
use crate::wire::SendBy;
use aws_sdk_dynamodb::types::{ReturnValue, TransactWriteItem, Update};
use futures::StreamExt;
use sarvcrawl_core::domain::{JobId, UserId};
use sarvcrawl_core::ports::Gates;
use sarvcrawl_core::ports::{
    NewNode, NodeRow, NodeStatus, StoreError, StoreResult, MAX_NODES_PER_JOB,
};
use std::collections::HashSet;
use std::time::Duration;

/// Most URLs one transaction claims (with the counters, DynamoDB's 100 actions).
const MAX_CLAIMS: usize = 99;
/// Rounds of a claim that keeps meeting other pages' claims before it gives up for now.
const CLAIM_ROUNDS: u32 = 30;
/// The links of one page to claim.
pub(crate) struct Claims {
    parent: String,
    nodes: Vec<NewNode>,
    limit: u64,
}

/// How long a lease item outlives its lease before TTL removes it: as long as the work and
/// render queues keep a message (`MessageRetentionPeriod` in template.yaml), so that no copy
/// of a task can come after its page's lease item is gone.
pub(crate) const LEASE_KEPT_SECS: i64 = 4 * 24 * 60 * 60;
/// How long one process may claim for a job before another takes over.
const CLAIM_LEASE_SECS: i64 = 30;
/// Skipped URLs recorded at once by conditional puts.
const SKIP_WRITES: usize = 16;
/// How long after taking the claim gate its holder writes skipped URLs without a condition:
/// well inside the gate's lease, so no other process can have recorded them meanwhile.
const EXCLUSIVE_SECS: u64 = CLAIM_LEASE_SECS as u64 - 10;

impl DynamoStore {
    /// [`JobStore::add_nodes`](sarvcrawl_core::ports::JobStore::add_nodes): the URLs neither
    /// this process nor the table knows are claimed together with those of the job's other
    /// pages this process claims at the same moment (see `group`).
    pub(crate) async fn claim(
        &self,
        user: &UserId,
        job: &JobId,
        parent: &str,
        nodes: &[NewNode],
        limit: u64,
    ) -> StoreResult<Vec<NewNode>> {
        let pk = job_pk(user, job);
        let mut seen = HashSet::new();
        let mut fresh: Vec<&NewNode> = self
            .known
            .unknown(&pk, nodes)
            .into_iter()
            .map(|(n, _)| n)
            .filter(|n| seen.insert(n.url.as_str()))
            .collect();
        if fresh.is_empty() {
            return Ok(Vec::new());
        }
        // Eventually consistent: a URL recorded a moment ago that this read misses fails its
        // condition in the claim below instead.
        let keys = fresh
            .iter()
            .map(|n| key(pk.clone(), node_sk(&n.url)))
            .collect();
        let recorded = self.recorded(keys, false).await?;
        self.known
            .insert(&pk, recorded.iter().map(|u| url_digest(u)));
        fresh.retain(|n| !recorded.contains(&n.url));
        if fresh.is_empty() {
            return Ok(Vec::new());
        }
        let request = Claims {
            parent: parent.to_string(),
            nodes: fresh.into_iter().cloned().collect(),
            limit,
        };
        let key = pk.as_str();
        self.claims
            .write(key, request, |batch| async move {
                let mut seen = HashSet::new();
                let merged: Vec<(&str, &NewNode)> = batch
                    .iter()
                    .flat_map(|r| r.nodes.iter().map(|n| (r.parent.as_str(), n)))
                    .filter(|(_, n)| seen.insert(n.url.as_str()))
                    .collect();
                let limit = batch.iter().map(|r| r.limit).max().unwrap_or(0);
                match self.claim_fresh(key, merged, limit).await {
                    Ok(mut claimed) => batch
                        .iter()
                        .map(|r| {
                            Ok(r.nodes
                                .iter()
                                .filter(|n| claimed.remove(&n.url))
                                .cloned()
                                .collect())
                        })
                        .collect(),
                    Err(e) => {
                        let message = e.to_string();
                        batch
                            .iter()
                            .map(|_| Err(StoreError::transient(message.clone())))
                            .collect()
                    }
                }
            })
            .await
    }

    /// Claims `fresh` (each URL with the page it was found on), numbered after the job's last,
    /// in as few transactions as they fit, each conditioned on that number: a URL another
    /// process claimed meanwhile fails its own condition and is dropped, the rest are tried
    /// again. The URLs claimed.
    async fn claim_fresh(
        &self,
        pk: &str,
        fresh: Vec<(&str, &NewNode)>,
        limit: u64,
    ) -> StoreResult<HashSet<String>> {
        // One process claims for a job at a time: a claim that lost the race for the job's
        // next number would be a whole transaction paid for nothing.
        let gate = format!("claims:{pk}");
        let holder = ulid::Ulid::new().to_string();
        let started = tokio::time::Instant::now();
        let mut pause = Duration::from_millis(10);
        let exclusive_until = loop {
            let entering = tokio::time::Instant::now();
            let until = self.clock.now() + chrono::Duration::seconds(CLAIM_LEASE_SECS);
            if self.enter(&gate, 1, &holder, until).await?.is_some() {
                break entering + Duration::from_secs(EXCLUSIVE_SECS);
            }
            if started.elapsed() > Duration::from_secs(CLAIM_LEASE_SECS as u64 * 2) {
                return Err(StoreError::transient(
                    "the job's links are being claimed elsewhere",
                ));
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_millis(500));
        };
        let claimed = self.claim_rounds(pk, fresh, limit, exclusive_until).await;
        if let Err(e) = self.leave(&gate, 0, &holder).await {
            tracing::warn!(error = %e, "the claim gate was not given back; its lease frees it");
        }
        claimed
    }

    /// The claim itself, in rounds of one transaction each, by the holder of the job's claim
    /// gate, which no other process holds before `exclusive_until`.
    async fn claim_rounds(
        &self,
        pk: &str,
        mut fresh: Vec<(&str, &NewNode)>,
        limit: u64,
        exclusive_until: tokio::time::Instant,
    ) -> StoreResult<HashSet<String>> {
        // Read again, strongly consistent, now that no other process claims for the job: a
        // claim holding a URL claimed meanwhile fails as a whole.
        let keys = fresh
            .iter()
            .map(|(_, n)| key(pk.to_string(), node_sk(&n.url)))
            .collect();
        let recorded = self.recorded(keys, true).await?;
        self.known
            .insert(pk, recorded.iter().map(|u| url_digest(u)));
        fresh.retain(|(_, n)| !recorded.contains(&n.url));
        let mut claimed = HashSet::new();
        for _ in 0..CLAIM_ROUNDS {
            if fresh.is_empty() {
                return Ok(claimed);
            }
            let Some(counts) = self.counts(pk).await? else {
                return Ok(claimed);
            };
            let numbered: u64 = get_n(&counts, "nodes").unwrap_or(0);
            let discovered: u64 = get_n(&counts, "discovered").unwrap_or(0);
            fresh.truncate(MAX_NODES_PER_JOB.saturating_sub(numbered) as usize);
            if fresh.is_empty() {
                return Ok(claimed);
            }
            // This round: the URLs up to the transaction's room, each claimed while the job's
            // limit allows and skipped for `limit` after.
            let mut room = limit.saturating_sub(discovered);
            let mut batch = Vec::new();
            let mut claims = 0;
            for &(parent, node) in &fresh {
                let skip = node.skip_at_limit(room == 0);
                if skip.is_none() {
                    if claims == MAX_CLAIMS {
                        break;
                    }
                    claims += 1;
                    room -= 1;
                }
                batch.push((parent, node, skip));
            }
            let first = numbered + 1;
            let count = build(
                Update::builder()
                    .table_name(&self.table)
                    .set_key(Some(count_key(pk)))
                    .update_expression("ADD nodes :k, discovered :c, pending :c")
                    .condition_expression("nodes = :seen")
                    .expression_attribute_values(":k", n(batch.len()))
                    .expression_attribute_values(":c", n(claims))
                    .expression_attribute_values(":seen", n(numbered))
                    .build(),
            )?;
            let mut items = vec![TransactWriteItem::builder().update(count).build()];
            let mut in_tx = Vec::new();
            for (i, (parent, node, skip)) in batch.iter().enumerate() {
                if skip.is_none() {
                    let item = node_item(
                        pk,
                        first + i as u64,
                        &node.url,
                        Some(parent),
                        node.depth,
                        None,
                    );
                    items.push(
                        TransactWriteItem::builder()
                            .put(self.put(item, "attribute_not_exists(PK)")?)
                            .build(),
                    );
                    in_tx.push(*node);
                }
            }
            match conflicts::transact(&self.client, items).await {
                Ok(()) => {
                    let skipped: Vec<_> = batch
                        .iter()
                        .enumerate()
                        .filter_map(|(i, (parent, node, skip))| {
                            skip.map(|r| {
                                node_item(
                                    pk,
                                    first + i as u64,
                                    &node.url,
                                    Some(parent),
                                    node.depth,
                                    Some(r),
                                )
                            })
                        })
                        .collect();
                    // Nodes are recorded only under the gate, and these were read absent
                    // (consistently) under it: while it is surely still held, they go in
                    // batches without conditions.
                    for chunk in skipped.chunks(super::BATCH_WRITE_MAX) {
                        if tokio::time::Instant::now() < exclusive_until {
                            self.batch_put(chunk).await?;
                        } else {
                            self.record_skipped(chunk.to_vec()).await?;
                        }
                    }
                    self.known
                        .insert(pk, batch.iter().map(|(_, node, _)| url_digest(&node.url)));
                    claimed.extend(in_tx.iter().map(|node| node.url.clone()));
                    fresh.drain(..batch.len());
                }
                Err(e) => {
                    let Some(failed) = cancellation(&e) else {
                        return Err(sdk(e));
                    };
                    // Claimed meanwhile by another page: dropped. (A failed first condition,
                    // the counters moving on, only needs them read again.)
                    let lost: HashSet<&str> = in_tx
                        .iter()
                        .zip(failed.iter().skip(1))
                        .filter(|(_, f)| **f)
                        .map(|(node, _)| node.url.as_str())
                        .collect();
                    self.known.insert(pk, lost.iter().map(|u| url_digest(u)));
                    fresh.retain(|(_, node)| !lost.contains(node.url.as_str()));
                }
            }
        }
        Err(StoreError::transient(
            "other pages kept claiming links; try again",
        ))
    }

    /// The URLs of the nodes of `keys` the job has recorded (only their `url` read).
    async fn recorded(
        &self,
        keys: Vec<super::items::Item>,
        consistent: bool,
    ) -> StoreResult<HashSet<String>> {
        Ok(self
            .batch_get_only(keys, consistent, Some("url"))
            .await?
            .iter()
            .filter_map(|i| get_s(i, "url").map(String::from))
            .collect())
    }

    /// Records skipped URLs, each only if the job has not recorded it meanwhile.
    async fn record_skipped(&self, items: Vec<super::items::Item>) -> StoreResult<()> {
        let mut writes = futures::stream::iter(items.into_iter().map(|item| self.put_if_new(item)))
            .buffer_unordered(SKIP_WRITES);
        while let Some(r) = writes.next().await {
            r?;
        }
        Ok(())
    }

    /// Writes `item` unless an item with its key exists; whether it wrote it.
    pub(crate) async fn put_if_new(&self, item: super::items::Item) -> StoreResult<bool> {
        let r = conflicts::write(|| {
            self.client
                .put_item()
                .table_name(&self.table)
                .set_item(Some(item.clone()))
                .condition_expression("attribute_not_exists(PK)")
                .send_by(self.client.wire())
        })
        .await;
        conditional(r)
    }

    /// [`JobStore::start_node`](sarvcrawl_core::ports::JobStore::start_node): a lease item of
    /// its own beside the node (`URL#<hash>#RUN`, in no index, so a lease costs one small
    /// write), taken when free, run out or already this holder's; then the node must still be
    /// pending. For a task's own page (`task_page`, see
    /// [`JobStore::start_task_node`](sarvcrawl_core::ports::JobStore::start_task_node)) the
    /// node is read only when the put replaced an earlier lease item: a node never leased is
    /// pending. Lease items are kept (given back as a run-out lease, not deleted) for longer
    /// than the task queue keeps a message, so any later copy of a task finds its page's.
    pub(crate) async fn take_node(
        &self,
        user: &UserId,
        job: &JobId,
        url: &str,
        holder: &str,
        lease_until: chrono::DateTime<chrono::Utc>,
        task_page: bool,
    ) -> StoreResult<bool> {
        let pk = job_pk(user, job);
        let mut lease = key(pk.clone(), lease_sk(url));
        lease.insert("holder".into(), s(holder));
        lease.insert("lease_until".into(), n(lease_until.timestamp_millis()));
        lease.insert(
            "expires_at".into(),
            n(lease_until.timestamp() + LEASE_KEPT_SECS),
        );
        let r = conflicts::write(|| {
            self.client
                .put_item()
                .table_name(&self.table)
                .set_item(Some(lease.clone()))
                .condition_expression(
                    "attribute_not_exists(PK) OR lease_until < :now OR holder = :me",
                )
                .expression_attribute_values(":now", n(self.clock.now().timestamp_millis()))
                .expression_attribute_values(":me", s(holder))
                .return_values(ReturnValue::AllOld)
                .send_by(self.client.wire())
        })
        .await;
        let Some(out) = conditional_output(r)? else {
            return Ok(false);
        };
        if task_page && out.attributes.is_none_or(|earlier| earlier.is_empty()) {
            return Ok(true);
        }
        let node = get_item(&self.client, &self.table, key(pk, node_sk(url))).await?;
        Ok(node
            .as_ref()
            .and_then(node_from_item)
            .is_some_and(|n| n.status.is_pending()))
    }

    /// [`JobStore::release_node`](sarvcrawl_core::ports::JobStore::release_node): its lease
    /// runs out now. The item stays (see `take_node`); a node never leased gets none.
    pub(crate) async fn give_back_node(
        &self,
        user: &UserId,
        job: &JobId,
        url: &str,
    ) -> StoreResult<()> {
        let r = conflicts::write(|| {
            self.client
                .update_item()
                .table_name(&self.table)
                .set_key(Some(key(job_pk(user, job), lease_sk(url))))
                .update_expression("SET lease_until = :run_out")
                .condition_expression("attribute_exists(PK)")
                .expression_attribute_values(":run_out", n(0))
                .send_by(self.client.wire())
        })
        .await;
        conditional(r)?;
        Ok(())
    }

    /// [`JobStore::get_node`](sarvcrawl_core::ports::JobStore::get_node): the node and its
    /// lease item in one query (their keys are neighbours); a pending node under a live lease
    /// is `running`.
    pub(crate) async fn node(
        &self,
        user: &UserId,
        job: &JobId,
        url: &str,
    ) -> StoreResult<Option<NodeRow>> {
        let (node_key, lease_key) = (node_sk(url), lease_sk(url));
        let out = self
            .client
            .query()
            .table_name(&self.table)
            .consistent_read(true)
            .key_condition_expression("PK = :pk AND SK BETWEEN :node AND :lease")
            .expression_attribute_values(":pk", s(job_pk(user, job)))
            .expression_attribute_values(":node", s(node_key.as_str()))
            .expression_attribute_values(":lease", s(lease_key.as_str()))
            .send_by(self.client.wire())
            .await
            .map_err(sdk)?;
        let items = out.items.unwrap_or_default();
        let find = |sk: &str| items.iter().find(|i| get_s(i, "SK") == Some(sk));
        let Some(mut row) = find(&node_key).and_then(node_from_item) else {
            return Ok(None);
        };
        let now = self.clock.now().timestamp_millis();
        let leased = find(&lease_key)
            .and_then(|l| get_n::<i64>(l, "lease_until"))
            .is_some_and(|until| until >= now);
        if row.status == NodeStatus::Queued && leased {
            row.status = NodeStatus::Running;
        }
        Ok(Some(row))
    }
}

/// The sort key of a node's lease item: right after the node's own.
pub(crate) fn lease_sk(url: &str) -> String {
    format!("{}#RUN", node_sk(url))
}
