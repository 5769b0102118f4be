//! Test doubles of the ports shared by the use cases' unit tests.

use crate::ports::{Gates, StoreResult};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// One gate of one place, held by at most one holder; counts the places given back.
#[derive(Default)]
pub(crate) struct OnePlace {
    holder: Mutex<Option<String>>,
    /// Places given back.
    pub(crate) left: AtomicUsize,
}

#[async_trait]
impl Gates for OnePlace {
    async fn enter(
        &self,
        _: &str,
        _: u32,
        holder: &str,
        _: DateTime<Utc>,
    ) -> StoreResult<Option<u32>> {
        let mut held = self.holder.lock().unwrap_or_else(|p| p.into_inner());
        if held.is_some() {
            return Ok(None);
        }
        *held = Some(holder.to_string());
        Ok(Some(0))
    }

    async fn leave(&self, _: &str, _: u32, holder: &str) -> StoreResult<()> {
        let mut held = self.holder.lock().unwrap_or_else(|p| p.into_inner());
        if held.as_deref() == Some(holder) {
            *held = None;
            self.left.fetch_add(1, Ordering::SeqCst);
        }
        Ok(())
    }

    async fn book(&self, _: &str, _: Duration, now: DateTime<Utc>) -> StoreResult<DateTime<Utc>> {
        Ok(now)
    }
}
