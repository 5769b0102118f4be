//! The page pipeline, shared by every job kind that reads pages: robots.txt, the host's gate,
//! the job's pacing, the fetch (or a render in the headless browser) with back-off on 429 and
//! 503, and the extraction into a document on the work pool. It depends on no job kind.

use super::artifact;
use super::document::{self, Built};
use super::model;
use super::polite::{at_host, chrono_of, robots_for, turn, until, until_check, Turn, LATE};
use super::runtime::JobRuntime;
use super::App;
use crate::domain::{ErrorCode, ExtractSpec, Format, Job, JobError, PageOptions};
use crate::engine::fetch::{FetchError, Fetched};
use crate::engine::robots::Robots;
use crate::ports::{NewLog, RenderRequest, Screenshot, StoreError, StoreResult, Task};
use crate::stages::{self, timed, Stage};
use chrono::{DateTime, Utc};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use url::Url;

/// Tries on a page answering 429 or 503.
const BUSY_TRIES: u32 = 3;
/// Longest `Retry-After` honoured within one task.
const MAX_PAUSE: Duration = Duration::from_secs(30);

/// What the one task of a job, or one page of a crawl, produced.
pub(crate) struct Produced {
    /// The document (or result) stored for it.
    pub doc: Option<serde_json::Value>,
    pub status_code: Option<u16>,
    pub error: Option<JobError>,
    /// Links to follow (crawls only).
    pub links: Vec<Url>,
    /// Tokens a language model took for it.
    pub tokens: u64,
}

impl Produced {
    /// A result of a job kind that ends in one document, or its failure.
    pub(crate) fn result(name: &str, r: Result<serde_json::Value, JobError>) -> Produced {
        let (doc, error) = match r {
            Ok(doc) => (Some(doc), None),
            Err(e) => (Some(document::failed(name, None, None, &e)), Some(e)),
        };
        Produced {
            doc,
            status_code: None,
            error,
            links: Vec::new(),
            tokens: 0,
        }
    }

    /// A step that stores no document (a batch's root).
    pub(crate) fn nothing() -> Produced {
        Produced {
            doc: None,
            status_code: None,
            error: None,
            links: Vec::new(),
            tokens: 0,
        }
    }

    pub(crate) fn page(url: &str, page: Page) -> Produced {
        match page {
            Ok((fetched, built)) => Produced {
                doc: Some(built.doc),
                status_code: Some(fetched.status),
                error: None,
                links: built.links,
                tokens: built.tokens,
            },
            Err(Failure {
                error,
                fetched,
                tokens,
            }) => {
                let final_url = fetched.as_ref().map(|f| &f.url);
                let status = fetched.as_ref().map(|f| f.status);
                Produced {
                    doc: Some(document::failed(url, final_url, status, &error)),
                    status_code: status,
                    error: Some(error),
                    links: Vec::new(),
                    tokens,
                }
            }
        }
    }
}

/// The document key of a page of a job.
pub(crate) fn document_key(task: &Task) -> String {
    let name = artifact::page_name(&task.url);
    format!("{}/{}/{name}.json", task.user_id, task.job_id)
}

/// A page that could not be turned into a document.
pub(crate) struct Failure {
    error: JobError,
    fetched: Option<Fetched>,
    /// Tokens a language model took before the page failed.
    tokens: u64,
}

impl Failure {
    fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Failure {
            error: JobError::new(code, message),
            fetched: None,
            tokens: 0,
        }
    }
}

impl From<FetchError> for Failure {
    fn from(e: FetchError) -> Self {
        Failure::new(e.code(), e.to_string())
    }
}

pub(crate) type Page = Result<(Fetched, Built), Failure>;

/// How one task's step ended.
pub(crate) enum Step<T> {
    Done(T),
    /// The job ended before the fetch started.
    Cancelled,
    /// The job's pacing booked the fetch for this later time: the task waits in the queue.
    Later(DateTime<Utc>),
}

impl<T> Step<T> {
    pub(crate) fn map<U>(self, f: impl FnOnce(T) -> U) -> Step<U> {
        match self {
            Step::Done(t) => Step::Done(f(t)),
            Step::Cancelled => Step::Cancelled,
            Step::Later(at) => Step::Later(at),
        }
    }
}

impl<T> From<Option<T>> for Step<T> {
    fn from(o: Option<T>) -> Self {
        o.map_or(Step::Cancelled, Step::Done)
    }
}

/// The spacing of a job's requests to one origin.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Pacing {
    /// The job's own spacing (`delay_ms`); the origin's `Crawl-delay` may ask for more.
    pub delay: Duration,
    /// A start booked earlier for this task.
    pub booked: Option<DateTime<Utc>>,
    /// Whether a start further than [`MAX_PACE_WAIT`] ahead is waited for in the queue
    /// ([`Step::Later`]) rather than here.
    pub may_defer: bool,
}

