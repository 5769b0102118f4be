//! The job store on one DynamoDB table. Every race the core cares about is a conditional write:
//! the slot and the job in one transaction, a URL claimed with the job's counters in one
//! transaction, a node completed and counted in one transaction, the final status set with the
//! slot freed in one transaction.
//!
//! Items (`PK`, `SK`):
//! - job `JOB#<user>#<id>`, `JOB`: owner, request, status, counters (`in_flight`: nodes let go
//!   to the queue and not done; `repairs`: the sweep's since the last progress);
//!   `GSI1PK = USER#<user>`, `GSI1SK = <id>` lists a user's jobs; `GSI2PK = ACTIVE` while not
//!   final, `GSI2SK` = last progress time, for the sweep.
//! - slot `USER#<user>`, `SLOT#<kind>`: the job holding it and `lease_until`.
//! - node `JOB#<user>#<id>`, `URL#<hash>`: one discovered URL; `SEQ` orders the tree (index
//!   `BySeq`).
//! - frontier `JOB#<user>#<id>`, `WAIT#<seq>`: a claimed URL waiting to be let go to the queue
//!   (see `frontier.rs`).
//! - result `JOB#<user>#<id>`, `RES#<ulid>`: a document key, in completion order.
//! - log `JOB#<user>#<id>`, `LOG#<seq>`: a log entry, expiring through TTL `expires_at`.
//! - active-job counter `USER#<user>`, `ACTIVE`: the user's active map, search and upload jobs.
//! - monitor `MON#<id>`, `MON` (see `monitors.rs`); gate places and paces (see `gates.rs`).

use crate::conflicts;
use crate::errors::sdk;
use crate::frontier;
use async_trait::async_trait;
use aws_sdk_dynamodb::config::http::HttpResponse;
use aws_sdk_dynamodb::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::types::{
    AttributeValue, Delete, KeysAndAttributes, Put, PutRequest, ReturnValue, TransactWriteItem,
    Update, WriteRequest,
};
use aws_sdk_dynamodb::Client;
use chrono::{DateTime, Utc};
use sarvcrawl_core::domain::{Job, JobError, JobId, JobKind, JobStatus, Progress, UserId};
use sarvcrawl_core::ports::{
    parse_stored_time, stored_time, ActiveJob, Claim, Clock, Completion, CreateOutcome, JobQuery,
    JobStore, LogEntry, LogLevel, NewLog, NewNode, NodeRow, NodeStatus, PageOutcome, ResultEntry,
    ResultPage, SkipReason, StoreError, StoreResult, MAX_NODES_PER_JOB,
};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::sync::Arc;

pub(crate) type Item = HashMap<String, AttributeValue>;

/// The lease of a node that no worker holds.
const NEVER: i64 = i64::MAX / 2;

/// How long job logs are kept.
const LOG_RETENTION_DAYS: i64 = 30;
/// Index of a user's jobs.
pub const USER_INDEX: &str = "ByUser";
/// Index of active jobs by last progress.
pub const ACTIVE_INDEX: &str = "ByActivity";
/// Local index of a job's nodes in discovery order.
pub const SEQ_INDEX: &str = "BySeq";

/// DynamoDB-backed [`JobStore`].
pub struct DynamoStore {
    pub(crate) client: Client,
    pub(crate) table: String,
    /// The only source of "now" (leases, activity, log times).
    pub(crate) clock: Arc<dyn Clock>,
}

pub(crate) fn s(v: impl Into<String>) -> AttributeValue {
    AttributeValue::S(v.into())
}

pub(crate) fn n(v: impl ToString) -> AttributeValue {
    AttributeValue::N(v.to_string())
}

pub(crate) fn get_s<'a>(item: &'a Item, k: &str) -> Option<&'a str> {
    item.get(k).and_then(|v| v.as_s().ok()).map(String::as_str)
}

pub(crate) fn get_n<T: std::str::FromStr>(item: &Item, k: &str) -> Option<T> {
    item.get(k)
        .and_then(|v| v.as_n().ok())
        .and_then(|v| v.parse().ok())
}

pub(crate) fn key(pk: String, sk: String) -> Item {
    HashMap::from([("PK".to_string(), s(pk)), ("SK".to_string(), s(sk))])
}

/// The item at `key`, read strongly consistent.
pub(crate) async fn get_item(client: &Client, table: &str, key: Item) -> StoreResult<Option<Item>> {
    read_item(client, table, key, true).await
}

/// The item at `key`; `consistent` or eventually consistent (half the price).
pub(crate) async fn read_item(
    client: &Client,
    table: &str,
    key: Item,
    consistent: bool,
) -> StoreResult<Option<Item>> {
    let out = client
        .get_item()
        .table_name(table)
        .set_key(Some(key))
        .consistent_read(consistent)
        .send()
        .await
        .map_err(sdk)?;
    Ok(out.item)
}

/// Whether a conditional write happened: `false` when its condition did not hold.
pub(crate) fn conditional<O, E, R>(r: Result<O, SdkError<E, R>>) -> StoreResult<bool>
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    R: std::fmt::Debug + Send + Sync + 'static,
{
    conditional_output(r).map(|o| o.is_some())
}

