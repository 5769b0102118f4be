//! Validated requests of every job kind. Parsing fills every default, so a stored request says
//! exactly what the job does.

use super::extract::ExtractSpec;
use super::validate::{Fields, Problem};
use super::webhook::WebhookSpec;
use super::{CheckRequest, Job, JobKind};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Output formats of a document.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Format {
    Markdown,
    Html,
    RawHtml,
    Text,
    Links,
    Metadata,
    /// A PNG of the rendered page (`render: true` only), stored as an artifact of the job.
    Screenshot,
    /// What `extract` asks for, as JSON.
    Json,
}

impl Format {
    /// The format a name stands for (`markdown`, `raw_html`, ...).
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "markdown" => Format::Markdown,
            "html" => Format::Html,
            "raw_html" => Format::RawHtml,
            "text" => Format::Text,
            "links" => Format::Links,
            "metadata" => Format::Metadata,
            "screenshot" => Format::Screenshot,
            "json" => Format::Json,
            _ => return None,
        })
    }
}

/// How one page is fetched and extracted; shared by scrape and every page of a crawl.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PageOptions {
    pub formats: Vec<Format>,
    pub only_main_content: bool,
    pub include_selectors: Vec<String>,
    pub exclude_selectors: Vec<String>,
    pub headers: BTreeMap<String, String>,
    pub timeout_ms: u64,
    pub render: bool,
    pub wait_for: Option<String>,
    pub wait_ms: u64,
    /// The screenshot's size, when the formats ask for one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub screenshot: Option<ScreenshotOptions>,
    /// The structured extraction of format `json`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extract: Option<ExtractSpec>,
}

/// The size of a page's screenshot: the browser's window, and whether the whole page is taken
/// (as tall as the page, at most [`ScreenshotOptions::MAX_HEIGHT`]) or only the window.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScreenshotOptions {
    pub full_page: bool,
    pub width: u32,
    pub height: u32,
}

impl ScreenshotOptions {
    /// Tallest image taken, a full page included.
    pub const MAX_HEIGHT: u32 = 16_384;
    /// Widest window.
    pub const MAX_WIDTH: u32 = 1_920;
}

/// A window of 1280 x 800, not the full page.
impl Default for ScreenshotOptions {
    fn default() -> Self {
        ScreenshotOptions {
            full_page: false,
            width: 1280,
            height: 800,
        }
    }
}

impl PageOptions {
    pub fn wants(&self, f: Format) -> bool {
        self.formats.contains(&f)
    }
}

/// The API's defaults: Markdown and metadata of the main content, within 30 s, not rendered.
impl Default for PageOptions {
    fn default() -> Self {
        PageOptions {
            formats: vec![Format::Markdown, Format::Metadata],
            only_main_content: true,
            include_selectors: Vec::new(),
            exclude_selectors: Vec::new(),
            headers: BTreeMap::new(),
            timeout_ms: 30_000,
            render: false,
            wait_for: None,
            wait_ms: 0,
            screenshot: None,
            extract: None,
        }
    }
}

/// `POST /api/scrape`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScrapeRequest {
    pub url: String,
    #[serde(flatten)]
    pub page: PageOptions,
    /// Where the job's events are sent, if anywhere.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webhook: Option<WebhookSpec>,
}

impl ScrapeRequest {
    /// A scrape of `url` with the API's defaults.
    pub fn new(url: impl Into<String>) -> Self {
        ScrapeRequest {
            url: url.into(),
            page: PageOptions::default(),
            webhook: None,
        }
    }
}

/// `POST /api/crawl`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CrawlRequest {
    pub url: String,
    pub limit: u64,
    pub max_depth: u64,
    pub include_paths: Vec<String>,
    pub exclude_paths: Vec<String>,
    pub allow_subdomains: bool,
    pub allow_external: bool,
    pub use_sitemap: bool,
    pub respect_robots: bool,
    pub max_concurrency: u64,
    pub delay_ms: u64,
    /// Whether links to documents (PDFs) are followed like pages.
    #[serde(default = "yes")]
    pub include_documents: bool,
    #[serde(flatten)]
    pub page: PageOptions,
    /// Where the job's events are sent, if anywhere.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webhook: Option<WebhookSpec>,
}

fn yes() -> bool {
    true
}

