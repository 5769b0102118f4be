//! A delivery's hold on its task and its page while it works on them. The queue's visibility
//! timeout and the page's lease are both the task lease: a delivery that runs longer (one
//! waiting its turn at a busy host, one fetching a slow page) renews both every third of it,
//! so that no other delivery takes the page over from a process that is still at work on it.
//! A process that stops renews nothing, and its page is taken over when the lease runs out.

use super::App;
use crate::ports::{Delivery, StoreResult};
use std::future::Future;
use std::sync::atomic::{AtomicU8, Ordering};

/// The page is not (yet) this delivery's.
const NOT_TAKEN: u8 = 0;
/// The page is this delivery's: its lease is renewed.
const TAKEN: u8 = 1;
/// The page's fate is being recorded (done, handed back, put off): no longer renewed.
const SETTLING: u8 = 2;

/// One delivery's hold: the holder its page's lease is taken for, and how far it got.
pub(crate) struct Hold {
    holder: String,
    state: AtomicU8,
}

impl Hold {
    pub(crate) fn new() -> Self {
        Hold {
            holder: ulid::Ulid::new().to_string(),
            state: AtomicU8::new(NOT_TAKEN),
        }
    }

    /// The holder the page's lease is taken for.
    pub(crate) fn holder(&self) -> &str {
        &self.holder
    }

    /// The page was taken for this delivery: its lease is renewed from now on.
    pub(crate) fn taken(&self) {
        self.state.store(TAKEN, Ordering::SeqCst);
    }

    /// The page's fate is about to be recorded: its lease is left as it stands.
    pub(crate) fn settling(&self) {
        self.state.store(SETTLING, Ordering::SeqCst);
    }

    fn is_taken(&self) -> bool {
        self.state.load(Ordering::SeqCst) == TAKEN
    }
}

/// Runs `work` (the delivery `d`'s, under `hold`), renewing the task's invisibility and the
/// page's lease every third of the task lease while it runs. Should the page turn out to have
/// been taken over meanwhile (this process stood still past its lease), the work stops there
/// and `None` is returned: the other delivery finishes the page.
pub(crate) async fn kept<T, F>(
    app: &App,
    d: &Delivery,
    hold: &Hold,
    work: F,
) -> StoreResult<Option<T>>
where
    F: Future<Output = StoreResult<T>>,
{
    let lease = app.config.task_lease;
    let every = (lease / 3).max(std::time::Duration::from_millis(100));
    tokio::pin!(work);
    let mut next = tokio::time::Instant::now() + every;
    loop {
        tokio::select! {
            out = &mut work => return out.map(Some),
            _ = tokio::time::sleep_until(next) => {}
        }
        next += every;
        if let Err(e) = app.queue.extend(&d.receipt, lease).await {
            tracing::warn!(error = %e, "the task's invisibility was not renewed");
        }
        if !hold.is_taken() {
            continue;
        }
        let t = &d.task;
        let until = app.clock.now() + super::settle::task_lease(app);
        match app
            .jobs
            .start_node(&t.user_id, &t.job_id, &t.url, hold.holder(), until)
            .await
        {
            Ok(true) => {}
            // (`work` is not polled during a renewal, so the page's state is as just checked.)
            Ok(false) => {
                tracing::warn!("the page was taken over by another delivery; leaving it to that");
                return Ok(None);
            }
            Err(e) => tracing::warn!(error = %e, "the page's lease was not renewed"),
        }
    }
}
