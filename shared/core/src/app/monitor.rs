//! Monitors: create, read, change and delete them; the scheduler's tick that starts the checks
//! that are due; and a check itself, which compares the page with the last snapshot and sends
//! a signed webhook when it changed.

use super::page::{fetch_page, Pacing, Produced, Step};
use super::runtime::JobRuntime;
use super::{submit, webhook, App, AppError};
use crate::domain::validate::Problem;
use crate::domain::{
    CheckRequest, Job, JobId, JobKind, Monitor, MonitorId, MonitorPatch, MonitorRequest,
    MonitorStatus, Snapshot, UserId,
};
use crate::engine::budget::Exceeded;
use crate::engine::diff;
use crate::ports::{NewLog, StoreError, StoreResult};
use bytes::Bytes;
use chrono::{DateTime, Utc};

use serde_json::{json, Value};
use sha2::{Digest, Sha256};

/// How long a check may hold its monitor; a check that died lets the next one start after it.
const CHECK_HOLD: chrono::Duration = chrono::Duration::minutes(15);
/// Monitors one tick starts at most.
const TICK_BATCH: u32 = 100;

fn invalid(field: &str, problem: &str) -> AppError {
    AppError::Invalid(vec![Problem {
        field: field.into(),
        problem: problem.into(),
    }])
}

/// W3: a notify URL must lead to an address the fetcher may reach.
async fn check_notify_url(app: &App, url: &url::Url) -> Result<(), AppError> {
    if app.fetcher.check_destination(url).await.is_err() {
        return Err(invalid(
            "notify_url",
            "is not reachable from this service (a blocked or unknown address)",
        ));
    }
    Ok(())
}

/// Creates a monitor and its first check (which takes the baseline): `(monitor, check job)`.
pub async fn create(app: &App, user: &UserId, body: &[u8]) -> Result<(Monitor, Job), AppError> {
    let req =
        MonitorRequest::parse(body, app.config.monitor_min_interval).map_err(AppError::Invalid)?;
    super::submit::render_allowed(app, req.page.render)?;
    super::submit::model_allowed(app, &req.page)?;
    check_notify_url(app, &req.notify_url).await?;
    let now = app.clock.now();
    let job_id = JobId::generate();
    let monitor = Monitor {
        monitor_id: MonitorId::generate(),
        user_id: user.clone(),
        url: req.url.to_string(),
        notify_url: req.notify_url.to_string(),
        interval_seconds: req.interval_seconds,
        selector: req.selector,
        page: req.page,
        status: MonitorStatus::Active,
        secret: webhook::new_secret()?,
        created_at: now,
        last_checked_at: None,
        last_changed_at: None,
        next_check_at: now + interval(req.interval_seconds),
        checks: 0,
        changes: 0,
        last_delivery: None,
        snapshot: None,
        running: Some((job_id.clone(), now + CHECK_HOLD)),
        version: 0,
    };
    app.monitors.insert_monitor(&monitor).await?;
    let job = start_check(app, &monitor, job_id).await?;
    Ok((monitor, job))
}

fn interval(seconds: u64) -> chrono::Duration {
    chrono::Duration::seconds(seconds.min(i64::MAX as u64) as i64)
}

/// Stores and queues the check job `id` of a monitor that is already claimed for it.
async fn start_check(app: &App, m: &Monitor, id: JobId) -> Result<Job, AppError> {
    let request = CheckRequest {
        monitor_id: m.monitor_id.clone(),
        url: m.url.clone(),
        page: m.page.clone(),
    };
    let request = serde_json::to_value(&request).map_err(StoreError::new)?;
    let mut job = Job::new(
        m.user_id.clone(),
        JobKind::Monitor,
        request,
        app.clock.now(),
    );
    job.job_id = id;
    submit::create(app, job, m.url.clone(), m.page.render).await
}

/// The caller's monitor, or `NotFound` for a missing id and another user's alike.
pub async fn get(app: &App, user: &UserId, id: &str) -> Result<Monitor, AppError> {
    let id = MonitorId::parse(id).ok_or(AppError::NotFound)?;
    app.monitors
        .get_monitor(user, &id)
        .await?
        .ok_or(AppError::NotFound)
}

pub async fn list(app: &App, user: &UserId) -> Result<Vec<Monitor>, AppError> {
    Ok(app.monitors.list_monitors(user).await?)
}