impl CrawlRequest {
    /// A crawl from `url` with the API's defaults.
    pub fn new(url: impl Into<String>) -> Self {
        CrawlRequest {
            url: url.into(),
            limit: 100,
            max_depth: 5,
            include_paths: Vec::new(),
            exclude_paths: Vec::new(),
            allow_subdomains: false,
            allow_external: false,
            use_sitemap: true,
            respect_robots: true,
            max_concurrency: 8,
            delay_ms: 0,
            include_documents: true,
            page: PageOptions::default(),
            webhook: None,
        }
    }
}

/// `POST /api/map`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MapRequest {
    pub url: String,
    pub limit: u64,
    pub use_sitemap: bool,
    pub include_subdomains: bool,
    pub search: Option<String>,
    /// Where the job's events are sent, if anywhere.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webhook: Option<WebhookSpec>,
}

impl MapRequest {
    /// A map of `url` with the API's defaults.
    pub fn new(url: impl Into<String>) -> Self {
        MapRequest {
            url: url.into(),
            limit: 1000,
            use_sitemap: true,
            include_subdomains: false,
            search: None,
            webhook: None,
        }
    }
}

/// `POST /api/search`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SearchRequest {
    pub query: String,
    pub limit: u64,
    pub scrape: bool,
    #[serde(flatten)]
    pub page: PageOptions,
    /// Where the job's events are sent, if anywhere.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webhook: Option<WebhookSpec>,
}

impl SearchRequest {
    /// A search for `query` with the API's defaults.
    pub fn new(query: impl Into<String>) -> Self {
        SearchRequest {
            query: query.into(),
            limit: 5,
            scrape: true,
            page: PageOptions::default(),
            webhook: None,
        }
    }
}

/// `POST /api/upload`: what the query string and the body's type said. The bytes themselves
/// are stored apart, under `source_key`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UploadRequest {
    pub filename: Option<String>,
    pub base_url: Option<String>,
    pub content_type: String,
    pub bytes: u64,
    pub source_key: String,
    /// The document comes later, by its upload URL (a presigned PUT).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub awaiting: bool,
    #[serde(flatten)]
    pub page: PageOptions,
    /// Where the job's events are sent, if anywhere.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webhook: Option<WebhookSpec>,
}

/// `POST /api/batch/scrape`, as stored with its job. The URLs themselves are kept apart, under
/// `urls_key` (ten thousand of them would not fit in a job's record on DynamoDB).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BatchRequest {
    /// The distinct URLs to fetch.
    pub url_count: u64,
    /// URLs of the body that repeated an earlier one (after normalisation).
    pub duplicates: u64,
    /// Invalid URLs dropped because the body said `ignore_invalid_urls`.
    pub invalid: u64,
    pub urls_key: String,
    pub respect_robots: bool,
    pub max_concurrency: u64,
    pub delay_ms: u64,
    #[serde(flatten)]
    pub page: PageOptions,
    /// Where the job's events are sent, if anywhere.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webhook: Option<WebhookSpec>,
}

/// Most URLs of one batch.
pub const MAX_BATCH_URLS: usize = 10_000;

/// A batch body as parsed: its options and its URLs, valid ones in their order and, when
/// `ignore_invalid_urls` was set, the invalid ones as they were given.
#[derive(Debug, Clone)]
pub struct BatchBody {
    pub urls: Vec<url::Url>,
    pub invalid_urls: Vec<String>,
    pub respect_robots: bool,
    pub max_concurrency: u64,
    pub delay_ms: u64,
    pub page: PageOptions,
    pub webhook: Option<WebhookSpec>,
}

impl BatchBody {
    /// Parses and validates a batch body: `urls` holds 1 to [`MAX_BATCH_URLS`] absolute
    /// http(s) URLs; each invalid one is a problem of its own (`urls[17]`) unless
    /// `ignore_invalid_urls` drops it.
    pub fn parse(body: &[u8]) -> Result<Self, Vec<Problem>> {
        let mut f = Fields::from_body(body)?;
        let ignore_invalid = f.boolean("ignore_invalid_urls", false);
        let (mut urls, mut invalid_urls) = (Vec::new(), Vec::new());
        let listed = f.has("urls");
        match f.list("urls") {
            None if !listed => f.problem("urls", "is required"),
            None => {}
            Some(list) if list.is_empty() || list.len() > MAX_BATCH_URLS => f.problem(
                "urls",
                format!("must have from 1 to {MAX_BATCH_URLS} entries"),
            ),
            Some(list) => {
                for (i, item) in list.into_iter().enumerate() {
                    let parsed = match &item {
                        serde_json::Value::String(s) => super::validate::parse_web_url(s),
                        _ => Err("must be a string".into()),
                    };
                    match parsed {
                        Ok(u) => urls.push(u),
                        Err(_) if ignore_invalid => invalid_urls.push(match item {
                            serde_json::Value::String(s) => s,
                            other => other.to_string(),
                        }),
                        Err(p) => f.problem(&format!("urls[{i}]"), p),
                    }
                }
                if urls.is_empty() && !invalid_urls.is_empty() {
                    f.problem("urls", "has no valid URL");
                }
            }
        }
        let d = CrawlRequest::new("");
        let respect_robots = f.boolean("respect_robots", d.respect_robots);
        let max_concurrency = f.integer("max_concurrency", d.max_concurrency, 1, 64);
        let delay_ms = f.integer("delay_ms", d.delay_ms, 0, 60_000);
        let page = page_options(&mut f);
        let webhook = WebhookSpec::read(&mut f);
        f.finish()?;
        Ok(BatchBody {
            urls,
            invalid_urls,
            respect_robots,
            max_concurrency,
            delay_ms,
            page,
            webhook,
        })
    }
}

