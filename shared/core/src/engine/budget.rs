//! The work one item (a page, a document, a diff) may do: a deadline, and the reasons an item
//! is given up. CPU-heavy code checks its [`Budget`] as it goes, so a hostile input fails its
//! own item quickly instead of holding a thread or the process.

use crate::domain::{ErrorCode, JobError};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Why an item's work was stopped.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Exceeded {
    /// It ran past its deadline.
    #[error("processing took longer than {} s", .0.as_secs())]
    Time(Duration),
    /// Its structure is beyond what is processed (nesting, node or operator counts).
    #[error("{0}")]
    TooComplex(String),
    /// What it would produce, or decode, is beyond the caps.
    #[error("{0}")]
    TooLarge(String),
    /// The code processing it failed (a panic in a parser).
    #[error("the content could not be processed")]
    Crashed,
}

impl From<Exceeded> for JobError {
    fn from(e: Exceeded) -> Self {
        let code = match &e {
            Exceeded::Time(_) => ErrorCode::Timeout,
            Exceeded::TooComplex(_) => ErrorCode::TooComplex,
            Exceeded::TooLarge(_) => ErrorCode::TooLarge,
            Exceeded::Crashed => ErrorCode::Internal,
        };
        JobError::new(code, e.to_string())
    }
}

/// The deadline of one item's work, and a flag that stops it early (its caller gave up).
#[derive(Debug, Clone)]
pub struct Budget {
    limit: Duration,
    deadline: Instant,
    stopped: Arc<AtomicBool>,
}

impl Budget {
    /// A budget of `limit` from now.
    pub fn new(limit: Duration) -> Self {
        Budget {
            limit,
            deadline: Instant::now() + limit,
            stopped: Arc::new(AtomicBool::new(false)),
        }
    }

    /// A budget that never runs out (for tests and tools).
    pub fn unlimited() -> Self {
        Budget::new(Duration::from_secs(365 * 24 * 3600))
    }

    /// Ok while there is time left and nobody stopped the work.
    pub fn check(&self) -> Result<(), Exceeded> {
        if self.stopped.load(Ordering::Relaxed) || Instant::now() >= self.deadline {
            return Err(self.timeout());
        }
        Ok(())
    }

    /// The error of this budget's deadline.
    pub fn timeout(&self) -> Exceeded {
        Exceeded::Time(self.limit)
    }

    /// Time left before the deadline.
    pub fn remaining(&self) -> Duration {
        self.deadline.saturating_duration_since(Instant::now())
    }

    /// Makes every later [`Budget::check`] fail (and so every clone's).
    pub fn stop(&self) {
        self.stopped.store(true, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_budget_runs_out_or_is_stopped() {
        let b = Budget::new(Duration::from_millis(20));
        assert!(b.check().is_ok());
        std::thread::sleep(Duration::from_millis(30));
        assert!(matches!(b.check(), Err(Exceeded::Time(_))));
        let b = Budget::unlimited();
        let c = b.clone();
        c.stop();
        assert!(b.check().is_err());
    }
}
