//! Opaque identifiers: a prefix and a sortable ULID.

use serde::{Deserialize, Serialize};
use std::fmt;

/// The owner of jobs and monitors, as resolved from an API key.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct UserId(pub String);

/// A job's id: `job_` followed by a ULID, so ids sort by creation time.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct JobId(pub String);

impl JobId {
    /// A fresh, time-ordered job id.
    pub fn generate() -> Self {
        JobId(format!("job_{}", ulid::Ulid::new()))
    }

    /// Accepts only strings shaped like a job id; anything else cannot name a job.
    pub fn parse(s: &str) -> Option<Self> {
        let rest = s.strip_prefix("job_")?;
        (rest.len() == 26 && rest.bytes().all(|b| b.is_ascii_alphanumeric()))
            .then(|| JobId(s.to_string()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl UserId {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for JobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Display for UserId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_ids_parse_and_sort() {
        let a = JobId::generate();
        std::thread::sleep(std::time::Duration::from_millis(2));
        let b = JobId::generate();
        assert!(JobId::parse(a.as_str()).is_some());
        assert!(a < b);
        assert!(JobId::parse("job_../../etc").is_none());
        assert!(JobId::parse("nope").is_none());
    }
}
