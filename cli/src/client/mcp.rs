//! `sarvcrawl mcp`: the Model Context Protocol over stdio (the official Rust SDK, `rmcp`), as a
//! client of any SarvCrawl API. Tools: `scrape`, `crawl` (answers the job id at once, followed
//! with `crawl_status` and `crawl_results`), `map`, `search`, `batch_scrape` and `extract`.
//! Answers are sized for a model's context: long Markdown is cut with a note saying how to read
//! on (`crawl_results` with an `offset`, which reads any job's documents), and long JSON from
//! `extract` the same way (`extract` with the job's id and an `offset`).

use super::api::{job_path, Api, Body};
use super::wait::{until_final, OnDeadline};
use super::{s, Failure};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    InitializeResult, JsonObject, ListToolsResult, PaginatedRequestParams, ServerCapabilities,
    ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;

/// Characters of Markdown an answer carries by default.
const MAX_CHARS: usize = 20_000;
/// How long a tool that waits for its job (scrape, map, search, extract) waits.
const WAIT: Duration = Duration::from_secs(120);
/// Lines of a map's URL list an answer carries at most.
const MAX_URLS: usize = 500;

/// Serves the tools on stdin and stdout until the client closes them.
pub async fn serve(api: Api) -> Result<(), Failure> {
    let running = Tools { api }
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|e| Failure::Other(format!("MCP: {e}")))?;
    running
        .waiting()
        .await
        .map_err(|e| Failure::Other(format!("MCP: {e}")))?;
    Ok(())
}

struct Tools {
    api: Api,
}

