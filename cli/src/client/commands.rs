//! The client's subcommands and what each prints.

use super::api::{Api, Body, Reply};
use super::wait::{until_final, OnDeadline};
use super::Failure;
use clap::{Args, Subcommand};
use serde_json::{json, Map, Value};
use std::path::{Path, PathBuf};
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
}

impl PageFlags {
    fn add_to(&self, body: &mut Map<String, Value>) {
        if !self.formats.is_empty() {
            body.insert("formats".into(), json!(self.formats));
        }
        if self.all_content {
            body.insert("only_main_content".into(), json!(false));
        }
        if !self.include_selectors.is_empty() {
            body.insert("include_selectors".into(), json!(self.include_selectors));
        }
        if !self.exclude_selectors.is_empty() {
            body.insert("exclude_selectors".into(), json!(self.exclude_selectors));
        }
        if let Some(t) = self.timeout_ms {
            body.insert("timeout_ms".into(), json!(t));
        }
        if !self.headers.is_empty() {
            let headers: Map<String, Value> = self
                .headers
                .iter()
                .map(|h| match h.split_once(':') {
                    Some((k, v)) => (k.trim().to_string(), json!(v.trim())),
                    // The API says what is wrong with a header without a value.
                    None => (h.trim().to_string(), json!("")),
                })
                .collect();
            body.insert("headers".into(), Value::Object(headers));
        }
        if self.render {
            body.insert("render".into(), json!(true));
        }
        if let Some(w) = &self.wait_for {
            body.insert("wait_for".into(), json!(w));
        }
        if let Some(w) = self.wait_ms {
            body.insert("wait_ms".into(), json!(w));
        }
    }
}

