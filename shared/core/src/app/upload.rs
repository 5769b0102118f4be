//! Uploads: a document sent in the request (raw or as the `file` part of a multipart form),
//! checked, stored with the job's documents, then extracted by a worker like a fetched page.
//! PDFs yield the text of their pages.

use super::page::{Produced, Step};
use super::{document, submit, App, AppError};
use crate::domain::{ErrorCode, Job, JobError, JobKind, UploadRequest, UserId};
use crate::engine::budget::Budget;
use crate::engine::docx;
use crate::engine::fetch::Fetched;
use crate::ports::StoreResult;
use bytes::Bytes;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::time::Duration;
use url::Url;

/// Largest document accepted.
pub const MAX_UPLOAD: usize = 25 * 1024 * 1024;
/// How long an upload URL may be used.
pub const UPLOAD_URL_TTL: Duration = Duration::from_secs(15 * 60);
/// How long a job announced by its size waits for its document before it fails.
const UPLOAD_WAIT: chrono::Duration = chrono::Duration::minutes(20);
/// How often such a job looks for its document.
const UPLOAD_LOOK: chrono::Duration = chrono::Duration::seconds(3);

/// The types an upload may have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Media {
    Html,
    Xhtml,
    Plain,
    Markdown,
    Pdf,
    Docx,
}

impl Media {
    fn of_type(content_type: &str) -> Option<Self> {
        let t = content_type.split(';').next().unwrap_or_default().trim();
        Some(match t.to_ascii_lowercase().as_str() {
            "text/html" => Media::Html,
            "application/xhtml+xml" => Media::Xhtml,
            "text/plain" => Media::Plain,
            "text/markdown" | "text/x-markdown" => Media::Markdown,
            "application/pdf" => Media::Pdf,
            docx::MEDIA_TYPE => Media::Docx,
            _ => return None,
        })
    }

    fn of_name(name: &str) -> Option<Self> {
        let ext = name.rsplit_once('.')?.1.to_ascii_lowercase();
        Some(match ext.as_str() {
            "html" | "htm" => Media::Html,
            "xhtml" => Media::Xhtml,
            "txt" => Media::Plain,
            "md" | "markdown" => Media::Markdown,
            "pdf" => Media::Pdf,
            "docx" => Media::Docx,
            _ => return None,
        })
    }

    fn as_str(self) -> &'static str {
        match self {
            Media::Html => "text/html",
            Media::Xhtml => "application/xhtml+xml",
            Media::Plain => "text/plain",
            Media::Markdown => "text/markdown",
            Media::Pdf => "application/pdf",
            Media::Docx => docx::MEDIA_TYPE,
        }
    }

    /// Why `bytes` cannot be a document of this type, for the types whose content has a
    /// signature (a PDF's `%PDF-`, a Word document's zip header).
    fn refuses(self, bytes: &[u8]) -> Option<&'static str> {
        match self {
            Media::Pdf if !bytes.starts_with(b"%PDF-") => Some("the upload is not a PDF document"),
            Media::Docx if !bytes.starts_with(b"PK\x03\x04") => {
                Some("the upload is not a Word (.docx) document")
            }
            _ => None,
        }
    }
}

/// The upload's type: the one declared (unless it is empty or says nothing), else the one
/// its file name implies.
fn media_of(declared: Option<&str>, filename: Option<&str>) -> Result<Media, AppError> {
    declared
        .filter(|t| !t.is_empty() && !t.starts_with("application/octet-stream"))
        .map(|t| Media::of_type(t).ok_or_else(|| unsupported(&format!("{t} is not accepted"))))
        .transpose()?
        .or_else(|| filename.and_then(Media::of_name))
        .ok_or_else(|| unsupported("the document's type is unknown"))
}

fn unsupported(what: &str) -> AppError {
    AppError::UnsupportedMediaType(format!(
        "{what}: send text/html, application/xhtml+xml, text/plain, text/markdown, \
         application/pdf or a Word document (.docx)"
    ))
}

/// The document of a multipart form: its `file` part, with its type and file name.
async fn file_part(
    content_type: &str,
    body: Bytes,
) -> Result<(Bytes, Option<String>, Option<String>), AppError> {
    let boundary = multer::parse_boundary(content_type).map_err(|_| {
        AppError::Invalid(vec![crate::domain::validate::Problem {
            field: "body".into(),
            problem: "multipart/form-data without a boundary".into(),
        }])
    })?;
    let stream = futures::stream::once(async move { Ok::<_, std::io::Error>(body) });
    let constraints = multer::Constraints::new()
        .size_limit(multer::SizeLimit::new().per_field(MAX_UPLOAD as u64));
    let mut form = multer::Multipart::with_constraints(stream, boundary, constraints);
    let invalid = |problem: String| {
        AppError::Invalid(vec![crate::domain::validate::Problem {
            field: "file".into(),
            problem,
        }])
    };
    loop {
        let field = match form.next_field().await {
            Ok(Some(f)) => f,
            Ok(None) => return Err(invalid("is required (a part named file)".into())),
            Err(multer::Error::FieldSizeExceeded { .. }) => {
                return Err(AppError::TooLarge(MAX_UPLOAD))
            }
            Err(e) => return Err(invalid(format!("the form cannot be read: {e}"))),
        };
        if field.name() != Some("file") {
            continue;
        }
        let part_type = field.content_type().map(|m| m.to_string());
        let name = field.file_name().map(str::to_string);
        return match field.bytes().await {
            Ok(b) => Ok((b, part_type, name)),
            Err(multer::Error::FieldSizeExceeded { .. }) => Err(AppError::TooLarge(MAX_UPLOAD)),
            Err(e) => Err(invalid(format!("the form cannot be read: {e}"))),
        };
    }
}

