//! The job store on SQLite. Every method is one transaction, so each race the core cares about
//! (slot, claim, count, final status) is settled by SQLite's single writer.

use crate::db::{exec, one_row, Db};
use crate::queue::{Bodies, SqliteQueue};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use rusqlite::{params, Connection, OptionalExtension, Row, Transaction};
use sarvcrawl_core::domain::{Job, JobError, JobId, JobKind, JobStatus, Progress, UserId};
use sarvcrawl_core::known::KnownUrls;
use sarvcrawl_core::ports::{
    parse_stored_time, stored_time, ActiveJob, Claim, Clock, Completion, CreateOutcome, JobQuery,
    JobStore, LogEntry, LogLevel, NewLog, NewNode, NodeRow, NodeStatus, PageOutcome, ResultEntry,
    ResultPage, SkipReason, StoreResult, Task, MAX_NODES_PER_JOB,
};
use std::sync::Arc;

/// SQLite-backed [`JobStore`].
pub struct SqliteStore {
    pub(crate) db: Arc<Db>,
    /// The work queue on the same database, which a new job's first tasks join in its write.
    queue: Arc<SqliteQueue>,
    /// The only source of "now" (leases, log times).
    clock: Arc<dyn Clock>,
    /// The URLs each job recorded, as far as this process has seen.
    known: KnownUrls,
}

/// A job's key in [`KnownUrls`].
fn known_key(user: &UserId, job: &JobId) -> String {
    format!("{}/{}", user.0, job.0)
}

impl SqliteStore {
    pub(crate) fn new(db: Arc<Db>, queue: Arc<SqliteQueue>, clock: Arc<dyn Clock>) -> Self {
        SqliteStore {
            db,
            queue,
            clock,
            known: KnownUrls::default(),
        }
    }

