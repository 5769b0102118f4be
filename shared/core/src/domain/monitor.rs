//! Monitors: a page watched on an interval, its content's last snapshot, and where changes
//! are sent.

use super::ids::{JobId, UserId};
use super::request::{page_options, PageOptions};
use super::validate::{Fields, Problem};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::fmt;

/// A monitor's id: `mon_` followed by a ULID.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct MonitorId(pub String);

impl MonitorId {
    pub fn generate() -> Self {
        MonitorId(format!("mon_{}", ulid::Ulid::new()))
    }

    /// Accepts only strings shaped like a monitor id.
    pub fn parse(s: &str) -> Option<Self> {
        let rest = s.strip_prefix("mon_")?;
        (rest.len() == 26 && rest.bytes().all(|b| b.is_ascii_alphanumeric()))
            .then(|| MonitorId(s.to_string()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for MonitorId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MonitorStatus {
    Active,
    Paused,
}

/// How the last notification went.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LastDelivery {
    pub at: DateTime<Utc>,
    pub status_code: Option<u16>,
    pub error: Option<String>,
}

/// The content a check compares against.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Snapshot {
    pub hash: String,
    pub checked_at: DateTime<Utc>,
}

/// A monitor as stored. `version` grows with every write, which is conditioned on it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Monitor {
    pub monitor_id: MonitorId,
    pub user_id: UserId,
    pub url: String,
    pub notify_url: String,
    pub interval_seconds: u64,
    pub selector: Option<String>,
    pub page: PageOptions,
    pub status: MonitorStatus,
    /// The webhook signing secret (`whsec_` and base64).
    pub secret: String,
    pub created_at: DateTime<Utc>,
    pub last_checked_at: Option<DateTime<Utc>>,
    pub last_changed_at: Option<DateTime<Utc>>,
    pub next_check_at: DateTime<Utc>,
    pub checks: u64,
    pub changes: u64,
    pub last_delivery: Option<LastDelivery>,
    pub snapshot: Option<Snapshot>,
    /// The check running now, and until when it may hold the monitor.
    pub running: Option<(JobId, DateTime<Utc>)>,
    pub version: u64,
}

impl Monitor {
    /// When the scheduler should look at it next: never while paused; when a running check's
    /// hold runs out; else at its next check.
    pub fn due_at(&self) -> Option<DateTime<Utc>> {
        match (self.status, &self.running) {
            (MonitorStatus::Paused, _) => None,
            (_, Some((_, until))) => Some(*until),
            _ => Some(self.next_check_at),
        }
    }
}

/// `POST /api/monitors`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MonitorRequest {
    pub url: url::Url,
    pub notify_url: url::Url,
    pub interval_seconds: u64,
    pub selector: Option<String>,
    #[serde(flatten)]
    pub page: PageOptions,
}

/// The default interval between checks: an hour.
pub const DEFAULT_INTERVAL: u64 = 3600;

impl MonitorRequest {
    /// A monitor of `url` notifying `notify_url`, with the API's defaults.
    pub fn new(url: url::Url, notify_url: url::Url) -> Self {
        MonitorRequest {
            url,
            notify_url,
            interval_seconds: DEFAULT_INTERVAL,
            selector: None,
            page: PageOptions::default(),
        }
    }
}

/// The longest interval between checks (30 days).
const MAX_INTERVAL: u64 = 30 * 24 * 3600;

impl MonitorRequest {
    /// Parses and validates a monitor body; `min_interval` is the shortest interval allowed.
    pub fn parse(body: &[u8], min_interval: u64) -> Result<Self, Vec<Problem>> {
        let mut f = Fields::from_body(body)?;
        let url = f.url("url");
        let notify_url = f.url("notify_url");
        let interval_seconds = f.integer(
            "interval_seconds",
            DEFAULT_INTERVAL.max(min_interval),
            min_interval,
            MAX_INTERVAL,
        );
        let selector = f.string("selector", 512);
        if let Some(s) = &selector {
            if scraper::Selector::parse(s).is_err() {
                f.problem("selector", "is not a valid CSS selector");
            }
        }
        let mut page = page_options(&mut f);
        if let Some(s) = &selector {
            page.include_selectors = vec![s.clone()];
        }
        f.finish()?;
        match (url, notify_url) {
            (Some(url), Some(notify_url)) => Ok(MonitorRequest {
                url,
                notify_url,
                interval_seconds,
                selector,
                page,
            }),
            _ => Err(Vec::new()),
        }
    }
}

/// `PATCH /api/monitors/{id}`.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct MonitorPatch {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<MonitorStatus>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interval_seconds: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub notify_url: Option<url::Url>,
}

impl MonitorPatch {
    pub fn parse(body: &[u8], min_interval: u64) -> Result<Self, Vec<Problem>> {
        let mut f = Fields::from_body(body)?;
        let status = match f.string("status", 16).as_deref() {
            None => None,
            Some("active") => Some(MonitorStatus::Active),
            Some("paused") => Some(MonitorStatus::Paused),
            Some(_) => {
                f.problem("status", "must be active or paused");
                None
            }
        };
        let interval_seconds = f
            .has("interval_seconds")
            .then(|| f.integer("interval_seconds", min_interval, min_interval, MAX_INTERVAL));
        let notify_url = f.optional_url("notify_url");
        f.finish()?;
        Ok(MonitorPatch {
            status,
            interval_seconds,
            notify_url,
        })
    }
}

/// What a check job does: watch one monitor's page.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckRequest {
    pub monitor_id: MonitorId,
    pub url: String,
    #[serde(flatten)]
    pub page: PageOptions,
}
