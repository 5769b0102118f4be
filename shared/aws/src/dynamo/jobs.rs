//! Jobs and the per-user slots: creating a job with its claim in one transaction, reading it
//! with its counters, listing a user's jobs, and ending it with its claim given back.

use super::items::{
    active_key, activity, build, cancellation, conditional, count_item, count_key, get_n, get_s,
    job_from_items, job_item, job_pk, key, n, node_item, s, slot_key, Item, COUNT_SK, JOB_SK,
};
use super::{DynamoStore, USER_INDEX};
use crate::conflicts;
use crate::errors::sdk;
use crate::wire::{PagesBy, SendBy};
use aws_sdk_dynamodb::types::{ConditionCheck, Delete, Put, TransactWriteItem, Update};
use chrono::{DateTime, Utc};
use sarvcrawl_core::domain::{Job, JobError, JobId, JobKind, JobStatus, UserId};
use sarvcrawl_core::ports::{stored_time, Claim, CreateOutcome, JobQuery, StoreError, StoreResult};
use std::collections::HashMap;

impl DynamoStore {
    /// The job item and the counters of the job in partition `pk`, in one consistent query;
    /// with `only`, just those attributes of either (and their sort keys).
    pub(crate) async fn job_items(
        &self,
        pk: &str,
        only: Option<&[&str]>,
    ) -> StoreResult<(Option<Item>, Option<Item>)> {
        // Every attribute by an alias: some names (`status`) are reserved words.
        let names: Option<Vec<(String, String)>> = only.map(|only| {
            std::iter::once("SK")
                .chain(only.iter().copied())
                .enumerate()
                .map(|(i, a)| (format!("#a{i}"), a.to_string()))
                .collect()
        });
        let projection = names.as_ref().map(|names| {
            let aliases: Vec<&str> = names.iter().map(|(alias, _)| alias.as_str()).collect();
            aliases.join(", ")
        });
        let out = self
            .client
            .query()
            .table_name(&self.table)
            .consistent_read(true)
            .key_condition_expression("PK = :pk AND SK BETWEEN :c AND :j")
            .expression_attribute_values(":pk", s(pk))
            .expression_attribute_values(":c", s(COUNT_SK))
            .expression_attribute_values(":j", s(JOB_SK))
            .set_projection_expression(projection)
            .set_expression_attribute_names(names.map(HashMap::from_iter))
            .send_by(self.client.wire())
            .await
            .map_err(sdk)?;
        let (mut job, mut counts) = (None, None);
        for item in out.items.unwrap_or_default() {
            match get_s(&item, "SK") {
                Some(JOB_SK) => job = Some(item),
                Some(COUNT_SK) => counts = Some(item),
                _ => {}
            }
        }
        Ok((job, counts))
    }

    /// The job item alone.
    pub(crate) async fn job_item(&self, pk: &str) -> StoreResult<Option<Item>> {
        super::items::get_item(&self.client, &self.table, key(pk.into(), JOB_SK.into())).await
    }

    /// The job's counters.
    pub(crate) async fn counts(&self, pk: &str) -> StoreResult<Option<Item>> {
        super::items::get_item(&self.client, &self.table, count_key(pk)).await
    }

    pub(crate) async fn read_job(&self, user: &UserId, job: &JobId) -> StoreResult<Option<Job>> {
        match self.job_items(&job_pk(user, job), None).await? {
            (Some(item), counts) if get_s(&item, "user_id") == Some(user.as_str()) => {
                job_from_items(&item, counts.as_ref()).map(Some)
            }
            _ => Ok(None),
        }
    }

