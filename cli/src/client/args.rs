//! The client's command line: its options and subcommands.

use super::wait::OnDeadline;
use super::Failure;
use clap::{Args, Subcommand};
use sarvcrawl_core::domain::{Format, PageOptions, ScreenshotOptions};
use std::path::PathBuf;
use std::time::Duration;

/// Where the API is and who calls it.
#[derive(Args, Debug)]
pub struct ClientArgs {
    /// Base URL of the SarvCrawl API.
    #[arg(
        long,
        global = true,
        env = "SARVCRAWL_API_URL",
        default_value = "http://127.0.0.1:8080"
    )]
    pub api_url: String,
    /// API key (sent as `Authorization: Bearer`).
    #[arg(long, global = true, env = "SARVCRAWL_API_KEY", hide_env_values = true)]
    pub api_key: Option<String>,
    /// Print JSON (one document per line) instead of text.
    #[arg(long, global = true)]
    pub json: bool,
}

/// How a page is extracted.
#[derive(Args, Debug, Default)]
pub struct PageFlags {
    /// Output formats: markdown, html, raw_html, text, links, metadata (repeatable or
    /// comma-separated).
    #[arg(long = "format", value_delimiter = ',')]
    formats: Vec<String>,
    /// Keep navigation, headers, footers and asides.
    #[arg(long)]
    all_content: bool,
    /// CSS selectors of the parts to keep.
    #[arg(long = "include-selector")]
    include_selectors: Vec<String>,
    /// CSS selectors of the parts to drop.
    #[arg(long = "exclude-selector")]
    exclude_selectors: Vec<String>,
    /// Per-page deadline in milliseconds.
    #[arg(long)]
    timeout_ms: Option<u64>,
    /// A request header to send, `Name: value` (repeatable).
    #[arg(long = "header", value_name = "NAME: VALUE")]
    headers: Vec<String>,
    /// Load the page in a headless browser.
    #[arg(long)]
    render: bool,
    /// With --render: wait for this CSS selector.
    #[arg(long)]
    wait_for: Option<String>,
    /// With --render: wait this many milliseconds more.
    #[arg(long)]
    wait_ms: Option<u64>,
    /// With --render: take a PNG screenshot of the page (1280 x 800 unless --window says).
    #[arg(long)]
    screenshot: bool,
    /// With --screenshot: the whole page, as tall as it is (at most 16384 pixels).
    #[arg(long)]
    full_page: bool,
    /// With --screenshot: the browser window's size, WIDTHxHEIGHT.
    #[arg(long, value_name = "WIDTHxHEIGHT", value_parser = parse_window)]
    window: Option<(u32, u32)>,
}

impl PageFlags {
    /// Sets the page options these flags give.
    pub fn apply(&self, page: &mut PageOptions) -> Result<(), Failure> {
        if !self.formats.is_empty() {
            page.formats = self
                .formats
                .iter()
                .map(|f| {
                    Format::parse(f.trim()).ok_or_else(|| {
                        Failure::Usage(format!(
                            "unknown format {f:?}: use markdown, html, raw_html, text, links, metadata"
                        ))
                    })
                })
                .collect::<Result<_, _>>()?;
        }
        page.only_main_content = !self.all_content;
        page.include_selectors = self.include_selectors.clone();
        page.exclude_selectors = self.exclude_selectors.clone();
        if let Some(t) = self.timeout_ms {
            page.timeout_ms = t;
        }
        for h in &self.headers {
            let Some((name, value)) = h.split_once(':') else {
                return Err(Failure::Usage(format!(
                    "--header {h:?} is not `Name: value`"
                )));
            };
            page.headers
                .insert(name.trim().to_string(), value.trim().to_string());
        }
        page.render = self.render;
        page.wait_for = self.wait_for.clone();
        if let Some(w) = self.wait_ms {
            page.wait_ms = w;
        }
        if self.screenshot {
            if !page.formats.contains(&Format::Screenshot) {
                page.formats.push(Format::Screenshot);
            }
            let mut shot = ScreenshotOptions {
                full_page: self.full_page,
                ..ScreenshotOptions::default()
            };
            if let Some((width, height)) = self.window {
                (shot.width, shot.height) = (width, height);
            }
            page.screenshot = Some(shot);
        }
        Ok(())
    }
}

