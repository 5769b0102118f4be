//! A bounded pool of threads for CPU-heavy work (parsing, extraction, PDFs, diffs), off the
//! async runtime. Each item runs with a [`Budget`] that starts when a thread takes it up; its
//! caller stops waiting at the deadline (and the item's own checks then stop it), and a panic
//! fails the item, never the thread or the process. The threads have large stacks, so even the
//! deepest tree the parsers let through cannot overflow one.

use super::budget::{Budget, Exceeded};
use std::cell::Cell;
use std::panic::AssertUnwindSafe;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::oneshot;

/// Stack of each pool thread: generous, since only what is touched is resident.
const STACK: usize = 64 * 1024 * 1024;
/// How long past its deadline an item that does not check its budget is waited for.
const GRACE: Duration = Duration::from_secs(2);
/// The pool threads' nice value: when pages keep every core busy, the threads that answer the
/// API run first, then those that fetch and keep the books, then the parses.
pub const WORK_NICE: i32 = 10;

thread_local! {
    /// The nice value this thread lowered itself to (0: the API's priority).
    static NICE: Cell<i32> = const { Cell::new(0) };
}

/// Whether the calling thread runs below the API's priority ([`lower_priority`]): a shared
/// resource (the one SQLite writer) serves the others first.
pub fn lowered() -> bool {
    NICE.with(Cell::get) > 0
}

/// Lowers the calling thread's scheduling priority to `nice`, never raising it (on Linux a
/// thread has its own; elsewhere nothing changes but [`lowered`]).
pub fn lower_priority(nice: i32) {
    NICE.with(|n| n.set(n.get().max(nice)));
    #[cfg(target_os = "linux")]
    // SAFETY: plain system calls about the calling thread, with no memory handed over.
    unsafe {
        let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
        let now = libc::getpriority(libc::PRIO_PROCESS, tid);
        if libc::setpriority(libc::PRIO_PROCESS, tid, now.max(nice)) != 0 {
            tracing::debug!("cannot lower a thread's priority");
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = nice;
}

type Item = Box<dyn FnOnce() + Send>;

/// Threads that run CPU-heavy items one at a time each.
pub struct WorkPool {
    items: Mutex<Option<mpsc::Sender<Item>>>,
    threads: usize,
}

impl WorkPool {
    /// A pool of `threads` threads (at least one; a thread the system refuses is logged and
    /// left out, and a pool without any fails every item).
    pub fn new(threads: usize) -> Self {
        let (tx, rx) = mpsc::channel::<Item>();
        let rx = Arc::new(Mutex::new(rx));
        let mut started = 0;
        for n in 0..threads.max(1) {
            let rx = rx.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("sarvcrawl-work-{n}"))
                .stack_size(STACK)
                .spawn(move || {
                    lower_priority(WORK_NICE);
                    loop {
                        let item = match rx.lock() {
                            Ok(r) => r.recv(),
                            Err(_) => return,
                        };
                        match item {
                            Ok(item) => item(),
                            Err(_) => return,
                        }
                    }
                });
            match spawned {
                Ok(_) => started += 1,
                Err(e) => tracing::error!(error = %e, "cannot start a work thread"),
            }
        }
        WorkPool {
            items: Mutex::new((started > 0).then_some(tx)),
            threads: started,
        }
    }

    /// A pool with one thread per core (at least two, so one slow item never holds all).
    pub fn per_core() -> Self {
        WorkPool::new(std::thread::available_parallelism().map_or(2, |n| n.get().max(2)))
    }

    /// How many items run at once.
    pub fn threads(&self) -> usize {
        self.threads
    }

    /// Runs `work` on a pool thread with a budget of `limit`, which starts when a thread takes
    /// the item up. The answer comes at the deadline at the latest (plus a short grace for
    /// work between two checks of its budget).
    pub async fn run<T, F>(&self, limit: Duration, work: F) -> Result<T, Exceeded>
    where
        T: Send + 'static,
        F: FnOnce(&Budget) -> Result<T, Exceeded> + Send + 'static,
    {
        let (started_tx, started_rx) = oneshot::channel::<Budget>();
        let (done_tx, done_rx) = oneshot::channel();
        let item: Item = Box::new(move || {
            let budget = Budget::new(limit);
            if started_tx.send(budget.clone()).is_err() {
                return; // Its caller is gone: nothing to do.
            }
            let result = std::panic::catch_unwind(AssertUnwindSafe(|| work(&budget)))
                .unwrap_or(Err(Exceeded::Crashed));
            let _ = done_tx.send(result);
        });
        let sent = match self.items.lock() {
            Ok(tx) => tx.as_ref().is_some_and(|tx| tx.send(item).is_ok()),
            Err(_) => false,
        };
        if !sent {
            return Err(Exceeded::Crashed);
        }
        let Ok(budget) = started_rx.await else {
            return Err(Exceeded::Crashed);
        };
        match tokio::time::timeout(limit + GRACE, done_rx).await {
            Ok(Ok(result)) => result,
            Ok(Err(_)) => Err(Exceeded::Crashed),
            Err(_) => {
                budget.stop();
                Err(Exceeded::Time(limit))
            }
        }
    }
}

impl Drop for WorkPool {
    fn drop(&mut self) {
        // Closing the channel ends every thread once it finishes its item.
        if let Ok(mut tx) = self.items.lock() {
            tx.take();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn results_panics_and_deadlines() {
        let pool = WorkPool::new(2);
        assert_eq!(pool.run(Duration::from_secs(5), |_| Ok(7)).await, Ok(7));
        let crashed: Result<(), _> = pool
            .run(Duration::from_secs(5), |_| panic!("a parser bug"))
            .await;
        assert_eq!(crashed, Err(Exceeded::Crashed));
        // Work that checks its budget stops at the deadline.
        let spun: Result<(), _> = pool
            .run(Duration::from_millis(100), |b| loop {
                b.check()?;
                std::hint::spin_loop();
            })
            .await;
        assert!(matches!(spun, Err(Exceeded::Time(_))));
        // Work that never checks is given up at the deadline plus the grace; the pool goes on.
        let t = std::time::Instant::now();
        let stuck: Result<(), _> = pool
            .run(Duration::from_millis(100), |_| {
                std::thread::sleep(Duration::from_secs(4));
                Ok(())
            })
            .await;
        assert!(matches!(stuck, Err(Exceeded::Time(_))));
        assert!(t.elapsed() < Duration::from_secs(3));
        assert_eq!(pool.run(Duration::from_secs(5), |_| Ok(1)).await, Ok(1));
    }

    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn work_runs_at_a_lower_priority() {
        // SAFETY: getpriority reads the calling thread's nice value.
        let nice = || unsafe {
            libc::getpriority(
                libc::PRIO_PROCESS,
                libc::syscall(libc::SYS_gettid) as libc::id_t,
            )
        };
        let here = nice();
        let pool = WorkPool::new(1);
        let there = pool
            .run(Duration::from_secs(5), move |_| Ok((nice(), lowered())))
            .await;
        assert_eq!(there, Ok((WORK_NICE.max(here), true)));
        assert!(!lowered(), "the test's own thread was never lowered");
    }

    #[tokio::test]
    async fn deep_recursion_fits_the_stack() {
        fn down(n: usize) -> usize {
            let pad = [0u8; 256];
            if n == 0 {
                pad.len()
            } else {
                std::hint::black_box(&pad);
                down(n - 1) + 1
            }
        }
        let pool = WorkPool::new(1);
        let r = pool.run(Duration::from_secs(5), |_| Ok(down(50_000))).await;
        assert_eq!(r, Ok(50_256));
    }
}
