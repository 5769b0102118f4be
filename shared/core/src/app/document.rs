//! Turning a fetched response into the API's document.

use crate::domain::{ErrorCode, ExtractSpec, Format, JobError, PageOptions};
use crate::engine::budget::Budget;
use crate::engine::docx::{self, DocxError};
use crate::engine::extract::{extract_html, ExtractOptions};
use crate::engine::fetch::Fetched;
use crate::engine::pdf::PdfError;
use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::{json, Map, Value};
use std::borrow::Cow;
use url::Url;

/// A document and the links found on its page.
pub(crate) struct Built {
    pub doc: Value,
    pub links: Vec<Url>,
    /// What the job's log should say about the page (content that was skipped).
    pub warnings: Vec<String>,
    /// Tokens a language model took to read the page.
    pub tokens: u64,
}

enum Kind {
    Html,
    Text,
    Pdf,
    Docx,
}

fn media_type(ct: &str) -> String {
    ct.split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase()
}

/// What a response is: by its signature for a PDF, and for a zip at a `.docx` path (documents
/// are often served with a wrong or no type), else by its type, or by its first bytes when it
/// has none.
fn kind_of(content_type: Option<&str>, body: &[u8], path: &str) -> Option<Kind> {
    if body.starts_with(b"%PDF-") {
        return Some(Kind::Pdf);
    }
    if body.starts_with(b"PK\x03\x04") && docx::is_docx_path(path) {
        return Some(Kind::Docx);
    }
    match content_type.map(media_type).as_deref() {
        Some("application/pdf" | "application/x-pdf") => Some(Kind::Pdf),
        Some(docx::MEDIA_TYPE) => Some(Kind::Docx),
        Some("text/html" | "application/xhtml+xml") => Some(Kind::Html),
        Some("text/plain" | "text/markdown" | "text/x-markdown") => Some(Kind::Text),
        None | Some("") => {
            let head = String::from_utf8_lossy(&body[..body.len().min(512)]).to_ascii_lowercase();
            let head = head.trim_start();
            (head.starts_with("<!doctype html") || head.starts_with("<html")).then_some(Kind::Html)
        }
        _ => None,
    }
}

/// Decodes the body with the charset that the header or (for HTML) a meta tag names.
fn decode<'b>(content_type: Option<&str>, body: &'b [u8]) -> Cow<'b, str> {
    let label = content_type
        .and_then(|ct| {
            ct.split(';')
                .find_map(|p| p.trim().strip_prefix("charset="))
        })
        .map(|l| l.trim_matches('"').to_string())
        .or_else(|| {
            let head = String::from_utf8_lossy(&body[..body.len().min(1024)]).to_ascii_lowercase();
            let at = head.find("charset=")? + 8;
            let rest = head[at..].trim_start_matches(['"', '\'']);
            let end = rest.find(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '_'))?;
            Some(rest[..end].to_string())
        });
    let encoding = label
        .and_then(|l| encoding_rs::Encoding::for_label(l.as_bytes()))
        .unwrap_or(encoding_rs::UTF_8);
    // A body already in its charset (UTF-8, nearly always) is read where it lies.
    encoding.decode(body).0
}