/// `WIDTHxHEIGHT`.
fn parse_window(s: &str) -> Result<(u32, u32), String> {
    let size = s
        .split_once(['x', 'X'])
        .and_then(|(w, h)| Some((w.trim().parse().ok()?, h.trim().parse().ok()?)));
    size.ok_or_else(|| format!("{s:?} is not a size like 1280x800"))
}

/// How a crawl or a batch fetches its pages.
#[derive(Args, Debug)]
pub struct PaceFlags {
    /// Do not obey robots.txt.
    #[arg(long)]
    pub ignore_robots: bool,
    #[arg(long)]
    pub max_concurrency: Option<u64>,
    #[arg(long)]
    pub delay_ms: Option<u64>,
}

/// Following the job a command submits: waiting for it, or having its events sent to a
/// webhook.
#[derive(Args, Debug)]
pub struct WaitFlags {
    #[command(flatten)]
    pub webhook: WebhookFlags,
    /// Wait until the job is final and print its result.
    #[arg(long)]
    pub wait: bool,
    /// Give up waiting after this long (e.g. 30s, 5m, 1h); exits with 4 naming the job.
    #[arg(long, value_parser = parse_duration)]
    pub deadline: Option<Duration>,
    /// What happens to the job when the deadline passes.
    #[arg(long, value_enum, default_value = "leave")]
    pub on_deadline: OnDeadline,
    /// Write the job id to this file as soon as the job exists.
    #[arg(long)]
    pub job_file: Option<PathBuf>,
}

/// A webhook for the job's events, signed with your secret (`sarvcrawl webhook secret`).
#[derive(Args, Debug)]
pub struct WebhookFlags {
    /// POST the job's events to this URL.
    #[arg(long, value_name = "URL")]
    pub webhook: Option<String>,
    /// Only these events (comma-separated: job.started, job.page, job.completed, job.failed,
    /// job.cancelled).
    #[arg(long, value_delimiter = ',', requires = "webhook")]
    pub webhook_events: Vec<String>,
    /// A JSON object echoed in every event.
    #[arg(long, value_name = "JSON", requires = "webhook")]
    pub webhook_metadata: Option<String>,
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let (num, unit) = s.split_at(s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len()));
    let n: u64 = num
        .parse()
        .map_err(|_| format!("{s:?} is not a duration like 30s or 5m"))?;
    let secs = match unit {
        "" | "s" => n,
        "ms" => return Ok(Duration::from_millis(n)),
        "m" => n * 60,
        "h" => n * 3600,
        _ => return Err(format!("{s:?} is not a duration like 30s or 5m")),
    };
    Ok(Duration::from_secs(secs))
}

