//! A job's log entries and the index of its documents, both in the job's partition: log items
//! `LOG#<seq>` holding up to eight entries each (one write for a task's lines, expiring through
//! TTL), and documents `RES#<ulid>` in completion order.

use super::items::{get_n, get_s, job_pk, key, n, parse_ts, s};
use super::DynamoStore;
use crate::errors::sdk;
use crate::wire::PagesBy;
use chrono::{DateTime, Utc};
use sarvcrawl_core::domain::{JobId, UserId};
use sarvcrawl_core::ports::{
    stored_time, LogEntry, LogLevel, NewLog, ResultEntry, ResultPage, StoreError, StoreResult,
};
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicU64, Ordering};

/// How long job logs are kept.
const LOG_RETENTION_DAYS: i64 = 30;
/// Log entries one item holds at most; items are numbered in multiples of it.
const PER_ITEM: u64 = 8;
/// Numbers drawn for one item before giving up.
const NUMBER_TRIES: u32 = 8;
/// 2020-01-01T00:00:00Z, where log numbers start.
const EPOCH_MS: i64 = 1_577_836_800_000;

/// One log entry inside a log item.
#[derive(Serialize, Deserialize)]
struct Line {
    level: String,
    message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    url: Option<String>,
}

/// Numbers of log items: the milliseconds since 2020 times a thousand, plus a random multiple
/// of [`PER_ITEM`] below a thousand, so processes writing in the same millisecond rarely draw
/// the same (a clash is drawn again) and entries sort by time. Within one process they only
/// grow. They stay below 2^53 until the year 2290, so JSON readers keep them exact.
#[derive(Default)]
pub(crate) struct Numbers {
    last: AtomicU64,
}

impl Numbers {
    fn next(&self, now: DateTime<Utc>) -> u64 {
        let ms = (now.timestamp_millis() - EPOCH_MS).max(0) as u64;
        let slot = getrandom::u64().unwrap_or(0) % (1000 / PER_ITEM);
        let drawn = ms * 1000 + slot * PER_ITEM;
        let mut last = self.last.load(Ordering::Relaxed);
        loop {
            let next = drawn.max(last + PER_ITEM);
            match self
                .last
                .compare_exchange(last, next, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => return next,
                Err(seen) => last = seen,
            }
        }
    }
}

impl DynamoStore {
    /// [`JobStore::results`](sarvcrawl_core::ports::JobStore::results).
    pub(crate) async fn result_page(
        &self,
        user: &UserId,
        job: &JobId,
        cursor: Option<&str>,
        limit: u32,
    ) -> StoreResult<ResultPage> {
        let pk = job_pk(user, job);
        let total = self.counter(&pk, "results").await?;
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
        let mut entries = Vec::new();
        let mut more = false;
        let mut pages = self
            .client
            .query()
            .table_name(&self.table)
            .key_condition_expression("PK = :pk AND SK BETWEEN :from AND :to")
            .expression_attribute_values(":pk", s(pk))
            .expression_attribute_values(":from", s(from))
            .expression_attribute_values(":to", s("RES#~"))
            .limit(limit.saturating_add(1).min(1000) as i32)
            .consistent_read(true)
            .pages_by(self.client.wire());
        while let Some(item) = pages.next().await {
            let item = item.map_err(sdk)?;
            if entries.len() == limit as usize {
                more = true;
                break;
            }
            let sk = get_s(&item, "SK").and_then(|sk| sk.strip_prefix("RES#"));
            if let (Some(k), Some(cursor)) = (get_s(&item, "doc_key"), sk) {
                entries.push(ResultEntry {
                    key: k.to_string(),
                    cursor: cursor.to_string(),
                });
            }
        }
        let next_cursor = more
            .then(|| entries.last().map(|e: &ResultEntry| e.cursor.clone()))
            .flatten();
        Ok(ResultPage {
            entries,
            next_cursor,
            total,
        })
    }

    /// Writes lines that follow a write already made (a new job, a page's completion), which
    /// stands without them: their loss is only logged, as `what` ("a page's log lines").
    pub(crate) async fn add_logs_after(
        &self,
        user: &UserId,
        job: &JobId,
        entries: &[NewLog],
        what: &str,
    ) {
        if let Err(e) = self.add_logs(user, job, entries).await {
            tracing::warn!(error = %e, job = %job, "{what} were lost");
        }
    }

