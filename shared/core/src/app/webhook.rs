//! Webhooks of jobs. A job's events are not written anywhere of their own: each is read off
//! the job's durable state, which the write that changed it already holds (`started_at`, the
//! results index in completion order, the final status). Event `n` of a job is therefore the
//! same on every reading: `1` is `job.started`, `2 + i` is the `i`-th finished page (crawl and
//! batch), and the final event follows the last page the job had when it ended. A crash between
//! a change and its POST loses nothing: the next run of the job's pump finds the event.
//!
//! The pump is a task on the work queue. Under a gate that one holder passes at a time, it
//! reads what the job's webhook has settled so far (a small state record beside the job's
//! documents), sends the events that follow one after another, each signed with the user's
//! keys and tried until delivered or given up, and queues its next run: soon while the job is
//! active, at the retry's due time after a failure, never once every event is settled. Runs
//! are idempotent, so the extra runs that nudges add (a job starting, ending, cancelled) cost a
//! read; a run already scheduled is never doubled.
//!
//! A monitor's check that found a change goes the same way: its one event, `monitor.changed`,
//! is built from what the check stored once its job has ended, and signed with the monitor's
//! own secret.

use super::{App, AppError};
use crate::domain::validate::Problem;
use crate::domain::{
    EventType, Job, JobRequest, JobStatus, LastDelivery, MonitorId, SigningKeys, UserId,
    WebhookSpec,
};
use crate::engine::fetch::Posted;
use crate::ports::{NewLog, StoreError, StoreResult, Task};
use base64::Engine;
use bytes::Bytes;
use chrono::{DateTime, Utc};
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use sha2::Sha256;
use std::time::{Duration, Instant};

/// The default pauses before each retry, in seconds: about 24 hours in all.
pub const RETRY_SCHEDULE: [u64; 9] = [5, 30, 120, 600, 1800, 3600, 10_800, 21_600, 43_200];
/// Longest pause before a retry, whatever a receiver's `Retry-After` asks.
const LONGEST_PAUSE: Duration = Duration::from_secs(12 * 3600);
/// Longest a receiver may take to answer one try.
pub const DELIVERY_TIMEOUT: Duration = Duration::from_secs(10);
/// Largest document sent inside a `job.page` event; a larger one is sent by reference.
pub const INLINE_DOCUMENT_BYTES: usize = 256 * 1024;
/// How long a pump holds its job's gate: a run stops starting tries well before.
const GATE_LEASE: chrono::Duration = chrono::Duration::seconds(90);
/// A run starts no try after this long.
const RUN_BUDGET: Duration = Duration::from_secs(30);
/// Events a run settles between two saves of its state.
const SAVE_EVERY: u32 = 25;
/// How soon a pump looks again at an active job: at once after it sent something, then less
/// and less often while nothing happens.
const POLL_MIN: i64 = 1;
const POLL_MAX: i64 = 15;
/// Longest a task waits in the queue at once (SQS's limit): a later run is reached in hops.
const MAX_QUEUE_DELAY: chrono::Duration = chrono::Duration::minutes(15);
/// How long a previous signing key keeps signing after a rotation.
pub const ROTATION_OVERLAP: chrono::Duration = chrono::Duration::hours(24);

/// Pauses written as seconds, comma-separated (`5,30,120`): at most 20, each at most a day.
pub fn parse_retries(s: &str) -> Result<Vec<Duration>, String> {
    let pauses: Vec<Duration> = s
        .split(',')
        .map(|p| match p.trim().parse::<u64>() {
            Ok(n) if n <= 86_400 => Ok(Duration::from_secs(n)),
            _ => Err(format!("{p:?} is not a number of seconds up to 86400")),
        })
        .collect::<Result<_, _>>()?;
    if pauses.len() > 20 {
        return Err("at most 20 retries".into());
    }
    Ok(pauses)
}

/// The last try of a job's webhook.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LastTry {
    pub at: DateTime<Utc>,
    #[serde(rename = "type")]
    pub event: EventType,
    pub sequence: u64,
    pub attempt: u32,
    pub status_code: Option<u16>,
    pub error: Option<String>,
}