/// A stored job's request, read back as its kind's type.
#[derive(Debug, Clone)]
pub enum JobRequest {
    Scrape(ScrapeRequest),
    Crawl(CrawlRequest),
    Map(MapRequest),
    Search(SearchRequest),
    Upload(UploadRequest),
    Check(CheckRequest),
    Batch(BatchRequest),
}

impl JobRequest {
    /// The request of `job`, as its kind reads it.
    pub fn of(job: &Job) -> Result<Self, serde_json::Error> {
        let r = job.request.clone();
        Ok(match job.kind {
            JobKind::Scrape => JobRequest::Scrape(serde_json::from_value(r)?),
            JobKind::Crawl => JobRequest::Crawl(serde_json::from_value(r)?),
            JobKind::Map => JobRequest::Map(serde_json::from_value(r)?),
            JobKind::Search => JobRequest::Search(serde_json::from_value(r)?),
            JobKind::Upload => JobRequest::Upload(serde_json::from_value(r)?),
            JobKind::Monitor => JobRequest::Check(serde_json::from_value(r)?),
            JobKind::Batch => JobRequest::Batch(serde_json::from_value(r)?),
        })
    }

    /// The options of the job's pages, for the kinds that read pages.
    pub fn page(&self) -> Option<&PageOptions> {
        match self {
            JobRequest::Scrape(r) => Some(&r.page),
            JobRequest::Crawl(r) => Some(&r.page),
            JobRequest::Search(r) => Some(&r.page),
            JobRequest::Check(r) => Some(&r.page),
            JobRequest::Batch(r) => Some(&r.page),
            JobRequest::Upload(r) => Some(&r.page),
            JobRequest::Map(_) => None,
        }
    }

    /// Whether the job's pages are loaded in a headless browser.
    pub fn renders(&self) -> bool {
        match self {
            JobRequest::Scrape(r) => r.page.render,
            JobRequest::Crawl(r) => r.page.render,
            JobRequest::Search(r) => r.scrape && r.page.render,
            JobRequest::Check(r) => r.page.render,
            JobRequest::Batch(r) => r.page.render,
            JobRequest::Map(_) | JobRequest::Upload(_) => false,
        }
    }
}

const MAX_SELECTORS: usize = 20;
const MAX_SELECTOR_LEN: usize = 512;
const MAX_PATTERNS: usize = 20;
const MAX_PATTERN_LEN: usize = 512;
/// Compiled size bound of a path pattern, so a hostile regex cannot eat memory or time.
pub const REGEX_SIZE_LIMIT: usize = 256 * 1024;
const FORBIDDEN_HEADERS: &[&str] = &[
    "host",
    "content-length",
    "transfer-encoding",
    "connection",
    "upgrade",
    "te",
    "trailer",
    "keep-alive",
    "proxy-authorization",
    "proxy-connection",
];

