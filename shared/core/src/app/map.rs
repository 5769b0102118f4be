//! A map job: the site's URLs from its sitemaps and from the links of its pages, read for links
//! and titles only (no Markdown), until `limit` URLs are known.

use super::page::{fetch_pages, Produced};
use super::runtime::JobRuntime;
use super::{crawl, submit, App, AppError};
use crate::domain::{CrawlRequest, Format, Job, JobKind, MapRequest, PageOptions, UserId};
use crate::engine::urls::{normalise, Scope};
use crate::ports::{NewLog, StoreResult};
use serde_json::{json, Value};
use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};
use url::Url;

/// Pages a map reads at once.
pub(crate) const CONCURRENCY: usize = 8;
/// Pages one map reads at most.
const MAX_PAGES: usize = 10_000;
/// How long a map reads pages; what it found by then is its result.
const BUDGET: Duration = Duration::from_secs(60);
/// Deepest link level followed.
const MAX_DEPTH: u64 = 50;
/// Paths never read for links (they are listed, not fetched).
const NOT_PAGES: &[&str] = &[
    "pdf", "jpg", "jpeg", "png", "gif", "webp", "svg", "ico", "zip", "gz", "tar", "mp3", "mp4",
    "webm", "css", "js", "woff", "woff2", "ttf", "xml", "json",
];

/// One URL found.
struct Link {
    url: String,
    title: Option<String>,
    source: &'static str,
}

/// The links found so far, each URL once, in the order found.
#[derive(Default)]
struct Found {
    links: Vec<Link>,
    index: HashMap<String, usize>,
}

impl Found {
    fn add(&mut self, url: &str, source: &'static str) -> bool {
        if self.index.contains_key(url) {
            return false;
        }
        self.index.insert(url.to_string(), self.links.len());
        self.links.push(Link {
            url: url.to_string(),
            title: None,
            source,
        });
        true
    }

    fn set_title(&mut self, url: &str, title: Option<&str>) {
        if let (Some(&i), Some(t)) = (self.index.get(url), title) {
            self.links[i].title = Some(t.to_string());
        }
    }

    fn matching<'a>(&'a self, search: Option<&'a str>) -> impl Iterator<Item = &'a Link> + 'a {
        let needle = search.map(str::to_lowercase);
        self.links.iter().filter(move |l| match &needle {
            None => true,
            Some(n) => {
                l.url.to_lowercase().contains(n)
                    || l.title
                        .as_deref()
                        .is_some_and(|t| t.to_lowercase().contains(n))
            }
        })
    }
}

fn reads_as_page(u: &Url) -> bool {
    let last = u.path().rsplit('/').next().unwrap_or_default();
    match last.rsplit_once('.') {
        Some((_, ext)) => !NOT_PAGES.contains(&ext.to_ascii_lowercase().as_str()),
        None => true,
    }
}

/// The crawl rules a map follows: its host (and subdomains when asked), robots, traps.
fn rules(req: &MapRequest, page: PageOptions) -> CrawlRequest {
    CrawlRequest {
        url: req.url.clone(),
        limit: req.limit,
        max_depth: MAX_DEPTH,
        include_paths: Vec::new(),
        exclude_paths: Vec::new(),
        allow_subdomains: req.include_subdomains,
        allow_external: false,
        use_sitemap: req.use_sitemap,
        respect_robots: true,
        max_concurrency: CONCURRENCY as u64,
        delay_ms: 0,
        include_documents: true,
        page,
        webhook: None,
    }
}

/// `POST /api/map`: validates the body, stores the job and queues it.
pub async fn submit(app: &App, user: &UserId, body: &[u8]) -> Result<Job, AppError> {
    let req = MapRequest::parse(body).map_err(AppError::Invalid)?;
    let root = submit::root_url(&req.url)?;
    submit::new_job(app, user, JobKind::Map, &req, root, false).await
}