/// The output of a conditional write, `None` when its condition did not hold.
pub(crate) fn conditional_output<O, E, R>(r: Result<O, SdkError<E, R>>) -> StoreResult<Option<O>>
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    R: std::fmt::Debug + Send + Sync + 'static,
{
    match r {
        Ok(o) => Ok(Some(o)),
        Err(e)
            if e.as_service_error().and_then(ProvideErrorMetadata::code)
                == Some("ConditionalCheckFailedException") =>
        {
            Ok(None)
        }
        Err(e) => Err(sdk(e)),
    }
}

pub(crate) fn build<T>(r: Result<T, aws_sdk_dynamodb::error::BuildError>) -> StoreResult<T> {
    r.map_err(StoreError::new)
}

/// The partition of a job and everything of it (nodes, results, logs). The owner is part of
/// the key, so a call made for another user addresses nothing (SECURITY.md T1, T4).
pub(crate) fn job_pk(user: &UserId, job: &JobId) -> String {
    format!("JOB#{user}#{job}")
}

pub(crate) const JOB_SK: &str = "JOB";

fn slot_key(user: &str, kind: JobKind) -> Item {
    key(format!("USER#{user}"), format!("SLOT#{}", kind.as_str()))
}

/// The counter of a user's active jobs of the kinds without a slot (`active`).
fn active_key(user: &str) -> Item {
    key(format!("USER#{user}"), "ACTIVE".into())
}

fn node_sk(url: &str) -> String {
    let d = Sha256::digest(url.as_bytes());
    let hex: String = d[..16].iter().map(|b| format!("{b:02x}")).collect();
    format!("URL#{hex}")
}

fn parse_ts(v: Option<&str>) -> Option<DateTime<Utc>> {
    parse_stored_time(v?)
}

pub(crate) fn activity(t: DateTime<Utc>) -> String {
    format!("{:015}", t.timestamp_millis().max(0))
}

/// Which items of a cancelled transaction failed their condition, in order; `None` when the
/// error is not a cancellation.
pub(crate) fn cancellation(
    e: &SdkError<TransactWriteItemsError, HttpResponse>,
) -> Option<Vec<bool>> {
    conflicts::reasons(e).map(|codes| {
        codes
            .iter()
            .map(|c| *c == Some("ConditionalCheckFailed"))
            .collect()
    })
}

fn job_item(job: &Job) -> Item {
    let mut item = key(job_pk(&job.user_id, &job.job_id), JOB_SK.into());
    item.insert("user_id".into(), s(job.user_id.as_str()));
    item.insert("kind".into(), s(job.kind.as_str()));
    item.insert("status".into(), s(job.status.as_str()));
    item.insert("created_at".into(), s(stored_time(job.created_at)));
    item.insert("request".into(), s(job.request.to_string()));
    item.insert("GSI1PK".into(), s(format!("USER#{}", job.user_id)));
    item.insert("GSI1SK".into(), s(job.job_id.as_str()));
    item.insert("GSI2PK".into(), s("ACTIVE"));
    item.insert("GSI2SK".into(), s(activity(job.created_at)));
    for (k, v) in [
        ("discovered", 1),
        ("pending", 1),
        ("in_flight", 1),
        ("repairs", 0),
        ("nodes", 1),
        ("completed", 0),
        ("failed", 0),
        ("results", 0),
        ("log_seq", 0),
    ] {
        item.insert(k.into(), n(v));
    }
    item
}

fn job_from_item(item: &Item) -> StoreResult<Job> {
    let bad = |what: &str| StoreError::permanent(format!("unreadable job item: {what}"));
    let id = get_s(item, "GSI1SK").ok_or_else(|| bad("id"))?;
    Ok(Job {
        job_id: JobId(id.to_string()),
        user_id: UserId(
            get_s(item, "user_id")
                .ok_or_else(|| bad("user"))?
                .to_string(),
        ),
        kind: get_s(item, "kind")
            .and_then(JobKind::parse)
            .ok_or_else(|| bad("kind"))?,
        status: get_s(item, "status")
            .and_then(JobStatus::parse)
            .ok_or_else(|| bad("status"))?,
        created_at: parse_ts(get_s(item, "created_at")).ok_or_else(|| bad("created_at"))?,
        started_at: parse_ts(get_s(item, "started_at")),
        finished_at: parse_ts(get_s(item, "finished_at")),
        request: get_s(item, "request")
            .and_then(|r| serde_json::from_str(r).ok())
            .ok_or_else(|| bad("request"))?,
        error: get_s(item, "error").and_then(|e| serde_json::from_str::<JobError>(e).ok()),
        progress: Progress {
            pages_discovered: get_n(item, "discovered").unwrap_or(0),
            pages_completed: get_n(item, "completed").unwrap_or(0),
            pages_failed: get_n(item, "failed").unwrap_or(0),
            pages_queued: get_n(item, "pending").unwrap_or(0),
        },
    })
}

fn node_item(
    pk: &str,
    seq: u64,
    url: &str,
    parent: Option<&str>,
    depth: u32,
    skip: Option<SkipReason>,
) -> Item {
    let mut item = key(pk.to_string(), node_sk(url));
    item.insert("SEQ".into(), n(seq));
    item.insert("url".into(), s(url));
    if let Some(p) = parent {
        item.insert("parent".into(), s(p));
    }
    item.insert("depth".into(), n(depth));
    match skip {
        Some(r) => {
            item.insert("status".into(), s("skipped"));
            item.insert("reason".into(), s(r.as_str()));
        }
        None => {
            item.insert("status".into(), s("queued"));
        }
    }
    item
}