/// An event being delivered: its body is fixed at its first try, so every try sends the same.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Inflight {
    sequence: u64,
    event: EventType,
    body: String,
    /// For a page: the results cursor just after it.
    cursor: Option<String>,
    tries: u32,
    due: DateTime<Utc>,
}

/// What a job's webhook has settled (delivered, failed, or not subscribed to).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct State {
    started_done: bool,
    /// Page events settled, and the results cursor after the last of them.
    pages: u64,
    cursor: Option<String>,
    /// The final event's sequence, fixed when the job was first seen final.
    final_seq: Option<u64>,
    final_done: bool,
    inflight: Option<Inflight>,
    delivered: u64,
    failed: u64,
    last: Option<LastTry>,
    /// When the run queued last is delivered, while it is pending.
    scheduled: Option<DateTime<Utc>>,
    /// Runs in a row that found nothing to send.
    idle: u32,
    /// The receiver answered 410 Gone: nothing more is sent.
    gone: bool,
}

fn state_key(job: &Job) -> String {
    format!("{}/{}/webhook-state.json", job.user_id, job.job_id)
}

async fn load(app: &App, job: &Job) -> StoreResult<State> {
    Ok(match app.blobs.get(&state_key(job)).await? {
        Some(b) => serde_json::from_slice(&b).unwrap_or_default(),
        None => State::default(),
    })
}

async fn save(app: &App, job: &Job, state: &State) -> StoreResult<()> {
    let body = serde_json::to_vec(state).map_err(StoreError::new)?;
    app.blobs.put(&state_key(job), Bytes::from(body)).await
}

/// What a pump sends: a job's webhook events, or the change a monitor's check found.
enum Source {
    Job(WebhookSpec),
    Check(MonitorId),
}

/// Queues the pump of a monitor's check that found a change: it sends the notification from
/// what the check stores, once the check's job has ended.
pub(crate) async fn notify_later(app: &App, job: &Job) -> StoreResult<()> {
    app.queue
        .send_later(&[pump_task(job)], Duration::from_secs(1))
        .await
}

/// A monitor check's one event: `monitor.changed`, built from the check's stored result once
/// its job has ended (a check that stored no change has none).
async fn check_event(app: &App, job: &Job, state: &mut State) -> StoreResult<Option<Inflight>> {
    if state.final_done || !job.status.is_final() {
        return Ok(None);
    }
    let page = app.jobs.results(&job.user_id, &job.job_id, None, 1).await?;
    let result: Option<Value> = match page.entries.first() {
        Some(e) => app
            .blobs
            .get(&e.key)
            .await?
            .and_then(|b| serde_json::from_slice::<Value>(&b).ok()),
        None => None,
    };
    let Some(r) = result.filter(|r| r["changed"] == true) else {
        state.final_done = true;
        return Ok(None);
    };
    let url = job.request["url"].clone();
    let mut body = json!({
        "type": "monitor.changed",
        "monitor_id": r["monitor_id"],
        "url": url,
        "job_id": job.job_id,
        "checked_at": r["checked_at"],
        "previous": r["previous"],
        "current": {"hash": r["hash"]},
        "diff": r["diff"],
    });
    if let Some(why) = r.get("diff_omitted") {
        body["diff_omitted"] = why.clone();
    }
    Ok(Some(Inflight {
        sequence: 1,
        event: EventType::MonitorChanged,
        body: body.to_string(),
        cursor: None,
        tries: 0,
        due: app.clock.now(),
    }))
}

/// The pump's task for `job`.
fn pump_task(job: &Job) -> Task {
    Task {
        webhook: true,
        ..Task::new(&job.user_id, &job.job_id, "", 0, false)
    }
}

/// The first run of a new job's pump, queued with its first task.
pub(crate) fn first_run(job: &Job) -> Option<Task> {
    WebhookSpec::of(job).map(|_| pump_task(job))
}

/// Runs the pump of `job` soon: its state just changed (started, ended). Best effort: the
/// pump's own schedule finds the change all the same.
pub(crate) async fn nudge(app: &App, job: &Job) {
    if WebhookSpec::of(job).is_none() {
        return;
    }
    if let Err(e) = app.queue.send(&[pump_task(job)]).await {
        tracing::warn!(job = %job.job_id, error = %e, "webhook nudge not queued");
    }
}

