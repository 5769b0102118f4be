//! A job's webhook: where its events go, which ones, and the metadata echoed in each; and the
//! per-user signing keys that sign them.

use super::validate::{parse_web_url, Fields};
use super::Job;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Largest `metadata` of a webhook, as compact JSON.
pub const MAX_METADATA_BYTES: usize = 4 * 1024;

/// The events of a job a webhook may receive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum EventType {
    #[serde(rename = "job.started")]
    Started,
    #[serde(rename = "job.page")]
    Page,
    #[serde(rename = "job.completed")]
    Completed,
    #[serde(rename = "job.failed")]
    Failed,
    #[serde(rename = "job.cancelled")]
    Cancelled,
    /// A monitor's check found a change (sent to the monitor's notify URL; not one of a job's
    /// events).
    #[serde(rename = "monitor.changed")]
    MonitorChanged,
}

impl EventType {
    /// Every event, in a job's order.
    pub const ALL: [EventType; 5] = [
        EventType::Started,
        EventType::Page,
        EventType::Completed,
        EventType::Failed,
        EventType::Cancelled,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Started => "job.started",
            EventType::Page => "job.page",
            EventType::Completed => "job.completed",
            EventType::Failed => "job.failed",
            EventType::Cancelled => "job.cancelled",
            EventType::MonitorChanged => "monitor.changed",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|e| e.as_str() == s)
    }
}

/// The `webhook` of a submit, validated.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WebhookSpec {
    pub url: String,
    pub events: Vec<EventType>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Value>,
}

impl WebhookSpec {
    /// The webhook stored with a job's request, if it has one.
    pub fn of(job: &Job) -> Option<WebhookSpec> {
        job.request
            .get("webhook")
            .and_then(|w| serde_json::from_value(w.clone()).ok())
    }

    /// Whether the webhook receives events of type `e`.
    pub fn wants(&self, e: EventType) -> bool {
        self.events.contains(&e)
    }

    /// Reads the optional `webhook` object of a request body; problems are named
    /// `webhook.url`, `webhook.events`, `webhook.metadata`.
    pub fn read(f: &mut Fields) -> Option<WebhookSpec> {
        let value = f.value("webhook")?;
        let Value::Object(mut map) = value else {
            f.problem("webhook", "must be an object with a url");
            return None;
        };
        let url = match map.remove("url") {
            Some(Value::String(s)) => match parse_web_url(&s) {
                Ok(u) => Some(u.to_string()),
                Err(p) => {
                    f.problem("webhook.url", p);
                    None
                }
            },
            None | Some(Value::Null) => {
                f.problem("webhook.url", "is required");
                None
            }
            Some(_) => {
                f.problem("webhook.url", "must be a string");
                None
            }
        };
        let events = match map.remove("events") {
            None | Some(Value::Null) => EventType::ALL.to_vec(),
            Some(Value::Array(items)) if !items.is_empty() => {
                let mut events = Vec::new();
                for item in items {
                    match item.as_str().and_then(EventType::parse) {
                        Some(e) if !events.contains(&e) => events.push(e),
                        Some(_) => {}
                        None => f.problem(
                            "webhook.events",
                            "entries must be job.started, job.page, job.completed, \
                             job.failed or job.cancelled",
                        ),
                    }
                }
                events
            }
            Some(_) => {
                f.problem("webhook.events", "must be a non-empty list of event names");
                Vec::new()
            }
        };
        let metadata = match map.remove("metadata") {
            None | Some(Value::Null) => None,
            Some(m @ Value::Object(_)) => {
                if m.to_string().len() > MAX_METADATA_BYTES {
                    f.problem(
                        "webhook.metadata",
                        format!("must be at most {MAX_METADATA_BYTES} bytes of JSON"),
                    );
                }
                Some(m)
            }
            Some(_) => {
                f.problem("webhook.metadata", "must be an object");
                None
            }
        };
        for k in map.keys() {
            f.problem(&format!("webhook.{k}"), "is not a known field");
        }
        Some(WebhookSpec {
            url: url?,
            events,
            metadata,
        })
    }
}

/// A user's webhook signing keys: the current one, and for a while after a rotation the one
/// it replaced, which still signs every delivery until `previous_until`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SigningKeys {
    pub current: String,
    pub created_at: DateTime<Utc>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_until: Option<DateTime<Utc>>,
    /// Bumped by every write; a write is made only over the version it read.
    #[serde(default)]
    pub version: u64,
}

impl SigningKeys {
    /// The secrets that sign a delivery made at `now`: the current one, and the previous one
    /// until it expires.
    pub fn signing_at(&self, now: DateTime<Utc>) -> Vec<&str> {
        let mut keys = vec![self.current.as_str()];
        if let (Some(p), Some(until)) = (&self.previous, self.previous_until) {
            if now < until {
                keys.push(p);
            }
        }
        keys
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(body: &str) -> Result<Option<WebhookSpec>, Vec<super::super::validate::Problem>> {
        let mut f = Fields::from_body(body.as_bytes())?;
        let w = WebhookSpec::read(&mut f);
        f.finish().map(|()| w)
    }

    #[test]
    fn events_default_to_all_and_metadata_is_bounded() {
        let w = read(r#"{"webhook":{"url":"https://example.com/hook"}}"#)
            .unwrap()
            .unwrap();
        assert_eq!(w.events, EventType::ALL.to_vec());
        assert!(read("{}").unwrap().is_none());
        let big = "x".repeat(MAX_METADATA_BYTES);
        let e = read(&format!(
            r#"{{"webhook":{{"url":"https://e.com/","metadata":{{"a":"{big}"}}}}}}"#
        ))
        .unwrap_err();
        assert_eq!(e[0].field, "webhook.metadata");
    }

    #[test]
    fn bad_fields_are_named() {
        let e = read(r#"{"webhook":{"url":"ftp://x/","events":["job.nope"],"x":1}}"#).unwrap_err();
        let fields: Vec<&str> = e.iter().map(|p| p.field.as_str()).collect();
        assert_eq!(fields, ["webhook.url", "webhook.events", "webhook.x"]);
    }

    #[test]
    fn the_previous_key_signs_until_it_expires() {
        let now = Utc::now();
        let keys = SigningKeys {
            current: "new".into(),
            created_at: now,
            previous: Some("old".into()),
            previous_until: Some(now + chrono::Duration::hours(24)),
            version: 1,
        };
        assert_eq!(keys.signing_at(now), ["new", "old"]);
        assert_eq!(keys.signing_at(now + chrono::Duration::hours(25)), ["new"]);
    }
}
