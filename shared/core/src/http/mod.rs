//! Transport-neutral HTTP handlers: `http::Request` in, `http::Response` out, one function per
//! route, errors mapped to API.md's bodies here and nowhere else.

mod idempotency;
mod response;

use crate::app::artifact::{self, Artifact};
use crate::app::{
    batch, cancel, crawl, map, monitor, query, scrape, search, upload, webhook, App, AppError,
};
use crate::domain::validate::Problem;
use crate::domain::{Job, JobKind, JobStatus, UserId};
use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use response::{error, json_response};
use serde_json::{json, Value};
use std::collections::HashMap;

pub use response::{error_response, ErrorBody};

/// Largest JSON body a submit route reads.
pub const MAX_JSON_BODY: usize = 1024 * 1024;
/// Largest body a transport passes on: an upload's document and its multipart framing.
pub const MAX_BODY: usize = upload::MAX_UPLOAD + 64 * 1024;

/// Largest body of a batch: ten thousand URLs with their options.
pub const MAX_BATCH_BODY: usize = 4 * 1024 * 1024;

/// `GET /api/health`, which needs no key.
pub fn health() -> Response<Bytes> {
    json_response(
        StatusCode::OK,
        &json!({"status": "ok", "version": crate::VERSION}),
    )
}

/// Whether a request is `GET /api/health`, the one route that needs no key.
pub fn is_health(method: &Method, path: &str) -> bool {
    method == Method::GET && path.trim_end_matches('/') == "/api/health"
}

/// The answer to a request without a valid key.
pub fn unauthorized() -> Response<Bytes> {
    error_response(
        StatusCode::UNAUTHORIZED,
        ErrorBody::new("UNAUTHORIZED", "a valid API key is required"),
    )
}

/// The answer to a body over [`MAX_BODY`], which a transport stops reading.
pub fn too_large() -> Response<Bytes> {
    error(AppError::TooLarge(MAX_BODY))
}