#[derive(Subcommand, Debug)]
pub enum ClientCommand {
    /// Scrape one page.
    Scrape {
        url: String,
        /// Wait for the page and write its Markdown (and its screenshot, a PNG beside it)
        /// into this directory.
        #[arg(long)]
        out: Option<PathBuf>,
        #[command(flatten)]
        page: PageFlags,
        #[command(flatten)]
        wait: WaitFlags,
    },
    /// Crawl a site.
    Crawl {
        url: String,
        #[arg(long)]
        limit: Option<u64>,
        #[arg(long)]
        max_depth: Option<u64>,
        /// Regex a URL path must match (repeatable).
        #[arg(long = "include-path")]
        include_paths: Vec<String>,
        /// Regex of URL paths to skip (repeatable).
        #[arg(long = "exclude-path")]
        exclude_paths: Vec<String>,
        #[arg(long)]
        allow_subdomains: bool,
        #[arg(long)]
        allow_external: bool,
        /// Do not read the site's sitemaps.
        #[arg(long)]
        no_sitemap: bool,
        #[command(flatten)]
        pace: PaceFlags,
        #[command(flatten)]
        page: PageFlags,
        #[command(flatten)]
        wait: WaitFlags,
    },
    /// Scrape a list of URLs as one job: one URL a line of FILE, or of standard input for
    /// `-` (blank lines and lines starting with `#` are skipped).
    Batch {
        file: PathBuf,
        /// Drop invalid URLs (listed in the answer) instead of refusing the batch.
        #[arg(long)]
        ignore_invalid_urls: bool,
        #[command(flatten)]
        pace: PaceFlags,
        /// With --wait: write one Markdown file per document into this directory.
        #[arg(long)]
        out: Option<PathBuf>,
        #[command(flatten)]
        page: PageFlags,
        #[command(flatten)]
        wait: WaitFlags,
    },
    /// List a site's URLs from its sitemaps and links.
    Map {
        url: String,
        #[arg(long)]
        limit: Option<u64>,
        /// Keep the URLs or titles containing this.
        #[arg(long)]
        search: Option<String>,
        #[arg(long)]
        no_sitemap: bool,
        #[arg(long)]
        include_subdomains: bool,
        #[command(flatten)]
        wait: WaitFlags,
    },
    /// Search the web and scrape the hits.
    Search {
        query: String,
        #[arg(long)]
        limit: Option<u64>,
        /// Only the hits, no page fetched.
        #[arg(long)]
        no_scrape: bool,
        #[command(flatten)]
        page: PageFlags,
        #[command(flatten)]
        wait: WaitFlags,
    },
    /// Extract a document of your own (HTML, XHTML, text, Markdown, PDF, .docx; at most
    /// 25 MiB).
    Upload {
        file: PathBuf,
        /// Its media type (default: from the file name).
        #[arg(long)]
        content_type: Option<String>,
        /// URL that relative links resolve against.
        #[arg(long)]
        base_url: Option<String>,
        #[arg(long = "format", value_delimiter = ',')]
        formats: Vec<String>,
        #[command(flatten)]
        wait: WaitFlags,
    },
    /// Watch pages for changes.
    #[command(subcommand)]
    Monitor(MonitorCommand),
    /// Your jobs, newest first.
    Jobs {
        #[arg(long)]
        kind: Option<String>,
        #[arg(long)]
        status: Option<String>,
        #[arg(long, default_value_t = 20)]
        limit: u32,
    },
    /// One job.
    Status { id: String },
    /// A job's log.
    Logs {
        id: String,
        /// Keep printing new entries until the job is final.
        #[arg(long)]
        follow: bool,
    },
    /// A job's discovery tree.
    Tree { id: String },
    /// A job's documents.
    Results {
        id: String,
        /// Every page of results, not only the first.
        #[arg(long)]
        all: bool,
        /// Write one Markdown file per document into this directory.
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Cancel a job.
    Cancel { id: String },
    /// Your webhook signing secret (made on first use); `--rotate` replaces it, and the old one
    /// keeps signing for 24 hours.
    WebhookSecret {
        #[arg(long)]
        rotate: bool,
    },
    /// Serve the Model Context Protocol on stdin and stdout: tools scrape, crawl,
    /// crawl_status, crawl_results, map, search, batch_scrape and extract, calling this API.
    Mcp,
}

#[derive(Subcommand, Debug)]
pub enum MonitorCommand {
    /// Watch a page; changes are POSTed to --notify.
    Add {
        url: String,
        #[arg(long)]
        notify: String,
        #[arg(long)]
        interval: Option<u64>,
        /// Watch only what this CSS selector matches.
        #[arg(long)]
        selector: Option<String>,
    },
    List,
    Show {
        id: String,
    },
    Pause {
        id: String,
    },
    Resume {
        id: String,
    },
    Rm {
        id: String,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("1s"), Ok(Duration::from_secs(1)));
        assert_eq!(parse_duration("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert!(parse_duration("soon").is_err());
    }

    #[test]
    fn page_flags_set_the_typed_options() {
        let flags = PageFlags {
            formats: vec!["text".into(), "links".into()],
            all_content: true,
            headers: vec!["X-Trace: a:b".into()],
            ..Default::default()
        };
        let mut page = PageOptions::default();
        flags.apply(&mut page).unwrap();
        assert_eq!(page.formats, [Format::Text, Format::Links]);
        assert!(!page.only_main_content);
        assert_eq!(page.headers["X-Trace"], "a:b");
        let bad = PageFlags {
            formats: vec!["pdf".into()],
            ..Default::default()
        };
        assert!(bad.apply(&mut PageOptions::default()).is_err());
    }
}
