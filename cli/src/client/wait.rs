//! Waiting for a job: the first poll soon, then backing off and honouring the server's
//! `Retry-After`; an overall deadline after which the job is cancelled or left; a progress bar
//! for crawls on a terminal, plain lines otherwise.

use super::api::{job_path, Api, Body};
use super::Failure;
use serde_json::Value;
use std::io::IsTerminal;
use std::time::{Duration, Instant};

/// What to do with the job when the deadline passes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum OnDeadline {
    Cancel,
    Leave,
}

/// The first pause, the growth of each next one, and the longest.
const FIRST_POLL: Duration = Duration::from_millis(500);
const BACKOFF: f64 = 1.6;
const LONGEST_POLL: Duration = Duration::from_secs(15);

fn is_final(job: &Value) -> bool {
    matches!(
        job["status"].as_str(),
        Some("completed" | "failed" | "cancelled")
    )
}

/// Polls the job until it is final; `Err(Deadline)` after `deadline` (having cancelled the
/// job when asked).
pub async fn until_final(
    api: &Api,
    id: &str,
    deadline: Option<Duration>,
    on_deadline: OnDeadline,
    quiet: bool,
) -> Result<Value, Failure> {
    let started = Instant::now();
    let mut pause = FIRST_POLL;
    let bar = Progress::new(quiet);
    loop {
        let wait = match deadline {
            Some(d) => {
                let left = d.saturating_sub(started.elapsed());
                if left.is_zero() {
                    bar.finish();
                    if on_deadline == OnDeadline::Cancel {
                        let path = format!("{}/cancel", job_path(id));
                        match api
                            .send(reqwest::Method::DELETE, &path, &Body::None, None)
                            .await
                        {
                            Ok(_) => eprintln!("job {id} cancelled"),
                            Err(e) => {
                                let _ = e.report();
                            }
                        }
                    }
                    return Err(Failure::Deadline(id.to_string()));
                }
                pause.min(left)
            }
            None => pause,
        };
        tokio::time::sleep(wait).await;
        if deadline.is_some_and(|d| started.elapsed() >= d) {
            continue;
        }
        let reply = api.get(&job_path(id)).await?;
        let job = reply.body;
        bar.show(&job);
        if is_final(&job) {
            bar.finish();
            return Ok(job);
        }
        // Back off, but never poll sooner than the server asks.
        let grown = Duration::from_secs_f64(pause.as_secs_f64() * BACKOFF).min(LONGEST_POLL);
        pause = reply.retry_after.map_or(grown, |r| grown.max(r));
    }
}

/// Progress on stderr: a bar on a terminal for crawls, a line per change otherwise.
struct Progress {
    bar: Option<indicatif::ProgressBar>,
    quiet: bool,
    started: Instant,
    last: std::cell::RefCell<String>,
}

impl Progress {
    fn new(quiet: bool) -> Self {
        let bar = (!quiet && std::io::stderr().is_terminal()).then(|| {
            let b = indicatif::ProgressBar::new(0);
            if let Ok(style) = indicatif::ProgressStyle::with_template(
                "{spinner} {pos}/{len} pages {msg} [{elapsed}]",
            ) {
                b.set_style(style);
            }
            b
        });
        Progress {
            bar,
            quiet,
            started: Instant::now(),
            last: std::cell::RefCell::new(String::new()),
        }
    }

    fn show(&self, job: &Value) {
        let p = &job["progress"];
        let (done, failed, found) = (
            p["pages_completed"].as_u64().unwrap_or(0),
            p["pages_failed"].as_u64().unwrap_or(0),
            p["pages_discovered"].as_u64().unwrap_or(0),
        );
        let rate = (done + failed) as f64 / self.started.elapsed().as_secs_f64().max(0.001);
        let status = job["status"].as_str().unwrap_or("?");
        if let Some(b) = &self.bar {
            b.set_length(found);
            b.set_position(done + failed);
            b.set_message(format!("{status}, {failed} failed, {rate:.1} pages/s"));
            b.tick();
        } else if !self.quiet {
            let line = format!("{status}: {done}/{found} pages, {failed} failed");
            if *self.last.borrow() != line {
                eprintln!("{line}");
                *self.last.borrow_mut() = line;
            }
        }
    }

    fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}