/// Pauses, resumes, or changes the interval or notify URL of a monitor.
pub async fn patch(app: &App, user: &UserId, id: &str, body: &[u8]) -> Result<Monitor, AppError> {
    let p =
        MonitorPatch::parse(body, app.config.monitor_min_interval).map_err(AppError::Invalid)?;
    if let Some(u) = &p.notify_url {
        check_notify_url(app, u).await?;
    }
    let id = MonitorId::parse(id).ok_or(AppError::NotFound)?;
    let now = app.clock.now();
    update(app, user, &id, |m| {
        if let Some(s) = p.status {
            if s == MonitorStatus::Active && m.status == MonitorStatus::Paused {
                // A resumed monitor is checked at once, then on its interval.
                m.next_check_at = now;
            }
            m.status = s;
        }
        if let Some(seconds) = p.interval_seconds {
            m.interval_seconds = seconds;
            m.next_check_at = m.next_check_at.min(now + interval(seconds));
        }
        if let Some(u) = &p.notify_url {
            m.notify_url = u.to_string();
        }
    })
    .await?
    .ok_or(AppError::NotFound)
}

pub async fn delete(app: &App, user: &UserId, id: &str) -> Result<(), AppError> {
    let id = MonitorId::parse(id).ok_or(AppError::NotFound)?;
    if app.monitors.delete_monitor(user, &id).await? {
        Ok(())
    } else {
        Err(AppError::NotFound)
    }
}

/// Applies `change` to the user's monitor `id` ([`MonitorStore::update_monitor`]).
async fn update(
    app: &App,
    user: &UserId,
    id: &MonitorId,
    mut change: impl FnMut(&mut Monitor) + Send,
) -> StoreResult<Option<Monitor>> {
    app.monitors.update_monitor(user, id, &mut change).await
}

/// Starts the check of every monitor that is due; returns how many started. Each is claimed
/// by a conditional write first, so schedulers running at once never start one check twice.
pub async fn tick(app: &App) -> StoreResult<usize> {
    let now = app.clock.now();
    let mut started = 0;
    for mut m in app.monitors.due_monitors(now, TICK_BATCH).await? {
        let id = JobId::generate();
        m.running = Some((id.clone(), now + CHECK_HOLD));
        m.next_check_at = now + interval(m.interval_seconds);
        if !app.monitors.save_monitor(&m).await? {
            continue; // another scheduler, a PATCH or a check's end came first
        }
        m.version += 1;
        match start_check(app, &m, id).await {
            Ok(_) => started += 1,
            Err(e) => {
                tracing::warn!(monitor = %m.monitor_id, error = %e, "check not started");
                let _ = update(app, &m.user_id, &m.monitor_id, |m| m.running = None).await;
            }
        }
    }
    Ok(started)
}