/// Robots, the host's gate, the job's pacing, a last cancel check, the fetch and the
/// extraction.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn fetch_page(
    app: &App,
    job: &Job,
    opts: &PageOptions,
    respect_robots: bool,
    rt: &JobRuntime,
    url: &str,
    pacing: Pacing,
    logs: &mut Vec<NewLog>,
) -> StoreResult<Step<Page>> {
    let Ok(url) = Url::parse(url) else {
        return Ok(Step::Done(Err(Failure::new(
            ErrorCode::FetchFailed,
            "invalid URL",
        ))));
    };
    let mut crawl_delay = None;
    if respect_robots {
        let robots = robots_for(app, job, rt, &url, logs).await?;
        if let Robots::Unreachable(e) = robots.as_ref() {
            return Ok(Step::Done(Err(Failure::from(e.clone()))));
        }
        if !robots.allows(&url) {
            return Ok(Step::Done(Err(Failure::new(
                ErrorCode::BlockedByRobots,
                "robots.txt does not allow this page",
            ))));
        }
        crawl_delay = robots.crawl_delay();
    }
    let spacing = pacing.delay.max(crawl_delay.unwrap_or_default());
    let deadline = fetch_deadline(opts);
    let mut booked = pacing.booked;
    let mut tries = 0;
    let fetched = loop {
        let start = match turn(app, job, &url, spacing, booked).await? {
            Turn::Later(at) if pacing.may_defer => return Ok(Step::Later(at)),
            Turn::Later(at) | Turn::At(at) => Some(at),
            Turn::Now => None,
        };
        if let Some(at) = start {
            until_check(app, at).await;
        }
        tries += 1;
        let may_be_late = tries > 5;
        // The place at the host is taken just before the start: a paced job holds none while
        // it waits for its turn.
        let attempt = at_host(app, &url, deadline, async {
            // The last moment before a fetch starts: a cancelled job fetches nothing more.
            match app.jobs.job_status(&job.user_id, &job.job_id).await? {
                Some(status) if !status.is_final() && !rt.cancelled() => {}
                _ => return Ok(Some(Step::Cancelled)),
            }
            if let Some(at) = start {
                until(app, at).await;
            }
            // Too late for the start booked (the check, the queue, the host's gate or a busy
            // machine's wake-up took long): a fetch now would come too close to the next one
            // booked, so book again. Checked after the sleep, which may itself end late.
            let late = start.is_some_and(|at| app.clock.now() - at > chrono_of(LATE));
            if late && !may_be_late {
                return Ok(None);
            }
            Ok::<_, StoreError>(Some(Step::Done(if opts.render {
                render(app, &url, opts, logs).await
            } else {
                fetch_politely(app, &url, &opts.headers, opts.timeout_ms, logs)
                    .await
                    .map(|f| (f, None))
            })))
        })
        .await??;
        match attempt {
            Some(step) => break step,
            None => booked = None,
        }
    };
    let (fetched, shot) = match fetched {
        Step::Done(Ok(f)) => f,
        Step::Done(Err(e)) => return Ok(Step::Done(Err(e))),
        Step::Cancelled => return Ok(Step::Cancelled),
        Step::Later(at) => return Ok(Step::Later(at)),
    };
    let (build_opts, requested, now) = (opts.clone(), url.to_string(), app.clock.now());
    let shared = Arc::new(fetched);
    let page = shared.clone();
    let built = app
        .work
        .run(app.config.work_limit, move |budget| {
            let _parse = stages::enter(Some(Stage::Parse));
            Ok(document::build(&page, &requested, &build_opts, now, budget))
        })
        .await
        .unwrap_or_else(|e| Err(e.into()));
    // The work thread let go of the response when it finished (or it is given up on).
    let fetched = Arc::try_unwrap(shared).unwrap_or_else(|a| (*a).clone());
    let (built, tokens) = finish(app, job, opts, &url, built, shot, logs).await?;
    Ok(Step::Done(match built {
        Ok(b) => Ok((fetched, b)),
        Err(error) => Err(Failure {
            error,
            fetched: Some(fetched),
            tokens,
        }),
    }))
}