    /// Writes a new job (see [`JobStore::create_job`]) and, once it is created, `tasks` to the
    /// queue in the same write.
    async fn create(
        &self,
        job: &Job,
        root_url: &str,
        claim: Claim,
        log: &[NewLog],
        tasks: Option<Bodies>,
    ) -> StoreResult<CreateOutcome> {
        let job = job.clone();
        let root = root_url.to_string();
        let request = job.request.to_string();
        let log = log.to_vec();
        let at = stored_time(self.clock.now());
        self.db
            .write(move |tx| {
                let user = job.user_id.as_str();
                let now = job.created_at.timestamp_millis();
                if let Claim::Active { max } = claim {
                    // (The kinds that `JobKind::is_capped`.)
                    // Writes are serialised, so counting here is as good as a counter.
                    let active: Vec<String> = tx
                        .prepare_cached(
                            "SELECT job_id FROM jobs WHERE user_id = ?1 AND status IN ('queued', 'running')
                             AND kind IN ('map', 'search', 'upload') ORDER BY job_id LIMIT ?2",
                        )?
                        .query_map(params![user, max], |r| r.get(0))?
                        .collect::<Result<_, _>>()?;
                    if active.len() >= max as usize {
                        return Ok(CreateOutcome::SlotBusy {
                            active_job_id: JobId(active.into_iter().next().unwrap_or_default()),
                        });
                    }
                }
                if let Claim::Slot(slot) = &claim {
                    let kind = slot.kind.as_str();
                    let holder: Option<(String, i64)> = one_row(
                            tx,
                            "SELECT s.job_id, s.lease_until FROM slots s JOIN jobs j ON j.job_id = s.job_id
                             WHERE s.user_id = ?1 AND s.kind = ?2 AND j.status IN ('queued', 'running')",
                            params![user, kind],
                            |r| Ok((r.get(0)?, r.get(1)?)),
                        )
                        .optional()?;
                    if let Some((active, lease_until)) = holder {
                        if lease_until >= now {
                            return Ok(CreateOutcome::SlotBusy {
                                active_job_id: JobId(active),
                            });
                        }
                    }
                    exec(
                        tx,
                        "INSERT OR REPLACE INTO slots (user_id, kind, job_id, lease_until) VALUES (?1, ?2, ?3, ?4)",
                        params![user, kind, job.job_id.as_str(), slot.lease_until.timestamp_millis()],
                    )?;
                }
                exec(
                    tx,
                    "INSERT INTO jobs (job_id, user_id, kind, status, created_at, request, discovered,
                       pending, nodes, in_flight, activity)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, 1, 1, 1, 1, ?7)",
                    params![
                        job.job_id.as_str(),
                        user,
                        job.kind.as_str(),
                        job.status.as_str(),
                        stored_time(job.created_at),
                        request,
                        now
                    ],
                )?;
                exec(
                    tx,
                    "INSERT INTO nodes (job_id, url, seq, parent, depth, status, released)
                     VALUES (?1, ?2, 1, NULL, 0, 'queued', 1)",
                    params![job.job_id.as_str(), root],
                )?;
                insert_logs(tx, job.job_id.as_str(), &at, &log)?;
                if let Some(tasks) = &tasks {
                    tasks.insert(tx, 0)?;
                }
                Ok(CreateOutcome::Created)
            })
            .await
    }

    pub(crate) fn now_ms(&self) -> i64 {
        self.clock.now().timestamp_millis()
    }

    /// Reads from the job `job` of `user` with `f` (given the job's id); nothing (the empty
    /// value) when the job is not theirs.
    async fn read_owned<T, F>(&self, user: &UserId, job: &JobId, f: F) -> StoreResult<T>
    where
        T: Default + Send + 'static,
        F: FnOnce(&Connection, &str) -> rusqlite::Result<T> + Send + 'static,
    {
        let (user, job) = (user.0.clone(), job.0.clone());
        self.db
            .read(move |c| {
                if !owns(c, &user, &job)? {
                    return Ok(T::default());
                }
                f(c, &job)
            })
            .await
    }

    /// Sets a final status once and frees the slot; with `idle_since`, only while the job's
    /// last progress is still that.
    async fn finish(
        &self,
        user: &UserId,
        job: &JobId,
        status: JobStatus,
        error: Option<JobError>,
        at: DateTime<Utc>,
        idle_since: Option<DateTime<Utc>>,
    ) -> StoreResult<bool> {
        let key = known_key(user, job);
        let (user, job) = (user.0.clone(), job.0.clone());
        let error = error.map(|e| serde_json::to_string(&e).unwrap_or_default());
        let idle_since = idle_since.map(|t| t.timestamp_millis());
        let finished = self
            .db
            .write(move |tx| {
                let n = exec(
                    tx,
                    "UPDATE jobs SET status = ?3, error = ?4, finished_at = ?5
                     WHERE job_id = ?1 AND user_id = ?2 AND status IN ('queued', 'running')
                       AND (?6 IS NULL OR activity = ?6)",
                    params![
                        job,
                        user,
                        status.as_str(),
                        error,
                        stored_time(at),
                        idle_since
                    ],
                )?;
                if n == 1 {
                    exec(
                        tx,
                        "DELETE FROM slots WHERE user_id = ?1 AND job_id = ?2",
                        params![user, job],
                    )?;
                }
                Ok(n == 1)
            })
            .await?;
        if finished {
            self.known.forget(&key);
        }
        Ok(finished)
    }
}

fn parse_ts(s: &str) -> rusqlite::Result<DateTime<Utc>> {
    parse_stored_time(s).ok_or_else(|| bad("time"))
}

fn bad(what: &str) -> rusqlite::Error {
    rusqlite::Error::InvalidColumnName(format!("unreadable {what}"))
}

/// A job's nodes waiting for the frontier, in the order found. Through the index of waiting
/// nodes by name: left to itself the planner walks the job's nodes by their key from the
/// first, past every node already let go, so each move of a 10,000-node crawl's frontier read
/// about 10,000 rows (0.7 ms) instead of the few it takes (9 µs).
pub(crate) const WAITING: &str = "SELECT url, depth FROM nodes INDEXED BY nodes_waiting
     WHERE job_id = ?1 AND released = 0 AND status = 'queued' ORDER BY seq LIMIT ?2";

const JOB_COLUMNS: &str = "job_id, user_id, kind, status, created_at, started_at, finished_at, \
     request, error, discovered, completed, failed, pending, extract_tokens";

