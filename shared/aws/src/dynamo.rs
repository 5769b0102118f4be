//! The job store on one DynamoDB table. Every race the core cares about is a conditional write:
//! the slot and the job in one transaction, a page's links claimed with the job's counters in
//! one transaction, a node completed and counted in one transaction, the final status set with
//! the slot freed in one transaction.
//!
//! Items (`PK`, `SK`):
//! - job `JOB#<user>#<id>`, `JOB`: owner, request, status, times; written when the job is
//!   created, started and finished only. `GSI1PK = USER#<user>`, `GSI1SK = <id>` lists a user's
//!   jobs; `GSI2PK = ACTIVE`, `GSI2SK` = creation time while not final, for the sweep.
//! - counters `JOB#<user>#<id>`, `COUNT`: progress, the frontier's cursor, the last progress
//!   time; the one small item every page writes, in no index.
//! - slot `USER#<user>`, `SLOT#<kind>`: the job holding it and `lease_until`.
//! - node `JOB#<user>#<id>`, `URL#<hash>`: one discovered URL; `SEQ` numbers it in discovery
//!   order (index `BySeq`).
//! - lease `JOB#<user>#<id>`, `URL#<hash>#RUN`: who fetches the node and until when (in no
//!   index; expiring through TTL).
//! - result `JOB#<user>#<id>`, `RES#<ulid>`: a document key, in completion order.
//! - log `JOB#<user>#<id>`, `LOG#<seq>`: up to eight log entries, expiring through TTL
//!   `expires_at`.
//! - active-job counter `USER#<user>`, `ACTIVE`: the user's active map, search and upload jobs.
//! - monitor `MON#<id>`, `MON` (see `monitors.rs`); gate places and paces (see `gates.rs`).
//!
//! The modules: `items` (keys and item mapping), `jobs` (jobs and slots), `claims` (a job's
//! nodes), `completions` (nodes done), `frontier` (the frontier and the sweep's reads), `logs`
//! (logs and results), `group` (writes of a job gathered into one request); the per-process
//! cache of recorded URLs is the core's `known`.

mod claims;
#[cfg(test)]
pub(crate) use claims::LEASE_KEPT_SECS;
mod completions;
mod frontier;
mod group;
mod items;
mod jobs;
mod logs;

pub(crate) use items::{conditional, get_item, get_n, get_s, job_pk, key, n, read_item, s, Item};

use crate::errors::sdk;
use crate::wire::SendBy;
use crate::Dynamo;
use async_trait::async_trait;
use aws_sdk_dynamodb::types::{KeysAndAttributes, Put, PutRequest, WriteRequest};
use chrono::{DateTime, Utc};
use items::build;
use sarvcrawl_core::domain::{Job, JobError, JobId, JobKind, JobStatus, UserId};
use sarvcrawl_core::known::KnownUrls;
use sarvcrawl_core::ports::{
    ActiveJob, Claim, Clock, Completion, CreateOutcome, JobQuery, JobStore, LogEntry, NewLog,
    NewNode, NodeRow, PageOutcome, ResultPage, StoreError, StoreResult,
};
use std::sync::Arc;
use std::time::Duration;

/// Index of a user's jobs.
pub const USER_INDEX: &str = "ByUser";
/// Index of active jobs.
pub const ACTIVE_INDEX: &str = "ByActivity";
/// Local index of a job's nodes in discovery order.
pub const SEQ_INDEX: &str = "BySeq";

/// Tries of a batch whose items DynamoDB left unprocessed.
const BATCH_TRIES: u32 = 8;
/// Most items one `BatchWriteItem` takes (DynamoDB's limit).
pub(crate) const BATCH_WRITE_MAX: usize = 25;

/// DynamoDB-backed [`JobStore`].
pub struct DynamoStore {
    pub(crate) client: Dynamo,
    pub(crate) table: String,
    /// The only source of "now" (leases, activity, log times).
    pub(crate) clock: Arc<dyn Clock>,
    /// The URLs each job has recorded, as this process has seen them.
    known: KnownUrls,
    /// Numbers of the log items this process writes.
    log_numbers: logs::Numbers,
    /// Completions under way, by job.
    completions: group::Group<completions::Done, Completion>,
    /// Claims under way, by job.
    claims: group::Group<claims::Claims, Vec<NewNode>>,
    /// Moves of the frontier under way, by job.
    advances: group::Group<u32, Vec<NewNode>>,
    /// Log entries being written, by job.
    log_writes: group::Group<Vec<NewLog>, ()>,
}