fn node_from_item(item: &Item) -> Option<NodeRow> {
    Some(NodeRow {
        url: get_s(item, "url")?.to_string(),
        parent: get_s(item, "parent").map(String::from),
        depth: get_n(item, "depth")?,
        status: NodeStatus::parse(get_s(item, "status")?)?,
        status_code: get_n(item, "status_code"),
        reason: get_s(item, "reason").and_then(SkipReason::parse),
    })
}

impl DynamoStore {
    pub fn new(client: Client, table: &str, clock: Arc<dyn Clock>) -> Self {
        DynamoStore {
            client,
            table: table.to_string(),
            clock,
        }
    }

    pub(crate) fn put(&self, item: Item, condition: &str) -> StoreResult<Put> {
        build(
            Put::builder()
                .table_name(&self.table)
                .set_item(Some(item))
                .condition_expression(condition)
                .build(),
        )
    }

    pub(crate) async fn job_item(&self, pk: &str) -> StoreResult<Option<Item>> {
        get_item(
            &self.client,
            &self.table,
            key(pk.to_string(), JOB_SK.into()),
        )
        .await
    }

    async fn slot_holder(&self, user: &str, kind: JobKind) -> StoreResult<Option<String>> {
        let item = get_item(&self.client, &self.table, slot_key(user, kind)).await?;
        Ok(item
            .as_ref()
            .and_then(|i| get_s(i, "job_id"))
            .map(String::from))
    }

    /// Sets a final status once and frees the job's claim in the same write; with
    /// `idle_since`, only while the job's last progress is still that.
    pub(crate) async fn finish(
        &self,
        user: &UserId,
        job: &JobId,
        status: JobStatus,
        error: Option<JobError>,
        at: DateTime<Utc>,
        idle_since: Option<DateTime<Utc>>,
    ) -> StoreResult<bool> {
        let Some(item) = self.job_item(&job_pk(user, job)).await? else {
            return Ok(false);
        };
        if get_s(&item, "user_id") != Some(user.as_str()) {
            return Ok(false);
        }
        let kind = get_s(&item, "kind")
            .and_then(JobKind::parse)
            .unwrap_or(JobKind::Scrape);
        let error = error.map(|e| serde_json::to_string(&e).unwrap_or_default());
        for _ in 0..3 {
            let mut update = Update::builder()
                .table_name(&self.table)
                .set_key(Some(key(job_pk(user, job), JOB_SK.into())))
                .condition_expression(if idle_since.is_some() {
                    "#s IN (:q, :r) AND user_id = :u AND GSI2SK = :seen"
                } else {
                    "#s IN (:q, :r) AND user_id = :u"
                })
                .set_expression_attribute_values(
                    idle_since.map(|t| HashMap::from([(":seen".to_string(), s(activity(t)))])),
                )
                .expression_attribute_names("#s", "status")
                .expression_attribute_values(":st", s(status.as_str()))
                .expression_attribute_values(":at", s(stored_time(at)))
                .expression_attribute_values(":q", s("queued"))
                .expression_attribute_values(":r", s("running"))
                .expression_attribute_values(":u", s(user.as_str()));
            update = match &error {
                Some(e) => update
                    .update_expression(
                        "SET #s = :st, finished_at = :at, #e = :e REMOVE GSI2PK, GSI2SK",
                    )
                    .expression_attribute_names("#e", "error")
                    .expression_attribute_values(":e", s(e.clone())),
                None => update
                    .update_expression("SET #s = :st, finished_at = :at REMOVE GSI2PK, GSI2SK"),
            };
            let mut items = vec![TransactWriteItem::builder()
                .update(build(update.build())?)
                .build()];
            if kind.is_capped() {
                let count = build(
                    Update::builder()
                        .table_name(&self.table)
                        .set_key(Some(active_key(user.as_str())))
                        .update_expression("ADD active :minus")
                        .expression_attribute_values(":minus", n(-1))
                        .build(),
                )?;
                items.push(TransactWriteItem::builder().update(count).build());
            } else if self.slot_holder(user.as_str(), kind).await?.as_deref() == Some(job.as_str())
            {
                let delete = build(
                    Delete::builder()
                        .table_name(&self.table)
                        .set_key(Some(slot_key(user.as_str(), kind)))
                        .condition_expression("job_id = :j")
                        .expression_attribute_values(":j", s(job.as_str()))
                        .build(),
                )?;
                items.push(TransactWriteItem::builder().delete(delete).build());
            }
            match conflicts::transact(&self.client, items).await {
                Ok(()) => return Ok(true),
                Err(e) => match cancellation(&e) {
                    Some(c) if c.first() == Some(&true) => return Ok(false),
                    Some(_) => continue, // the slot changed hands meanwhile
                    None => return Err(sdk(e)),
                },
            }
        }
        Err(StoreError::transient("the slot kept changing; try again"))
    }

    /// What a completion leaves: the job's pending nodes, and how many of them wait in its
    /// frontier.
    async fn completion(&self, pk: &str, applied: bool) -> StoreResult<Completion> {
        let item = self.job_item(pk).await?;
        let count = |k: &str| item.as_ref().and_then(|i| get_n::<u64>(i, k)).unwrap_or(0);
        let pending = count("pending");
        Ok(Completion {
            applied,
            pending,
            waiting: pending.saturating_sub(count("in_flight")),
        })
    }