impl ServerHandler for Tools {
    fn get_info(&self) -> ServerConfig {
        InitializeResult::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("sarvcrawl", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "Web pages as clean Markdown: scrape one page, crawl a site (a job you follow \
                 with crawl_status and crawl_results), map a site's URLs, search the web, scrape \
                 a list of URLs, or extract structured data as JSON.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(tools()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args = request.arguments.unwrap_or_default();
        let answer = match request.name.as_ref() {
            "scrape" => self.scrape(&args).await,
            "crawl" => self.crawl(&args).await,
            "crawl_status" => self.status(&args).await,
            "crawl_results" => self.results(&args).await,
            "map" => self.map(&args).await,
            "search" => self.search(&args).await,
            "batch_scrape" => self.batch(&args).await,
            "extract" => self.extract(&args).await,
            other => {
                return Err(ErrorData::invalid_params(
                    format!("no tool is called {other}"),
                    None,
                ))
            }
        };
        Ok(match answer {
            Ok(text) => CallToolResult::success(vec![ContentBlock::text(text)]),
            Err(why) => CallToolResult::error(vec![ContentBlock::text(why)]),
        }
        .into())
    }
}

/// A tool: its name, what it does and its arguments' JSON Schema.
fn tool(name: &'static str, description: &'static str, schema: Value) -> Tool {
    let schema = match schema {
        Value::Object(o) => o,
        _ => JsonObject::new(),
    };
    Tool::new(name, description, Arc::new(schema))
}

fn object(properties: Value, required: &[&str]) -> Value {
    json!({"type": "object", "properties": properties, "required": required})
}

fn tools() -> Vec<Tool> {
    let url = json!({"type": "string", "description": "An absolute http(s) URL."});
    let job_id = json!({"type": "string", "description": "The job id a tool answered with."});
    let max_chars = json!({"type": "integer", "minimum": 100, "description": "Characters of Markdown to answer at most (20000 by default)."});
    let formats = json!({"type": "array", "items": {"type": "string"}, "description": "markdown (default), html, text, links, metadata."});
    vec![
        tool(
            "scrape",
            "One page as clean Markdown (its main content).",
            object(
                json!({"url": url, "render": {"type": "boolean", "description": "Run the page's scripts in a headless browser first."},
                       "only_main_content": {"type": "boolean"}, "formats": formats, "max_chars": max_chars}),
                &["url"],
            ),
        ),
        tool(
            "crawl",
            "Starts crawling a site from a URL; answers the job id at once. Follow it with crawl_status and read it with crawl_results.",
            object(
                json!({"url": url, "limit": {"type": "integer", "minimum": 1, "maximum": 10000, "description": "Pages at most (20 by default)."},
                       "max_depth": {"type": "integer", "minimum": 0},
                       "include_paths": {"type": "array", "items": {"type": "string"}, "description": "Regexes a URL path must match."},
                       "exclude_paths": {"type": "array", "items": {"type": "string"}}}),
                &["url"],
            ),
        ),
        tool(
            "crawl_status",
            "Where a job (a crawl, a batch, any job) stands: its status and page counts.",
            object(json!({"job_id": job_id}), &["job_id"]),
        ),
        tool(
            "crawl_results",
            "A job's documents as Markdown, a few at a time: pass the answer's cursor for the next ones, or an offset to read on in a cut document.",
            object(
                json!({"job_id": job_id, "cursor": {"type": "string"}, "limit": {"type": "integer", "minimum": 1, "maximum": 20, "description": "Documents per answer (5 by default)."},
                       "document": {"type": "integer", "minimum": 0, "description": "Show only the document at this position of the page (from 0)."},
                       "offset": {"type": "integer", "minimum": 0, "description": "Read the document shown (the first one, without document) from this character on."},
                       "max_chars": max_chars}),
                &["job_id"],
            ),
        ),
        tool(
            "map",
            "A site's URLs, from its sitemaps and links, without reading its pages.",
            object(
                json!({"url": url, "search": {"type": "string", "description": "Keep the URLs or titles containing this."},
                       "limit": {"type": "integer", "minimum": 1, "maximum": 30000}}),
                &["url"],
            ),
        ),
        tool(
            "search",
            "Searches the web (where the deployment has a search provider) and reads the hits.",
            object(
                json!({"query": {"type": "string"}, "limit": {"type": "integer", "minimum": 1, "maximum": 20},
                       "scrape": {"type": "boolean", "description": "Read each hit's page (true by default)."}, "max_chars": max_chars}),
                &["query"],
            ),
        ),
        tool(
            "batch_scrape",
            "Starts scraping a list of URLs as one job; answers the job id at once (follow it with crawl_status and crawl_results).",
            object(json!({"urls": {"type": "array", "items": url, "minItems": 1}, "formats": formats}), &["urls"]),
        ),
        tool(
            "extract",
            "Structured data from a page as JSON: a schema of CSS selectors (base_selector, fields), or a prompt and/or a JSON Schema read by the deployment's language model where it has one. A long answer is cut with a note: read on with the job_id and offset it gives (and no url).",
            object(
                json!({"url": url, "schema": {"type": "object", "description": "Selectors ({\"base_selector\"?, \"fields\": [...]}) or a JSON Schema."},
                       "prompt": {"type": "string"}, "render": {"type": "boolean"},
                       "job_id": {"type": "string", "description": "Instead of url: the extract job of a cut answer, read on from offset."},
                       "offset": {"type": "integer", "minimum": 0, "description": "With job_id: the character to read on from."},
                       "max_chars": {"type": "integer", "minimum": 100, "description": "Characters of JSON to answer at most (20000 by default)."}}),
                &[],
            ),
        ),
    ]
}

/// Copies the arguments named in `keys` that were given into `body`.
fn pass(args: &JsonObject, keys: &[&str], mut body: Value) -> Value {
    for k in keys {
        if let Some(v) = args.get(*k).filter(|v| !v.is_null()) {
            body[*k] = v.clone();
        }
    }
    body
}

fn text_arg(args: &JsonObject, key: &str) -> Result<String, String> {
    args.get(key)
        .and_then(Value::as_str)
        .map(str::to_string)
        .ok_or_else(|| format!("{key} is required"))
}

fn number_arg(args: &JsonObject, key: &str) -> Option<usize> {
    args.get(key)
        .and_then(Value::as_u64)
        .and_then(|n| usize::try_from(n).ok())
}

/// What went wrong, for the model to read.
fn said(f: Failure) -> String {
    match f {
        Failure::Api(r) => format!(
            "{} {}: {}{}",
            r.status,
            s(&r.body["error"]["code"]),
            s(&r.body["error"]["message"]),
            match r.body["error"]["details"].as_array() {
                Some(d) => format!(" {}", Value::Array(d.clone())),
                None => String::new(),
            }
        ),
        Failure::Auth => "the API refused the key (--api-key or SARVCRAWL_API_KEY)".into(),
        Failure::Network(e) | Failure::Other(e) | Failure::Usage(e) => e,
        Failure::Deadline(id) => format!(
            "job {id} is still running after {} s; follow it with crawl_status",
            WAIT.as_secs()
        ),
        Failure::JobFailed => "the job failed".into(),
        Failure::JobCancelled => "the job was cancelled".into(),
    }
}

/// `text` from character `offset`, at most `max` characters; when it is cut, a note saying
/// how to read on, from `read_on(end, total)` (the characters shown end at `end` of `total`).
fn window(
    text: &str,
    offset: usize,
    max: usize,
    read_on: &dyn Fn(usize, usize) -> String,
) -> String {
    let total = text.chars().count();
    let part: String = text.chars().skip(offset).take(max).collect();
    let end = offset + part.chars().count();
    if end < total {
        let hint = read_on(end, total);
        format!("{part}\n\n[cut: characters {offset}-{end} of {total}; {hint}]")
    } else {
        part
    }
}

/// The note of a cut document: the `crawl_results` call that shows document `document` of
/// the page at `cursor` of job `job_id` from where the cut was.
fn results_call(
    job_id: &str,
    cursor: Option<&str>,
    document: usize,
) -> impl Fn(usize, usize) -> String {
    let cursor = cursor.map_or(String::new(), |c| format!(", \"cursor\": {}", json!(c)));
    let job_id = json!(job_id);
    move |end, _| {
        format!("read on with crawl_results {{\"job_id\": {job_id}{cursor}, \"document\": {document}, \"offset\": {end}}}")
    }
}

impl Tools {
    /// Submits `body` to `path` and answers the job id.
    async fn submit(&self, path: &str, body: Value) -> Result<Value, String> {
        let reply = self
            .api
            .submit(path, Body::Json(body))
            .await
            .map_err(said)?;
        Ok(reply.body)
    }