/// The page options of a body (formats, selectors, headers, timeouts, rendering).
pub(crate) fn page_options(f: &mut Fields) -> PageOptions {
    let names = f.strings("formats", 8, 16);
    let mut formats = Vec::new();
    for n in &names {
        match Format::parse(n) {
            Some(fmt) if !formats.contains(&fmt) => formats.push(fmt),
            Some(_) => {}
            None => f.problem(
                "formats",
                format!(
                    "unknown format {n:?}: use markdown, html, raw_html, text, links, metadata, \
                     screenshot, json"
                ),
            ),
        }
    }
    let d = PageOptions::default();
    if formats.is_empty() {
        formats = d.formats;
    }
    let only_main_content = f.boolean("only_main_content", d.only_main_content);
    let include_selectors = selectors(f, "include_selectors");
    let exclude_selectors = selectors(f, "exclude_selectors");
    let mut headers = BTreeMap::new();
    for (k, v) in f.string_map("headers", 20, 4096) {
        let valid_name = http::HeaderName::from_bytes(k.as_bytes()).is_ok();
        if !valid_name || http::HeaderValue::from_str(&v).is_err() {
            f.problem("headers", format!("{k:?} is not a valid header"));
        } else if FORBIDDEN_HEADERS.contains(&k.to_ascii_lowercase().as_str()) {
            f.problem("headers", format!("{k:?} cannot be set"));
        } else {
            headers.insert(k, v);
        }
    }
    let timeout_ms = f.integer("timeout_ms", d.timeout_ms, 1_000, 120_000);
    let render = f.boolean("render", d.render);
    let wait_for = f.string("wait_for", MAX_SELECTOR_LEN);
    if let Some(sel) = &wait_for {
        if scraper::Selector::parse(sel).is_err() {
            f.problem("wait_for", "is not a valid CSS selector");
        }
    }
    let wait_ms = f.integer("wait_ms", d.wait_ms, 0, 30_000);
    let screenshot = screenshot_options(f, formats.contains(&Format::Screenshot), render);
    let extract = ExtractSpec::read(f);
    match (&extract, formats.contains(&Format::Json)) {
        (Some(_), false) => formats.push(Format::Json),
        (None, true) => f.problem("extract", "is required for the json format"),
        _ => {}
    }
    PageOptions {
        formats,
        only_main_content,
        include_selectors,
        exclude_selectors,
        headers,
        timeout_ms,
        render,
        wait_for,
        wait_ms,
        screenshot,
        extract,
    }
}

/// `screenshot` of a body asking for the format (`wanted`): its options, defaults filled.
/// Only a rendered page has a screenshot; options without the format are a mistake.
fn screenshot_options(f: &mut Fields, wanted: bool, render: bool) -> Option<ScreenshotOptions> {
    let given = f.value("screenshot");
    if !wanted {
        if given.is_some() {
            f.problem("screenshot", "is set but formats has no screenshot");
        }
        return None;
    }
    if !render {
        f.problem("render", "must be true for the screenshot format");
    }
    let mut o = ScreenshotOptions::default();
    match given {
        None | Some(serde_json::Value::Null) => {}
        Some(serde_json::Value::Object(map)) => {
            for (k, v) in map {
                let field = format!("screenshot.{k}");
                match (k.as_str(), &v) {
                    ("full_page", serde_json::Value::Bool(b)) => o.full_page = *b,
                    ("width", _) => match bounded(&v, 320, ScreenshotOptions::MAX_WIDTH) {
                        Some(n) => o.width = n,
                        None => f.problem(&field, "must be an integer from 320 to 1920"),
                    },
                    ("height", _) => match bounded(&v, 200, ScreenshotOptions::MAX_HEIGHT) {
                        Some(n) => o.height = n,
                        None => f.problem(&field, "must be an integer from 200 to 16384"),
                    },
                    ("full_page", _) => f.problem(&field, "must be a boolean"),
                    _ => f.problem(&field, "is not an option: use full_page, width, height"),
                }
            }
        }
        Some(_) => f.problem("screenshot", "must be an object"),
    }
    Some(o)
}

/// `v` as an integer from `min` to `max`.
fn bounded(v: &serde_json::Value, min: u32, max: u32) -> Option<u32> {
    v.as_u64()
        .and_then(|n| u32::try_from(n).ok())
        .filter(|n| (min..=max).contains(n))
}

fn selectors(f: &mut Fields, field: &str) -> Vec<String> {
    let list = f.strings(field, MAX_SELECTORS, MAX_SELECTOR_LEN);
    for s in &list {
        if scraper::Selector::parse(s).is_err() {
            f.problem(field, format!("{s:?} is not a valid CSS selector"));
        }
    }
    list
}

fn patterns(f: &mut Fields, field: &str) -> Vec<String> {
    let list = f.strings(field, MAX_PATTERNS, MAX_PATTERN_LEN);
    for p in &list {
        if let Err(e) = regex::RegexBuilder::new(p)
            .size_limit(REGEX_SIZE_LIMIT)
            .build()
        {
            f.problem(field, format!("{p:?} is not a valid regex: {e}"));
        }
    }
    list
}

