//! The client commands: submit jobs, wait for them politely, read their logs, trees and
//! results, cancel them, and manage monitors, against a SarvCrawl API.
//!
//! Exit codes: 0 the job completed (or the command succeeded), 1 the job failed, 2 usage
//! errors, 3 the job was cancelled, 4 the `--deadline` passed, 5 the API key was refused,
//! 6 the API answered an error or could not be reached.

mod api;
mod args;
mod jobs;
mod mcp;
mod monitors;
mod submit;
mod wait;

pub use args::{ClientArgs, ClientCommand};

use api::{Api, Reply};
use serde_json::Value;
use std::process::ExitCode;

/// Why a client command did not succeed.
#[derive(Debug)]
pub enum Failure {
    /// The job ended `failed`.
    JobFailed,
    /// The job ended `cancelled`.
    JobCancelled,
    /// The deadline passed; the job id is named.
    Deadline(String),
    /// 401: no or a wrong API key.
    Auth,
    /// Another error answer.
    Api(Reply),
    /// The API could not be reached.
    Network(String),
    /// Options that do not make a request (an unknown format, a header without a value).
    Usage(String),
    /// Anything else (a file, the terminal).
    Other(String),
}

impl Failure {
    /// Says what happened on stderr and gives the documented exit code.
    pub fn report(self) -> ExitCode {
        match self {
            Failure::JobFailed => ExitCode::from(1),
            Failure::JobCancelled => ExitCode::from(3),
            Failure::Deadline(id) => {
                eprintln!("deadline passed; job {id}");
                ExitCode::from(4)
            }
            Failure::Auth => {
                eprintln!("error: the API refused the key (set --api-key or SARVCRAWL_API_KEY)");
                ExitCode::from(5)
            }
            Failure::Api(r) => {
                let e = &r.body["error"];
                eprintln!(
                    "error: {} {}: {}",
                    r.status,
                    e["code"].as_str().unwrap_or("?"),
                    e["message"].as_str().unwrap_or("")
                );
                if let Some(details) = e["details"].as_array() {
                    for d in details {
                        eprintln!(
                            "  {}: {}",
                            d["field"].as_str().unwrap_or("?"),
                            d["problem"].as_str().unwrap_or("")
                        );
                    }
                }
                if let Some(active) = e["active_job_id"].as_str() {
                    eprintln!("  active job: {active}");
                }
                ExitCode::from(6)
            }
            Failure::Network(e) => {
                eprintln!("error: the API could not be reached: {e}");
                ExitCode::from(6)
            }
            Failure::Usage(e) => {
                eprintln!("error: {e}");
                ExitCode::from(2)
            }
            Failure::Other(e) => {
                eprintln!("error: {e}");
                ExitCode::from(6)
            }
        }
    }
}

/// Runs a client command.
pub async fn run(args: ClientArgs, cmd: ClientCommand) -> Result<(), Failure> {
    let api = Api::new(&args.api_url, args.api_key.clone())?;
    let out = Out { json: args.json };
    match cmd {
        ClientCommand::Scrape {
            url,
            out: dir,
            page,
            mut wait,
        } => {
            // Files are written once the page is done: an output directory means waiting.
            wait.wait |= dir.is_some();
            submit::scrape(&api, &out, url, &page, &wait, dir).await
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
            pace,
            page,
            wait,
        } => {
            let flags = submit::CrawlFlags {
                limit,
                max_depth,
                include_paths,
                exclude_paths,
                allow_subdomains,
                allow_external,
                no_sitemap,
                pace,
            };
            submit::crawl(&api, &out, url, flags, &page, &wait).await
        }
        ClientCommand::Batch {
            file,
            ignore_invalid_urls,
            pace,
            out: dir,
            page,
            wait,
        } => {
            let flags = submit::BatchFlags {
                ignore_invalid_urls,
                pace,
                dir,
            };
            submit::batch(&api, &out, &file, flags, &page, &wait).await
        }
        ClientCommand::Map {
            url,
            limit,
            search,
            no_sitemap,
            include_subdomains,
            wait,
        } => {
            let flags = submit::MapFlags {
                limit,
                search,
                no_sitemap,
                include_subdomains,
            };
            submit::map(&api, &out, url, flags, &wait).await
        }
        ClientCommand::Search {
            query,
            limit,
            no_scrape,
            page,
            wait,
        } => submit::search(&api, &out, query, limit, no_scrape, &page, &wait).await,
        ClientCommand::Upload {
            file,
            content_type,
            base_url,
            formats,
            wait,
        } => submit::upload(&api, &out, &file, content_type, base_url, &formats, &wait).await,
        ClientCommand::Monitor(m) => monitors::run(&api, &out, m).await,
        ClientCommand::Jobs {
            kind,
            status,
            limit,
        } => jobs::list(&api, &out, kind, status, limit).await,
        ClientCommand::Status { id } => jobs::status(&api, &out, &id).await,
        ClientCommand::Logs { id, follow } => jobs::logs(&api, &out, &id, follow).await,
        ClientCommand::Tree { id } => jobs::tree(&api, &out, &id).await,
        ClientCommand::Results { id, all, out: dir } => {
            jobs::results(&api, &out, &id, all, dir).await
        }
        ClientCommand::Cancel { id } => jobs::cancel(&api, &out, &id).await,
        ClientCommand::WebhookSecret { rotate } => jobs::webhook_secret(&api, &out, rotate).await,
        ClientCommand::Mcp => mcp::serve(api).await,
    }
}

/// How results are printed.
pub struct Out {
    pub json: bool,
}

impl Out {
    pub fn line(&self, v: &Value, text: impl FnOnce() -> String) {
        if self.json {
            println!("{v}");
        } else {
            println!("{}", text());
        }
    }
}

/// A value as text (`-` for null).
pub fn s(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "-".into(),
        other => other.to_string(),
    }
}