    /// Submits, waits for the job's end and answers the final job (a failed job's error).
    async fn run(&self, path: &str, body: Value) -> Result<Value, String> {
        let accepted = self.submit(path, body).await?;
        let id = s(&accepted["job_id"]);
        let job = until_final(&self.api, &id, Some(WAIT), OnDeadline::Leave, true)
            .await
            .map_err(said)?;
        match job["status"].as_str() {
            Some("completed") => Ok(job),
            _ => Err(format!(
                "job {id} {}: {} {}",
                s(&job["status"]),
                s(&job["error"]["code"]),
                s(&job["error"]["message"])
            )),
        }
    }

    /// The job's one document: inline, or the first of its results.
    async fn document(&self, job: &Value) -> Result<Value, String> {
        if job["result"].is_object() {
            return Ok(job["result"].clone());
        }
        let id = s(&job["job_id"]);
        let page = self
            .api
            .get(&format!("{}/results?limit=1", job_path(&id)))
            .await
            .map_err(said)?;
        Ok(page.body["data"][0].clone())
    }

    async fn scrape(&self, args: &JsonObject) -> Result<String, String> {
        let url = text_arg(args, "url")?;
        let body = pass(
            args,
            &["render", "only_main_content", "formats"],
            json!({"url": url, "formats": ["markdown"]}),
        );
        let job = self.run("/api/scrape", body).await?;
        let doc = self.document(&job).await?;
        let max = number_arg(args, "max_chars").unwrap_or(MAX_CHARS);
        Ok(render_document(
            &doc,
            0,
            max,
            &results_call(&s(&job["job_id"]), None, 0),
        ))
    }