impl ScrapeRequest {
    /// Parses and validates a scrape body.
    pub fn parse(body: &[u8]) -> Result<Self, Vec<Problem>> {
        let mut f = Fields::from_body(body)?;
        let url = f.url("url");
        let page = page_options(&mut f);
        let webhook = WebhookSpec::read(&mut f);
        f.finish()?;
        Ok(ScrapeRequest {
            url: url.map(String::from).unwrap_or_default(),
            page,
            webhook,
        })
    }
}

impl CrawlRequest {
    /// Parses and validates a crawl body.
    pub fn parse(body: &[u8]) -> Result<Self, Vec<Problem>> {
        let mut f = Fields::from_body(body)?;
        let d = CrawlRequest::new("");
        let url = f.url("url");
        let limit = f.integer("limit", d.limit, 1, 10_000);
        let max_depth = f.integer("max_depth", d.max_depth, 0, 50);
        let include_paths = patterns(&mut f, "include_paths");
        let exclude_paths = patterns(&mut f, "exclude_paths");
        let allow_subdomains = f.boolean("allow_subdomains", d.allow_subdomains);
        let allow_external = f.boolean("allow_external", d.allow_external);
        let use_sitemap = f.boolean("use_sitemap", d.use_sitemap);
        let respect_robots = f.boolean("respect_robots", d.respect_robots);
        let max_concurrency = f.integer("max_concurrency", d.max_concurrency, 1, 64);
        let delay_ms = f.integer("delay_ms", d.delay_ms, 0, 60_000);
        let include_documents = f.boolean("include_documents", d.include_documents);
        let page = page_options(&mut f);
        let webhook = WebhookSpec::read(&mut f);
        f.finish()?;
        Ok(CrawlRequest {
            url: url.map(String::from).unwrap_or_default(),
            limit,
            max_depth,
            include_paths,
            exclude_paths,
            allow_subdomains,
            allow_external,
            use_sitemap,
            respect_robots,
            max_concurrency,
            delay_ms,
            include_documents,
            page,
            webhook,
        })
    }
}

impl MapRequest {
    /// Parses and validates a map body.
    pub fn parse(body: &[u8]) -> Result<Self, Vec<Problem>> {
        let mut f = Fields::from_body(body)?;
        let d = MapRequest::new("");
        let url = f.url("url");
        let limit = f.integer("limit", d.limit, 1, 30_000);
        let use_sitemap = f.boolean("use_sitemap", d.use_sitemap);
        let include_subdomains = f.boolean("include_subdomains", d.include_subdomains);
        let search = f.string("search", 256);
        let webhook = WebhookSpec::read(&mut f);
        f.finish()?;
        Ok(MapRequest {
            url: url.map(String::from).unwrap_or_default(),
            limit,
            use_sitemap,
            include_subdomains,
            search,
            webhook,
        })
    }
}

impl SearchRequest {
    /// Parses and validates a search body; `scrape` takes the page options of a scrape.
    pub fn parse(body: &[u8]) -> Result<Self, Vec<Problem>> {
        let mut f = Fields::from_body(body)?;
        let query = f.string("query", 512);
        if query.as_deref().is_some_and(|q| q.trim().is_empty()) {
            f.problem("query", "must not be empty");
        } else if query.is_none() {
            f.problem("query", "is required");
        }
        let d = SearchRequest::new("");
        let limit = f.integer("limit", d.limit, 1, 20);
        let scrape = f.boolean("scrape", d.scrape);
        let page = page_options(&mut f);
        let webhook = WebhookSpec::read(&mut f);
        f.finish()?;
        Ok(SearchRequest {
            query: query.unwrap_or_default(),
            limit,
            scrape,
            page,
            webhook,
        })
    }
}