fn job_from_row(r: &Row) -> rusqlite::Result<Job> {
    let kind: String = r.get(2)?;
    let status: String = r.get(3)?;
    let created: String = r.get(4)?;
    let started: Option<String> = r.get(5)?;
    let finished: Option<String> = r.get(6)?;
    let request: String = r.get(7)?;
    let error: Option<String> = r.get(8)?;
    Ok(Job {
        job_id: JobId(r.get(0)?),
        user_id: UserId(r.get(1)?),
        kind: JobKind::parse(&kind).ok_or_else(|| bad("kind"))?,
        status: JobStatus::parse(&status).ok_or_else(|| bad("status"))?,
        created_at: parse_ts(&created)?,
        started_at: started.as_deref().map(parse_ts).transpose()?,
        finished_at: finished.as_deref().map(parse_ts).transpose()?,
        request: serde_json::from_str(&request).map_err(|_| bad("request"))?,
        error: error
            .map(|e| serde_json::from_str::<JobError>(&e))
            .transpose()
            .map_err(|_| bad("error"))?,
        progress: Progress {
            pages_discovered: r.get(9)?,
            pages_completed: r.get(10)?,
            pages_failed: r.get(11)?,
            pages_queued: r.get(12)?,
            extract_tokens: r.get(13)?,
        },
    })
}

fn owns(c: &Connection, user: &str, job: &str) -> rusqlite::Result<bool> {
    c.prepare_cached("SELECT 1 FROM jobs WHERE job_id = ?1 AND user_id = ?2")?
        .exists(params![job, user])
}

fn node_from_row(r: &Row) -> rusqlite::Result<NodeRow> {
    let status: String = r.get(3)?;
    let reason: Option<String> = r.get(5)?;
    Ok(NodeRow {
        url: r.get(0)?,
        parent: r.get(1)?,
        depth: r.get(2)?,
        status: NodeStatus::parse(&status).ok_or_else(|| bad("node status"))?,
        status_code: r.get(4)?,
        reason: reason.as_deref().and_then(SkipReason::parse),
    })
}

