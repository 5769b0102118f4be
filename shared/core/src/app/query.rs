//! Reading jobs: one job, a user's list, results, logs and the discovery tree.

use super::{App, AppError};
use crate::domain::{Job, JobId, JobKind, JobStatus, UserId};
use crate::ports::{JobQuery, LogEntry, NodeRow};
use futures::{StreamExt, TryStreamExt};
use serde_json::{json, Value};
use std::collections::HashMap;

/// Most document bytes one page of `/results` carries (besides its first document).
pub const RESULTS_PAGE_BYTES: usize = 4 * 1024 * 1024;

/// Trees larger than this answer their first nodes and `truncated: true`.
pub const MAX_TREE_NODES: u32 = 10_000;

/// The caller's job, or `NotFound` for a missing id and another user's job alike.
pub async fn job(app: &App, user: &UserId, id: &str) -> Result<Job, AppError> {
    let id = JobId::parse(id).ok_or(AppError::NotFound)?;
    app.jobs.get_job(user, &id).await?.ok_or(AppError::NotFound)
}

/// The inline result of a finished single-document job, when small enough.
pub async fn inline_result(app: &App, job: &Job) -> Result<Option<Value>, AppError> {
    if job.kind.has_pages() || !job.status.is_final() {
        return Ok(None);
    }
    let page = app.jobs.results(&job.user_id, &job.job_id, None, 1).await?;
    let Some(key) = page.entries.first().map(|e| &e.key) else {
        return Ok(None);
    };
    match app.blobs.get(key).await? {
        Some(b) if b.len() <= app.config.inline_result_bytes => Ok(serde_json::from_slice(&b).ok()),
        _ => Ok(None),
    }
}

/// A page of the user's jobs, newest first, and the cursor of the next page.
pub async fn list(
    app: &App,
    user: &UserId,
    kind: Option<JobKind>,
    status: Option<JobStatus>,
    limit: u32,
    cursor: Option<&str>,
) -> Result<(Vec<Job>, Option<String>), AppError> {
    let before = match cursor {
        Some(c) => Some(JobId::parse(c).ok_or_else(|| {
            AppError::Invalid(vec![crate::domain::validate::Problem {
                field: "cursor".into(),
                problem: "is not a cursor of this list".into(),
            }])
        })?),
        None => None,
    };
    let q = JobQuery {
        kind,
        status,
        limit: limit + 1,
        before,
    };
    let mut jobs = app.jobs.list_jobs(user, &q).await?;
    let next = if jobs.len() > limit as usize {
        jobs.truncate(limit as usize);
        jobs.last().map(|j| j.job_id.to_string())
    } else {
        None
    };
    Ok((jobs, next))
}

/// Documents of a results page read at once.
const RESULT_READS: usize = 32;

/// Documents of a job: `(documents, next_cursor, total)`.
pub async fn results(
    app: &App,
    user: &UserId,
    id: &str,
    cursor: Option<&str>,
    limit: u32,
) -> Result<(Vec<Value>, Option<String>, u64), AppError> {
    let job = job(app, user, id).await?;
    let page = app.jobs.results(user, &job.job_id, cursor, limit).await?;
    // Read side by side, a bounded number at a time, kept in order.
    let reads: Vec<_> = page
        .entries
        .iter()
        .map(|e| {
            let (blobs, key) = (app.blobs.clone(), e.key.clone());
            async move { blobs.get(&key).await }
        })
        .collect();
    let blobs: Vec<_> = futures::stream::iter(reads)
        .buffered(RESULT_READS)
        .try_collect()
        .await?;
    let mut docs = Vec::with_capacity(page.entries.len());
    let mut bytes = 0;
    let mut next = page.next_cursor;
    for (i, blob) in blobs.into_iter().enumerate() {
        let Some(blob) = blob else {
            continue;
        };
        // A page of results stays under the byte budget (Lambda answers at most 6 MB); the
        // rest follows with the cursor of the last document included.
        if !docs.is_empty() && bytes + blob.len() > RESULTS_PAGE_BYTES {
            next = Some(page.entries[i - 1].cursor.clone());
            break;
        }
        if let Ok(v) = serde_json::from_slice(&blob) {
            bytes += blob.len();
            docs.push(v);
        }
    }
    Ok((docs, next, page.total))
}