/// W3, S1: a webhook URL must lead to an address the service may reach.
pub(crate) async fn check_destination(app: &App, job: &Job) -> Result<(), AppError> {
    let Some(spec) = WebhookSpec::of(job) else {
        return Ok(());
    };
    let blocked = match url::Url::parse(&spec.url) {
        Ok(u) => app.fetcher.check_destination(&u).await.is_err(),
        Err(_) => true,
    };
    if blocked {
        return Err(AppError::Invalid(vec![Problem {
            field: "webhook.url".into(),
            problem: "is not reachable from this service (a blocked or unknown address)".into(),
        }]));
    }
    Ok(())
}

/// A pump task handed over by the dead-letter queue (its deliveries ran out on errors): it
/// goes back to the work queue as a fresh task, so the job's webhook is not left without one.
pub(crate) async fn requeue(app: &App, task: &Task) -> StoreResult<()> {
    app.queue.send(std::slice::from_ref(task)).await
}

/// Runs a delivered pump task: sends what the job's webhook has due, and queues the next run.
pub(crate) async fn pump(app: &App, task: &Task) -> StoreResult<()> {
    let (user, id) = (&task.user_id, &task.job_id);
    let Some(job) = app.jobs.get_job(user, id).await? else {
        return Ok(());
    };
    let source = match (WebhookSpec::of(&job), JobRequest::of(&job)) {
        (Some(spec), _) => Source::Job(spec),
        (None, Ok(JobRequest::Check(c))) => Source::Check(c.monitor_id),
        _ => return Ok(()),
    };
    let gate = format!("webhook:{user}/{id}");
    let holder = ulid::Ulid::new().to_string();
    let until = app.clock.now() + GATE_LEASE;
    let Some(place) = app.gates.enter(&gate, 1, &holder, until).await? else {
        // Another run is sending. A nudge can go (that run looks again before it stops); a
        // scheduled run comes back, as the schedule may rest on it.
        if task.not_before.is_some() {
            app.queue
                .send_later(std::slice::from_ref(task), Duration::from_secs(5))
                .await?;
        }
        return Ok(());
    };
    let ran = pump_held(app, &job, &source).await;
    app.gates.leave(&gate, place, &holder).await?;
    ran
}