    /// [`JobStore::append_logs`](sarvcrawl_core::ports::JobStore::append_logs): the entries
    /// (with those of the job's other tasks written at the same moment in this process) in as
    /// few items as they fit, each numbered from the time (see [`Numbers`]).
    pub(crate) async fn add_logs(
        &self,
        user: &UserId,
        job: &JobId,
        entries: &[NewLog],
    ) -> StoreResult<()> {
        if entries.is_empty() {
            return Ok(());
        }
        let pk = job_pk(user, job);
        let key = pk.as_str();
        self.log_writes
            .write(key, entries.to_vec(), |batch| async move {
                let all: Vec<NewLog> = batch.iter().flatten().cloned().collect();
                let result = self.write_log_items(key, &all).await;
                let message = result.as_ref().err().map(ToString::to_string);
                batch
                    .iter()
                    .map(|_| match &message {
                        None => Ok(()),
                        Some(m) => Err(StoreError::transient(m.clone())),
                    })
                    .collect()
            })
            .await
    }

    async fn write_log_items(&self, pk: &str, entries: &[NewLog]) -> StoreResult<()> {
        let now = self.clock.now();
        let expires = (now + chrono::Duration::days(LOG_RETENTION_DAYS)).timestamp();
        for chunk in entries.chunks(PER_ITEM as usize) {
            let lines: Vec<Line> = chunk
                .iter()
                .map(|e| Line {
                    level: e.level.as_str().to_string(),
                    message: e.message.clone(),
                    url: e.url.clone(),
                })
                .collect();
            let lines = serde_json::to_string(&lines).map_err(StoreError::new)?;
            let mut written = false;
            for _ in 0..NUMBER_TRIES {
                let first = self.log_numbers.next(now);
                let mut item = key(pk.to_string(), format!("LOG#{first:016}"));
                item.insert("seq".into(), n(first));
                item.insert("at".into(), s(stored_time(now)));
                item.insert("lines".into(), s(lines.clone()));
                item.insert("expires_at".into(), n(expires));
                // Another process took the number in the same millisecond: draw another.
                if self.put_if_new(item).await? {
                    written = true;
                    break;
                }
            }
            if !written {
                return Err(StoreError::transient("no free log number; try again"));
            }
        }
        Ok(())
    }

    /// [`JobStore::logs`](sarvcrawl_core::ports::JobStore::logs).
    pub(crate) async fn log_page(
        &self,
        user: &UserId,
        job: &JobId,
        after: Option<u64>,
        limit: u32,
    ) -> StoreResult<Vec<LogEntry>> {
        let next = after.map_or(0, |a| a.saturating_add(1));
        // The item that may hold the next entry starts at a multiple of the item size.
        let from = format!("LOG#{:016}", next - next % PER_ITEM);
        let mut out = Vec::new();
        let mut pages = self
            .client
            .query()
            .table_name(&self.table)
            .key_condition_expression("PK = :pk AND SK BETWEEN :from AND :to")
            .expression_attribute_values(":pk", s(job_pk(user, job)))
            .expression_attribute_values(":from", s(from))
            .expression_attribute_values(":to", s("LOG#~"))
            .limit(limit.clamp(1, 1000) as i32)
            .consistent_read(true)
            .pages_by(self.client.wire());
        while out.len() < limit as usize {
            let Some(item) = pages.next().await else {
                break;
            };
            let item = item.map_err(sdk)?;
            let first: u64 = get_n(&item, "seq").unwrap_or(0);
            let at = parse_ts(get_s(&item, "at")).unwrap_or_default();
            let lines: Vec<Line> = get_s(&item, "lines")
                .and_then(|l| serde_json::from_str(l).ok())
                .unwrap_or_default();
            for (i, line) in lines.into_iter().enumerate() {
                let seq = first + i as u64;
                if seq < next || out.len() >= limit as usize {
                    continue;
                }
                out.push(LogEntry {
                    seq,
                    at,
                    level: LogLevel::parse(&line.level),
                    message: line.message,
                    url: line.url,
                });
            }
        }
        Ok(out)
    }
}