    async fn crawl(&self, args: &JsonObject) -> Result<String, String> {
        let url = text_arg(args, "url")?;
        let body = pass(
            args,
            &["limit", "max_depth", "include_paths", "exclude_paths"],
            json!({"url": url, "limit": 20}),
        );
        let job = self.submit("/api/crawl", body).await?;
        Ok(format!(
            "Crawl job {} is queued. Call crawl_status with this job_id to follow it, and \
             crawl_results to read its pages as they come.",
            s(&job["job_id"])
        ))
    }

    async fn status(&self, args: &JsonObject) -> Result<String, String> {
        let id = text_arg(args, "job_id")?;
        let job = self.api.get(&job_path(&id)).await.map_err(said)?.body;
        let p = &job["progress"];
        let mut out = format!(
            "job {id} ({}) is {}: {} of {} pages done, {} failed, {} queued",
            s(&job["kind"]),
            s(&job["status"]),
            p["pages_completed"],
            p["pages_discovered"],
            p["pages_failed"],
            p["pages_queued"]
        );
        if job["error"].is_object() {
            out.push_str(&format!(
                "; error {}: {}",
                s(&job["error"]["code"]),
                s(&job["error"]["message"])
            ));
        }
        Ok(out)
    }

    async fn results(&self, args: &JsonObject) -> Result<String, String> {
        let id = text_arg(args, "job_id")?;
        let document = number_arg(args, "document");
        let limit = number_arg(args, "limit")
            .unwrap_or(5)
            .max(document.map_or(1, |d| d + 1))
            .clamp(1, 20);
        let max = number_arg(args, "max_chars").unwrap_or(MAX_CHARS);
        let offset = number_arg(args, "offset").unwrap_or(0);
        let cursor = args.get("cursor").and_then(Value::as_str);
        let mut path = format!("{}/results?limit={limit}", job_path(&id));
        if let Some(c) = cursor {
            path.push_str(&format!("&cursor={}", url_encode(c)));
        }
        let page = self.api.get(&path).await.map_err(said)?.body;
        let docs = page["data"].as_array().cloned().unwrap_or_default();
        if docs.is_empty() {
            return Ok(format!(
                "job {id} has no documents yet (crawl_status says how it stands)"
            ));
        }
        if let Some(d) = document {
            let doc = docs
                .get(d)
                .ok_or_else(|| format!("this page of job {id} has {} documents", docs.len()))?;
            return Ok(render_document(
                doc,
                offset,
                max,
                &results_call(&id, cursor, d),
            ));
        }
        let share = (max / docs.len()).max(100);
        let mut out: Vec<String> = docs
            .iter()
            .enumerate()
            .map(|(i, d)| {
                let from = if i == 0 { offset } else { 0 };
                render_document(d, from, share, &results_call(&id, cursor, i))
            })
            .collect();
        match page["next_cursor"].as_str() {
            Some(c) => out.push(format!(
                "[{} of {} documents shown; the next ones: crawl_results {{\"job_id\": \"{id}\", \"cursor\": \"{c}\"}}]",
                docs.len(),
                page["total"]
            )),
            None => out.push(format!("[the last of {} documents]", page["total"])),
        }
        Ok(out.join("\n\n"))
    }