/// Checks an upload, stores its bytes and queues its job. `query` holds the query string's
/// parameters (`filename`, `base_url`, `formats`, ...), `content_type` the request's header.
pub async fn submit(
    app: &App,
    user: &UserId,
    query: &BTreeMap<String, String>,
    content_type: Option<&str>,
    body: Bytes,
) -> Result<Job, AppError> {
    let content_type = content_type.unwrap_or_default();
    let (bytes, declared, part_name) = if content_type
        .to_ascii_lowercase()
        .starts_with("multipart/form-data")
    {
        file_part(content_type, body).await?
    } else {
        (body, Some(content_type.to_string()), None)
    };
    if bytes.len() > MAX_UPLOAD {
        return Err(AppError::TooLarge(MAX_UPLOAD));
    }
    if bytes.is_empty() {
        return Err(AppError::Invalid(vec![crate::domain::validate::Problem {
            field: "body".into(),
            problem: "is empty".into(),
        }]));
    }
    let filename = query.get("filename").cloned().or(part_name);
    let media = media_of(declared.as_deref(), filename.as_deref())?;
    // V5: the declared type is checked against the content. A PDF or a Word document must be
    // one; text that holds binary data is kept as plain text, never interpreted.
    if let Some(why) = media.refuses(&bytes) {
        return Err(unsupported(why));
    }
    let media = match media {
        m @ (Media::Pdf | Media::Docx) => m,
        m if bytes[..bytes.len().min(8192)].contains(&0) => {
            tracing::info!(declared = m.as_str(), "binary content kept as plain text");
            Media::Plain
        }
        m => m,
    };
    let mut query = query.clone();
    if let Some(name) = &filename {
        query.insert("filename".into(), name.clone());
    }
    let mut job = Job::new(user.clone(), JobKind::Upload, Value::Null, app.clock.now());
    let key = format!("{}/{}/upload", user, job.job_id);
    let request = UploadRequest::parse(&query, media.as_str(), bytes.len() as u64, key.clone())
        .map_err(AppError::Invalid)?;
    job.request = serde_json::to_value(&request).map_err(crate::ports::StoreError::new)?;
    app.blobs.put(&key, bytes).await?;
    submit::create_with_input(app, job, node_name(&request), false, &key).await
}

/// A job announced by its document's size, and where to PUT the document.
pub struct Announced {
    pub job: Job,
    pub upload_url: String,
}

fn invalid(field: &str, problem: &str) -> AppError {
    AppError::Invalid(vec![crate::domain::validate::Problem {
        field: field.into(),
        problem: problem.into(),
    }])
}

/// `POST /api/upload` with `{"filename", "content_type", "size"}`: a document too big for the
/// API's own body limit (API Gateway's 10 MB, Lambda's 6 MB) goes straight to the document
/// store through a presigned URL; the job starts working once it arrives. The other options
/// come in the query string as for any upload.
pub async fn announce(
    app: &App,
    user: &UserId,
    query: &BTreeMap<String, String>,
    body: &[u8],
) -> Result<Announced, AppError> {
    let mut f = crate::domain::validate::Fields::from_body(body).map_err(AppError::Invalid)?;
    let filename = f.string("filename", 255);
    let declared = f.string("content_type", 255);
    if !f.has("size") {
        f.problem("size", "is required");
    }
    let size = f.integer("size", 1, 1, MAX_UPLOAD as u64);
    f.finish().map_err(AppError::Invalid)?;
    let media = media_of(declared.as_deref(), filename.as_deref())?;
    let mut query = query.clone();
    if let Some(name) = &filename {
        query.insert("filename".into(), name.clone());
    }
    let mut job = Job::new(user.clone(), JobKind::Upload, Value::Null, app.clock.now());
    let key = format!("{}/{}/upload", user, job.job_id);
    let mut request = UploadRequest::parse(&query, media.as_str(), size, key.clone())
        .map_err(AppError::Invalid)?;
    request.awaiting = true;
    let Some(upload_url) = app
        .blobs
        .upload_url(&key, media.as_str(), size, UPLOAD_URL_TTL)
        .await?
    else {
        return Err(invalid(
            "body",
            "this deployment takes the document itself as the body (up to 25 MiB)",
        ));
    };
    job.request = serde_json::to_value(&request).map_err(crate::ports::StoreError::new)?;
    let job = submit::create(app, job, node_name(&request), false).await?;
    Ok(Announced { job, upload_url })
}