    /// The job holding what `claim` asks for: the slot's holder, or an active job counted
    /// against the cap.
    async fn holder_of(&self, claim: &Claim, user: &UserId) -> StoreResult<Option<String>> {
        match claim {
            Claim::Slot(slot) => self.slot_holder(user.as_str(), slot.kind).await,
            Claim::Active { .. } => self.an_active_job(user).await,
            Claim::Free => Ok(None),
        }
    }

    /// The newest active job of the user's kinds without a slot.
    async fn an_active_job(&self, user: &UserId) -> StoreResult<Option<String>> {
        let q = JobQuery {
            kind: None,
            status: None,
            limit: 100,
            before: None,
        };
        Ok(self
            .list_jobs(user, &q)
            .await?
            .into_iter()
            .find(|j| !j.status.is_final() && j.kind.is_capped())
            .map(|j| j.job_id.0))
    }

    async fn batch_get_nodes(&self, pk: &str, urls: &[&str]) -> StoreResult<HashMap<String, Item>> {
        let mut found = HashMap::new();
        for chunk in urls.chunks(100) {
            let keys: Vec<Item> = chunk
                .iter()
                .map(|u| key(pk.to_string(), node_sk(u)))
                .collect();
            let mut request = Some(build(
                KeysAndAttributes::builder()
                    .set_keys(Some(keys))
                    .consistent_read(true)
                    .build(),
            )?);
            let mut tries = 0;
            while let Some(r) = request.take() {
                tries += 1;
                let out = self
                    .client
                    .batch_get_item()
                    .request_items(&self.table, r)
                    .send()
                    .await
                    .map_err(sdk)?;
                for item in out
                    .responses
                    .unwrap_or_default()
                    .remove(&self.table)
                    .unwrap_or_default()
                {
                    if let Some(url) = get_s(&item, "url") {
                        found.insert(url.to_string(), item);
                    }
                }
                request = out
                    .unprocessed_keys
                    .unwrap_or_default()
                    .remove(&self.table)
                    .filter(|k| !k.keys().is_empty());
                if request.is_some() {
                    if tries > 8 {
                        return Err(StoreError::transient("batch read throttled"));
                    }
                    tokio::time::sleep(std::time::Duration::from_millis(50 << tries.min(5))).await;
                }
            }
        }
        Ok(found)
    }

    async fn batch_put(&self, items: Vec<Item>) -> StoreResult<()> {
        for chunk in items.chunks(25) {
            let mut writes: Vec<WriteRequest> = Vec::with_capacity(chunk.len());
            for item in chunk {
                writes.push(
                    WriteRequest::builder()
                        .put_request(build(
                            PutRequest::builder().set_item(Some(item.clone())).build(),
                        )?)
                        .build(),
                );
            }
            let mut tries = 0;
            while !writes.is_empty() {
                tries += 1;
                let out = self
                    .client
                    .batch_write_item()
                    .request_items(&self.table, writes)
                    .send()
                    .await
                    .map_err(sdk)?;
                writes = out
                    .unprocessed_items
                    .unwrap_or_default()
                    .remove(&self.table)
                    .unwrap_or_default();
                if !writes.is_empty() {
                    if tries > 8 {
                        return Err(StoreError::transient("batch write throttled"));
                    }
                    tokio::time::sleep(std::time::Duration::from_millis(50 << tries.min(5))).await;
                }
            }
        }
        Ok(())
    }

    /// Adds `by` to a counter of the job and returns its new value; `None` when the job (of
    /// this owner) does not exist.
    async fn bump(&self, pk: &str, counter: &str, by: u64) -> StoreResult<Option<u64>> {
        let out = conflicts::write(|| {
            self.client
                .update_item()
                .table_name(&self.table)
                .set_key(Some(key(pk.to_string(), JOB_SK.into())))
                .update_expression("ADD #c :by")
                .condition_expression("attribute_exists(PK)")
                .expression_attribute_names("#c", counter)
                .expression_attribute_values(":by", n(by))
                .return_values(ReturnValue::UpdatedNew)
                .send()
        })
        .await;
        let Some(out) = conditional_output(out)? else {
            return Ok(None);
        };
        out.attributes
            .as_ref()
            .and_then(|a| get_n(a, counter))
            .map(Some)
            .ok_or_else(|| StoreError::permanent(format!("counter {counter} unreadable")))
    }

    async fn put_if_new(&self, item: Item) -> StoreResult<()> {
        let r = conflicts::write(|| {
            self.client
                .put_item()
                .table_name(&self.table)
                .set_item(Some(item.clone()))
                .condition_expression("attribute_not_exists(PK)")
                .send()
        })
        .await;
        conditional(r).map(|_| ())
    }
}