/// The pause before the `tries`-th try of a batch DynamoDB left partly unprocessed.
pub(crate) async fn back_off(tries: u32, what: &str) -> StoreResult<()> {
    if tries > BATCH_TRIES {
        return Err(StoreError::transient(format!("{what} throttled")));
    }
    tokio::time::sleep(Duration::from_millis(50 << tries.min(5))).await;
    Ok(())
}

impl DynamoStore {
    pub fn new(client: Dynamo, table: &str, clock: Arc<dyn Clock>) -> Self {
        DynamoStore {
            client,
            table: table.to_string(),
            clock,
            known: KnownUrls::default(),
            log_numbers: logs::Numbers::default(),
            completions: group::Group::default(),
            claims: group::Group::default(),
            advances: group::Group::default(),
            log_writes: group::Group::default(),
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

    /// The items of `keys` that exist, a hundred keys to a request.
    pub(crate) async fn batch_get(
        &self,
        keys: Vec<Item>,
        consistent: bool,
    ) -> StoreResult<Vec<Item>> {
        self.batch_get_only(keys, consistent, None).await
    }

    /// [`Self::batch_get`] with only the attribute `only` of each item, when given (the read
    /// units are the whole items'; the answer is smaller and quicker to read).
    pub(crate) async fn batch_get_only(
        &self,
        keys: Vec<Item>,
        consistent: bool,
        only: Option<&str>,
    ) -> StoreResult<Vec<Item>> {
        let mut found = Vec::new();
        for chunk in keys.chunks(100) {
            let mut request = Some(build(
                KeysAndAttributes::builder()
                    .set_keys(Some(chunk.to_vec()))
                    .consistent_read(consistent)
                    .set_projection_expression(only.map(|_| "#only".to_string()))
                    .set_expression_attribute_names(
                        only.map(|a| [("#only".to_string(), a.to_string())].into()),
                    )
                    .build(),
            )?);
            let mut tries = 0;
            while let Some(r) = request.take() {
                tries += 1;
                let out = self
                    .client
                    .batch_get_item()
                    .request_items(&self.table, r)
                    .send_by(self.client.wire())
                    .await
                    .map_err(sdk)?;
                found.extend(
                    out.responses
                        .unwrap_or_default()
                        .remove(&self.table)
                        .unwrap_or_default(),
                );
                request = out
                    .unprocessed_keys
                    .unwrap_or_default()
                    .remove(&self.table)
                    .filter(|k| !k.keys().is_empty());
                if request.is_some() {
                    back_off(tries, "batch read").await?;
                }
            }
        }
        Ok(found)
    }

    /// Writes `items` unconditionally, [`BATCH_WRITE_MAX`] to a request (a put of an item
    /// already there replaces it).
    pub(crate) async fn batch_put(&self, items: &[Item]) -> StoreResult<()> {
        for chunk in items.chunks(BATCH_WRITE_MAX) {
            let mut writes = Vec::with_capacity(chunk.len());
            for item in chunk {
                let put = build(PutRequest::builder().set_item(Some(item.clone())).build())?;
                writes.push(WriteRequest::builder().put_request(put).build());
            }
            let mut tries = 0;
            while !writes.is_empty() {
                tries += 1;
                let out = self
                    .client
                    .batch_write_item()
                    .request_items(&self.table, writes)
                    .send_by(self.client.wire())
                    .await
                    .map_err(sdk)?;
                writes = out
                    .unprocessed_items
                    .unwrap_or_default()
                    .remove(&self.table)
                    .unwrap_or_default();
                if !writes.is_empty() {
                    back_off(tries, "batch write").await?;
                }
            }
        }
        Ok(())
    }
}

#[async_trait]
impl JobStore for DynamoStore {
    async fn create_job(
        &self,
        job: &Job,
        root_url: &str,
        claim: Claim,
        log: &[NewLog],
    ) -> StoreResult<CreateOutcome> {
        let outcome = self.create(job, root_url, claim).await?;
        // The lines go in a write of their own (a transaction's item costs twice a put's); the
        // job stands without them.
        if matches!(outcome, CreateOutcome::Created) {
            self.add_logs_after(
                &job.user_id,
                &job.job_id,
                log,
                "a new job's first log lines",
            )
            .await;
        }
        Ok(outcome)
    }

    async fn get_job(&self, user: &UserId, job: &JobId) -> StoreResult<Option<Job>> {
        self.read_job(user, job).await
    }

    async fn job_status(&self, user: &UserId, job: &JobId) -> StoreResult<Option<JobStatus>> {
        self.read_status(user, job).await
    }

    async fn list_jobs(&self, user: &UserId, q: &JobQuery) -> StoreResult<Vec<Job>> {
        self.list(user, q).await
    }

    async fn start_job(&self, user: &UserId, job: &JobId, at: DateTime<Utc>) -> StoreResult<bool> {
        self.start(user, job, at).await
    }

    async fn finish_job(
        &self,
        user: &UserId,
        job: &JobId,
        status: JobStatus,
        error: Option<JobError>,
        at: DateTime<Utc>,
    ) -> StoreResult<bool> {
        let done = self.finish(user, job, status, error, at, None).await?;
        self.known.forget(&job_pk(user, job));
        Ok(done)
    }

    async fn renew_slot(
        &self,
        user: &UserId,
        job: &JobId,
        kind: JobKind,
        lease_until: DateTime<Utc>,
    ) -> StoreResult<()> {
        self.renew(user, job, kind, lease_until).await
    }

    async fn add_nodes(
        &self,
        user: &UserId,
        job: &JobId,
        parent: &str,
        nodes: &[NewNode],
        limit: u64,
    ) -> StoreResult<Vec<NewNode>> {
        self.claim(user, job, parent, nodes, limit).await
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
        let failed = self
            .finish(
                user,
                job,
                JobStatus::Failed,
                Some(error),
                at,
                Some(activity),
            )
            .await?;
        self.known.forget(&job_pk(user, job));
        Ok(failed)
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
        self.take_node(user, job, url, holder, lease_until, false)
            .await
    }

    async fn start_task_node(
        &self,
        user: &UserId,
        job: &JobId,
        url: &str,
        holder: &str,
        lease_until: DateTime<Utc>,
    ) -> StoreResult<bool> {
        self.take_node(user, job, url, holder, lease_until, true)
            .await
    }

    async fn release_node(&self, user: &UserId, job: &JobId, url: &str) -> StoreResult<()> {
        self.give_back_node(user, job, url).await
    }

    async fn complete_node(
        &self,
        user: &UserId,
        job: &JobId,
        url: &str,
        outcome: &PageOutcome,
    ) -> StoreResult<Completion> {
        let done = self.complete(&job_pk(user, job), url, outcome).await?;
        // As with a new job's: the lines are written after, and the page stands without them.
        if done.applied {
            self.add_logs_after(user, job, &outcome.log, "a page's log lines")
                .await;
        }
        Ok(done)
    }

    async fn get_node(
        &self,
        user: &UserId,
        job: &JobId,
        url: &str,
    ) -> StoreResult<Option<NodeRow>> {
        self.node(user, job, url).await
    }

    async fn tree(&self, user: &UserId, job: &JobId, max: u32) -> StoreResult<Vec<NodeRow>> {
        self.nodes(user, job, max).await
    }

    async fn results(
        &self,
        user: &UserId,
        job: &JobId,
        cursor: Option<&str>,
        limit: u32,
    ) -> StoreResult<ResultPage> {
        self.result_page(user, job, cursor, limit).await
    }

    async fn append_logs(&self, user: &UserId, job: &JobId, entries: &[NewLog]) -> StoreResult<()> {
        self.add_logs(user, job, entries).await
    }

    async fn logs(
        &self,
        user: &UserId,
        job: &JobId,
        after: Option<u64>,
        limit: u32,
    ) -> StoreResult<Vec<LogEntry>> {
        self.log_page(user, job, after, limit).await
    }
}