    async fn map(&self, args: &JsonObject) -> Result<String, String> {
        let url = text_arg(args, "url")?;
        let body = pass(args, &["search", "limit"], json!({"url": url}));
        let job = self.run("/api/map", body).await?;
        let links = job["result"]["links"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let mut lines: Vec<String> = links.iter().take(MAX_URLS).map(|l| s(&l["url"])).collect();
        if links.len() > MAX_URLS {
            lines.push(format!(
                "[{} more URLs; narrow the map with search]",
                links.len() - MAX_URLS
            ));
        }
        Ok(lines.join("\n"))
    }

    async fn search(&self, args: &JsonObject) -> Result<String, String> {
        let query = text_arg(args, "query")?;
        let body = pass(
            args,
            &["limit", "scrape"],
            json!({"query": query, "formats": ["markdown"]}),
        );
        let job = self.run("/api/search", body).await?;
        let hits = job["result"]["results"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let max = number_arg(args, "max_chars").unwrap_or(MAX_CHARS);
        let share = (max / hits.len().max(1)).max(100);
        let out: Vec<String> = hits
            .iter()
            .map(|h| {
                let mut entry = format!(
                    "## {}\n{}\n{}",
                    s(&h["title"]),
                    s(&h["url"]),
                    s(&h["snippet"])
                );
                if let Some(md) = h["document"]["markdown"].as_str() {
                    entry.push_str("\n\n");
                    let url = json!(s(&h["url"]));
                    let read_on = |_, total| {
                        format!("the whole page: scrape {{\"url\": {url}, \"max_chars\": {total}}}")
                    };
                    entry.push_str(&window(md, 0, share, &read_on));
                }
                entry
            })
            .collect();
        Ok(out.join("\n\n"))
    }

    async fn batch(&self, args: &JsonObject) -> Result<String, String> {
        let urls = args
            .get("urls")
            .cloned()
            .ok_or_else(|| "urls is required".to_string())?;
        let body = pass(args, &["formats"], json!({"urls": urls}));
        let job = self.submit("/api/batch/scrape", body).await?;
        Ok(format!(
            "Batch job {} is queued. Call crawl_status with this job_id to follow it, and \
             crawl_results to read its pages.",
            s(&job["job_id"])
        ))
    }

    /// Extracts from `url`, or with `job_id` shows an earlier extraction again (from `offset`,
    /// to read on in a cut one).
    async fn extract(&self, args: &JsonObject) -> Result<String, String> {
        let job = if args.contains_key("job_id") {
            let id = text_arg(args, "job_id")?;
            let job = self.api.get(&job_path(&id)).await.map_err(said)?.body;
            if job["status"] != "completed" {
                return Err(format!("job {id} is {}", s(&job["status"])));
            }
            job
        } else {
            let url = text_arg(args, "url").map_err(|_| "url or job_id is required")?;
            let extract = pass(args, &["schema", "prompt"], json!({}));
            let body = pass(
                args,
                &["render"],
                json!({"url": url, "formats": ["json"], "extract": extract}),
            );
            self.run("/api/scrape", body).await?
        };
        let doc = self.document(&job).await?;
        let json = serde_json::to_string_pretty(&doc["json"]).unwrap_or_default();
        let job_id = json!(s(&job["job_id"]));
        let read_on =
            |end, _| format!("read on with extract {{\"job_id\": {job_id}, \"offset\": {end}}}");
        let max = number_arg(args, "max_chars").unwrap_or(MAX_CHARS);
        let offset = number_arg(args, "offset").unwrap_or(0);
        Ok(window(&json, offset, max, &read_on))
    }
}

/// A document as the model reads it: its URL, and its Markdown (or its error).
fn render_document(
    doc: &Value,
    offset: usize,
    max: usize,
    read_on: &dyn Fn(usize, usize) -> String,
) -> String {
    let url = doc["url"]
        .as_str()
        .or(doc["requested_url"].as_str())
        .unwrap_or("");
    match doc["markdown"].as_str() {
        Some(md) => format!("# {url}\n\n{}", window(md, offset, max, read_on)),
        None => format!(
            "# {url}\n\n(no Markdown: {} {})",
            s(&doc["error"]["code"]),
            s(&doc["error"]["message"])
        ),
    }
}

fn url_encode(s: &str) -> String {
    url::form_urlencoded::byte_serialize(s.as_bytes()).collect()
}
