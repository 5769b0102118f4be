//! The commands that follow jobs: list them, show one, its log (`--follow`), its tree, its
//! documents (`--out` writes one Markdown file each), and cancel one.

use super::api::{job_path, Api, Body};
use super::{s, Failure, Out};
use serde_json::Value;
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub async fn list(
    api: &Api,
    out: &Out,
    kind: Option<String>,
    status: Option<String>,
    limit: u32,
) -> Result<(), Failure> {
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

pub async fn status(api: &Api, out: &Out, id: &str) -> Result<(), Failure> {
    let job = api.get(&job_path(id)).await?.body;
    out.line(&job, || describe(&job));
    Ok(())
}

pub async fn tree(api: &Api, out: &Out, id: &str) -> Result<(), Failure> {
    let tree = api.get(&format!("{}/tree", job_path(id))).await?.body;
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

pub async fn cancel(api: &Api, out: &Out, id: &str) -> Result<(), Failure> {
    let path = format!("{}/cancel", job_path(id));
    let r = api
        .send(reqwest::Method::DELETE, &path, &Body::None, None)
        .await?;
    out.line(&r.body, || {
        format!("{} {}", s(&r.body["job_id"]), s(&r.body["status"]))
    });
    Ok(())
}

/// Shows the webhook signing secret, or rotates it first.
pub async fn webhook_secret(api: &Api, out: &Out, rotate: bool) -> Result<(), Failure> {
    let (method, path) = if rotate {
        (reqwest::Method::POST, "/api/webhooks/secret/rotate")
    } else {
        (reqwest::Method::GET, "/api/webhooks/secret")
    };
    let r = api.send(method, path, &Body::None, None).await?;
    out.line(&r.body, || s(&r.body["secret"]));
    if let Some(until) = r.body["previous_expires_at"].as_str() {
        if !out.json {
            eprintln!("the previous secret signs too until {until}");
        }
    }
    Ok(())
}

/// A job in one line: its counters, error and webhook deliveries.
pub fn describe(job: &Value) -> String {
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
    if let Some(w) = job["webhook"].as_object() {
        line.push_str(&format!(
            "; webhook {} delivered, {} failed, {} pending",
            w["delivered"], w["failed"], w["pending"]
        ));
    }
    line
}

pub async fn logs(api: &Api, out: &Out, id: &str, follow: bool) -> Result<(), Failure> {
    let jobs = job_path(id);
    let mut after: Option<u64> = None;
    let mut pause = Duration::from_millis(500);
    loop {
        let path = match after {
            Some(a) => format!("{jobs}/logs?limit=1000&after={a}"),
            None => format!("{jobs}/logs?limit=1000"),
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
        let job = api.get(&jobs).await?.body;
        if matches!(
            job["status"].as_str(),
            Some("completed" | "failed" | "cancelled")
        ) {
            // One more read catches entries written with the final status.
            let path = format!("{jobs}/logs?limit=1000&after={}", after.unwrap_or(0));
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

pub async fn results(
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
    let jobs = job_path(id);
    let mut cursor: Option<String> = None;
    let mut names = HashSet::new();
    let mut screenshots = 0;
    loop {
        let path = match &cursor {
            Some(c) => format!("{jobs}/results?limit=100&cursor={c}"),
            None => format!("{jobs}/results?limit=100"),
        };
        let r = api.get(&path).await?;
        for doc in r.body["data"].as_array().cloned().unwrap_or_default() {
            match &dir {
                Some(d) => {
                    let written = write_markdown(d, &doc, &mut names)?;
                    if let Some(url) = doc["screenshot"]["url"].as_str() {
                        let png = written.with_extension("png");
                        let bytes = api.download(url).await?;
                        std::fs::write(&png, bytes).map_err(|e| {
                            Failure::Other(format!("cannot write {}: {e}", png.display()))
                        })?;
                        screenshots += 1;
                    }
                }
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
        if screenshots > 0 {
            eprintln!("{screenshots} screenshots written beside them");
        }
    }
    Ok(())
}

/// Writes a document's Markdown to `<dir>/<host and path>.md` (a failed page: its error) and
/// says where. URLs that map to one name (`/x/y`, `/x_y`, `/x?y`) get `-2`, `-3` ... so that
/// no document of the run overwrites another; `names` holds the names the run has used.
fn write_markdown(
    dir: &Path,
    doc: &Value,
    names: &mut HashSet<String>,
) -> Result<PathBuf, Failure> {
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
        .map_err(|e| Failure::Other(format!("cannot write {}: {e}", path.display())))?;
    Ok(path)
}
