//! Jobs and their status machine: `queued -> running -> completed | failed | cancelled`.

use super::ids::{JobId, UserId};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// What a job does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobKind {
    Scrape,
    Crawl,
    Map,
    Search,
    Upload,
    /// One check of a monitor.
    Monitor,
    /// A list of URLs scraped as one job.
    Batch,
}

impl JobKind {
    /// Every kind, in API.md's order.
    pub const ALL: [JobKind; 7] = [
        JobKind::Scrape,
        JobKind::Crawl,
        JobKind::Map,
        JobKind::Search,
        JobKind::Upload,
        JobKind::Monitor,
        JobKind::Batch,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            JobKind::Scrape => "scrape",
            JobKind::Crawl => "crawl",
            JobKind::Map => "map",
            JobKind::Search => "search",
            JobKind::Upload => "upload",
            JobKind::Monitor => "monitor",
            JobKind::Batch => "batch",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == s)
    }

    /// Whether a user may run only one job of this kind at a time (its own slot); the other
    /// kinds share the per-user cap on active jobs.
    pub fn has_own_slot(self) -> bool {
        matches!(self, JobKind::Scrape | JobKind::Crawl | JobKind::Batch)
    }

    /// Whether a job of this kind has several pages, read from `/results` (its status carries
    /// no inline result).
    pub fn has_pages(self) -> bool {
        matches!(self, JobKind::Crawl | JobKind::Batch)
    }

    /// Whether a job of this kind counts against the per-user cap on active jobs (monitor
    /// checks do not: each monitor runs one at a time).
    pub fn is_capped(self) -> bool {
        matches!(self, JobKind::Map | JobKind::Search | JobKind::Upload)
    }
}

/// A job's lifecycle state. Final states never change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobStatus {
    Queued,
    Running,
    Completed,
    Failed,
    Cancelled,
}

impl JobStatus {
    pub fn is_final(self) -> bool {
        matches!(
            self,
            JobStatus::Completed | JobStatus::Failed | JobStatus::Cancelled
        )
    }

    pub fn as_str(self) -> &'static str {
        match self {
            JobStatus::Queued => "queued",
            JobStatus::Running => "running",
            JobStatus::Completed => "completed",
            JobStatus::Failed => "failed",
            JobStatus::Cancelled => "cancelled",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "queued" => JobStatus::Queued,
            "running" => JobStatus::Running,
            "completed" => JobStatus::Completed,
            "failed" => JobStatus::Failed,
            "cancelled" => JobStatus::Cancelled,
            _ => return None,
        })
    }
}

/// Error codes of jobs and pages, as API.md names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ErrorCode {
    FetchFailed,
    Timeout,
    HttpError,
    BlockedByRobots,
    BlockedAddress,
    TooLarge,
    /// The content's structure is beyond what is processed (nesting, node or operator counts).
    TooComplex,
    UnsupportedContent,
    SearchUnavailable,
    RenderUnavailable,
    /// The language model gave no valid answer for the page.
    ExtractFailed,
    Internal,
}

impl ErrorCode {
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::FetchFailed => "FETCH_FAILED",
            ErrorCode::Timeout => "TIMEOUT",
            ErrorCode::HttpError => "HTTP_ERROR",
            ErrorCode::BlockedByRobots => "BLOCKED_BY_ROBOTS",
            ErrorCode::BlockedAddress => "BLOCKED_ADDRESS",
            ErrorCode::TooLarge => "TOO_LARGE",
            ErrorCode::TooComplex => "TOO_COMPLEX",
            ErrorCode::UnsupportedContent => "UNSUPPORTED_CONTENT",
            ErrorCode::SearchUnavailable => "SEARCH_UNAVAILABLE",
            ErrorCode::RenderUnavailable => "RENDER_UNAVAILABLE",
            ErrorCode::ExtractFailed => "EXTRACT_FAILED",
            ErrorCode::Internal => "INTERNAL",
        }
    }
}

/// Why a job or a page failed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobError {
    pub code: ErrorCode,
    pub message: String,
}

impl JobError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        JobError {
            code,
            message: message.into(),
        }
    }
}

/// Exact page counters of a job.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Progress {
    pub pages_discovered: u64,
    pub pages_completed: u64,
    pub pages_failed: u64,
    /// Tokens the language model took to read the job's pages (`extract` by a model).
    #[serde(default)]
    pub extract_tokens: u64,
    pub pages_queued: u64,
}

/// A job as stored: who owns it, what it was asked, where it stands.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Job {
    pub job_id: JobId,
    pub user_id: UserId,
    pub kind: JobKind,
    pub status: JobStatus,
    pub created_at: DateTime<Utc>,
    pub started_at: Option<DateTime<Utc>>,
    pub finished_at: Option<DateTime<Utc>>,
    /// The validated request with every default filled in.
    pub request: serde_json::Value,
    pub progress: Progress,
    pub error: Option<JobError>,
}

impl Job {
    /// A new job in `queued`.
    pub fn new(
        user_id: UserId,
        kind: JobKind,
        request: serde_json::Value,
        now: DateTime<Utc>,
    ) -> Self {
        Job {
            job_id: JobId::generate(),
            user_id,
            kind,
            status: JobStatus::Queued,
            created_at: now,
            started_at: None,
            finished_at: None,
            request,
            progress: Progress::default(),
            error: None,
        }
    }

    /// The job's page counters as the API shows them. A batch's root node stands for its list
    /// of URLs, not a page, and is left out: it is done (completed, or failed when the list
    /// could not be read) before any URL of the batch is let go, so while nothing is done it
    /// is still pending.
    pub fn page_progress(&self) -> Progress {
        let mut p = self.progress;
        if self.kind == JobKind::Batch {
            p.pages_discovered = p.pages_discovered.saturating_sub(1);
            if p.pages_completed > 0 {
                p.pages_completed -= 1;
            } else if p.pages_failed > 0 {
                p.pages_failed -= 1;
            } else {
                p.pages_queued = p.pages_queued.saturating_sub(1);
            }
        }
        p
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(progress: Progress) -> Job {
        let mut job = Job::new(
            UserId("u".into()),
            JobKind::Batch,
            serde_json::Value::Null,
            Utc::now(),
        );
        job.progress = progress;
        job
    }

    fn p(discovered: u64, completed: u64, failed: u64, queued: u64) -> Progress {
        Progress {
            pages_discovered: discovered,
            pages_completed: completed,
            pages_failed: failed,
            pages_queued: queued,
            extract_tokens: 0,
        }
    }

    #[test]
    fn a_batch_counts_its_urls_not_its_root() {
        // Root pending, then its URLs claimed, then done with two pages failed.
        assert_eq!(batch(p(1, 0, 0, 1)).page_progress(), p(0, 0, 0, 0));
        assert_eq!(batch(p(4, 1, 0, 3)).page_progress(), p(3, 0, 0, 3));
        assert_eq!(batch(p(4, 2, 2, 0)).page_progress(), p(3, 1, 2, 0));
        // The root failed (its list unreadable): nothing left to count.
        assert_eq!(batch(p(1, 0, 1, 0)).page_progress(), p(0, 0, 0, 0));
        // Cancelled before the root ran: it is neither pending nor counted.
        assert_eq!(batch(p(1, 0, 0, 0)).page_progress(), p(0, 0, 0, 0));
        let mut crawl = batch(p(4, 2, 2, 0));
        crawl.kind = JobKind::Crawl;
        assert_eq!(crawl.page_progress(), p(4, 2, 2, 0));
    }
}