/// The name of an upload's one node and document.
fn node_name(req: &UploadRequest) -> String {
    format!("upload:{}", req.filename.as_deref().unwrap_or("document"))
}

/// Extracts an uploaded document (the worker's part). A document announced by its size is
/// waited for, a few seconds at a time, until it arrives or its time is up.
pub(crate) async fn run(app: &App, job: &Job, req: &UploadRequest) -> StoreResult<Step<Produced>> {
    let name = node_name(req);
    let now = app.clock.now();
    let Some(bytes) = app.blobs.get(&req.source_key).await? else {
        if req.awaiting && now < job.created_at + UPLOAD_WAIT {
            return Ok(Step::Later(now + UPLOAD_LOOK));
        }
        let e = if req.awaiting {
            JobError::new(
                ErrorCode::Timeout,
                "the document was not uploaded within 20 minutes",
            )
        } else {
            JobError::new(ErrorCode::Internal, "the uploaded document is missing")
        };
        return Ok(Step::Done(Produced::result(&name, Err(e))));
    };
    // V5 for a document that came by its URL: it was not seen at submit. (S3 holds the PUT to
    // the announced length and type; this holds any store to them.)
    if req.awaiting {
        let refused = if bytes.len() as u64 != req.bytes {
            Some("the upload is not the announced size")
        } else {
            Media::of_type(&req.content_type).and_then(|m| m.refuses(&bytes))
        };
        if let Some(why) = refused {
            let e = JobError::new(ErrorCode::UnsupportedContent, why);
            return Ok(Step::Done(Produced::result(&name, Err(e))));
        }
    }
    let (req, now, doc_name) = (req.clone(), app.clock.now(), name.clone());
    let r = app
        .work
        .run(app.config.work_limit, move |budget| {
            Ok(extract(&req, &doc_name, bytes, now, budget))
        })
        .await
        .unwrap_or_else(|e| Err(e.into()));
    Ok(Step::Done(Produced::result(&name, r)))
}

fn extract(
    req: &UploadRequest,
    name: &str,
    bytes: Bytes,
    now: chrono::DateTime<chrono::Utc>,
    budget: &Budget,
) -> Result<Value, JobError> {
    let base = req.base_url.as_deref().and_then(|u| Url::parse(u).ok());
    let mut doc = if Media::of_type(&req.content_type) == Some(Media::Pdf) {
        pdf(req, name, &bytes, budget)?
    } else {
        let fetched = Fetched {
            url: base
                .clone()
                .or_else(|| Url::parse(name).ok())
                .ok_or_else(|| JobError::new(ErrorCode::Internal, "no document URL"))?,
            status: 200,
            content_type: Some(req.content_type.clone()),
            retry_after: None,
            body: bytes,
            elapsed: Duration::ZERO,
        };
        document::build(&fetched, name, &req.page, now, budget)?.doc
    };
    doc["url"] = json!(base.as_ref().map(Url::as_str));
    doc["requested_url"] = Value::Null;
    doc["status_code"] = Value::Null;
    if let Some(meta) = doc.get_mut("metadata") {
        meta["filename"] = json!(req.filename);
    }
    Ok(doc)
}

/// A PDF's document: its formats and metadata ([`document::pdf`]).
fn pdf(req: &UploadRequest, name: &str, bytes: &[u8], budget: &Budget) -> Result<Value, JobError> {
    let (fields, pdf_meta) = document::pdf(bytes, &req.page, budget)?;
    let mut doc = Map::new();
    doc.insert("url".into(), Value::Null);
    doc.insert("requested_url".into(), json!(name));
    doc.insert("status_code".into(), Value::Null);
    doc.insert("content_type".into(), json!("application/pdf"));
    doc.extend(fields);
    if req.page.wants(crate::domain::Format::Metadata) {
        let mut meta = json!({"title": null, "description": null, "language": null,
                              "canonical_url": null, "bytes": bytes.len()});
        if let (Value::Object(m), Value::Object(p)) = (&mut meta, pdf_meta) {
            m.extend(p);
        }
        doc.insert("metadata".into(), meta);
    }
    Ok(Value::Object(doc))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn media_types_by_header_and_by_name() {
        assert_eq!(
            Media::of_type("text/html; charset=utf-8"),
            Some(Media::Html)
        );
        assert_eq!(Media::of_type("image/png"), None);
        assert_eq!(Media::of_name("notes.MD"), Some(Media::Markdown));
        assert_eq!(Media::of_name("report.pdf"), Some(Media::Pdf));
        assert_eq!(Media::of_name("run.exe"), None);
    }
}