/// Routes an authenticated request.
pub async fn handle(app: &App, user: &UserId, req: Request<Bytes>) -> Response<Bytes> {
    let path = req.uri().path().trim_end_matches('/').to_string();
    let query = parse_query(req.uri().query());
    let segments: Vec<&str> = path.split('/').skip(1).collect();
    let result = match (req.method(), segments.as_slice()) {
        (&Method::GET, ["api", "health"]) => return health(),
        // A document announced by its size: the answer says where to PUT it.
        (&Method::POST, ["api", "upload"])
            if req
                .headers()
                .get(http::header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .is_some_and(|ct| ct.trim_start().starts_with("application/json")) =>
        {
            let query: std::collections::BTreeMap<_, _> = query.into_iter().collect();
            let submit = async {
                let a = upload::announce(app, user, &query, req.body()).await?;
                let mut body = accepted_json(&a.job);
                body["upload_url"] = json!(a.upload_url);
                Ok(accepted_body(&body))
            };
            idempotency::once(app, user, &req, submit).await
        }
        (&Method::POST, ["api", "upload"]) => {
            let content_type = req
                .headers()
                .get(http::header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok());
            let query: std::collections::BTreeMap<_, _> = query.into_iter().collect();
            let submit = upload::submit(app, user, &query, content_type, req.body().clone());
            submitted(app, user, &req, submit).await
        }
        (&Method::POST, ["api", "batch", "scrape"]) if req.body().len() > MAX_BATCH_BODY => {
            Err(AppError::TooLarge(MAX_BATCH_BODY))
        }
        // A list of URLs may be longer than other submits' bodies: up to [`MAX_BATCH_BODY`].
        (&Method::POST, ["api", "batch", "scrape"]) => {
            let submit = async {
                let s = batch::submit(app, user, req.body()).await?;
                let mut body = accepted_json(&s.job);
                if !s.invalid_urls.is_empty() {
                    body["invalid_urls"] = json!(s.invalid_urls);
                }
                Ok(accepted_body(&body))
            };
            idempotency::once(app, user, &req, submit).await
        }
        (&Method::POST, ["api", "monitors"]) if req.body().len() <= MAX_JSON_BODY => {
            let create = async {
                let (m, job) = monitor::create(app, user, req.body()).await?;
                let mut body = accepted_json(&job);
                body["monitor_id"] = json!(m.monitor_id);
                body["secret"] = json!(m.secret);
                Ok(accepted_body(&body))
            };
            idempotency::once(app, user, &req, create).await
        }
        (&Method::GET, ["api", "monitors"]) => monitor::list(app, user).await.map(|ms| {
            let list: Vec<Value> = ms.iter().map(monitor::to_json).collect();
            json_response(StatusCode::OK, &json!({ "monitors": list }))
        }),
        (&Method::GET, ["api", "monitors", id]) => monitor::get(app, user, id)
            .await
            .map(|m| json_response(StatusCode::OK, &monitor::to_json(&m))),
        (&Method::PATCH, ["api", "monitors", id]) if req.body().len() <= MAX_JSON_BODY => {
            monitor::patch(app, user, id, req.body())
                .await
                .map(|m| json_response(StatusCode::OK, &monitor::to_json(&m)))
        }
        (&Method::DELETE, ["api", "monitors", id]) => {
            monitor::delete(app, user, id).await.map(|()| {
                let mut resp = Response::new(Bytes::new());
                *resp.status_mut() = StatusCode::NO_CONTENT;
                resp
            })
        }
        (&Method::POST | &Method::PATCH, ["api", "monitors", ..])
            if req.body().len() > MAX_JSON_BODY =>
        {
            Err(AppError::TooLarge(MAX_JSON_BODY))
        }
        (&Method::POST, ["api", "scrape" | "crawl" | "map" | "search"])
            if req.body().len() > MAX_JSON_BODY =>
        {
            Err(AppError::TooLarge(MAX_JSON_BODY))
        }
        (&Method::POST, ["api", "scrape"]) => {
            submitted(app, user, &req, scrape::submit(app, user, req.body())).await
        }
        (&Method::POST, ["api", "crawl"]) => {
            submitted(app, user, &req, crawl::submit(app, user, req.body())).await
        }
        (&Method::POST, ["api", "map"]) => {
            submitted(app, user, &req, map::submit(app, user, req.body())).await
        }
        (&Method::POST, ["api", "search"]) => {
            submitted(app, user, &req, search::submit(app, user, req.body())).await
        }
        (&Method::GET, ["api", "webhooks", "secret"]) => webhook::signing_keys(app, user)
            .await
            .map(|k| json_response(StatusCode::OK, &webhook::keys_json(&k)))
            .map_err(AppError::from),
        (&Method::POST, ["api", "webhooks", "secret", "rotate"]) => webhook::rotate(app, user)
            .await
            .map(|k| json_response(StatusCode::OK, &webhook::keys_json(&k)))
            .map_err(AppError::from),
        (&Method::GET, ["api", "jobs"]) => list_jobs(app, user, &query).await,
        (&Method::GET, ["api", "jobs", id]) => get_job(app, user, id).await,
        (&Method::GET, ["api", "jobs", id, "results"]) => results(app, user, id, &query).await,
        (&Method::GET, ["api", "jobs", id, "logs"]) => logs(app, user, id, &query).await,
        (&Method::GET, ["api", "jobs", id, "artifacts", name]) => {
            artifact::read(app, user, id, name)
                .await
                .map(artifact_response)
        }
        (&Method::GET, ["api", "jobs", id, "tree"]) => query::tree(app, user, id)
            .await
            .map(|t| json_response(StatusCode::OK, &t)),
        (&Method::DELETE, ["api", "jobs", id, "cancel"]) => {
            cancel::cancel(app, user, id).await.map(|j| {
                json_response(
                    StatusCode::OK,
                    &json!({"job_id": j.job_id, "status": j.status.as_str()}),
                )
            })
        }
        _ => Err(AppError::NoRoute),
    };
    result.unwrap_or_else(error)
}

/// An artifact's bytes (a PNG), or a redirect to the short-lived link where they are.
fn artifact_response(a: Artifact) -> Response<Bytes> {
    let (status, header, value, body) = match a {
        Artifact::Bytes(b) => (
            StatusCode::OK,
            http::header::CONTENT_TYPE,
            "image/png".into(),
            b,
        ),
        Artifact::Link(url) => (StatusCode::FOUND, http::header::LOCATION, url, Bytes::new()),
    };
    let mut resp = Response::new(body);
    *resp.status_mut() = status;
    if let Ok(v) = http::HeaderValue::from_str(&value) {
        resp.headers_mut().insert(header, v);
    }
    resp.headers_mut().insert(
        http::header::CACHE_CONTROL,
        http::HeaderValue::from_static("private, no-store"),
    );
    resp
}

fn parse_query(q: Option<&str>) -> HashMap<String, String> {
    url::form_urlencoded::parse(q.unwrap_or_default().as_bytes())
        .into_owned()
        .collect()
}

fn invalid(field: &str, problem: &str) -> AppError {
    AppError::Invalid(vec![Problem {
        field: field.into(),
        problem: problem.into(),
    }])
}

/// A bounded integer query parameter.
fn int_param(
    q: &HashMap<String, String>,
    name: &str,
    default: u64,
    min: u64,
    max: u64,
) -> Result<u64, AppError> {
    match q.get(name) {
        None => Ok(default),
        Some(v) => match v.parse::<u64>() {
            Ok(n) if (min..=max).contains(&n) => Ok(n),
            _ => Err(invalid(
                name,
                &format!("must be an integer from {min} to {max}"),
            )),
        },
    }
}

fn opt_int_param(q: &HashMap<String, String>, name: &str) -> Result<Option<u64>, AppError> {
    q.get(name)
        .map(|v| {
            v.parse::<u64>()
                .map_err(|_| invalid(name, "must be a non-negative integer"))
        })
        .transpose()
}

fn job_links(job: &Job) -> Value {
    let base = format!("/api/jobs/{}", job.job_id);
    json!({
        "self": base,
        "logs": format!("{base}/logs"),
        "tree": format!("{base}/tree"),
        "results": format!("{base}/results"),
        "cancel": format!("{base}/cancel"),
    })
}

fn job_json(job: &Job) -> Value {
    let p = job.page_progress();
    let mut body = json!({
        "job_id": job.job_id,
        "kind": job.kind.as_str(),
        "status": job.status.as_str(),
        "created_at": response::timestamp(job.created_at),
        "started_at": job.started_at.map(response::timestamp),
        "finished_at": job.finished_at.map(response::timestamp),
        "request": job.request,
        "progress": {
            "pages_discovered": p.pages_discovered,
            "pages_completed": p.pages_completed,
            "pages_failed": p.pages_failed,
            "pages_queued": p.pages_queued,
        },
        "error": job.error,
        "links": job_links(job),
    });
    if p.extract_tokens > 0 {
        body["extract_tokens"] = json!(p.extract_tokens);
    }
    body
}

/// Seconds a client should wait before polling a job of this age again.
fn poll_after(age: chrono::Duration) -> u64 {
    match age.num_seconds() {
        s if s < 10 => 1,
        s if s < 60 => 2,
        s if s < 600 => 5,
        _ => 10,
    }
}

/// A submit's answer: its job's 202, remembered under the request's `Idempotency-Key`.
async fn submitted(
    app: &App,
    user: &UserId,
    req: &Request<Bytes>,
    submit: impl std::future::Future<Output = Result<Job, AppError>>,
) -> Result<Response<Bytes>, AppError> {
    idempotency::once(app, user, req, async {
        submit.await.map(|job| accepted(&job))
    })
    .await
}

/// The 202 answer to a submit.
fn accepted(job: &Job) -> Response<Bytes> {
    accepted_body(&accepted_json(job))
}

/// The body of a submit's 202.
fn accepted_json(job: &Job) -> Value {
    json!({
        "job_id": job.job_id,
        "kind": job.kind.as_str(),
        "status": job.status.as_str(),
        "created_at": response::timestamp(job.created_at),
        "links": job_links(job),
    })
}

/// A 202 with `body`, which names its job: `Location` and `Retry-After` as API.md says.
fn accepted_body(body: &Value) -> Response<Bytes> {
    let job = body["job_id"].as_str().unwrap_or_default();
    let mut resp = json_response(StatusCode::ACCEPTED, body);
    let headers = resp.headers_mut();
    if let Ok(v) = format!("/api/jobs/{job}").parse() {
        headers.insert(http::header::LOCATION, v);
    }
    headers.insert(
        http::header::RETRY_AFTER,
        http::HeaderValue::from_static("1"),
    );
    resp
}

async fn get_job(app: &App, user: &UserId, id: &str) -> Result<Response<Bytes>, AppError> {
    let job = query::job(app, user, id).await?;
    let mut body = job_json(&job);
    body["result"] = query::inline_result(app, &job)
        .await?
        .unwrap_or(Value::Null);
    if let Some(w) = webhook::status_json(app, &job).await? {
        body["webhook"] = w;
    }
    let mut resp = json_response(StatusCode::OK, &body);
    if !job.status.is_final() {
        let after = poll_after(app.clock.now() - job.created_at);
        if let Ok(v) = after.to_string().parse() {
            resp.headers_mut().insert(http::header::RETRY_AFTER, v);
        }
    }
    Ok(resp)
}

async fn list_jobs(
    app: &App,
    user: &UserId,
    q: &HashMap<String, String>,
) -> Result<Response<Bytes>, AppError> {
    let kind = match q.get("kind") {
        Some(k) => Some(JobKind::parse(k).ok_or_else(|| {
            invalid(
                "kind",
                "must be scrape, crawl, batch, map, search, upload or monitor",
            )
        })?),
        None => None,
    };
    let status = match q.get("status") {
        Some(s) => Some(JobStatus::parse(s).ok_or_else(|| {
            invalid(
                "status",
                "must be queued, running, completed, failed or cancelled",
            )
        })?),
        None => None,
    };
    let limit = int_param(q, "limit", 20, 1, 100)? as u32;
    let (jobs, next) = query::list(
        app,
        user,
        kind,
        status,
        limit,
        q.get("cursor").map(String::as_str),
    )
    .await?;
    let jobs: Vec<Value> = jobs.iter().map(job_json).collect();
    Ok(json_response(
        StatusCode::OK,
        &json!({"jobs": jobs, "next_cursor": next}),
    ))
}

async fn results(
    app: &App,
    user: &UserId,
    id: &str,
    q: &HashMap<String, String>,
) -> Result<Response<Bytes>, AppError> {
    let limit = int_param(q, "limit", 20, 1, 100)? as u32;
    let cursor = q.get("cursor").map(String::as_str);
    if cursor.is_some_and(|c| c.is_empty() || c.len() > 512) {
        return Err(invalid("cursor", "is not a cursor of this list"));
    }
    let (data, next, total) = query::results(app, user, id, cursor, limit).await?;
    Ok(json_response(
        StatusCode::OK,
        &json!({"data": data, "next_cursor": next, "total": total}),
    ))
}

async fn logs(
    app: &App,
    user: &UserId,
    id: &str,
    q: &HashMap<String, String>,
) -> Result<Response<Bytes>, AppError> {
    let limit = int_param(q, "limit", 100, 1, 1000)? as u32;
    let after = opt_int_param(q, "after")?;
    let (entries, next) = query::logs(app, user, id, after, limit).await?;
    Ok(json_response(
        StatusCode::OK,
        &json!({"entries": entries, "next_after": next}),
    ))
}