    /// The job's status alone: its item's owner and status, projected (the rest of the item,
    /// the request above all, is neither sent nor parsed).
    pub(crate) async fn read_status(
        &self,
        user: &UserId,
        job: &JobId,
    ) -> StoreResult<Option<JobStatus>> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .set_key(Some(key(job_pk(user, job), JOB_SK.into())))
            .consistent_read(true)
            .projection_expression("user_id, #status")
            .expression_attribute_names("#status", "status")
            .send_by(self.client.wire())
            .await
            .map_err(sdk)?;
        let Some(item) = out.item else {
            return Ok(None);
        };
        if get_s(&item, "user_id") != Some(user.as_str()) {
            return Ok(None);
        }
        get_s(&item, "status")
            .and_then(JobStatus::parse)
            .map(Some)
            .ok_or_else(|| StoreError::permanent("unreadable job item: status"))
    }

    pub(crate) async fn create(
        &self,
        job: &Job,
        root_url: &str,
        claim: Claim,
    ) -> StoreResult<CreateOutcome> {
        let user = job.user_id.as_str();
        let pk = job_pk(&job.user_id, &job.job_id);
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
            let new = "attribute_not_exists(PK)";
            let root = node_item(&pk, 1, root_url, None, 0, None);
            for item in [job_item(job), count_item(&pk, job.created_at), root] {
                items.push(
                    TransactWriteItem::builder()
                        .put(self.put(item, new)?)
                        .build(),
                );
            }
            match conflicts::transact(&self.client, items).await {
                Ok(()) => return Ok(CreateOutcome::Created),
                Err(e) => {
                    let Some(failed) = cancellation(&e) else {
                        return Err(sdk(e));
                    };
                    // The job is already there: an earlier try wrote it (its answer was lost
                    // and the wire sent it again).
                    if failed.get(failed.len().saturating_sub(3)) == Some(&true)
                        && self.job_item(&pk).await?.is_some()
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

    /// The user's jobs, newest first, with their counters (read eventually consistent: a list
    /// is a glance).
    pub(crate) async fn list(&self, user: &UserId, q: &JobQuery) -> StoreResult<Vec<Job>> {
        let mut req = self
            .client
            .query()
            .table_name(&self.table)
            .index_name(USER_INDEX)
            .scan_index_forward(false)
            .expression_attribute_values(":u", s(format!("USER#{user}")));
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
        let mut items = Vec::new();
        let mut pages = req.pages_by(self.client.wire());
        while let Some(item) = pages.next().await {
            items.push(item.map_err(sdk)?);
            if items.len() >= q.limit as usize {
                break;
            }
        }
        let keys: Vec<Item> = items
            .iter()
            .filter_map(|i| get_s(i, "PK"))
            .map(count_key)
            .collect();
        let counts: HashMap<String, Item> = self
            .batch_get(keys, false)
            .await?
            .into_iter()
            .filter_map(|c| Some((get_s(&c, "PK")?.to_string(), c)))
            .collect();
        items
            .iter()
            .map(|i| job_from_items(i, get_s(i, "PK").and_then(|pk| counts.get(pk))))
            .collect()
    }

    pub(crate) async fn slot_holder(
        &self,
        user: &str,
        kind: JobKind,
    ) -> StoreResult<Option<String>> {
        let item = super::items::get_item(&self.client, &self.table, slot_key(user, kind)).await?;
        Ok(item
            .as_ref()
            .and_then(|i| get_s(i, "job_id"))
            .map(String::from))
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
            .list(user, &q)
            .await?
            .into_iter()
            .find(|j| !j.status.is_final() && j.kind.is_capped())
            .map(|j| j.job_id.0))
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
        let pk = job_pk(user, job);
        let Some(item) = self.job_item(&pk).await? else {
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
                .set_key(Some(key(pk.clone(), JOB_SK.into())))
                .condition_expression("#s IN (:q, :r) AND user_id = :u")
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
            if let Some(seen) = idle_since {
                let check = build(
                    ConditionCheck::builder()
                        .table_name(&self.table)
                        .set_key(Some(count_key(&pk)))
                        .condition_expression("act = :seen")
                        .expression_attribute_values(":seen", s(activity(seen)))
                        .build(),
                )?;
                items.push(TransactWriteItem::builder().condition_check(check).build());
            }
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
                    // Final already, or (for the sweep) it made progress meanwhile.
                    Some(c) if c.first() == Some(&true) => return Ok(false),
                    Some(c) if idle_since.is_some() && c.get(1) == Some(&true) => return Ok(false),
                    Some(_) => continue, // the slot changed hands meanwhile
                    None => return Err(sdk(e)),
                },
            }
        }
        Err(StoreError::transient("the slot kept changing; try again"))
    }

    /// [`JobStore::start_job`](sarvcrawl_core::ports::JobStore::start_job).
    pub(crate) async fn start(
        &self,
        user: &UserId,
        job: &JobId,
        at: DateTime<Utc>,
    ) -> StoreResult<bool> {
        let r = conflicts::write(|| {
            self.client
                .update_item()
                .table_name(&self.table)
                .set_key(Some(key(job_pk(user, job), JOB_SK.into())))
                .update_expression("SET #s = :running, started_at = :at")
                .condition_expression("#s = :queued AND user_id = :u")
                .expression_attribute_names("#s", "status")
                .expression_attribute_values(":running", s("running"))
                .expression_attribute_values(":queued", s("queued"))
                .expression_attribute_values(":at", s(stored_time(at)))
                .expression_attribute_values(":u", s(user.as_str()))
                .send_by(self.client.wire())
        })
        .await;
        conditional(r)
    }

    /// [`JobStore::renew_slot`](sarvcrawl_core::ports::JobStore::renew_slot).
    pub(crate) async fn renew(
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
                .send_by(self.client.wire())
        })
        .await;
        conditional(r).map(|_| ())
    }

    /// The value of counter `k` of the job in partition `pk` (0 when it has none).
    pub(crate) async fn counter(&self, pk: &str, k: &str) -> StoreResult<u64> {
        Ok(self
            .counts(pk)
            .await?
            .as_ref()
            .and_then(|c| get_n(c, k))
            .unwrap_or(0))
    }
}
