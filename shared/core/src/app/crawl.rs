//! A crawl job: `POST /api/crawl` ([`submit`]), a crawled page ([`run`]) and the URLs it leads
//! to ([`discover`]: scope, depth and robots rules, the site's sitemaps), claimed and queued.

use super::page::{fetch_page, Pacing, Produced, Step};
use super::polite::{at_host, robots_for};
use super::runtime::JobRuntime;
use super::{submit, App, AppError};
use crate::domain::{BatchRequest, CrawlRequest, Job, JobKind, PageOptions, UserId};
use crate::engine::robots::Robots;
use crate::engine::sitemap::{self, Sitemap};
use crate::engine::urls::{normalise, Scope};
use crate::ports::{NewLog, NewNode, SkipReason, StoreResult, Task};
use std::collections::{BTreeMap, HashSet, VecDeque};
use std::time::Duration;
use url::Url;

/// Sitemap documents read per crawl at most.
const MAX_SITEMAPS: usize = 50;
/// URLs taken from sitemaps per crawl at most.
const MAX_SITEMAP_URLS: usize = 50_000;

/// `POST /api/crawl`: validates the body, stores the job and queues its root page.
pub async fn submit(app: &App, user: &UserId, body: &[u8]) -> Result<Job, AppError> {
    let req = CrawlRequest::parse(body).map_err(AppError::Invalid)?;
    let root = submit::root_url(&req.url)?;
    submit::new_job(app, user, JobKind::Crawl, &req, root, req.page.render).await
}

/// How the pages of a job's frontier (a crawl's or a batch's) are fetched.
pub(crate) struct PagePolicy<'a> {
    pub opts: &'a PageOptions,
    pub respect_robots: bool,
    /// Spacing of the job's requests to one origin (the origin's `Crawl-delay` may ask more).
    pub delay_ms: u64,
}

impl<'a> PagePolicy<'a> {
    pub(crate) fn of_crawl(r: &'a CrawlRequest) -> Self {
        PagePolicy {
            opts: &r.page,
            respect_robots: r.respect_robots,
            delay_ms: r.delay_ms,
        }
    }

    pub(crate) fn of_batch(r: &'a BatchRequest) -> Self {
        PagePolicy {
            opts: &r.page,
            respect_robots: r.respect_robots,
            delay_ms: r.delay_ms,
        }
    }
}

/// One page of a crawl or a batch, robots.txt obeyed unless the request says otherwise, its
/// requests to an origin spaced by `delay_ms`.
pub(crate) async fn run(
    app: &App,
    job: &Job,
    policy: PagePolicy<'_>,
    rt: &JobRuntime,
    task: &Task,
    logs: &mut Vec<NewLog>,
) -> StoreResult<Step<Produced>> {
    let pacing = Pacing {
        delay: Duration::from_millis(policy.delay_ms),
        booked: task.not_before,
        may_defer: true,
    };
    Ok(fetch_page(
        app,
        job,
        policy.opts,
        policy.respect_robots,
        rt,
        &task.url,
        pacing,
        logs,
    )
    .await?
    .map(|p| Produced::page(&task.url, p)))
}

/// Claims the links of a crawled page (and, for the root, the sitemap's URLs) into the job's
/// frontier.
pub(crate) async fn discover(
    app: &App,
    job: &Job,
    req: &CrawlRequest,
    rt: &JobRuntime,
    task: &Task,
    links: Vec<Url>,
    logs: &mut Vec<NewLog>,
) -> StoreResult<()> {
    let Ok(page) = Url::parse(&task.url) else {
        return Ok(());
    };
    let Ok(root) = Url::parse(&req.url) else {
        return Ok(());
    };
    let robots = if req.respect_robots {
        Some(robots_for(app, job, rt, &page, logs).await?)
    } else {
        None
    };
    let scope = Scope::new(req, &root);
    let mut nodes = classify(&scope, req, &page, task.depth, links, robots.as_deref());
    if task.depth == 0 && req.use_sitemap {
        let (urls, read) = sitemap_urls(app, &root, robots.as_deref()).await;
        if !urls.is_empty() {
            logs.push(NewLog::info(format!(
                "sitemaps: {} URLs from {read} sitemap documents",
                urls.len()
            )));
        }
        let known: std::collections::HashSet<String> =
            nodes.iter().map(|n| n.url.clone()).collect();
        nodes.extend(
            classify(&scope, req, &page, 0, urls, robots.as_deref())
                .into_iter()
                .filter(|n| !known.contains(&n.url)),
        );
    }
    app.jobs
        .add_nodes(&job.user_id, &job.job_id, &task.url, &nodes, req.limit)
        .await?;
    Ok(())
}

