//! The client commands: submit jobs, wait for them politely, read their logs, trees and
//! results, cancel them, and manage monitors, against a SarvCrawl API.
//!
//! Exit codes: 0 the job completed (or the command succeeded), 1 the job failed, 2 usage
//! errors, 3 the job was cancelled, 4 the `--deadline` passed, 5 the API key was refused,
//! 6 the API answered an error or could not be reached.

mod api;
mod commands;
mod wait;

pub use commands::{run, ClientArgs, ClientCommand};

use api::Reply;
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
            Failure::Other(e) => {
                eprintln!("error: {e}");
                ExitCode::from(6)
            }
        }
    }
}