/// What a completion leaves: the job's pending nodes, and how many of them wait in its
/// frontier.
fn completion(tx: &Transaction, job: &str, applied: bool) -> rusqlite::Result<Completion> {
    let (pending, in_flight): (u64, u64) = one_row(
        tx,
        "SELECT pending, in_flight FROM jobs WHERE job_id = ?1",
        [job],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?;
    Ok(Completion {
        applied,
        pending,
        waiting: pending.saturating_sub(in_flight),
    })
}

#[async_trait]
impl JobStore for SqliteStore {
    async fn create_job(
        &self,
        job: &Job,
        root_url: &str,
        claim: Claim,
        log: &[NewLog],
    ) -> StoreResult<CreateOutcome> {
        self.create(job, root_url, claim, log, None).await
    }

    async fn create_job_queued(
        &self,
        job: &Job,
        root_url: &str,
        claim: Claim,
        log: &[NewLog],
        tasks: &[Task],
    ) -> StoreResult<Option<CreateOutcome>> {
        let tasks = Bodies::of(tasks)?;
        let outcome = self.create(job, root_url, claim, log, Some(tasks)).await?;
        if outcome == CreateOutcome::Created {
            self.queue.sent();
        }
        Ok(Some(outcome))
    }

    async fn get_job(&self, user: &UserId, job: &JobId) -> StoreResult<Option<Job>> {
        let (user, job) = (user.0.clone(), job.0.clone());
        self.db
            .read(move |c| {
                c.prepare_cached(&format!(
                    "SELECT {JOB_COLUMNS} FROM jobs WHERE job_id = ?1 AND user_id = ?2"
                ))?
                .query_row(params![job, user], job_from_row)
                .optional()
            })
            .await
    }

    async fn job_status(&self, user: &UserId, job: &JobId) -> StoreResult<Option<JobStatus>> {
        let (user, job) = (user.0.clone(), job.0.clone());
        self.db
            .read(move |c| {
                c.prepare_cached("SELECT status FROM jobs WHERE job_id = ?1 AND user_id = ?2")?
                    .query_row(params![job, user], |r| {
                        let status: String = r.get(0)?;
                        JobStatus::parse(&status).ok_or_else(|| bad("status"))
                    })
                    .optional()
            })
            .await
    }

    async fn list_jobs(&self, user: &UserId, q: &JobQuery) -> StoreResult<Vec<Job>> {
        let user = user.0.clone();
        let q = q.clone();
        self.db
            .read(move |c| {
                let sql = format!(
                    "SELECT {JOB_COLUMNS} FROM jobs WHERE user_id = ?1
                     AND (?2 IS NULL OR kind = ?2) AND (?3 IS NULL OR status = ?3)
                     AND (?4 IS NULL OR job_id < ?4)
                     ORDER BY job_id DESC LIMIT ?5"
                );
                let mut stmt = c.prepare_cached(&sql)?;
                let rows = stmt.query_map(
                    params![
                        user,
                        q.kind.map(JobKind::as_str),
                        q.status.map(JobStatus::as_str),
                        q.before.as_ref().map(JobId::as_str),
                        q.limit
                    ],
                    job_from_row,
                )?;
                rows.collect()
            })
            .await
    }

    async fn start_job(&self, user: &UserId, job: &JobId, at: DateTime<Utc>) -> StoreResult<bool> {
        let (user, job) = (user.0.clone(), job.0.clone());
        self.db
            .write(move |tx| {
                let n = exec(
                    tx,
                    "UPDATE jobs SET status = 'running', started_at = ?3, activity = ?4
                     WHERE job_id = ?1 AND user_id = ?2 AND status = 'queued'",
                    params![job, user, stored_time(at), at.timestamp_millis()],
                )?;
                Ok(n == 1)
            })
            .await
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
        let (user, job) = (user.0.clone(), job.0.clone());
        self.db
            .write(move |tx| {
                exec(
                    tx,
                    "UPDATE slots SET lease_until = ?4 WHERE user_id = ?1 AND kind = ?2 AND job_id = ?3",
                    params![user, kind.as_str(), job, lease_until.timestamp_millis()],
                )?;
                Ok(())
            })
            .await
    }

    async fn add_nodes(
        &self,
        user: &UserId,
        job: &JobId,
        parent: &str,
        nodes: &[NewNode],
        limit: u64,
    ) -> StoreResult<Vec<NewNode>> {
        // Links this process saw recorded before need no lookup; a page whose links all were
        // (most pages of a site) needs no transaction.
        let key = known_key(user, job);
        let (nodes, looked_up): (Vec<NewNode>, Vec<[u8; 16]>) = self
            .known
            .unknown(&key, nodes)
            .into_iter()
            .map(|(n, d)| (n.clone(), d))
            .unzip();
        if nodes.is_empty() {
            return Ok(Vec::new());
        }
        let (user, job, parent) = (user.0.clone(), job.0.clone(), parent.to_string());
        let (owned, claimed) = self
            .db
            .write(move |tx| {
                if !owns(tx, &user, &job)? {
                    return Ok((false, Vec::new()));
                }
                let (mut discovered, mut pending, mut count): (u64, u64, u64) = one_row(
                    tx,
                    "SELECT discovered, pending, nodes FROM jobs WHERE job_id = ?1",
                    [&job],
                    |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
                )?;
                let mut claimed = Vec::new();
                {
                    let mut known = tx.prepare_cached("SELECT 1 FROM nodes WHERE job_id = ?1 AND url = ?2")?;
                    let mut insert = tx.prepare_cached(
                        "INSERT INTO nodes (job_id, url, seq, parent, depth, status, reason, released)
                         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 0)",
                    )?;
                    for n in &nodes {
                        if count >= MAX_NODES_PER_JOB {
                            break;
                        }
                        if known.exists(params![job, n.url])? {
                            continue;
                        }
                        let skip = n.skip_at_limit(discovered >= limit);
                        let status = if skip.is_some() { "skipped" } else { "queued" };
                        count += 1;
                        if skip.is_none() {
                            discovered += 1;
                            pending += 1;
                            claimed.push(n.clone());
                        }
                        insert.execute(params![
                            job,
                            n.url,
                            count,
                            parent,
                            n.depth,
                            status,
                            skip.map(SkipReason::as_str)
                        ])?;
                    }
                }
                exec(
                    tx,
                    "UPDATE jobs SET discovered = ?2, pending = ?3, nodes = ?4 WHERE job_id = ?1",
                    params![job, discovered, pending, count],
                )?;
                Ok((true, claimed))
            })
            .await?;
        // Every URL looked up is recorded now (or the job holds as many nodes as it may, and
        // records no more).
        if owned {
            self.known.insert(&key, looked_up);
        }
        Ok(claimed)
    }

    async fn advance(
        &self,
        user: &UserId,
        job: &JobId,
        max_in_flight: u32,
    ) -> StoreResult<Vec<NewNode>> {
        let (user, job) = (user.0.clone(), job.0.clone());
        self.db
            .write(move |tx| {
                let in_flight: Option<u64> = one_row(
                    tx,
                    "SELECT in_flight FROM jobs WHERE job_id = ?1 AND user_id = ?2
                         AND status IN ('queued', 'running')",
                    params![job, user],
                    |r| r.get(0),
                )
                .optional()?;
                let Some(in_flight) = in_flight else {
                    return Ok(Vec::new());
                };
                let room = u64::from(max_in_flight).saturating_sub(in_flight);
                let next: Vec<NewNode> = tx
                    .prepare_cached(WAITING)?
                    .query_map(params![job, room], |r| {
                        Ok(NewNode {
                            url: r.get(0)?,
                            depth: r.get(1)?,
                            skip: None,
                        })
                    })?
                    .collect::<Result<_, _>>()?;
                let mut let_go = tx.prepare_cached(
                    "UPDATE nodes SET released = 1 WHERE job_id = ?1 AND url = ?2",
                )?;
                for n in &next {
                    let_go.execute(params![job, n.url])?;
                }
                exec(
                    tx,
                    "UPDATE jobs SET in_flight = in_flight + ?2 WHERE job_id = ?1",
                    params![job, next.len()],
                )?;
                Ok(next)
            })
            .await
    }

    async fn released_unstarted(&self, user: &UserId, job: &JobId) -> StoreResult<Vec<NewNode>> {
        self.read_owned(user, job, move |c, job| {
            c.prepare_cached(
                "SELECT url, depth FROM nodes WHERE job_id = ?1 AND released = 1 AND status = 'queued'",
            )?
            .query_map([job], |r| {
                Ok(NewNode {
                    url: r.get(0)?,
                    depth: r.get(1)?,
                    skip: None,
                })
            })?
            .collect()
        })
        .await
    }

    async fn active_jobs(&self, max: u32) -> StoreResult<Vec<ActiveJob>> {
        self.db
            .read(move |c| {
                c.prepare_cached(
                    "SELECT user_id, job_id, kind, activity, pending, repairs FROM jobs
                     WHERE status IN ('queued', 'running') ORDER BY activity LIMIT ?1",
                )?
                .query_map([max], |r| {
                    let kind: String = r.get(2)?;
                    let activity: i64 = r.get(3)?;
                    Ok(ActiveJob {
                        user_id: UserId(r.get(0)?),
                        job_id: JobId(r.get(1)?),
                        kind: JobKind::parse(&kind).ok_or_else(|| bad("kind"))?,
                        activity: DateTime::from_timestamp_millis(activity).unwrap_or_default(),
                        pending: r.get(4)?,
                        repairs: r.get(5)?,
                    })
                })?
                .collect()
            })
            .await
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
        let (user, job) = (user.0.clone(), job.0.clone());
        self.db
            .write(move |tx| {
                let n = exec(
                    tx,
                    "UPDATE jobs SET activity = ?4, repairs = repairs + 1
                     WHERE job_id = ?1 AND user_id = ?2 AND status IN ('queued', 'running')
                       AND activity = ?3",
                    params![
                        job,
                        user,
                        activity.timestamp_millis(),
                        at.timestamp_millis()
                    ],
                )?;
                Ok(n == 1)
            })
            .await
    }

    async fn start_node(
        &self,
        user: &UserId,
        job: &JobId,
        url: &str,
        holder: &str,
        lease_until: DateTime<Utc>,
    ) -> StoreResult<bool> {
        let (user, job, url, holder) = (
            user.0.clone(),
            job.0.clone(),
            url.to_string(),
            holder.to_string(),
        );
        let now = self.clock.now().timestamp_millis();
        self.db
            .write(move |tx| {
                if !owns(tx, &user, &job)? {
                    return Ok(false);
                }
                let n = exec(
                    tx,
                    "UPDATE nodes SET status = 'running', lease_until = ?3, holder = ?5
                     WHERE job_id = ?1 AND url = ?2 AND (status = 'queued'
                       OR (status = 'running' AND (lease_until < ?4 OR holder = ?5)))",
                    params![job, url, lease_until.timestamp_millis(), now, holder],
                )?;
                Ok(n == 1)
            })
            .await
    }

    async fn release_node(&self, user: &UserId, job: &JobId, url: &str) -> StoreResult<()> {
        let (user, job, url) = (user.0.clone(), job.0.clone(), url.to_string());
        self.db
            .write(move |tx| {
                if owns(tx, &user, &job)? {
                    exec(
                        tx,
                        "UPDATE nodes SET status = 'queued', lease_until = NULL
                         WHERE job_id = ?1 AND url = ?2 AND status = 'running'",
                        params![job, url],
                    )?;
                }
                Ok(())
            })
            .await
    }

    async fn complete_node(
        &self,
        user: &UserId,
        job: &JobId,
        url: &str,
        outcome: &PageOutcome,
    ) -> StoreResult<Completion> {
        let (user, job, url) = (user.0.clone(), job.0.clone(), url.to_string());
        let outcome = outcome.clone();
        let clock = self.clock.now();
        let (now, at) = (clock.timestamp_millis(), stored_time(clock));
        self.db
            .write(move |tx| {
                if !owns(tx, &user, &job)? {
                    return Ok(Completion {
                        applied: false,
                        pending: 0,
                        waiting: 0,
                    });
                }
                let current: Option<(String, bool)> = one_row(
                        tx,
                        "SELECT status, released FROM nodes WHERE job_id = ?1 AND url = ?2",
                        params![job, url],
                        |r| Ok((r.get(0)?, r.get(1)?)),
                    )
                    .optional()?;
                let pending_now = current
                    .as_ref()
                    .and_then(|(s, _)| NodeStatus::parse(s))
                    .is_some_and(NodeStatus::is_pending);
                if !pending_now || outcome.status.is_pending() {
                    return completion(tx, &job, false);
                }
                let released = current.is_some_and(|(_, r)| r);
                exec(
                    tx,
                    "UPDATE nodes SET status = ?3, status_code = ?4 WHERE job_id = ?1 AND url = ?2",
                    params![job, url, outcome.status.as_str(), outcome.status_code],
                )?;
                let (completed, failed) = match outcome.status {
                    NodeStatus::Completed => (1, 0),
                    NodeStatus::Failed => (0, 1),
                    _ => (0, 0),
                };
                exec(
                    tx,
                    "UPDATE jobs SET completed = completed + ?2, failed = failed + ?3, pending = pending - 1,
                       in_flight = MAX(in_flight - ?4, 0), activity = ?5, repairs = 0,
                       extract_tokens = extract_tokens + ?6
                     WHERE job_id = ?1",
                    params![job, completed, failed, u64::from(released), now, outcome.tokens],
                )?;
                if let Some(key) = &outcome.document_key {
                    exec(
                        tx,
                        "INSERT INTO results (job_id, seq, doc_key)
                         VALUES (?1, (SELECT COALESCE(MAX(seq), 0) + 1 FROM results WHERE job_id = ?1), ?2)",
                        params![job, key],
                    )?;
                }
                insert_logs(tx, &job, &at, &outcome.log)?;
                completion(tx, &job, true)
            })
            .await
    }

    async fn get_node(
        &self,
        user: &UserId,
        job: &JobId,
        url: &str,
    ) -> StoreResult<Option<NodeRow>> {
        let url = url.to_string();
        self.read_owned(user, job, move |c, job| {
            c.prepare_cached(
                "SELECT url, parent, depth, status, status_code, reason FROM nodes WHERE job_id = ?1 AND url = ?2",
            )?
            .query_row(params![job, url], node_from_row)
            .optional()
        })
        .await
    }

    async fn tree(&self, user: &UserId, job: &JobId, max: u32) -> StoreResult<Vec<NodeRow>> {
        self.read_owned(user, job, move |c, job| {
            let mut stmt = c.prepare_cached(
                "SELECT url, parent, depth, status, status_code, reason FROM nodes
                 WHERE job_id = ?1 ORDER BY seq LIMIT ?2",
            )?;
            let rows = stmt.query_map(params![job, max], node_from_row)?;
            rows.collect()
        })
        .await
    }

    async fn results(
        &self,
        user: &UserId,
        job: &JobId,
        cursor: Option<&str>,
        limit: u32,
    ) -> StoreResult<ResultPage> {
        // Cursors are result sequence numbers; one that is not reads past the end.
        let after: i64 = match cursor {
            None => 0,
            Some(c) => c.parse().unwrap_or(i64::MAX),
        };
        self.read_owned(user, job, move |c, job| {
                let total: u64 = one_row(c, "SELECT COUNT(*) FROM results WHERE job_id = ?1", [job], |r| r.get(0))?;
                let mut stmt = c.prepare_cached(
                    "SELECT seq, doc_key FROM results WHERE job_id = ?1 AND seq > ?2 ORDER BY seq LIMIT ?3",
                )?;
                let mut rows: Vec<(u64, String)> = stmt
                    .query_map(params![job, after, limit + 1], |r| Ok((r.get(0)?, r.get(1)?)))?
                    .collect::<Result<_, _>>()?;
                let more = rows.len() > limit as usize;
                rows.truncate(limit as usize);
                Ok(ResultPage {
                    next_cursor: if more { rows.last().map(|r| r.0.to_string()) } else { None },
                    entries: rows
                        .into_iter()
                        .map(|(seq, key)| ResultEntry {
                            key,
                            cursor: seq.to_string(),
                        })
                        .collect(),
                    total,
                })
            })
            .await
    }

    async fn append_logs(&self, user: &UserId, job: &JobId, entries: &[NewLog]) -> StoreResult<()> {
        if entries.is_empty() {
            return Ok(());
        }
        let (user, job) = (user.0.clone(), job.0.clone());
        let entries = entries.to_vec();
        let at = stored_time(self.clock.now());
        self.db
            .write(move |tx| {
                if !owns(tx, &user, &job)? {
                    return Ok(());
                }
                insert_logs(tx, &job, &at, &entries)
            })
            .await
    }

    async fn logs(
        &self,
        user: &UserId,
        job: &JobId,
        after: Option<u64>,
        limit: u32,
    ) -> StoreResult<Vec<LogEntry>> {
        self.read_owned(user, job, move |c, job| {
                let mut stmt = c.prepare_cached(
                    "SELECT seq, at, level, message, url FROM logs WHERE job_id = ?1 AND seq > ?2 ORDER BY seq LIMIT ?3",
                )?;
                let rows = stmt.query_map(params![job, after.unwrap_or(0), limit], |r| {
                    let at: String = r.get(1)?;
                    let level: String = r.get(2)?;
                    Ok(LogEntry {
                        seq: r.get(0)?,
                        at: parse_ts(&at)?,
                        level: LogLevel::parse(&level),
                        message: r.get(3)?,
                        url: r.get(4)?,
                    })
                })?;
                rows.collect()
            })
            .await
    }
}

/// Adds a job's log lines, all stamped `at`.
fn insert_logs(tx: &Connection, job: &str, at: &str, entries: &[NewLog]) -> rusqlite::Result<()> {
    let mut insert = tx.prepare_cached(
        "INSERT INTO logs (job_id, at, level, message, url) VALUES (?1, ?2, ?3, ?4, ?5)",
    )?;
    for e in entries {
        insert.execute(params![job, at, e.level.as_str(), e.message, e.url])?;
    }
    Ok(())
}
