//! Keys and item mapping of the job table, and the small helpers every query uses.

use crate::conflicts;
use crate::errors::sdk;
use crate::wire::SendBy;
use crate::Dynamo;
use aws_sdk_dynamodb::config::http::HttpResponse;
use aws_sdk_dynamodb::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::types::AttributeValue;
use chrono::{DateTime, Utc};
use sarvcrawl_core::domain::{Job, JobError, JobId, JobKind, JobStatus, Progress, UserId};
use sarvcrawl_core::ports::{
    parse_stored_time, stored_time, NodeRow, NodeStatus, SkipReason, StoreError, StoreResult,
};
use std::collections::HashMap;

pub(crate) type Item = HashMap<String, AttributeValue>;

/// Sort key of a job's item.
pub(crate) const JOB_SK: &str = "JOB";
/// Sort key of a job's counters, the item every page writes (kept apart from the indexed job
/// item, and small). `COUNT` sorts right before `JOB`, so one query reads both.
pub(crate) const COUNT_SK: &str = "COUNT";

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
pub(crate) async fn get_item(client: &Dynamo, table: &str, key: Item) -> StoreResult<Option<Item>> {
    read_item(client, table, key, true).await
}

/// The item at `key`; `consistent` or eventually consistent (half the price).
pub(crate) async fn read_item(
    client: &Dynamo,
    table: &str,
    key: Item,
    consistent: bool,
) -> StoreResult<Option<Item>> {
    let out = client
        .get_item()
        .table_name(table)
        .set_key(Some(key))
        .consistent_read(consistent)
        .send_by(client.wire())
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

/// The partition of a job and everything of it (counters, nodes, results, logs). The owner is
/// part of the key, so a call made for another user addresses nothing (SECURITY.md T1, T4).
pub(crate) fn job_pk(user: &UserId, job: &JobId) -> String {
    format!("JOB#{user}#{job}")
}

/// The key of a job's counters.
pub(crate) fn count_key(pk: &str) -> Item {
    key(pk.to_string(), COUNT_SK.into())
}

pub(crate) fn slot_key(user: &str, kind: JobKind) -> Item {
    key(format!("USER#{user}"), format!("SLOT#{}", kind.as_str()))
}

/// The counter of a user's active jobs of the kinds without a slot (`active`).
pub(crate) fn active_key(user: &str) -> Item {
    key(format!("USER#{user}"), "ACTIVE".into())
}

/// The digest naming a URL inside its job's partition.
pub(crate) use sarvcrawl_core::known::url_digest;

pub(crate) fn node_sk(url: &str) -> String {
    let hex: String = url_digest(url).iter().map(|b| format!("{b:02x}")).collect();
    format!("URL#{hex}")
}

pub(crate) fn parse_ts(v: Option<&str>) -> Option<DateTime<Utc>> {
    parse_stored_time(v?)
}

/// A time as the activity attributes keep it: milliseconds, zero-padded so they sort.
pub(crate) fn activity(t: DateTime<Utc>) -> String {
    format!("{:015}", t.timestamp_millis().max(0))
}

pub(crate) fn parse_activity(v: Option<&str>) -> Option<DateTime<Utc>> {
    v?.parse::<i64>()
        .ok()
        .and_then(DateTime::from_timestamp_millis)
}

/// The job item: who owns it, what was asked, its status and times. It is written when the
/// job is created, started and finished, never per page, so the indexes that copy it
/// (`ByUser`, `ByActivity`) are written three times per job.
pub(crate) fn job_item(job: &Job) -> Item {
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
    item
}

/// The counters of a new job, whose root (node 1) is claimed and let go.
///
/// `nodes`: URLs recorded (the last sequence number given); `discovered`, `pending`,
/// `completed`, `failed`: the job's progress; `released`: the frontier's cursor, every claimed
/// URL numbered up to it is let go to the queue; `in_flight`: let go and not done; `results`:
/// documents indexed; `act`: last progress; `repairs`: the sweep's since then.
pub(crate) fn count_item(pk: &str, created: DateTime<Utc>) -> Item {
    let mut item = count_key(pk);
    for (k, v) in [
        ("nodes", 1),
        ("discovered", 1),
        ("pending", 1),
        ("released", 1),
        ("in_flight", 1),
        ("completed", 0),
        ("failed", 0),
        ("results", 0),
        ("repairs", 0),
    ] {
        item.insert(k.into(), n(v));
    }
    item.insert("act".into(), s(activity(created)));
    item
}

/// The job of a job item and its counters.
pub(crate) fn job_from_items(item: &Item, counts: Option<&Item>) -> StoreResult<Job> {
    let bad = |what: &str| StoreError::permanent(format!("unreadable job item: {what}"));
    let id = get_s(item, "GSI1SK").ok_or_else(|| bad("id"))?;
    let count = |k: &str| counts.and_then(|c| get_n(c, k)).unwrap_or(0);
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
            pages_discovered: count("discovered"),
            pages_completed: count("completed"),
            pages_failed: count("failed"),
            pages_queued: count("pending"),
            extract_tokens: count("tokens"),
        },
    })
}

pub(crate) fn node_item(
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

pub(crate) fn node_from_item(item: &Item) -> Option<NodeRow> {
    Some(NodeRow {
        url: get_s(item, "url")?.to_string(),
        parent: get_s(item, "parent").map(String::from),
        depth: get_n(item, "depth")?,
        status: NodeStatus::parse(get_s(item, "status")?)?,
        status_code: get_n(item, "status_code"),
        reason: get_s(item, "reason").and_then(SkipReason::parse),
    })
}
