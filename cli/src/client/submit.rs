//! The commands that submit a job (scrape, crawl, map, search, upload): each builds the core's
//! own request type from its flags, submits it with an `Idempotency-Key`, and with `--wait`
//! follows the job to its end.

use super::api::{Api, Body, Reply};
use super::args::{PageFlags, WaitFlags};
use super::jobs::describe;
use super::wait::until_final;
use super::{s, Failure, Out};
use sarvcrawl_core::domain::{CrawlRequest, MapRequest, ScrapeRequest, SearchRequest};
use serde::Serialize;
use serde_json::Value;
use std::path::Path;

/// A request as the JSON body of its route.
fn json(request: &impl Serialize) -> Result<Body, Failure> {
    serde_json::to_value(request)
        .map(Body::Json)
        .map_err(|e| Failure::Other(format!("cannot encode the request: {e}")))
}

pub async fn scrape(
    api: &Api,
    out: &Out,
    url: String,
    page: &PageFlags,
    wait: &WaitFlags,
) -> Result<(), Failure> {
    let mut req = ScrapeRequest::new(url);
    page.apply(&mut req.page)?;
    submit(api, out, "/api/scrape", json(&req)?, wait).await
}

/// The crawl's own flags.
pub struct CrawlFlags {
    pub limit: Option<u64>,
    pub max_depth: Option<u64>,
    pub include_paths: Vec<String>,
    pub exclude_paths: Vec<String>,
    pub allow_subdomains: bool,
    pub allow_external: bool,
    pub no_sitemap: bool,
    pub ignore_robots: bool,
    pub max_concurrency: Option<u64>,
    pub delay_ms: Option<u64>,
}

pub async fn crawl(
    api: &Api,
    out: &Out,
    url: String,
    flags: CrawlFlags,
    page: &PageFlags,
    wait: &WaitFlags,
) -> Result<(), Failure> {
    let mut req = CrawlRequest::new(url);
    req.limit = flags.limit.unwrap_or(req.limit);
    req.max_depth = flags.max_depth.unwrap_or(req.max_depth);
    req.include_paths = flags.include_paths;
    req.exclude_paths = flags.exclude_paths;
    req.allow_subdomains = flags.allow_subdomains;
    req.allow_external = flags.allow_external;
    req.use_sitemap = !flags.no_sitemap;
    req.respect_robots = !flags.ignore_robots;
    req.max_concurrency = flags.max_concurrency.unwrap_or(req.max_concurrency);
    req.delay_ms = flags.delay_ms.unwrap_or(req.delay_ms);
    page.apply(&mut req.page)?;
    submit(api, out, "/api/crawl", json(&req)?, wait).await
}

/// The map's own flags.
pub struct MapFlags {
    pub limit: Option<u64>,
    pub search: Option<String>,
    pub no_sitemap: bool,
    pub include_subdomains: bool,
}

pub async fn map(
    api: &Api,
    out: &Out,
    url: String,
    flags: MapFlags,
    wait: &WaitFlags,
) -> Result<(), Failure> {
    let mut req = MapRequest::new(url);
    req.limit = flags.limit.unwrap_or(req.limit);
    req.search = flags.search;
    req.use_sitemap = !flags.no_sitemap;
    req.include_subdomains = flags.include_subdomains;
    submit(api, out, "/api/map", json(&req)?, wait).await
}

pub async fn search(
    api: &Api,
    out: &Out,
    query: String,
    limit: Option<u64>,
    no_scrape: bool,
    page: &PageFlags,
    wait: &WaitFlags,
) -> Result<(), Failure> {
    let mut req = SearchRequest::new(query);
    req.limit = limit.unwrap_or(req.limit);
    req.scrape = !no_scrape;
    page.apply(&mut req.page)?;
    submit(api, out, "/api/search", json(&req)?, wait).await
}

/// Uploads a file as it is: its bytes are the body, the rest is the query string.
pub async fn upload(
    api: &Api,
    out: &Out,
    file: &Path,
    content_type: Option<String>,
    base_url: Option<String>,
    formats: &[String],
    wait: &WaitFlags,
) -> Result<(), Failure> {
    let bytes = std::fs::read(file)
        .map_err(|e| Failure::Other(format!("cannot read {}: {e}", file.display())))?;
    let name = file
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let content_type = content_type.unwrap_or_else(|| media_type(&name).into());
    let mut query = url::form_urlencoded::Serializer::new(String::new());
    query.append_pair("filename", &name);
    if let Some(b) = &base_url {
        query.append_pair("base_url", b);
    }
    if !formats.is_empty() {
        query.append_pair("formats", &formats.join(","));
    }
    let path = format!("/api/upload?{}", query.finish());
    let body = Body::Raw {
        content_type,
        bytes,
    };
    submit(api, out, &path, body, wait).await
}

fn media_type(name: &str) -> &'static str {
    match name
        .rsplit_once('.')
        .map(|(_, e)| e.to_ascii_lowercase())
        .as_deref()
    {
        Some("html" | "htm") => "text/html",
        Some("xhtml") => "application/xhtml+xml",
        Some("md" | "markdown") => "text/markdown",
        Some("pdf") => "application/pdf",
        _ => "text/plain",
    }
}

/// Submits a job; prints (and stores) its id before waiting; with `--wait`, prints its end.
async fn submit(
    api: &Api,
    out: &Out,
    path: &str,
    body: Body,
    wait: &WaitFlags,
) -> Result<(), Failure> {
    let reply: Reply = api.submit(path, body).await?;
    let id = s(&reply.body["job_id"]);
    if let Some(file) = &wait.job_file {
        std::fs::write(file, format!("{id}\n"))
            .map_err(|e| Failure::Other(format!("cannot write {}: {e}", file.display())))?;
    }
    if !wait.wait {
        out.line(&reply.body, || id.clone());
        return Ok(());
    }
    eprintln!("job {id}");
    let job = until_final(api, &id, wait.deadline, wait.on_deadline, out.json).await?;
    if out.json {
        println!("{job}");
    } else {
        print_result(&job);
    }
    match job["status"].as_str() {
        Some("completed") => Ok(()),
        Some("cancelled") => Err(Failure::JobCancelled),
        _ => {
            eprintln!("{}", describe(&job));
            Err(Failure::JobFailed)
        }
    }
}

/// A finished job's result as text: a document's Markdown, a map's URLs, search hits, or a
/// crawl's totals.
fn print_result(job: &Value) {
    let r = &job["result"];
    if let Some(links) = r["links"].as_array().filter(|_| job["kind"] == "map") {
        for l in links {
            println!("{}", s(&l["url"]));
        }
    } else if let Some(hits) = r["results"].as_array() {
        for h in hits {
            println!("{}\n  {}", s(&h["title"]), s(&h["url"]));
        }
    } else if let Some(md) = r["markdown"].as_str() {
        println!("{md}");
    } else if !r.is_null() {
        println!("{r}");
    } else {
        println!("{}", describe(job));
    }
}