/// Markdown compared between checks: trailing spaces and runs of blank lines do not count.
fn normalise(markdown: &str) -> String {
    let mut out = String::with_capacity(markdown.len());
    let mut blank = false;
    for line in markdown.lines().map(str::trim_end) {
        if line.is_empty() {
            blank = !out.is_empty();
            continue;
        }
        if blank {
            out.push('\n');
            blank = false;
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

fn hash(text: &str) -> String {
    let d = Sha256::digest(text.as_bytes());
    d.iter().map(|b| format!("{b:02x}")).collect()
}

fn snapshot_key(m: &Monitor) -> String {
    format!("{}/monitors/{}/snapshot.md", m.user_id, m.monitor_id)
}

/// Runs one check of a monitor; `None` when the job was cancelled meanwhile.
pub(crate) async fn run_check(
    app: &App,
    job: &Job,
    req: &CheckRequest,
    rt: &JobRuntime,
    logs: &mut Vec<NewLog>,
) -> StoreResult<Option<Produced>> {
    let user = &job.user_id;
    let release = |m: &mut Monitor| {
        if m.running.as_ref().is_some_and(|(j, _)| *j == job.job_id) {
            m.running = None;
        }
    };
    let Some(monitor) = app.monitors.get_monitor(user, &req.monitor_id).await? else {
        logs.push(NewLog::info("the monitor was deleted: nothing checked"));
        return Ok(Some(Produced::result(
            &req.url,
            Ok(json!({"monitor_id": req.monitor_id, "deleted": true})),
        )));
    };
    let pacing = Pacing::default();
    let step = fetch_page(app, job, &req.page, true, rt, &req.url, pacing, logs).await?;
    let Step::Done(page) = step else {
        update(app, user, &req.monitor_id, release).await?;
        return Ok(None);
    };
    let now = app.clock.now();
    let built = match page {
        Ok((_, built)) => built,
        Err(failure) => {
            update(app, user, &req.monitor_id, |m| {
                release(m);
                m.last_checked_at = Some(now);
                m.checks += 1;
            })
            .await?;
            return Ok(Some(Produced::page(&req.url, Err(failure))));
        }
    };
    let markdown = built.doc["markdown"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let snapshot = app
        .work
        .run(app.config.work_limit, move |_| {
            let current = normalise(&markdown);
            let current_hash = hash(&current);
            Ok((current, current_hash))
        })
        .await;
    let (current, current_hash) = match snapshot {
        Ok(s) => s,
        Err(e) => return Ok(Some(checked_out(app, req, job, now, e).await?)),
    };
    let key = snapshot_key(&monitor);
    let previous = monitor.snapshot.clone();
    let mut result = json!({"monitor_id": monitor.monitor_id, "hash": current_hash});
    match &previous {
        None => {
            app.blobs.put(&key, Bytes::from(current.clone())).await?;
            logs.push(NewLog::info("baseline taken"));
            result["baseline"] = json!(true);
        }
        Some(p) if p.hash == current_hash => {
            logs.push(NewLog::info("unchanged"));
            result["changed"] = json!(false);
        }
        Some(p) => {
            let before = app
                .blobs
                .get(&key)
                .await?
                .map(|b| String::from_utf8_lossy(&b).into_owned())
                .unwrap_or_default();
            let after = current.clone();
            let diff = app
                .work
                .run(app.config.work_limit, move |budget| {
                    diff::unified(&before, &after, budget)
                })
                .await;
            // A change too big to diff within bounds is still reported, without its diff.
            let diff = match diff {
                Ok(d) => Value::String(d),
                Err(e) => {
                    let why = format!("the diff was left out: {e}");
                    logs.push(NewLog::warn(why.clone()));
                    result["diff_omitted"] = json!(why);
                    Value::Null
                }
            };
            logs.push(NewLog::info("changed: notifying"));
            result["previous"] = json!({"hash": p.hash, "checked_at": timestamp(p.checked_at)});
            result["checked_at"] = json!(timestamp(now));
            // The notification is sent from what this check stores, once its job has ended.
            webhook::notify_later(app, job).await?;
            app.blobs.put(&key, Bytes::from(current.clone())).await?;
            result["changed"] = json!(true);
            result["diff"] = diff;
        }
    }
    let changed = previous.as_ref().is_some_and(|p| p.hash != current_hash);
    update(app, user, &req.monitor_id, |m| {
        release(m);
        m.last_checked_at = Some(now);
        m.checks += 1;
        if m.snapshot.is_none() || changed {
            m.snapshot = Some(Snapshot {
                hash: current_hash.clone(),
                checked_at: now,
            });
        }
        if changed {
            m.changes += 1;
            m.last_changed_at = Some(now);
        }
    })
    .await?;
    Ok(Some(Produced::result(&req.url, Ok(result))))
}

/// Ends a check whose snapshot could not be taken within bounds: the page fails with the
/// reason, the monitor is released and keeps its snapshot.
async fn checked_out(
    app: &App,
    req: &CheckRequest,
    job: &Job,
    now: DateTime<Utc>,
    e: Exceeded,
) -> StoreResult<Produced> {
    update(app, &job.user_id, &req.monitor_id, |m| {
        if m.running.as_ref().is_some_and(|(j, _)| *j == job.job_id) {
            m.running = None;
        }
        m.last_checked_at = Some(now);
        m.checks += 1;
    })
    .await?;
    Ok(Produced::result(&req.url, Err(e.into())))
}

fn timestamp(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// A monitor as the API shows it (never its secret).
pub fn to_json(m: &Monitor) -> Value {
    json!({
        "monitor_id": m.monitor_id,
        "url": m.url,
        "notify_url": m.notify_url,
        "interval_seconds": m.interval_seconds,
        "selector": m.selector,
        "status": m.status,
        "created_at": timestamp(m.created_at),
        "last_checked_at": m.last_checked_at.map(timestamp),
        "last_changed_at": m.last_changed_at.map(timestamp),
        "next_check_at": timestamp(m.next_check_at),
        "checks": m.checks,
        "changes": m.changes,
        "last_delivery": m.last_delivery.as_ref().map(|d| json!({
            "at": timestamp(d.at), "status_code": d.status_code, "error": d.error
        })),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalised_markdown_ignores_spacing_noise() {
        assert_eq!(normalise("# A  \n\n\n\ntext \n"), "# A\n\ntext\n");
        assert_eq!(normalise("\n\nx"), "x\n");
    }
}