/// Runs a map; `None` when the job was cancelled meanwhile.
pub(crate) async fn run(
    app: &App,
    job: &Job,
    req: &MapRequest,
    rt: &JobRuntime,
    logs: &mut Vec<NewLog>,
) -> StoreResult<Option<Produced>> {
    let started = Instant::now();
    let page = PageOptions {
        formats: vec![Format::Metadata],
        only_main_content: false,
        include_selectors: Vec::new(),
        exclude_selectors: Vec::new(),
        ..PageOptions::default()
    };
    let rules = rules(req, page);
    let Ok(root) = Url::parse(&req.url).map(|u| normalise(&u)) else {
        return Ok(Some(Produced::result(
            &req.url,
            Err(crate::domain::JobError::new(
                crate::domain::ErrorCode::FetchFailed,
                "invalid URL",
            )),
        )));
    };
    let scope = Scope::new(&rules, &root);
    let limit = req.limit as usize;
    let search = req.search.as_deref();
    let mut found = Found::default();
    let mut frontier: VecDeque<(Url, u32)> = VecDeque::new();
    found.add(root.as_str(), "page");
    frontier.push_back((root.clone(), 0));

    // The root's page first: it fetches the origin's robots.txt, which the sitemaps and
    // every classification below obey.
    let mut read = 0usize;
    let mut first = true;
    while !frontier.is_empty()
        && found.matching(search).count() < limit
        && read < MAX_PAGES
        && started.elapsed() < BUDGET
    {
        let take = if first { 1 } else { CONCURRENCY };
        let batch: Vec<(Url, u32)> = (0..take).filter_map(|_| frontier.pop_front()).collect();
        read += batch.len();
        let urls: Vec<&str> = batch.iter().map(|(u, _)| u.as_str()).collect();
        let Some(pages) = fetch_pages(app, job, &rules.page, rt, &urls, logs).await? else {
            return Ok(None);
        };
        for ((url, depth), page) in batch.into_iter().zip(pages) {
            let Ok((fetched, built)) = page else {
                if first {
                    // The start page itself failed (robots, address, network): so does the map.
                    let produced = Produced::page(url.as_str(), page);
                    return Ok(Some(produced));
                }
                continue;
            };
            found.set_title(url.as_str(), built.doc["metadata"]["title"].as_str());
            let robots = rt
                .robots
                .lock()
                .await
                .get(&fetched.url.origin().ascii_serialization())
                .cloned();
            for node in crawl::classify(
                &scope,
                &rules,
                &fetched.url,
                depth,
                built.links,
                robots.as_deref(),
            ) {
                if node.skip.is_none() && found.add(&node.url, "page") {
                    if let Ok(u) = Url::parse(&node.url) {
                        if reads_as_page(&u) {
                            frontier.push_back((u, node.depth));
                        }
                    }
                }
            }
        }
        if first {
            first = false;
            if req.use_sitemap {
                let robots = rt
                    .robots
                    .lock()
                    .await
                    .get(&root.origin().ascii_serialization())
                    .cloned();
                let (urls, docs) = crawl::sitemap_urls(app, &root, robots.as_deref()).await;
                let nodes = crawl::classify(&scope, &rules, &root, 0, urls, robots.as_deref());
                let mut added = 0;
                for node in nodes.into_iter().filter(|n| n.skip.is_none()) {
                    if found.add(&node.url, "sitemap") {
                        added += 1;
                        if let Ok(u) = Url::parse(&node.url) {
                            if reads_as_page(&u) {
                                frontier.push_back((u, 1));
                            }
                        }
                    }
                }
                logs.push(NewLog::info(format!(
                    "sitemaps: {added} new URLs from {docs} sitemap documents"
                )));
            }
        }
    }
    let links: Vec<Value> = found
        .matching(search)
        .take(limit)
        .map(|l| match &l.title {
            Some(t) => json!({"url": l.url, "title": t, "source": l.source}),
            None => json!({"url": l.url, "source": l.source}),
        })
        .collect();
    let mut summary = format!("map: {} URLs, {read} pages read", links.len());
    if !frontier.is_empty() && started.elapsed() >= BUDGET {
        summary.push_str(&format!(
            "; stopped after {} s with pages left unread",
            BUDGET.as_secs()
        ));
    }
    logs.push(NewLog::info(summary));
    Ok(Some(Produced::result(
        &req.url,
        Ok(json!({ "links": links })),
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn assets_are_listed_not_read() {
        for (u, page) in [
            ("https://a.example/", true),
            ("https://a.example/docs/intro", true),
            ("https://a.example/x.html", true),
            ("https://a.example/paper.PDF", false),
            ("https://a.example/logo.png", false),
        ] {
            assert_eq!(reads_as_page(&Url::parse(u).unwrap()), page, "{u}");
        }
    }

    #[test]
    fn search_matches_url_or_title() {
        let mut f = Found::default();
        f.add("https://a.example/pricing", "page");
        f.add("https://a.example/b", "sitemap");
        f.set_title("https://a.example/b", Some("Our Pricing"));
        f.add("https://a.example/c", "page");
        let urls: Vec<_> = f
            .matching(Some("PRICING"))
            .map(|l| l.url.as_str())
            .collect();
        assert_eq!(urls, ["https://a.example/pricing", "https://a.example/b"]);
        assert_eq!(f.matching(None).count(), 3);
    }
}