async fn pump_held(app: &App, job: &Job, source: &Source) -> StoreResult<()> {
    let mut state = load(app, job).await?;
    let now = app.clock.now();
    if state
        .scheduled
        .is_some_and(|t| t <= now + chrono::Duration::seconds(1))
    {
        // This is the scheduled run, or a run standing in for it.
        state.scheduled = None;
    }
    let started = Instant::now();
    let (mut sent, mut unsaved) = (0u32, 0u32);
    loop {
        if state.inflight.is_none() {
            let next = match source {
                Source::Job(spec) => next_event(app, job, spec, &mut state).await?,
                Source::Check(_) => check_event(app, job, &mut state).await?,
            };
            match next {
                Some(ev) => state.inflight = Some(ev),
                None => break,
            }
        }
        let Some(ev) = state.inflight.as_mut() else {
            break;
        };
        if state.gone {
            state.failed += 1;
            settle(&mut state);
            continue;
        }
        let now = app.clock.now();
        if ev.due > now || started.elapsed() > RUN_BUDGET {
            break;
        }
        let Some(target) = target(app, job, source).await? else {
            // The monitor was deleted meanwhile: its change is never sent.
            let log = NewLog::info("the monitor was deleted: not notified");
            app.jobs
                .append_logs(&job.user_id, &job.job_id, &[log])
                .await?;
            state.inflight = None;
            state.final_done = true;
            break;
        };
        ev.tries += 1;
        let outcome = deliver(app, &target, job, ev).await;
        let (attempt, sequence, event) = (ev.tries, ev.sequence, ev.event);
        let mut line = format!("webhook {} #{sequence} try {attempt}: ", event.as_str());
        let mut last = LastTry {
            at: now,
            event,
            sequence,
            attempt,
            status_code: None,
            error: None,
        };
        let retry_after = match outcome {
            Ok(Posted { status, .. }) if (200..300).contains(&status) => {
                last.status_code = Some(status);
                line.push_str(&format!("delivered ({status})"));
                state.delivered += 1;
                settle(&mut state);
                None
            }
            Ok(Posted { status: 410, .. }) => {
                last.status_code = Some(410);
                last.error = Some("the receiver is gone (410)".into());
                line.push_str("the receiver answered 410 Gone: no more events are sent");
                state.failed += 1;
                state.gone = true;
                settle(&mut state);
                None
            }
            Ok(Posted {
                status,
                retry_after,
            }) => {
                last.status_code = Some(status);
                last.error = Some(format!("the receiver answered {status}"));
                line.push_str(&format!("the receiver answered {status}"));
                Some(if matches!(status, 429 | 503) {
                    retry_after
                } else {
                    None
                })
            }
            Err(e) => {
                let why = format!("{} ({e})", e.code().as_str());
                line.push_str(&why);
                last.error = Some(why);
                Some(None)
            }
        };
        let mut log = if last.error.is_none() {
            NewLog::info(line)
        } else {
            NewLog::warn(line)
        };
        if let Some(asked) = retry_after {
            match app.config.webhook_retries.get(attempt as usize - 1) {
                Some(pause) => {
                    // A receiver's own `Retry-After` is waited out, up to a longest pause.
                    let pause = asked
                        .map_or_else(|| jitter(*pause), |a| a.max(*pause))
                        .min(LONGEST_PAUSE);
                    let pause =
                        chrono::Duration::from_std(pause).unwrap_or(chrono::Duration::hours(12));
                    if let Some(ev) = state.inflight.as_mut() {
                        ev.due = now + pause;
                    }
                    log.message
                        .push_str(&format!("; next try in {}", seconds(pause)));
                }
                None => {
                    log.message.push_str("; given up");
                    state.failed += 1;
                    settle(&mut state);
                }
            }
        }
        app.jobs
            .append_logs(&job.user_id, &job.job_id, &[log.at(target.url.clone())])
            .await?;
        if let Source::Check(monitor) = source {
            let d = LastDelivery {
                at: last.at,
                status_code: last.status_code,
                error: last.error.clone(),
            };
            app.monitors
                .update_monitor(&job.user_id, monitor, &mut |m| {
                    m.last_delivery = Some(d.clone())
                })
                .await?;
        }
        state.last = Some(last);
        sent += 1;
        unsaved += 1;
        if unsaved >= SAVE_EVERY {
            save(app, job, &state).await?;
            unsaved = 0;
        }
    }
    schedule(app, job, &mut state, sent > 0).await?;
    save(app, job, &state).await
}

/// Queues the pump's next run when one is needed and none is queued for sooner.
async fn schedule(app: &App, job: &Job, state: &mut State, sent: bool) -> StoreResult<()> {
    let now = app.clock.now();
    state.idle = if sent {
        0
    } else {
        state.idle.saturating_add(1)
    };
    let want = match &state.inflight {
        Some(ev) => Some(ev.due.max(now)),
        None if state.final_done => None,
        None => {
            let wait = (POLL_MIN << state.idle.min(4)).min(POLL_MAX);
            Some(now + chrono::Duration::seconds(wait))
        }
    };
    let Some(want) = want else {
        return Ok(());
    };
    let at = want.min(now + MAX_QUEUE_DELAY);
    if state.scheduled.is_some_and(|t| t > now && t <= at) {
        return Ok(());
    }
    let task = Task {
        not_before: Some(at),
        ..pump_task(job)
    };
    let delay = (at - now).to_std().unwrap_or_default();
    app.queue.send_later(&[task], delay).await?;
    state.scheduled = Some(at);
    Ok(())
}

/// Marks the event in flight settled and moves past it.
fn settle(state: &mut State) {
    let Some(ev) = state.inflight.take() else {
        return;
    };
    match ev.event {
        EventType::Started => state.started_done = true,
        EventType::Page => {
            state.pages += 1;
            state.cursor = ev.cursor;
        }
        _ => state.final_done = true,
    }
}