/// Log entries after `after`: `(entries, next_after)`.
pub async fn logs(
    app: &App,
    user: &UserId,
    id: &str,
    after: Option<u64>,
    limit: u32,
) -> Result<(Vec<LogEntry>, Option<u64>), AppError> {
    let job = job(app, user, id).await?;
    let entries = app.jobs.logs(user, &job.job_id, after, limit).await?;
    let next = entries.last().map(|e| e.seq).or(after);
    Ok((entries, next))
}

/// The discovery tree as API.md draws it.
pub async fn tree(app: &App, user: &UserId, id: &str) -> Result<Value, AppError> {
    let job = job(app, user, id).await?;
    let rows = app.jobs.tree(user, &job.job_id, MAX_TREE_NODES + 1).await?;
    let truncated = rows.len() > MAX_TREE_NODES as usize;
    let rows = &rows[..rows.len().min(MAX_TREE_NODES as usize)];
    let mut out = json!({"root": build_tree(rows), "nodes": rows.len()});
    if truncated {
        out["truncated"] = Value::Bool(true);
    }
    Ok(out)
}

fn node_json(row: &NodeRow) -> Value {
    let mut n = json!({
        "url": row.url,
        "status": row.status.as_str(),
        "depth": row.depth,
        "children": [],
    });
    if let Some(code) = row.status_code {
        n["status_code"] = json!(code);
    }
    if let Some(reason) = row.reason {
        n["reason"] = json!(reason.as_str());
    }
    n
}

/// Nests rows (in discovery order, parents before children) under their parents.
fn build_tree(rows: &[NodeRow]) -> Value {
    let index: HashMap<&str, usize> = rows
        .iter()
        .enumerate()
        .map(|(i, r)| (r.url.as_str(), i))
        .collect();
    let mut children: Vec<Vec<usize>> = vec![Vec::new(); rows.len()];
    let mut roots = Vec::new();
    for (i, r) in rows.iter().enumerate() {
        match r.parent.as_deref().and_then(|p| index.get(p)) {
            Some(&p) if p != i => children[p].push(i),
            _ => roots.push(i),
        }
    }
    // Iterative post-order so deep trees cannot exhaust the stack.
    fn assemble(i: usize, rows: &[NodeRow], children: &[Vec<usize>]) -> Value {
        let mut stack: Vec<(usize, bool)> = vec![(i, false)];
        let mut built: HashMap<usize, Value> = HashMap::new();
        while let Some((n, expanded)) = stack.pop() {
            if expanded {
                let mut v = node_json(&rows[n]);
                let kids: Vec<Value> = children[n].iter().filter_map(|c| built.remove(c)).collect();
                v["children"] = Value::Array(kids);
                built.insert(n, v);
            } else {
                stack.push((n, true));
                stack.extend(children[n].iter().map(|&c| (c, false)));
            }
        }
        built.remove(&i).unwrap_or(Value::Null)
    }
    match roots.first() {
        Some(&r) => assemble(r, rows, &children),
        None => Value::Null,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ports::{NodeStatus, SkipReason};

    fn row(url: &str, parent: Option<&str>, depth: u32) -> NodeRow {
        NodeRow {
            url: url.into(),
            parent: parent.map(String::from),
            depth,
            status: NodeStatus::Completed,
            status_code: Some(200),
            reason: None,
        }
    }

    #[test]
    fn nests_children_in_discovery_order() {
        let mut skipped = row("x", Some("a"), 1);
        skipped.status = NodeStatus::Skipped;
        skipped.status_code = None;
        skipped.reason = Some(SkipReason::External);
        let rows = vec![
            row("a", None, 0),
            row("b", Some("a"), 1),
            skipped,
            row("c", Some("b"), 2),
        ];
        let t = build_tree(&rows);
        assert_eq!(t["url"], "a");
        assert_eq!(t["children"][0]["url"], "b");
        assert_eq!(t["children"][0]["children"][0]["url"], "c");
        assert_eq!(t["children"][1]["reason"], "external");
        assert!(t["children"][1].get("status_code").is_none());
    }
}
