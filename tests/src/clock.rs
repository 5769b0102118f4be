//! A clock that stands still until a test moves it: leases and stalls expire without waiting.

use chrono::{DateTime, Utc};
use sarvcrawl_core::ports::Clock;
use std::sync::Mutex;

/// The time a test sets.
pub struct TestClock(Mutex<DateTime<Utc>>);

impl TestClock {
    /// A clock at the present moment.
    pub fn now_at_start() -> Self {
        TestClock(Mutex::new(Utc::now()))
    }

    /// Moves the clock forward.
    pub fn advance(&self, by: chrono::Duration) {
        let mut now = self.0.lock().unwrap_or_else(|p| p.into_inner());
        *now += by;
    }
}

impl Clock for TestClock {
    fn now(&self) -> DateTime<Utc> {
        *self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}