/// Classifies the links of a page at `depth` into nodes to fetch and nodes skipped, each URL
/// once and never the page itself. `robots` are the rules of the page's own origin.
pub(crate) fn classify(
    scope: &Scope,
    req: &CrawlRequest,
    page: &Url,
    depth: u32,
    links: impl IntoIterator<Item = Url>,
    robots: Option<&Robots>,
) -> Vec<NewNode> {
    let mut seen = HashSet::new();
    seen.insert(page.as_str().to_string());
    let child_depth = depth + 1;
    let mut nodes = Vec::new();
    for link in links {
        let link = normalise(&link);
        if !seen.insert(link.as_str().to_string()) {
            continue;
        }
        let skip = scope.skip_reason(&link).or_else(|| {
            if u64::from(child_depth) > req.max_depth {
                return Some(SkipReason::Depth);
            }
            let same_origin = link.origin() == page.origin();
            match robots {
                Some(r) if same_origin && !r.allows(&link) => Some(SkipReason::Robots),
                _ => None,
            }
        });
        nodes.push(NewNode {
            url: link.into(),
            depth: child_depth,
            skip,
        });
    }
    nodes
}

/// Page URLs listed by the sitemaps of the root's origin: those robots.txt names and
/// `/sitemap.xml`, following indexes, gzipped or not.
pub(crate) async fn sitemap_urls(
    app: &App,
    root: &Url,
    robots: Option<&Robots>,
) -> (Vec<Url>, usize) {
    let mut queue: VecDeque<String> = robots.map(Robots::sitemaps).unwrap_or_default().into();
    if let Ok(default) = root.join("/sitemap.xml") {
        queue.push_back(default.into());
    }
    let mut visited = HashSet::new();
    let mut urls = Vec::new();
    let no_headers = BTreeMap::new();
    while let Some(next) = queue.pop_front() {
        if visited.len() >= MAX_SITEMAPS || urls.len() >= MAX_SITEMAP_URLS {
            break;
        }
        if !visited.insert(next.clone()) {
            continue;
        }
        let Ok(loc) = Url::parse(&next) else {
            continue;
        };
        let deadline = Duration::from_secs(30);
        let fetch = app.fetcher.get(&loc, &no_headers, deadline);
        let Ok(Ok(f)) = at_host(app, &loc, deadline, fetch).await else {
            continue;
        };
        if !(200..300).contains(&f.status) {
            continue;
        }
        // Gunzipping and scanning a sitemap is work for the pool, like a page's.
        let body = f.body;
        let parsed = app
            .work
            .run(app.config.work_limit, move |_| Ok(sitemap::parse(&body)))
            .await;
        match parsed {
            Err(_) => continue,
            Ok(Sitemap::Index(children)) => queue.extend(children),
            Ok(Sitemap::Urls(list)) => urls.extend(
                list.iter()
                    .filter_map(|u| Url::parse(u).ok())
                    .filter(|u| matches!(u.scheme(), "http" | "https"))
                    .take(MAX_SITEMAP_URLS),
            ),
        }
    }
    urls.truncate(MAX_SITEMAP_URLS);
    (urls, visited.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_each_link_once() {
        let req = CrawlRequest::parse(
            br#"{"url":"https://e.com/","max_depth":1,"exclude_paths":["^/private"]}"#,
        )
        .unwrap();
        let root = Url::parse(&req.url).unwrap();
        let scope = Scope::new(&req, &root);
        let links = [
            "https://e.com/a#x",
            "https://e.com/a",
            "https://e.com/",
            "https://e.com/private/1",
            "https://other.org/",
            "https://e.com/b",
        ]
        .map(|u| Url::parse(u).unwrap());
        let nodes = classify(&scope, &req, &root, 0, links.clone(), None);
        let got: Vec<_> = nodes.iter().map(|n| (n.url.as_str(), n.skip)).collect();
        assert_eq!(
            got,
            [
                ("https://e.com/a", None),
                ("https://e.com/private/1", Some(SkipReason::Filtered)),
                ("https://other.org/", Some(SkipReason::External)),
                ("https://e.com/b", None),
            ]
        );
        let deeper = classify(&scope, &req, &root, 1, links, None);
        assert!(deeper
            .iter()
            .filter(|n| n.url.starts_with("https://e.com/") && !n.url.contains("private"))
            .all(|n| n.skip == Some(SkipReason::Depth)));
    }
}
