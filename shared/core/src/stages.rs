//! CPU time by stage of a page (fetch, parse, links, Markdown, store, bookkeeping), for the
//! benchmarks. Off unless [`enable`] was called (`SARVCRAWL_STAGE_CPU=1` on `serve`): then each
//! thread measures its own CPU clock where a stage starts and ends, and a stage entered inside
//! another pauses the outer one, so every nanosecond is counted once. Work handed to another
//! thread (a blocking SQLite call, a file write) carries its stage along with [`current`].

use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::task::{Context, Poll};

/// A part of a page's work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// The request, the response's headers and body, decompression.
    Fetch,
    /// Decoding and parsing the HTML into a tree, and building the document.
    Parse,
    /// Links and metadata taken from the tree.
    Links,
    /// Markdown, text and cleaned HTML rendered from the tree.
    Markdown,
    /// Serialising the document and writing it to the document store.
    Store,
    /// The job's records: the job and its page read, claims, counters, logs, the queue, and
    /// the embedded database's transactions and checkpoints that carry them.
    Bookkeeping,
}

const STAGES: [Stage; 6] = [
    Stage::Fetch,
    Stage::Parse,
    Stage::Links,
    Stage::Markdown,
    Stage::Store,
    Stage::Bookkeeping,
];

impl Stage {
    fn name(self) -> &'static str {
        match self {
            Stage::Fetch => "fetch",
            Stage::Parse => "parse",
            Stage::Links => "links",
            Stage::Markdown => "markdown",
            Stage::Store => "store",
            Stage::Bookkeeping => "bookkeeping",
        }
    }
}

static ON: AtomicBool = AtomicBool::new(false);
static TOTALS: [AtomicU64; 6] = [const { AtomicU64::new(0) }; 6];

thread_local! {
    /// The stage this thread is in and the thread's CPU clock when it entered (or resumed) it.
    static ACTIVE: Cell<Option<(Stage, u64)>> = const { Cell::new(None) };
}

/// Starts counting (for the life of the process).
pub fn enable() {
    ON.store(true, Ordering::Relaxed);
}

/// Whether stages are counted.
pub fn enabled() -> bool {
    ON.load(Ordering::Relaxed)
}

/// This thread's CPU time in nanoseconds.
fn thread_cpu() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime only writes the timespec it is given.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return 0;
    }
    (ts.tv_sec as u64) * 1_000_000_000 + ts.tv_nsec as u64
}

fn add(stage: Stage, nanos: u64) {
    TOTALS[stage as usize].fetch_add(nanos, Ordering::Relaxed);
}

/// The stage this thread is in, to carry into work it hands to another thread.
pub fn current() -> Option<Stage> {
    if !enabled() {
        return None;
    }
    ACTIVE.with(|a| a.get().map(|(s, _)| s))
}

/// Runs blocking work on tokio's blocking pool, its CPU counted in the caller's stage.
pub fn spawn_blocking<T: Send + 'static>(
    work: impl FnOnce() -> T + Send + 'static,
) -> tokio::task::JoinHandle<T> {
    let stage = current();
    tokio::task::spawn_blocking(move || {
        let _in = enter(stage);
        work()
    })
}

/// Counts this thread's CPU time as `stage` until the guard is dropped.
#[must_use]
pub struct Guard {
    /// The stage paused by this one (`None` outside any); unused when counting is off.
    outer: Option<Option<Stage>>,
}

/// Enters `stage` on this thread (`None`: stays where it is).
pub fn enter(stage: Option<Stage>) -> Guard {
    let Some(stage) = stage.filter(|_| enabled()) else {
        return Guard { outer: None };
    };
    let now = thread_cpu();
    let outer = ACTIVE.with(|a| {
        let outer = a.get().map(|(s, since)| {
            add(s, now.saturating_sub(since));
            s
        });
        a.set(Some((stage, now)));
        outer
    });
    Guard { outer: Some(outer) }
}

impl Drop for Guard {
    fn drop(&mut self) {
        let Some(outer) = self.outer else {
            return;
        };
        let now = thread_cpu();
        ACTIVE.with(|a| {
            if let Some((s, since)) = a.get() {
                add(s, now.saturating_sub(since));
            }
            a.set(outer.map(|o| (o, now)));
        });
    }
}

/// A future whose every poll counts as `stage`.
pub struct Timed<F> {
    stage: Stage,
    inner: F,
}

/// Counts the CPU time of every poll of `f` as `stage`.
pub fn timed<F: Future>(stage: Stage, f: F) -> Timed<F> {
    Timed { stage, inner: f }
}

impl<F: Future> Future for Timed<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let _in = enter(Some(self.stage));
        // SAFETY: `inner` is pinned with `self` and never moved out of it (structural
        // pinning); `Timed` has no `Drop` and is not `Unpin` unless `F` is.
        unsafe { self.map_unchecked_mut(|t| &mut t.inner) }.poll(cx)
    }
}

/// The CPU seconds counted so far, by stage name.
pub fn totals() -> Vec<(&'static str, f64)> {
    STAGES
        .iter()
        .map(|s| {
            let nanos = TOTALS[*s as usize].load(Ordering::Relaxed);
            (s.name(), nanos as f64 / 1e9)
        })
        .collect()
}

/// The CPU seconds counted per stage, as one JSON object (`None` when counting is off).
pub fn report() -> Option<String> {
    if !enabled() {
        return None;
    }
    let fields: Vec<String> = totals()
        .into_iter()
        .map(|(name, secs)| format!("\"{name}\":{secs:.6}"))
        .collect();
    Some(format!("{{{}}}", fields.join(",")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spin(ms: u64) {
        let start = thread_cpu();
        while thread_cpu() - start < ms * 1_000_000 {
            std::hint::black_box(0u64);
        }
    }

    #[test]
    fn an_inner_stage_pauses_the_outer_one() {
        enable();
        let before: Vec<u64> = TOTALS.iter().map(|t| t.load(Ordering::Relaxed)).collect();
        {
            let _parse = enter(Some(Stage::Parse));
            spin(20);
            {
                let _md = enter(Some(Stage::Markdown));
                assert_eq!(current(), Some(Stage::Markdown));
                spin(40);
            }
            assert_eq!(current(), Some(Stage::Parse));
            spin(20);
        }
        assert_eq!(current(), None);
        let grew = |s: Stage| {
            (TOTALS[s as usize].load(Ordering::Relaxed) - before[s as usize]) as f64 / 1e6
        };
        // Other tests' threads may render Markdown meanwhile, but no unit test enters `Parse`:
        // the 40 ms of Markdown were not counted as parsing too.
        assert!(
            (38.0..60.0).contains(&grew(Stage::Parse)),
            "{}",
            grew(Stage::Parse)
        );
        assert!(grew(Stage::Markdown) >= 38.0, "{}", grew(Stage::Markdown));
    }
}
