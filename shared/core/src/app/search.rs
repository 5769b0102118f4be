//! A search job: the configured provider's hits for a query, each scraped (when asked) with the
//! request's page options. A hit that fails carries its error; the job still completes.

use super::page::{fetch_pages, Produced};
use super::runtime::JobRuntime;
use super::{submit, App, AppError};
use crate::domain::{ErrorCode, Job, JobError, JobKind, SearchRequest, UserId};
use crate::ports::{NewLog, StoreResult};
use serde_json::json;

/// Hits scraped at once.
pub(crate) const CONCURRENCY: usize = 5;

/// The name of a search job's one node and document.
pub(crate) fn node_name(query: &str) -> String {
    format!(
        "search:{}",
        url::form_urlencoded::byte_serialize(query.as_bytes()).collect::<String>()
    )
}

/// `POST /api/search`: validates the body, stores the job and queues it (503 without a search
/// provider).
pub async fn submit(app: &App, user: &UserId, body: &[u8]) -> Result<Job, AppError> {
    let req = SearchRequest::parse(body).map_err(AppError::Invalid)?;
    if app.search.is_none() {
        return Err(AppError::SearchUnavailable);
    }
    let renders = req.scrape && req.page.render;
    submit::new_job(
        app,
        user,
        JobKind::Search,
        &req,
        node_name(&req.query),
        renders,
    )
    .await
}

/// Runs a search; `None` when the job was cancelled meanwhile.
pub(crate) async fn run(
    app: &App,
    job: &Job,
    req: &SearchRequest,
    rt: &JobRuntime,
    logs: &mut Vec<NewLog>,
) -> StoreResult<Option<Produced>> {
    let name = node_name(&req.query);
    let Some(provider) = app.search.clone() else {
        let e = JobError::new(
            ErrorCode::SearchUnavailable,
            "no search provider is configured",
        );
        return Ok(Some(Produced::result(&name, Err(e))));
    };
    let hits = match provider.search(&req.query, req.limit as usize).await {
        Ok(h) => h,
        Err(e) => {
            tracing::warn!(provider = provider.name(), error = %e, "search failed");
            let e = JobError::new(
                ErrorCode::SearchUnavailable,
                format!("the search provider ({}) failed", provider.name()),
            );
            return Ok(Some(Produced::result(&name, Err(e))));
        }
    };
    logs.push(NewLog::info(format!(
        "{}: {} hits",
        provider.name(),
        hits.len()
    )));
    let mut results = Vec::with_capacity(hits.len());
    if !req.scrape {
        for h in &hits {
            results.push(json!({"url": h.url, "title": h.title, "snippet": h.snippet}));
        }
        return Ok(Some(Produced::result(
            &name,
            Ok(json!({ "results": results })),
        )));
    }
    let urls: Vec<&str> = hits.iter().map(|h| h.url.as_str()).collect();
    let Some(pages) = fetch_pages(app, job, &req.page, rt, &urls, logs).await? else {
        return Ok(None);
    };
    let mut tokens = 0;
    for (hit, page) in hits.iter().zip(pages) {
        let page = Produced::page(&hit.url, page);
        tokens += page.tokens;
        logs.push(
            match (&page.error, page.status_code) {
                (Some(e), _) => {
                    NewLog::warn(format!("failed: {} ({})", e.code.as_str(), e.message))
                }
                (None, code) => NewLog::info(format!("fetched ({})", code.unwrap_or_default())),
            }
            .at(hit.url.clone()),
        );
        results.push(json!({
            "url": hit.url, "title": hit.title, "snippet": hit.snippet, "document": page.doc
        }));
    }
    let mut produced = Produced::result(&name, Ok(json!({ "results": results })));
    produced.tokens = tokens;
    Ok(Some(produced))
}