/// The next event of the job to settle, its body built now; events the webhook does not
/// want are settled on the way. `None` while the next event has not happened yet.
async fn next_event(
    app: &App,
    job: &Job,
    spec: &WebhookSpec,
    state: &mut State,
) -> StoreResult<Option<Inflight>> {
    let now = app.clock.now();
    let fresh = |sequence, event, body: Value, cursor| Inflight {
        sequence,
        event,
        body: body.to_string(),
        cursor,
        tries: 0,
        due: now,
    };
    if !state.started_done {
        match job.started_at {
            Some(at) if spec.wants(EventType::Started) => {
                let body = payload(job, spec, EventType::Started, 1, at, json!({}));
                return Ok(Some(fresh(1, EventType::Started, body, None)));
            }
            Some(_) => state.started_done = true,
            None if job.status.is_final() => state.started_done = true,
            None => return Ok(None),
        }
    }
    let final_status = job.status.is_final();
    let sends_pages = spec.wants(EventType::Page) && !state.gone;
    if job.kind.has_pages() && !sends_pages {
        // No page is sent: only their count matters, for the final event's number.
        if final_status {
            let last = match state.final_seq {
                Some(f) => f,
                None => {
                    let total = app
                        .jobs
                        .results(&job.user_id, &job.job_id, None, 1)
                        .await?
                        .total;
                    2 + total.max(state.pages)
                }
            };
            state.final_seq = Some(last);
            let pages = last - 2;
            if state.gone {
                state.failed += pages.saturating_sub(state.pages);
            }
            state.pages = state.pages.max(pages);
        }
    } else if job.kind.has_pages() && state.final_seq.is_none_or(|f| 2 + state.pages < f) {
        let page = app
            .jobs
            .results(&job.user_id, &job.job_id, state.cursor.as_deref(), 1)
            .await?;
        if final_status && state.final_seq.is_none() {
            state.final_seq = Some(2 + page.total);
        }
        match page.entries.into_iter().next() {
            Some(entry) => {
                let sequence = 2 + state.pages;
                let data = page_data(app, job, &entry.key, state.cursor.as_deref()).await?;
                let body = payload(job, spec, EventType::Page, sequence, now, data);
                let cursor = Some(entry.cursor);
                return Ok(Some(fresh(sequence, EventType::Page, body, cursor)));
            }
            None if !final_status => return Ok(None),
            None => {}
        }
    }
    if !final_status || state.final_done {
        return Ok(None);
    }
    let sequence = *state.final_seq.get_or_insert(2 + state.pages);
    let event = match job.status {
        JobStatus::Completed => EventType::Completed,
        JobStatus::Cancelled => EventType::Cancelled,
        _ => EventType::Failed,
    };
    if !spec.wants(event) {
        state.final_done = true;
        return Ok(None);
    }
    let at = job.finished_at.unwrap_or(now);
    let data = json!({ "error": job.error });
    let body = payload(job, spec, event, sequence, at, data);
    Ok(Some(fresh(sequence, event, body, None)))
}

/// A `job.page` event's page: its document, or for one over [`INLINE_DOCUMENT_BYTES`] its
/// URL, status and where to read it.
async fn page_data(app: &App, job: &Job, key: &str, before: Option<&str>) -> StoreResult<Value> {
    let Some(bytes) = app.blobs.get(key).await? else {
        return Ok(json!({ "document": null }));
    };
    let doc: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    if bytes.len() <= INLINE_DOCUMENT_BYTES {
        return Ok(json!({ "document": doc }));
    }
    let mut results = format!("/api/jobs/{}/results?limit=1", job.job_id);
    if let Some(c) = before {
        results.push_str(&format!("&cursor={}", urlencode(c)));
    }
    Ok(json!({
        "document": null,
        "page": {
            "url": doc["url"],
            "status_code": doc["status_code"],
            "error": doc["error"],
            "bytes": bytes.len(),
            "results_url": results,
        }
    }))
}