/// Waiting for the job a command submits.
#[derive(Args, Debug)]
pub struct WaitFlags {
    /// Wait until the job is final and print its result.
    #[arg(long)]
    wait: bool,
    /// Give up waiting after this long (e.g. 30s, 5m, 1h); exits with 4 naming the job.
    #[arg(long, value_parser = parse_duration)]
    deadline: Option<Duration>,
    /// What happens to the job when the deadline passes.
    #[arg(long, value_enum, default_value = "leave")]
    on_deadline: OnDeadline,
    /// Write the job id to this file as soon as the job exists.
    #[arg(long)]
    job_file: Option<PathBuf>,
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
        /// Do not obey robots.txt.
        #[arg(long)]
        ignore_robots: bool,
        #[arg(long)]
        max_concurrency: Option<u64>,
        #[arg(long)]
        delay_ms: Option<u64>,
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
    /// Extract a document of your own (HTML, XHTML, text, Markdown, PDF; at most 4 MiB).
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

/// Runs a client command.
pub async fn run(args: ClientArgs, cmd: ClientCommand) -> Result<(), Failure> {
    let api = Api::new(&args.api_url, args.api_key.clone())?;
    let out = Out { json: args.json };
    match cmd {
        ClientCommand::Scrape { url, page, wait } => {
            let mut body = Map::new();
            body.insert("url".into(), json!(url));
            page.add_to(&mut body);
            submit(
                &api,
                &out,
                "/api/scrape",
                Body::Json(Value::Object(body)),
                &wait,
            )
            .await
        }
        ClientCommand::Crawl {
            url,
            limit,
            max_depth,
            include_paths,
            exclude_paths,
            allow_subdomains,
            allow_external,
            no_sitemap,
            ignore_robots,
            max_concurrency,
            delay_ms,
            page,
            wait,
        } => {
            let mut body = Map::new();
            body.insert("url".into(), json!(url));
            let optional = [
                ("limit", limit),
                ("max_depth", max_depth),
                ("max_concurrency", max_concurrency),
                ("delay_ms", delay_ms),
            ];
            for (k, v) in optional {
                if let Some(v) = v {
                    body.insert(k.into(), json!(v));
                }
            }
            if !include_paths.is_empty() {
                body.insert("include_paths".into(), json!(include_paths));
            }
            if !exclude_paths.is_empty() {
                body.insert("exclude_paths".into(), json!(exclude_paths));
            }
            for (k, on) in [
                ("allow_subdomains", allow_subdomains),
                ("allow_external", allow_external),
            ] {
                if on {
                    body.insert(k.into(), json!(true));
                }
            }
            for (k, off) in [
                ("use_sitemap", no_sitemap),
                ("respect_robots", ignore_robots),
            ] {
                if off {
                    body.insert(k.into(), json!(false));
                }
            }
            page.add_to(&mut body);
            submit(
                &api,
                &out,
                "/api/crawl",
                Body::Json(Value::Object(body)),
                &wait,
            )
            .await
        }
        ClientCommand::Map {
            url,
            limit,
            search,
            no_sitemap,
            include_subdomains,
            wait,
        } => {
            let mut body = json!({"url": url});
            if let Some(l) = limit {
                body["limit"] = json!(l);
            }
            if let Some(s) = search {
                body["search"] = json!(s);
            }
            if no_sitemap {
                body["use_sitemap"] = json!(false);
            }
            if include_subdomains {
                body["include_subdomains"] = json!(true);
            }
            submit(&api, &out, "/api/map", Body::Json(body), &wait).await
        }
        ClientCommand::Search {
            query,
            limit,
            no_scrape,
            page,
            wait,
        } => {
            let mut body = Map::new();
            body.insert("query".into(), json!(query));
            if let Some(l) = limit {
                body.insert("limit".into(), json!(l));
            }
            if no_scrape {
                body.insert("scrape".into(), json!(false));
            }
            page.add_to(&mut body);
            submit(
                &api,
                &out,
                "/api/search",
                Body::Json(Value::Object(body)),
                &wait,
            )
            .await
        }
        ClientCommand::Upload {
            file,
            content_type,
            base_url,
            formats,
            wait,
        } => {
            let bytes = std::fs::read(&file)
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
            submit(&api, &out, &path, body, &wait).await
        }
        ClientCommand::Monitor(m) => monitor(&api, &out, m).await,
        ClientCommand::Jobs {
            kind,
            status,
            limit,
        } => {
            let mut q = url::form_urlencoded::Serializer::new(String::new());
            q.append_pair("limit", &limit.to_string());
            if let Some(k) = &kind {
                q.append_pair("kind", k);
            }
            if let Some(s) = &status {
                q.append_pair("status", s);
            }
            let r = api.get(&format!("/api/jobs?{}", q.finish())).await?;
            for j in r.body["jobs"].as_array().cloned().unwrap_or_default() {
                out.line(&j, || {
                    format!(
                        "{}  {:<8} {:<10} {}",
                        s(&j["job_id"]),
                        s(&j["kind"]),
                        s(&j["status"]),
                        s(&j["created_at"])
                    )
                });
            }
            Ok(())
        }
        ClientCommand::Status { id } => {
            let job = api.get(&format!("/api/jobs/{id}")).await?.body;
            out.line(&job, || describe(&job));
            Ok(())
        }
        ClientCommand::Logs { id, follow } => logs(&api, &out, &id, follow).await,
        ClientCommand::Tree { id } => {
            let tree = api.get(&format!("/api/jobs/{id}/tree")).await?.body;
            if out.json {
                println!("{tree}");
            } else {
                draw(&tree["root"], 0);
                if tree["truncated"] == true {
                    println!("(truncated: the first {} nodes)", tree["nodes"]);
                }
            }
            Ok(())
        }
        ClientCommand::Results { id, all, out: dir } => results(&api, &out, &id, all, dir).await,
        ClientCommand::Cancel { id } => {
            let path = format!("/api/jobs/{id}/cancel");
            let r = api
                .send(reqwest::Method::DELETE, &path, &Body::None, None)
                .await?;
            out.line(&r.body, || {
                format!("{} {}", s(&r.body["job_id"]), s(&r.body["status"]))
            });
            Ok(())
        }
    }
}

/// How results are printed.
struct Out {
    json: bool,
}

impl Out {
    fn line(&self, v: &Value, text: impl FnOnce() -> String) {
        if self.json {
            println!("{v}");
        } else {
            println!("{}", text());
        }
    }
}

fn s(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "-".into(),
        other => other.to_string(),
    }
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

fn describe(job: &Value) -> String {
    let p = &job["progress"];
    let mut line = format!(
        "{} {} {}: {} completed, {} failed, {} queued of {} discovered",
        s(&job["job_id"]),
        s(&job["kind"]),
        s(&job["status"]),
        p["pages_completed"],
        p["pages_failed"],
        p["pages_queued"],
        p["pages_discovered"]
    );
    if let Some(e) = job["error"].as_object() {
        line.push_str(&format!("; error {}: {}", s(&e["code"]), s(&e["message"])));
    }
    line
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

async fn logs(api: &Api, out: &Out, id: &str, follow: bool) -> Result<(), Failure> {
    let mut after: Option<u64> = None;
    let mut pause = Duration::from_millis(500);
    loop {
        let path = match after {
            Some(a) => format!("/api/jobs/{id}/logs?limit=1000&after={a}"),
            None => format!("/api/jobs/{id}/logs?limit=1000"),
        };
        let r = api.get(&path).await?;
        let entries = r.body["entries"].as_array().cloned().unwrap_or_default();
        for e in &entries {
            out.line(e, || {
                let url = e["url"]
                    .as_str()
                    .map(|u| format!(" {u}"))
                    .unwrap_or_default();
                format!(
                    "{} {:<5}{url} {}",
                    s(&e["at"]),
                    s(&e["level"]),
                    s(&e["message"])
                )
            });
        }
        after = r.body["next_after"].as_u64().or(after);
        if entries.len() == 1000 {
            continue;
        }
        if !follow {
            return Ok(());
        }
        let job = api.get(&format!("/api/jobs/{id}")).await?.body;
        if matches!(
            job["status"].as_str(),
            Some("completed" | "failed" | "cancelled")
        ) {
            // One more read catches entries written with the final status.
            let path = format!(
                "/api/jobs/{id}/logs?limit=1000&after={}",
                after.unwrap_or(0)
            );
            for e in api.get(&path).await?.body["entries"]
                .as_array()
                .cloned()
                .unwrap_or_default()
            {
                out.line(&e, || {
                    format!("{} {:<5} {}", s(&e["at"]), s(&e["level"]), s(&e["message"]))
                });
            }
            return Ok(());
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 3 / 2).min(Duration::from_secs(5));
    }
}

/// The tree, one node a line, indented by depth, with a status mark.
fn draw(node: &Value, indent: usize) {
    let mark = match node["status"].as_str() {
        Some("completed") => "✓",
        Some("failed") => "✗",
        Some("running") => "…",
        Some("skipped") => "-",
        Some("cancelled") => "⊘",
        _ => "·",
    };
    let mut line = format!("{}{mark} {}", "  ".repeat(indent), s(&node["url"]));
    if let Some(code) = node["status_code"].as_u64() {
        line.push_str(&format!(" ({code})"));
    }
    if let Some(reason) = node["reason"].as_str() {
        line.push_str(&format!(" [{reason}]"));
    }
    println!("{line}");
    for child in node["children"].as_array().cloned().unwrap_or_default() {
        draw(&child, indent + 1);
    }
}

async fn results(
    api: &Api,
    out: &Out,
    id: &str,
    all: bool,
    dir: Option<PathBuf>,
) -> Result<(), Failure> {
    if let Some(d) = &dir {
        std::fs::create_dir_all(d)
            .map_err(|e| Failure::Other(format!("cannot create {}: {e}", d.display())))?;
    }
    let mut cursor: Option<String> = None;
    let mut names = std::collections::HashSet::new();
    loop {
        let path = match &cursor {
            Some(c) => format!("/api/jobs/{id}/results?limit=100&cursor={c}"),
            None => format!("/api/jobs/{id}/results?limit=100"),
        };
        let r = api.get(&path).await?;
        for doc in r.body["data"].as_array().cloned().unwrap_or_default() {
            match &dir {
                Some(d) => write_markdown(d, &doc, &mut names)?,
                None => out.line(&doc, || {
                    format!(
                        "# {}\n\n{}\n",
                        s(&doc["url"]),
                        doc["markdown"].as_str().unwrap_or("")
                    )
                }),
            }
        }
        cursor = r.body["next_cursor"].as_str().map(str::to_string);
        if cursor.is_none() || !all {
            break;
        }
    }
    if let Some(d) = &dir {
        eprintln!("{} documents written to {}", names.len(), d.display());
    }
    Ok(())
}

/// Writes a document's Markdown to `<dir>/<host and path>.md` (a failed page: its error).
/// URLs that map to one name (`/x/y`, `/x_y`, `/x?y`) get `-2`, `-3` ... so that no document
/// of the run overwrites another; `names` holds the names the run has used.
fn write_markdown(
    dir: &Path,
    doc: &Value,
    names: &mut std::collections::HashSet<String>,
) -> Result<(), Failure> {
    let url = doc["url"]
        .as_str()
        .or(doc["requested_url"].as_str())
        .unwrap_or("document");
    let stem: String = url
        .split("://")
        .last()
        .unwrap_or(url)
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(150)
        .collect();
    let text = match doc["markdown"].as_str() {
        Some(md) => md.to_string(),
        None => format!("<!-- {url}: {} -->\n", doc["error"]),
    };
    let stem = stem.trim_matches('_');
    let mut name = format!("{stem}.md");
    let mut n = 1;
    while !names.insert(name.clone()) {
        n += 1;
        name = format!("{stem}-{n}.md");
    }
    let path = dir.join(name);
    std::fs::write(&path, text)
        .map_err(|e| Failure::Other(format!("cannot write {}: {e}", path.display())))
}

async fn monitor(api: &Api, out: &Out, cmd: MonitorCommand) -> Result<(), Failure> {
    let show = |m: &Value| {
        format!(
            "{} {} {} every {} s; {} checks, {} changes; next {}",
            s(&m["monitor_id"]),
            s(&m["status"]),
            s(&m["url"]),
            s(&m["interval_seconds"]),
            s(&m["checks"]),
            s(&m["changes"]),
            s(&m["next_check_at"])
        )
    };
    let patch = |id: &str, status: &str| {
        let path = format!("/api/monitors/{id}");
        let body = Body::Json(json!({ "status": status }));
        async move { api.send(reqwest::Method::PATCH, &path, &body, None).await }
    };
    match cmd {
        MonitorCommand::Add {
            url,
            notify,
            interval,
            selector,
        } => {
            let mut body = json!({"url": url, "notify_url": notify});
            if let Some(i) = interval {
                body["interval_seconds"] = json!(i);
            }
            if let Some(sel) = selector {
                body["selector"] = json!(sel);
            }
            let r = api.submit("/api/monitors", Body::Json(body)).await?;
            out.line(&r.body, || {
                format!(
                    "monitor {}\nsecret {} (shown once: keep it to verify webhooks)\nfirst check: job {}",
                    s(&r.body["monitor_id"]),
                    s(&r.body["secret"]),
                    s(&r.body["job_id"])
                )
            });
        }
        MonitorCommand::List => {
            let r = api.get("/api/monitors").await?;
            for m in r.body["monitors"].as_array().cloned().unwrap_or_default() {
                out.line(&m, || show(&m));
            }
        }
        MonitorCommand::Show { id } => {
            let m = api.get(&format!("/api/monitors/{id}")).await?.body;
            out.line(&m, || show(&m));
        }
        MonitorCommand::Pause { id } => {
            let m = patch(&id, "paused").await?.body;
            out.line(&m, || show(&m));
        }
        MonitorCommand::Resume { id } => {
            let m = patch(&id, "active").await?.body;
            out.line(&m, || show(&m));
        }
        MonitorCommand::Rm { id } => {
            let path = format!("/api/monitors/{id}");
            api.send(reqwest::Method::DELETE, &path, &Body::None, None)
                .await?;
            out.line(&json!({"monitor_id": id, "deleted": true}), || {
                format!("{id} deleted")
            });
        }
    }
    Ok(())
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
}