#[async_trait]
impl JobStore for DynamoStore {
    async fn create_job(
        &self,
        job: &Job,
        root_url: &str,
        claim: Claim,
    ) -> StoreResult<CreateOutcome> {
        let user = job.user_id.as_str();
        let now = job.created_at.timestamp_millis();
        for _ in 0..3 {
            let mut items = Vec::new();
            match &claim {
                Claim::Slot(slot) => {
                    let mut item = slot_key(user, slot.kind);
                    item.insert("job_id".into(), s(job.job_id.as_str()));
                    item.insert("lease_until".into(), n(slot.lease_until.timestamp_millis()));
                    let put = build(
                        Put::builder()
                            .table_name(&self.table)
                            .set_item(Some(item))
                            .condition_expression("attribute_not_exists(PK) OR lease_until < :now")
                            .expression_attribute_values(":now", n(now))
                            .build(),
                    )?;
                    items.push(TransactWriteItem::builder().put(put).build());
                }
                Claim::Active { max } => {
                    let count = build(
                        Update::builder()
                            .table_name(&self.table)
                            .set_key(Some(active_key(user)))
                            .update_expression("ADD active :one")
                            .condition_expression("attribute_not_exists(active) OR active < :max")
                            .expression_attribute_values(":one", n(1))
                            .expression_attribute_values(":max", n(*max))
                            .build(),
                    )?;
                    items.push(TransactWriteItem::builder().update(count).build());
                }
                Claim::Free => {}
            }
            let job_put = self.put(job_item(job), "attribute_not_exists(PK)")?;
            items.push(TransactWriteItem::builder().put(job_put).build());
            let root = node_item(
                &job_pk(&job.user_id, &job.job_id),
                1,
                root_url,
                None,
                0,
                None,
            );
            items.push(
                TransactWriteItem::builder()
                    .put(self.put(root, "attribute_not_exists(PK)")?)
                    .build(),
            );
            match conflicts::transact(&self.client, items).await {
                Ok(()) => return Ok(CreateOutcome::Created),
                Err(e) => {
                    let Some(failed) = cancellation(&e) else {
                        return Err(sdk(e));
                    };
                    // The job is already there: an earlier try wrote it (its answer was lost
                    // and the SDK sent it again).
                    if failed.get(failed.len().saturating_sub(2)) == Some(&true)
                        && self
                            .job_item(&job_pk(&job.user_id, &job.job_id))
                            .await?
                            .is_some()
                    {
                        return Ok(CreateOutcome::Created);
                    }
                    if failed.first() != Some(&true) {
                        return Err(sdk(e));
                    }
                    match self.holder_of(&claim, &job.user_id).await? {
                        Some(active) if active == job.job_id.as_str() => {
                            return Ok(CreateOutcome::Created)
                        }
                        Some(active) => {
                            return Ok(CreateOutcome::SlotBusy {
                                active_job_id: JobId(active),
                            })
                        }
                        // The slot was freed in between: try again.
                        None => {}
                    }
                }
            }
        }
        // The slot kept changing hands: as far as this submit can tell, it is taken.
        match self.holder_of(&claim, &job.user_id).await? {
            Some(active) => Ok(CreateOutcome::SlotBusy {
                active_job_id: JobId(active),
            }),
            None => Err(StoreError::transient("the slot kept changing; try again")),
        }
    }

    async fn get_job(&self, user: &UserId, job: &JobId) -> StoreResult<Option<Job>> {
        match self.job_item(&job_pk(user, job)).await? {
            Some(item) if get_s(&item, "user_id") == Some(user.as_str()) => {
                job_from_item(&item).map(Some)
            }
            _ => Ok(None),
        }
    }

    async fn list_jobs(&self, user: &UserId, q: &JobQuery) -> StoreResult<Vec<Job>> {
        let mut out = Vec::new();
        let mut start: Option<Item> = None;
        loop {
            let mut req = self
                .client
                .query()
                .table_name(&self.table)
                .index_name(USER_INDEX)
                .scan_index_forward(false)
                .expression_attribute_values(":u", s(format!("USER#{user}")))
                .set_exclusive_start_key(start.take());
            req = match &q.before {
                Some(b) => req
                    .key_condition_expression("GSI1PK = :u AND GSI1SK < :b")
                    .expression_attribute_values(":b", s(b.as_str())),
                None => req.key_condition_expression("GSI1PK = :u"),
            };
            let mut filters = Vec::new();
            if let Some(k) = q.kind {
                filters.push("kind = :k");
                req = req.expression_attribute_values(":k", s(k.as_str()));
            }
            if let Some(st) = q.status {
                filters.push("#s = :s");
                req = req
                    .expression_attribute_names("#s", "status")
                    .expression_attribute_values(":s", s(st.as_str()));
            }
            if !filters.is_empty() {
                req = req.filter_expression(filters.join(" AND "));
            }
            let page = req.send().await.map_err(sdk)?;
            for item in page.items() {
                out.push(job_from_item(item)?);
                if out.len() >= q.limit as usize {
                    return Ok(out);
                }
            }
            start = page.last_evaluated_key;
            if start.is_none() {
                return Ok(out);
            }
        }
    }

    async fn start_job(&self, user: &UserId, job: &JobId, at: DateTime<Utc>) -> StoreResult<bool> {
        let r = conflicts::write(|| {
            self.client
                .update_item()
                .table_name(&self.table)
                .set_key(Some(key(job_pk(user, job), JOB_SK.into())))
                .update_expression("SET #s = :running, started_at = :at, GSI2SK = :act")
                .condition_expression("#s = :queued AND user_id = :u")
                .expression_attribute_names("#s", "status")
                .expression_attribute_values(":running", s("running"))
                .expression_attribute_values(":queued", s("queued"))
                .expression_attribute_values(":at", s(stored_time(at)))
                .expression_attribute_values(":act", s(activity(at)))
                .expression_attribute_values(":u", s(user.as_str()))
                .send()
        })
        .await;
        conditional(r)
    }