fn urlencode(s: &str) -> String {
    url::form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

/// The body of an event: what every event carries, and `data`'s fields.
fn payload(
    job: &Job,
    spec: &WebhookSpec,
    event: EventType,
    sequence: u64,
    at: DateTime<Utc>,
    data: Value,
) -> Value {
    let mut body = json!({
        "type": event.as_str(),
        "job_id": job.job_id,
        "kind": job.kind.as_str(),
        "status": job.status.as_str(),
        "at": at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        "sequence": sequence,
        "progress": job.page_progress(),
        "metadata": spec.metadata.clone().unwrap_or_else(|| json!({})),
    });
    if let (Value::Object(b), Value::Object(d)) = (&mut body, data) {
        b.extend(d);
    }
    body
}

/// Where an event goes and the secrets that sign it.
struct Target {
    url: String,
    secrets: Vec<String>,
    /// The `webhook-id` of the job's event `n` is `msg_<job>_<n>`; a monitor's check has one
    /// event, `msg_<job>`.
    numbered: bool,
}

/// The target of the source's next try, read afresh (a monitor's notify URL may have
/// changed); `None` when the monitor is gone.
async fn target(app: &App, job: &Job, source: &Source) -> StoreResult<Option<Target>> {
    Ok(match source {
        Source::Job(spec) => {
            let keys = signing_keys(app, &job.user_id).await?;
            Some(Target {
                url: spec.url.clone(),
                secrets: keys
                    .signing_at(app.clock.now())
                    .into_iter()
                    .map(String::from)
                    .collect(),
                numbered: true,
            })
        }
        Source::Check(id) => app
            .monitors
            .get_monitor(&job.user_id, id)
            .await?
            .map(|m| Target {
                url: m.notify_url,
                secrets: vec![m.secret],
                numbered: false,
            }),
    })
}

/// One try of the event in flight, signed with every secret of the target.
async fn deliver(
    app: &App,
    target: &Target,
    job: &Job,
    ev: &Inflight,
) -> Result<Posted, crate::engine::fetch::FetchError> {
    let url =
        url::Url::parse(&target.url).map_err(|_| crate::engine::fetch::FetchError::Blocked)?;
    let job_part = job.job_id.as_str().trim_start_matches("job_");
    let id = if target.numbered {
        format!("msg_{job_part}_{}", ev.sequence)
    } else {
        format!("msg_{job_part}")
    };
    let timestamp = app.clock.now().timestamp();
    let signatures: Vec<String> = target
        .secrets
        .iter()
        .map(|k| signature(k, &id, timestamp, ev.body.as_bytes()))
        .collect();
    let headers = [
        ("content-type".to_string(), "application/json".to_string()),
        ("webhook-id".to_string(), id),
        ("webhook-timestamp".to_string(), timestamp.to_string()),
        ("webhook-signature".to_string(), signatures.join(" ")),
    ];
    app.fetcher
        .post(
            &url,
            &headers,
            Bytes::from(ev.body.clone()),
            DELIVERY_TIMEOUT,
        )
        .await
}

/// `pause` with up to a fifth taken off or added at random, so retries of many deliveries do
/// not arrive together.
fn jitter(pause: Duration) -> Duration {
    let mut b = [0u8; 2];
    if getrandom::fill(&mut b).is_err() {
        return pause;
    }
    let r = u16::from_le_bytes(b) as f64 / u16::MAX as f64; // 0..=1
    pause.mul_f64(0.8 + 0.4 * r)
}

fn seconds(d: chrono::Duration) -> String {
    format!("{} s", d.num_seconds().max(0))
}

/// The Standard Webhooks signature of a delivery: `v1,<base64 HMAC-SHA256>` over
/// `id.timestamp.body`, keyed with the secret's bytes.
pub fn signature(secret: &str, id: &str, timestamp: i64, body: &[u8]) -> String {
    let key = secret
        .strip_prefix("whsec_")
        .and_then(|k| base64::engine::general_purpose::STANDARD.decode(k).ok())
        .unwrap_or_else(|| secret.as_bytes().to_vec());
    let mut mac = match Hmac::<Sha256>::new_from_slice(&key) {
        Ok(m) => m,
        Err(_) => return String::new(),
    };
    mac.update(format!("{id}.{timestamp}.").as_bytes());
    mac.update(body);
    format!(
        "v1,{}",
        base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes())
    )
}

/// A new signing secret: `whsec_` and 32 random bytes in base64.
pub fn new_secret() -> StoreResult<String> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes)
        .map_err(|e| StoreError::transient(format!("no randomness: {e}")))?;
    Ok(format!(
        "whsec_{}",
        base64::engine::general_purpose::STANDARD.encode(bytes)
    ))
}