/// What follows a page's extraction: its warnings logged, its reading by the language model
/// (with the tokens that took), its screenshot stored beside it.
async fn finish(
    app: &App,
    job: &Job,
    opts: &PageOptions,
    url: &Url,
    built: Result<Built, JobError>,
    shot: Option<Result<Screenshot, JobError>>,
    logs: &mut Vec<NewLog>,
) -> StoreResult<(Result<Built, JobError>, u64)> {
    if let Ok(b) = &built {
        logs.extend(b.warnings.iter().map(|w| NewLog::warn(w).at(url.as_str())));
    }
    let (built, tokens) = match (built, &opts.extract) {
        (Ok(b), Some(ExtractSpec::Model { prompt, schema })) => {
            let keep = opts.wants(Format::Markdown);
            let (prompt, schema) = (prompt.as_deref(), schema.as_ref());
            model::read_page(app, b, prompt, schema, url.as_str(), keep).await
        }
        (b, _) => (b, 0),
    };
    let built = match (built, shot) {
        (Ok(mut b), Some(Ok(shot))) => {
            b.doc["screenshot"] = artifact::store_screenshot(app, job, url.as_str(), shot).await?;
            Ok(b)
        }
        (Ok(_), Some(Err(error))) | (Err(error), _) => Err(error),
        (Ok(b), None) => Ok(b),
    };
    Ok((built, tokens))
}

/// The longest one page's request may take, its tries on 429 and 503 and their pauses
/// included.
fn fetch_deadline(opts: &PageOptions) -> Duration {
    let one = Duration::from_millis(opts.timeout_ms);
    if opts.render {
        one
    } else {
        one * BUSY_TRIES + MAX_PAUSE * (BUSY_TRIES - 1)
    }
}

/// [`fetch_page`] for several URLs at once (as many as the task's turns allow), robots obeyed
/// and pacing waited for here; each page's log lines are added in the order of `urls`.
/// `None` when the job was cancelled.
pub(crate) async fn fetch_pages(
    app: &App,
    job: &Job,
    opts: &PageOptions,
    rt: &JobRuntime,
    urls: &[&str],
    logs: &mut Vec<NewLog>,
) -> StoreResult<Option<Vec<Page>>> {
    let fetched = futures::future::join_all(urls.iter().map(|u| async move {
        let mut l = Vec::new();
        let Some(_turn) = rt.turn().await else {
            return (Ok(Step::Cancelled), l);
        };
        let p = fetch_page(app, job, opts, true, rt, u, Pacing::default(), &mut l).await;
        (p, l)
    }))
    .await;
    let mut pages = Vec::with_capacity(fetched.len());
    for (page, l) in fetched {
        logs.extend(l);
        match page? {
            Step::Done(p) => pages.push(p),
            Step::Cancelled | Step::Later(_) => return Ok(None),
        }
    }
    Ok(Some(pages))
}

/// Loads the page in the headless browser, with its screenshot when the formats ask for one;
/// the requests it refused are logged (S9).
async fn render(
    app: &App,
    url: &Url,
    opts: &PageOptions,
    logs: &mut Vec<NewLog>,
) -> Result<(Fetched, Option<Result<Screenshot, JobError>>), Failure> {
    let Some(renderer) = &app.renderer else {
        return Err(Failure::new(
            ErrorCode::RenderUnavailable,
            "no headless browser renders pages here",
        ));
    };
    app.fetcher.check_destination(url).await?;
    let rendered = renderer
        .render(RenderRequest {
            url,
            headers: &opts.headers,
            timeout: Duration::from_millis(opts.timeout_ms),
            wait_for: opts.wait_for.as_deref(),
            wait_ms: opts.wait_ms,
            screenshot: opts.screenshot,
        })
        .await;
    logs.extend(rendered.blocked.iter().map(|b| {
        NewLog::warn(format!(
            "{}: the page's request to {b} was refused",
            ErrorCode::BlockedAddress.as_str()
        ))
        .at(url.as_str())
    }));
    Ok((rendered.page?, rendered.screenshot))
}

/// Fetches, backing off while the server answers 429 or 503 (C2).
async fn fetch_politely(
    app: &App,
    url: &Url,
    headers: &BTreeMap<String, String>,
    timeout_ms: u64,
    logs: &mut Vec<NewLog>,
) -> Result<Fetched, Failure> {
    let deadline = Duration::from_millis(timeout_ms);
    let mut attempt = 0;
    loop {
        attempt += 1;
        let f = timed(Stage::Fetch, app.fetcher.get(url, headers, deadline)).await?;
        if !matches!(f.status, 429 | 503) || attempt >= BUSY_TRIES {
            return Ok(f);
        }
        let pause = f
            .retry_after
            .unwrap_or(Duration::from_secs(1 << attempt))
            .min(MAX_PAUSE);
        logs.push(
            NewLog::warn(format!(
                "server answered {}; waiting {} s before trying again",
                f.status,
                pause.as_secs()
            ))
            .at(url.as_str()),
        );
        tokio::time::sleep(pause).await;
    }
}