impl UploadRequest {
    /// Validates an upload's query parameters: `filename`, `base_url`, and the page options
    /// that make sense for a document at hand (`formats` comma-separated, `only_main_content`,
    /// the selectors).
    pub fn parse(
        query: &BTreeMap<String, String>,
        content_type: &str,
        bytes: u64,
        source_key: String,
    ) -> Result<Self, Vec<Problem>> {
        let mut map = serde_json::Map::new();
        let mut webhook = serde_json::Map::new();
        for (k, v) in query {
            // The webhook's fields, as `webhook_url`, `webhook_events` (comma-separated) and
            // `webhook_metadata` (a JSON object).
            if let Some(field) = k.strip_prefix("webhook_") {
                let value = match field {
                    "events" => serde_json::json!(v.split(',').map(str::trim).collect::<Vec<_>>()),
                    "metadata" => serde_json::from_str(v).unwrap_or(serde_json::json!(v)),
                    _ => serde_json::json!(v),
                };
                webhook.insert(field.to_string(), value);
                continue;
            }
            let value = match k.as_str() {
                "formats" | "include_selectors" | "exclude_selectors" => {
                    serde_json::json!(v.split(',').map(str::trim).collect::<Vec<_>>())
                }
                "only_main_content" => match v.as_str() {
                    "true" => serde_json::json!(true),
                    "false" => serde_json::json!(false),
                    _ => serde_json::json!(v),
                },
                "filename" | "base_url" => serde_json::json!(v),
                // Anything else is refused by name below.
                _ => serde_json::Value::Bool(false),
            };
            map.insert(k.clone(), value);
        }
        if !webhook.is_empty() {
            map.insert("webhook".into(), serde_json::Value::Object(webhook));
        }
        let body = serde_json::Value::Object(map).to_string();
        let mut f = Fields::from_body(body.as_bytes())?;
        let filename = f.string("filename", 255);
        let base_url = f.optional_url("base_url");
        let page = PageOptions {
            render: false,
            ..page_options(&mut f)
        };
        let webhook = WebhookSpec::read(&mut f);
        f.finish()?;
        Ok(UploadRequest {
            filename,
            base_url: base_url.map(String::from),
            content_type: content_type.to_string(),
            bytes,
            source_key,
            awaiting: false,
            page,
            webhook,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scrape_defaults() {
        let r = ScrapeRequest::parse(br#"{"url":"https://example.com"}"#).unwrap();
        assert_eq!(r.url, "https://example.com/");
        assert_eq!(r.page.formats, vec![Format::Markdown, Format::Metadata]);
        assert!(r.page.only_main_content);
        assert_eq!(r.page.timeout_ms, 30_000);
    }

    #[test]
    fn crawl_rejects_out_of_range_and_bad_patterns() {
        let body = br#"{"url":"https://example.com","limit":10001,"max_depth":51,
            "include_paths":["("],"exclude_selectors":["<<"],"headers":{"Host":"x"},
            "formats":["pdf"],"timeout_ms":999999}"#;
        let problems = CrawlRequest::parse(body).unwrap_err();
        let mut fields: Vec<_> = problems.iter().map(|p| p.field.clone()).collect();
        fields.sort();
        assert_eq!(
            fields,
            [
                "exclude_selectors",
                "formats",
                "headers",
                "include_paths",
                "limit",
                "max_depth",
                "timeout_ms"
            ]
        );
    }

    #[test]
    fn a_screenshot_needs_render_and_bounded_options() {
        let fields = |body: &str| -> Vec<String> {
            ScrapeRequest::parse(body.as_bytes())
                .unwrap_err()
                .into_iter()
                .map(|p| p.field)
                .collect()
        };
        let r = ScrapeRequest::parse(
            br#"{"url":"https://e.com","render":true,"formats":["markdown","screenshot"]}"#,
        )
        .unwrap();
        assert_eq!(r.page.screenshot, Some(ScreenshotOptions::default()));
        let r = ScrapeRequest::parse(
            br#"{"url":"https://e.com","render":true,"formats":["screenshot"],
                "screenshot":{"full_page":true,"width":800,"height":600}}"#,
        )
        .unwrap();
        let o = r.page.screenshot.unwrap();
        assert!(o.full_page && o.width == 800 && o.height == 600);
        assert_eq!(
            fields(r#"{"url":"https://e.com","formats":["screenshot"]}"#),
            ["render"]
        );
        assert_eq!(
            fields(r#"{"url":"https://e.com","render":true,"screenshot":{}}"#),
            ["screenshot"]
        );
        let mut bad = fields(
            r#"{"url":"https://e.com","render":true,"formats":["screenshot"],
                "screenshot":{"width":99999,"height":16385,"full_page":1,"zoom":2}}"#,
        );
        bad.sort();
        assert_eq!(
            bad,
            [
                "screenshot.full_page",
                "screenshot.height",
                "screenshot.width",
                "screenshot.zoom"
            ]
        );
    }

    #[test]
    fn huge_regex_is_refused() {
        let body = br#"{"url":"https://example.com","include_paths":["(a{1000}){1000}"]}"#;
        assert!(CrawlRequest::parse(body).is_err());
    }
}