/// The user's signing keys, made on first use (racing first uses agree on one).
pub async fn signing_keys(app: &App, user: &UserId) -> StoreResult<SigningKeys> {
    for _ in 0..5 {
        if let Some(k) = app.signing.signing_keys(user).await? {
            return Ok(k);
        }
        let keys = SigningKeys {
            current: new_secret()?,
            created_at: app.clock.now(),
            previous: None,
            previous_until: None,
            version: 0,
        };
        if app.signing.save_signing_keys(user, &keys).await? {
            return Ok(SigningKeys { version: 1, ..keys });
        }
    }
    Err(StoreError::transient("the signing keys kept changing"))
}

/// Replaces the user's signing secret; the one it replaces keeps signing for
/// [`ROTATION_OVERLAP`].
pub async fn rotate(app: &App, user: &UserId) -> StoreResult<SigningKeys> {
    for _ in 0..5 {
        let old = signing_keys(app, user).await?;
        let now = app.clock.now();
        let keys = SigningKeys {
            current: new_secret()?,
            created_at: now,
            previous: Some(old.current),
            previous_until: Some(now + ROTATION_OVERLAP),
            version: old.version,
        };
        if app.signing.save_signing_keys(user, &keys).await? {
            return Ok(SigningKeys {
                version: keys.version + 1,
                ..keys
            });
        }
    }
    Err(StoreError::transient("the signing keys kept changing"))
}

/// The signing keys as `GET /api/webhooks/secret` shows them.
pub fn keys_json(k: &SigningKeys) -> Value {
    let t = |t: DateTime<Utc>| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    json!({
        "secret": k.current,
        "created_at": t(k.created_at),
        "previous_expires_at": k.previous_until.filter(|_| k.previous.is_some()).map(t),
    })
}

/// The job's webhook as `GET /api/jobs/{id}` shows it: where, which events, and how its
/// deliveries went.
pub async fn status_json(app: &App, job: &Job) -> StoreResult<Option<Value>> {
    let Some(spec) = WebhookSpec::of(job) else {
        return Ok(None);
    };
    let state = load(app, job).await?;
    let p = job.page_progress();
    let mut happened = 0u64;
    if job.started_at.is_some() && spec.wants(EventType::Started) {
        happened += 1;
    }
    if job.kind.has_pages() && spec.wants(EventType::Page) {
        let pages = p.pages_completed + p.pages_failed;
        happened += match state.final_seq {
            Some(f) => pages.min(f.saturating_sub(2)),
            None => pages,
        };
    }
    let final_event = match job.status {
        JobStatus::Completed => Some(EventType::Completed),
        JobStatus::Failed => Some(EventType::Failed),
        JobStatus::Cancelled => Some(EventType::Cancelled),
        _ => None,
    };
    if final_event.is_some_and(|e| spec.wants(e)) {
        happened += 1;
    }
    let settled = state.delivered + state.failed;
    Ok(Some(json!({
        "url": spec.url,
        "events": spec.events,
        "delivered": state.delivered,
        "failed": state.failed,
        "pending": happened.saturating_sub(settled),
        "last_delivery": state.last,
    })))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signature_follows_standard_webhooks() {
        // The example of the Standard Webhooks specification.
        let secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
        let body = br#"{"test": 2432232314}"#;
        let sig = signature(secret, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body);
        assert_eq!(sig, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
    }

    #[test]
    fn jitter_stays_within_a_fifth() {
        for _ in 0..100 {
            let j = jitter(Duration::from_secs(100));
            assert!(j >= Duration::from_secs(80) && j <= Duration::from_secs(120));
        }
    }

    #[test]
    fn settling_moves_through_the_phases() {
        let mut s = State::default();
        let ev = |event, cursor: Option<&str>| Inflight {
            sequence: 1,
            event,
            body: String::new(),
            cursor: cursor.map(String::from),
            tries: 1,
            due: Utc::now(),
        };
        s.inflight = Some(ev(EventType::Started, None));
        settle(&mut s);
        assert!(s.started_done && s.inflight.is_none());
        s.inflight = Some(ev(EventType::Page, Some("c1")));
        settle(&mut s);
        assert_eq!((s.pages, s.cursor.as_deref()), (1, Some("c1")));
        s.inflight = Some(ev(EventType::Cancelled, None));
        settle(&mut s);
        assert!(s.final_done);
    }
}