    async fn finish_job(
        &self,
        user: &UserId,
        job: &JobId,
        status: JobStatus,
        error: Option<JobError>,
        at: DateTime<Utc>,
    ) -> StoreResult<bool> {
        self.finish(user, job, status, error, at, None).await
    }

    async fn renew_slot(
        &self,
        user: &UserId,
        job: &JobId,
        kind: JobKind,
        lease_until: DateTime<Utc>,
    ) -> StoreResult<()> {
        let r = conflicts::write(|| {
            self.client
                .update_item()
                .table_name(&self.table)
                .set_key(Some(slot_key(user.as_str(), kind)))
                .update_expression("SET lease_until = :l")
                .condition_expression("job_id = :j")
                .expression_attribute_values(":l", n(lease_until.timestamp_millis()))
                .expression_attribute_values(":j", s(job.as_str()))
                .send()
        })
        .await;
        conditional(r).map(|_| ())
    }

    async fn add_nodes(
        &self,
        user: &UserId,
        job: &JobId,
        parent: &str,
        nodes: &[NewNode],
        limit: u64,
    ) -> StoreResult<Vec<NewNode>> {
        let pk = job_pk(user, job);
        let id = pk.as_str();
        let mut seen = std::collections::HashSet::new();
        let nodes: Vec<&NewNode> = nodes
            .iter()
            .filter(|n| seen.insert(n.url.as_str()))
            .collect();
        if nodes.is_empty() {
            return Ok(Vec::new());
        }
        let urls: Vec<&str> = nodes.iter().map(|n| n.url.as_str()).collect();
        let known = self.batch_get_nodes(id, &urls).await?;
        let fresh: Vec<&NewNode> = nodes
            .into_iter()
            .filter(|n| !known.contains_key(&n.url))
            .collect();
        if fresh.is_empty() {
            return Ok(Vec::new());
        }
        let Some(end) = self.bump(id, "nodes", fresh.len() as u64).await? else {
            return Ok(Vec::new());
        };
        let first = end - fresh.len() as u64 + 1;
        let room = MAX_NODES_PER_JOB.saturating_sub(first - 1) as usize;
        let mut limit_reached = false;
        let mut claimed = Vec::new();
        for (i, node) in fresh.into_iter().take(room).enumerate() {
            let seq = first + i as u64;
            let skip = node.skip_at_limit(limit_reached);
            if skip.is_some() {
                self.put_if_new(node_item(
                    id,
                    seq,
                    &node.url,
                    Some(parent),
                    node.depth,
                    skip,
                ))
                .await?;
                continue;
            }
            // The node, its place in the frontier and the job's counters, in one write.
            let put = self.put(
                node_item(id, seq, &node.url, Some(parent), node.depth, None),
                "attribute_not_exists(PK)",
            )?;
            let count = build(
                Update::builder()
                    .table_name(&self.table)
                    .set_key(Some(key(id.to_string(), JOB_SK.into())))
                    .update_expression("ADD discovered :one, pending :one")
                    .condition_expression("discovered < :limit AND user_id = :u")
                    .expression_attribute_values(":one", n(1))
                    .expression_attribute_values(":limit", n(limit))
                    .expression_attribute_values(":u", s(user.as_str()))
                    .build(),
            )?;
            let wait = self.put(
                frontier::wait_item(id, seq, &node.url, node.depth),
                "attribute_not_exists(PK)",
            )?;
            let items = vec![
                TransactWriteItem::builder().put(put).build(),
                TransactWriteItem::builder().update(count).build(),
                TransactWriteItem::builder().put(wait).build(),
            ];
            match conflicts::transact(&self.client, items).await {
                Ok(()) => claimed.push(NewNode {
                    url: node.url.clone(),
                    depth: node.depth,
                    skip: None,
                }),
                Err(e) => match cancellation(&e) {
                    // Claimed meanwhile by another page.
                    Some(c) if c.first() == Some(&true) => {}
                    Some(c) if c.get(1) == Some(&true) => {
                        limit_reached = true;
                        self.put_if_new(node_item(
                            id,
                            seq,
                            &node.url,
                            Some(parent),
                            node.depth,
                            Some(SkipReason::Limit),
                        ))
                        .await?;
                    }
                    _ => return Err(sdk(e)),
                },
            }
        }
        Ok(claimed)
    }

    async fn advance(
        &self,
        user: &UserId,
        job: &JobId,
        max_in_flight: u32,
    ) -> StoreResult<Vec<NewNode>> {
        self.advance_frontier(user, job, max_in_flight).await
    }

    async fn released_unstarted(&self, user: &UserId, job: &JobId) -> StoreResult<Vec<NewNode>> {
        self.unstarted(user, job).await
    }

    async fn active_jobs(&self, max: u32) -> StoreResult<Vec<ActiveJob>> {
        self.active(max).await
    }

    async fn fail_if_idle(
        &self,
        user: &UserId,
        job: &JobId,
        activity: DateTime<Utc>,
        error: JobError,
        at: DateTime<Utc>,
    ) -> StoreResult<bool> {
        self.finish(
            user,
            job,
            JobStatus::Failed,
            Some(error),
            at,
            Some(activity),
        )
        .await
    }

    async fn note_repair(
        &self,
        user: &UserId,
        job: &JobId,
        activity: DateTime<Utc>,
        at: DateTime<Utc>,
    ) -> StoreResult<bool> {
        self.repaired(user, job, activity, at).await
    }

