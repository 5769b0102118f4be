//! The commands that submit a job (scrape, crawl, batch, map, search, upload): each builds the
//! core's own request type from its flags, submits it with an `Idempotency-Key`, and with `--wait`
//! follows the job to its end.

use super::api::{Api, Body, Reply};
use super::args::{PaceFlags, PageFlags, WaitFlags};
use super::jobs::{describe, results};
use super::wait::until_final;
use super::{s, Failure, Out};
use sarvcrawl_core::domain::{CrawlRequest, MapRequest, PageOptions, ScrapeRequest, SearchRequest};
use serde::Serialize;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

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
    dir: Option<PathBuf>,
) -> Result<(), Failure> {
    let mut req = ScrapeRequest::new(url);
    page.apply(&mut req.page)?;
    let id = submit(api, out, "/api/scrape", json(&req)?, wait).await?;
    if let Some(dir) = dir {
        results(api, out, &id, false, Some(dir)).await?;
    }
    Ok(())
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
    pub pace: PaceFlags,
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
    req.respect_robots = !flags.pace.ignore_robots;
    req.max_concurrency = flags.pace.max_concurrency.unwrap_or(req.max_concurrency);
    req.delay_ms = flags.pace.delay_ms.unwrap_or(req.delay_ms);
    page.apply(&mut req.page)?;
    submit(api, out, "/api/crawl", json(&req)?, wait).await?;
    Ok(())
}

/// The batch's own flags.
pub struct BatchFlags {
    pub ignore_invalid_urls: bool,
    pub pace: PaceFlags,
    /// Where the documents are written once the job ends (with `--wait`).
    pub dir: Option<PathBuf>,
}

/// Submits the URLs of `file` (one a line; `-` is standard input) as one batch.
pub async fn batch(
    api: &Api,
    out: &Out,
    file: &Path,
    flags: BatchFlags,
    page: &PageFlags,
    wait: &WaitFlags,
) -> Result<(), Failure> {
    if flags.dir.is_some() && !wait.wait {
        return Err(Failure::Usage("--out needs --wait".into()));
    }
    let text = if file == Path::new("-") {
        std::io::read_to_string(std::io::stdin())
    } else {
        std::fs::read_to_string(file)
    }
    .map_err(|e| Failure::Other(format!("cannot read {}: {e}", file.display())))?;
    let urls: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    let mut options = PageOptions::default();
    page.apply(&mut options)?;
    let mut body = match serde_json::to_value(&options) {
        Ok(Value::Object(m)) => m,
        _ => return Err(Failure::Other("cannot encode the page options".into())),
    };
    body.insert("urls".into(), json!(urls));
    body.insert(
        "ignore_invalid_urls".into(),
        json!(flags.ignore_invalid_urls),
    );
    body.insert("respect_robots".into(), json!(!flags.pace.ignore_robots));
    if let Some(n) = flags.pace.max_concurrency {
        body.insert("max_concurrency".into(), json!(n));
    }
    if let Some(n) = flags.pace.delay_ms {
        body.insert("delay_ms".into(), json!(n));
    }
    let id = submit(
        api,
        out,
        "/api/batch/scrape",
        Body::Json(Value::Object(body)),
        wait,
    )
    .await?;
    if let Some(dir) = flags.dir {
        results(api, out, &id, true, Some(dir)).await?;
    }
    Ok(())
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
    submit(api, out, "/api/map", json(&req)?, wait).await?;
    Ok(())
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
    submit(api, out, "/api/search", json(&req)?, wait).await?;
    Ok(())
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
    let hook = &wait.webhook;
    if let Some(url) = &hook.webhook {
        query.append_pair("webhook_url", url);
    }
    if !hook.webhook_events.is_empty() {
        query.append_pair("webhook_events", &hook.webhook_events.join(","));
    }
    if let Some(m) = &hook.webhook_metadata {
        query.append_pair("webhook_metadata", m);
    }
    let path = format!("/api/upload?{}", query.finish());
    if bytes.len() > DIRECT_UPLOAD {
        // Announced first: a deployment whose API cannot take a body this big (AWS) answers
        // with a link to put it to; the embedded server says it takes the document itself.
        let announce = json!({"filename": name, "content_type": content_type, "size": bytes.len()});
        match api.submit(&path, Body::Json(announce)).await {
            Ok(reply) => {
                let link = s(&reply.body["upload_url"]);
                eprintln!("uploading {} bytes to the link the API gave", bytes.len());
                api.put_link(&link, &content_type, bytes).await?;
                follow(api, out, reply, wait).await?;
                return Ok(());
            }
            Err(Failure::Api(r))
                if r.status == 400 && r.body["error"]["details"][0]["field"] == "body" => {}
            Err(e) => return Err(e),
        }
    }
    let body = Body::Raw {
        content_type,
        bytes,
    };
    submit(api, out, &path, body, wait).await?;
    Ok(())
}

/// Largest document sent as the upload's own body without asking for a link first: within
/// Lambda's 6 MB once base64-encoded.
const DIRECT_UPLOAD: usize = 4 * 1024 * 1024;

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
        Some("docx") => sarvcrawl_core::engine::docx::MEDIA_TYPE,
        _ => "text/plain",
    }
}

/// Submits a job; prints (and stores) its id before waiting; with `--wait`, prints its end.
/// Answers the job's id once it was submitted (and, with `--wait`, completed).
async fn submit(
    api: &Api,
    out: &Out,
    path: &str,
    body: Body,
    wait: &WaitFlags,
) -> Result<String, Failure> {
    let body = match body {
        Body::Json(mut v) => {
            if let Some(hook) = wait.webhook.json()? {
                v["webhook"] = hook;
            }
            Body::Json(v)
        }
        other => other,
    };
    let reply: Reply = api.submit(path, body).await?;
    follow(api, out, reply, wait).await
}

/// After a submit's 202: prints (and stores) the job's id; with `--wait`, waits for the job and
/// prints its end.
async fn follow(api: &Api, out: &Out, reply: Reply, wait: &WaitFlags) -> Result<String, Failure> {
    let id = s(&reply.body["job_id"]);
    if let Some(invalid) = reply.body["invalid_urls"].as_array() {
        eprintln!("{} invalid URLs ignored:", invalid.len());
        for u in invalid {
            eprintln!("  {}", s(u));
        }
    }
    if let Some(file) = &wait.job_file {
        std::fs::write(file, format!("{id}\n"))
            .map_err(|e| Failure::Other(format!("cannot write {}: {e}", file.display())))?;
    }
    if !wait.wait {
        out.line(&reply.body, || id.clone());
        return Ok(id);
    }
    eprintln!("job {id}");
    let job = until_final(api, &id, wait.deadline, wait.on_deadline, out.json).await?;
    if out.json {
        println!("{job}");
    } else {
        print_result(&job);
    }
    match job["status"].as_str() {
        Some("completed") => Ok(id),
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

impl super::args::WebhookFlags {
    /// The `webhook` object of a JSON submit, if one was asked for.
    fn json(&self) -> Result<Option<Value>, Failure> {
        let Some(url) = &self.webhook else {
            return Ok(None);
        };
        let mut hook = json!({ "url": url });
        if !self.webhook_events.is_empty() {
            hook["events"] = json!(self.webhook_events);
        }
        if let Some(m) = &self.webhook_metadata {
            hook["metadata"] = serde_json::from_str(m)
                .map_err(|e| Failure::Usage(format!("--webhook-metadata is not JSON: {e}")))?;
        }
        Ok(Some(hook))
    }
}