fn rfc3339(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// Builds the document of a successful response within `budget` (on a work thread: this is
/// the CPU-heavy part of a page), or says why the page failed.
pub(crate) fn build(
    f: &Fetched,
    requested_url: &str,
    opts: &PageOptions,
    fetched_at: DateTime<Utc>,
    budget: &Budget,
) -> Result<Built, JobError> {
    if f.status >= 400 {
        return Err(JobError::new(
            ErrorCode::HttpError,
            format!("the server answered {}", f.status),
        ));
    }
    let ct = f.content_type.as_deref();
    let Some(kind) = kind_of(ct, &f.body, f.url.path()) else {
        return Err(JobError::new(
            ErrorCode::UnsupportedContent,
            format!("content type {} is not supported", ct.unwrap_or("(none)")),
        ));
    };
    let mut doc = Map::new();
    doc.insert("url".into(), json!(f.url.as_str()));
    doc.insert("requested_url".into(), json!(requested_url));
    doc.insert("status_code".into(), json!(f.status));
    doc.insert("content_type".into(), json!(ct));
    let mut meta = json!({
        "title": null, "description": null, "language": null, "canonical_url": null,
        "fetched_at": rfc3339(fetched_at),
        "elapsed_ms": f.elapsed.as_millis() as u64,
        "bytes": f.body.len(),
    });
    if matches!(kind, Kind::Pdf | Kind::Docx) {
        let (fields, doc_meta) = match kind {
            Kind::Pdf => pdf(&f.body, opts, budget)?,
            _ => word(&f.body, opts, budget)?,
        };
        doc.extend(fields);
        if let (Value::Object(m), Value::Object(p)) = (&mut meta, doc_meta) {
            m.extend(p);
        }
        if opts.wants(Format::Metadata) {
            doc.insert("metadata".into(), meta);
        }
        if opts.wants(Format::Json) {
            doc.insert("json".into(), Value::Null);
        }
        return Ok(Built {
            doc: Value::Object(doc),
            links: Vec::new(),
            warnings: Vec::new(),
            tokens: 0,
        });
    }
    let source = decode(ct, &f.body);
    let mut warnings = Vec::new();
    let links = match kind {
        Kind::Html => {
            let e = extract_html(
                &source,
                &f.url,
                &ExtractOptions {
                    only_main_content: opts.only_main_content,
                    // A model reads the Markdown even when the formats do not ask for it.
                    markdown: opts.wants(Format::Markdown)
                        || opts.extract.as_ref().is_some_and(ExtractSpec::uses_model),
                    text: opts.wants(Format::Text),
                    html: opts.wants(Format::Html),
                    declared: opts.wants(Format::Metadata),
                    schema: match &opts.extract {
                        Some(ExtractSpec::Selectors(s)) => Some(s.clone()),
                        _ => None,
                    },
                    ..Default::default()
                }
                .with_selectors(&opts.include_selectors, &opts.exclude_selectors),
                budget,
            )?;
            meta["title"] = json!(e.title);
            meta["description"] = json!(e.description);
            meta["language"] = json!(e.language);
            meta["canonical_url"] = json!(e.canonical_url);
            if let Value::Object(m) = &mut meta {
                m.extend(e.declared);
            }
            if e.invalid_json_ld > 0 {
                warnings.push(format!(
                    "{} JSON-LD block(s) of the page are not valid JSON and were skipped",
                    e.invalid_json_ld
                ));
            }
            if let Some(json) = e.json {
                doc.insert("json".into(), json);
            }
            for (format, value) in [("markdown", e.markdown), ("text", e.text), ("html", e.html)] {
                if let Some(v) = value {
                    doc.insert(format.into(), Value::String(v));
                }
            }
            e.links
        }
        Kind::Text => {
            for (format, name) in [(Format::Markdown, "markdown"), (Format::Text, "text")] {
                if opts.wants(format) {
                    doc.insert(name.into(), json!(&*source));
                }
            }
            if opts.wants(Format::Html) {
                let escaped = source
                    .replace('&', "&amp;")
                    .replace('<', "&lt;")
                    .replace('>', "&gt;");
                doc.insert("html".into(), json!(format!("<pre>{escaped}</pre>")));
            }
            Vec::new()
        }
        Kind::Pdf | Kind::Docx => Vec::new(),
    };
    if opts.wants(Format::RawHtml) {
        doc.insert("raw_html".into(), json!(&*source));
    }
    if opts.wants(Format::Links) {
        let list: Vec<&str> = links.iter().map(Url::as_str).collect();
        doc.insert("links".into(), json!(list));
    }
    if opts.wants(Format::Metadata) {
        doc.insert("metadata".into(), meta);
    }
    if opts.wants(Format::Json) && !doc.contains_key("json") {
        doc.insert("json".into(), Value::Null);
    }
    Ok(Built {
        doc: Value::Object(doc),
        links,
        warnings,
        tokens: 0,
    })
}

/// A PDF's formats as the page options ask (`markdown` with a `## Page N` section per page,
/// `text`), and what its metadata gains (`title`, `author`, `pages`). A PDF that cannot be read
/// is `UNSUPPORTED_CONTENT`; one over the reader's bounds `TOO_LARGE` or `TOO_COMPLEX`.
pub(crate) fn pdf(
    bytes: &[u8],
    opts: &PageOptions,
    budget: &Budget,
) -> Result<(Map<String, Value>, Value), JobError> {
    let read = crate::engine::pdf::read(bytes, budget).map_err(|e| match e {
        PdfError::Unreadable(_) => JobError::new(ErrorCode::UnsupportedContent, e.to_string()),
        PdfError::Exceeded(e) => e.into(),
    })?;
    let mut fields = Map::new();
    if opts.wants(Format::Markdown) {
        let md: Vec<String> = read
            .pages
            .iter()
            .enumerate()
            .map(|(i, t)| format!("## Page {}\n\n{t}", i + 1))
            .collect();
        fields.insert("markdown".into(), json!(md.join("\n\n")));
    }
    if opts.wants(Format::Text) {
        fields.insert("text".into(), json!(read.pages.join("\n\n")));
    }
    let meta = json!({"title": read.title, "author": read.author, "pages": read.pages.len()});
    Ok((fields, meta))
}

/// A Word document's formats as the page options ask (`markdown` with its headings, lists and
/// tables, `text`), and what its metadata gains (`title`, `author`).
fn word(
    bytes: &[u8],
    opts: &PageOptions,
    budget: &Budget,
) -> Result<(Map<String, Value>, Value), JobError> {
    let read = docx::read(bytes, budget).map_err(|e| match e {
        DocxError::Unreadable(_) => JobError::new(ErrorCode::UnsupportedContent, e.to_string()),
        DocxError::Exceeded(e) => e.into(),
    })?;
    let mut fields = Map::new();
    if opts.wants(Format::Markdown) {
        fields.insert("markdown".into(), json!(read.markdown));
    }
    if opts.wants(Format::Text) {
        fields.insert("text".into(), json!(read.text));
    }
    Ok((fields, json!({"title": read.title, "author": read.author})))
}

/// The document of a page that failed.
pub(crate) fn failed(
    requested_url: &str,
    final_url: Option<&Url>,
    status_code: Option<u16>,
    error: &JobError,
) -> Value {
    json!({
        "url": final_url.map_or(requested_url, Url::as_str),
        "requested_url": requested_url,
        "status_code": status_code,
        "error": error,
    })
}