    async fn start_node(
        &self,
        user: &UserId,
        job: &JobId,
        url: &str,
        holder: &str,
        lease_until: DateTime<Utc>,
    ) -> StoreResult<bool> {
        let r = conflicts::write(|| {
            self.client
                .update_item()
                .table_name(&self.table)
                .set_key(Some(key(job_pk(user, job), node_sk(url))))
                // Only a running node has a lease that can run out or a holder (other nodes carry
                // `NEVER` and no holder), so the lease terms need no status test.
                .update_expression("SET #s = :running, lease_until = :until, holder = :me")
                .condition_expression("#s = :queued OR lease_until < :now OR holder = :me")
                .expression_attribute_names("#s", "status")
                .expression_attribute_values(":running", s("running"))
                .expression_attribute_values(":queued", s("queued"))
                .expression_attribute_values(":until", n(lease_until.timestamp_millis()))
                .expression_attribute_values(":now", n(self.clock.now().timestamp_millis()))
                .expression_attribute_values(":me", s(holder))
                .send()
        })
        .await;
        conditional(r)
    }

    async fn release_node(&self, user: &UserId, job: &JobId, url: &str) -> StoreResult<()> {
        let r = conflicts::write(|| {
            self.client
                .update_item()
                .table_name(&self.table)
                .set_key(Some(key(job_pk(user, job), node_sk(url))))
                .update_expression("SET #s = :queued, lease_until = :never, holder = :none")
                .expression_attribute_values(":never", n(NEVER))
                .expression_attribute_values(":none", s(""))
                .condition_expression("#s = :running")
                .expression_attribute_names("#s", "status")
                .expression_attribute_values(":running", s("running"))
                .expression_attribute_values(":queued", s("queued"))
                .send()
        })
        .await;
        conditional(r).map(|_| ())
    }

    async fn complete_node(
        &self,
        user: &UserId,
        job: &JobId,
        url: &str,
        outcome: &PageOutcome,
    ) -> StoreResult<Completion> {
        let pk = job_pk(user, job);
        let id = pk.as_str();
        if outcome.status.is_pending() {
            return self.completion(id, false).await;
        }
        let mut node = Update::builder()
            .table_name(&self.table)
            .set_key(Some(key(id.to_string(), node_sk(url))))
            .condition_expression("#s IN (:q, :r)")
            .expression_attribute_names("#s", "status")
            .expression_attribute_values(":st", s(outcome.status.as_str()))
            .expression_attribute_values(":q", s("queued"))
            .expression_attribute_values(":r", s("running"))
            .expression_attribute_values(":never", n(NEVER))
            .expression_attribute_values(":none", s(""));
        node = match outcome.status_code {
            Some(code) => node
                .update_expression(
                    "SET #s = :st, status_code = :c, lease_until = :never, holder = :none",
                )
                .expression_attribute_values(":c", n(code)),
            None => node.update_expression("SET #s = :st, lease_until = :never, holder = :none"),
        };
        let (completed, failed) = match outcome.status {
            NodeStatus::Completed => (1, 0),
            NodeStatus::Failed => (0, 1),
            _ => (0, 0),
        };
        let results = u64::from(outcome.document_key.is_some());
        let counters = build(
            Update::builder()
                .table_name(&self.table)
                .set_key(Some(key(id.to_string(), JOB_SK.into())))
                .update_expression(
                    "ADD completed :c, failed :f, pending :minus, in_flight :minus, results :res \
                     SET GSI2SK = :act, repairs = :zero",
                )
                .condition_expression("user_id = :u")
                .expression_attribute_values(":c", n(completed))
                .expression_attribute_values(":f", n(failed))
                .expression_attribute_values(":minus", n(-1))
                .expression_attribute_values(":res", n(results))
                .expression_attribute_values(":zero", n(0))
                .expression_attribute_values(":act", s(activity(self.clock.now())))
                .expression_attribute_values(":u", s(user.as_str()))
                .build(),
        )?;
        let mut items = vec![
            TransactWriteItem::builder()
                .update(build(node.build())?)
                .build(),
            TransactWriteItem::builder().update(counters).build(),
        ];
        if let Some(doc) = &outcome.document_key {
            let mut item = key(id.to_string(), format!("RES#{}", ulid::Ulid::new()));
            item.insert("doc_key".into(), s(doc.clone()));
            items.push(
                TransactWriteItem::builder()
                    .put(self.put(item, "attribute_not_exists(PK)")?)
                    .build(),
            );
        }
        let applied = match conflicts::transact(&self.client, items).await {
            Ok(()) => true,
            Err(e) => match cancellation(&e) {
                Some(c) if c.iter().any(|failed| *failed) => false,
                _ => return Err(sdk(e)),
            },
        };
        self.completion(id, applied).await
    }

    async fn get_node(
        &self,
        user: &UserId,
        job: &JobId,
        url: &str,
    ) -> StoreResult<Option<NodeRow>> {
        let item = get_item(
            &self.client,
            &self.table,
            key(job_pk(user, job), node_sk(url)),
        )
        .await?;
        Ok(item.as_ref().and_then(node_from_item))
    }

    async fn tree(&self, user: &UserId, job: &JobId, max: u32) -> StoreResult<Vec<NodeRow>> {
        let mut rows = Vec::new();
        let mut start: Option<Item> = None;
        loop {
            let page = self
                .client
                .query()
                .table_name(&self.table)
                .index_name(SEQ_INDEX)
                .consistent_read(true)
                .key_condition_expression("PK = :pk")
                .expression_attribute_values(":pk", s(job_pk(user, job)))
                .set_exclusive_start_key(start.take())
                .send()
                .await
                .map_err(sdk)?;
            for item in page.items() {
                if let Some(row) = node_from_item(item) {
                    rows.push(row);
                    if rows.len() >= max as usize {
                        return Ok(rows);
                    }
                }
            }
            start = page.last_evaluated_key;
            if start.is_none() {
                return Ok(rows);
            }
        }
    }

    async fn results(
        &self,
        user: &UserId,
        job: &JobId,
        cursor: Option<&str>,
        limit: u32,
    ) -> StoreResult<ResultPage> {
        let pk = job_pk(user, job);
        let total = self
            .job_item(&pk)
            .await?
            .as_ref()
            .and_then(|i| get_n(i, "results"))
            .unwrap_or(0);
        // Result keys are `RES#` and a ULID, which is also the (URL-safe) cursor; all ULIDs
        // have one length, so `RES#<cursor>!` is the least key after the cursor's.
        let from = match cursor {
            None => "RES#".to_string(),
            Some(c) if c.len() == 26 && c.bytes().all(|b| b.is_ascii_alphanumeric()) => {
                format!("RES#{c}!")
            }
            Some(_) => {
                return Ok(ResultPage {
                    total,
                    ..ResultPage::default()
                })
            }
        };
        let mut start: Option<Item> = None;
        let mut entries = Vec::new();
        loop {
            let page = self
                .client
                .query()
                .table_name(&self.table)
                .key_condition_expression("PK = :pk AND SK BETWEEN :from AND :to")
                .expression_attribute_values(":pk", s(pk.clone()))
                .expression_attribute_values(":from", s(from.clone()))
                .expression_attribute_values(":to", s("RES#~"))
                .limit((limit + 1 - entries.len() as u32) as i32)
                .consistent_read(true)
                .set_exclusive_start_key(start.take())
                .send()
                .await
                .map_err(sdk)?;
            for item in page.items() {
                if entries.len() == limit as usize {
                    let next_cursor = entries.last().map(|e: &ResultEntry| e.cursor.clone());
                    return Ok(ResultPage {
                        entries,
                        next_cursor,
                        total,
                    });
                }
                let sk = get_s(item, "SK").and_then(|sk| sk.strip_prefix("RES#"));
                if let (Some(k), Some(cursor)) = (get_s(item, "doc_key"), sk) {
                    entries.push(ResultEntry {
                        key: k.to_string(),
                        cursor: cursor.to_string(),
                    });
                }
            }
            start = page.last_evaluated_key;
            if start.is_none() {
                return Ok(ResultPage {
                    entries,
                    next_cursor: None,
                    total,
                });
            }
        }
    }

    async fn append_logs(&self, user: &UserId, job: &JobId, entries: &[NewLog]) -> StoreResult<()> {
        if entries.is_empty() {
            return Ok(());
        }
        let pk = job_pk(user, job);
        let id = pk.as_str();
        let Some(end) = self.bump(id, "log_seq", entries.len() as u64).await? else {
            return Ok(());
        };
        let first = end - entries.len() as u64 + 1;
        let now = self.clock.now();
        let expires = (now + chrono::Duration::days(LOG_RETENTION_DAYS)).timestamp();
        let items = entries
            .iter()
            .enumerate()
            .map(|(i, e)| {
                let seq = first + i as u64;
                let mut item = key(id.to_string(), format!("LOG#{seq:012}"));
                item.insert("seq".into(), n(seq));
                item.insert("at".into(), s(stored_time(now)));
                item.insert("level".into(), s(e.level.as_str()));
                item.insert("message".into(), s(e.message.clone()));
                if let Some(u) = &e.url {
                    item.insert("url".into(), s(u.clone()));
                }
                item.insert("expires_at".into(), n(expires));
                item
            })
            .collect();
        self.batch_put(items).await
    }

    async fn logs(
        &self,
        user: &UserId,
        job: &JobId,
        after: Option<u64>,
        limit: u32,
    ) -> StoreResult<Vec<LogEntry>> {
        let from = format!("LOG#{:012}", after.unwrap_or(0) + 1);
        let mut out = Vec::new();
        let mut start: Option<Item> = None;
        loop {
            let page = self
                .client
                .query()
                .table_name(&self.table)
                .key_condition_expression("PK = :pk AND SK BETWEEN :from AND :to")
                .expression_attribute_values(":pk", s(job_pk(user, job)))
                .expression_attribute_values(":from", s(from.clone()))
                .expression_attribute_values(":to", s("LOG#~"))
                .limit((limit as usize - out.len()) as i32)
                .consistent_read(true)
                .set_exclusive_start_key(start.take())
                .send()
                .await
                .map_err(sdk)?;
            for item in page.items() {
                out.push(LogEntry {
                    seq: get_n(item, "seq").unwrap_or(0),
                    at: parse_ts(get_s(item, "at")).unwrap_or_default(),
                    level: LogLevel::parse(get_s(item, "level").unwrap_or_default()),
                    message: get_s(item, "message").unwrap_or_default().to_string(),
                    url: get_s(item, "url").map(String::from),
                });
            }
            start = page.last_evaluated_key;
            if start.is_none() || out.len() >= limit as usize {
                return Ok(out);
            }
        }
    }
}
