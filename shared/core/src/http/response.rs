//! Response bodies: JSON documents and API.md's error format.

use crate::app::AppError;
use bytes::Bytes;
use chrono::{DateTime, SecondsFormat, Utc};
use http::{Response, StatusCode};
use serde::Serialize;
use serde_json::{json, Map, Value};

/// RFC 3339 UTC with milliseconds.
pub(crate) fn timestamp(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// A JSON response.
pub(crate) fn json_response(status: StatusCode, body: &impl Serialize) -> Response<Bytes> {
    let bytes = serde_json::to_vec(body).unwrap_or_else(|_| b"{}".to_vec());
    let mut resp = Response::new(Bytes::from(bytes));
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    resp
}

/// `{"error": {"code", "message", ...}}`.
pub struct ErrorBody {
    fields: Map<String, Value>,
}

impl ErrorBody {
    pub fn new(code: &str, message: &str) -> Self {
        let mut fields = Map::new();
        fields.insert("code".into(), json!(code));
        fields.insert("message".into(), json!(message));
        ErrorBody { fields }
    }

    pub fn with(mut self, key: &str, value: Value) -> Self {
        self.fields.insert(key.into(), value);
        self
    }
}

/// An error response in API.md's format.
pub fn error_response(status: StatusCode, body: ErrorBody) -> Response<Bytes> {
    json_response(status, &json!({"error": body.fields}))
}

/// Maps a use case's error to its status and body.
pub(crate) fn error(e: AppError) -> Response<Bytes> {
    match e {
        AppError::Invalid(details) => error_response(
            StatusCode::BAD_REQUEST,
            ErrorBody::new("INVALID_REQUEST", "the request is invalid")
                .with("details", json!(details)),
        ),
        AppError::NotFound => error_response(
            StatusCode::NOT_FOUND,
            ErrorBody::new("NOT_FOUND", "no such resource"),
        ),
        AppError::NoRoute => error_response(
            StatusCode::NOT_FOUND,
            ErrorBody::new("NOT_FOUND", "no such route"),
        ),
        AppError::JobFinished => error_response(
            StatusCode::CONFLICT,
            ErrorBody::new("JOB_FINISHED", "the job has already finished"),
        ),
        AppError::ConcurrencyLimit {
            limit,
            active_job_id,
        } => {
            let message = format!("an active {limit} job already exists; wait for it or cancel it");
            let mut resp = error_response(
                StatusCode::TOO_MANY_REQUESTS,
                ErrorBody::new("CONCURRENCY_LIMIT", &message)
                    .with("limit", json!(limit))
                    .with("active_job_id", json!(active_job_id)),
            );
            resp.headers_mut().insert(
                http::header::RETRY_AFTER,
                http::HeaderValue::from_static("5"),
            );
            resp
        }
        AppError::RenderUnavailable => error_response(
            StatusCode::SERVICE_UNAVAILABLE,
            ErrorBody::new(
                "RENDER_UNAVAILABLE",
                "this deployment has no headless browser for render: true",
            ),
        ),
        AppError::SearchUnavailable => error_response(
            StatusCode::SERVICE_UNAVAILABLE,
            ErrorBody::new(
                "SEARCH_UNAVAILABLE",
                "this deployment has no search provider configured",
            ),
        ),
        AppError::ExtractUnavailable => error_response(
            StatusCode::SERVICE_UNAVAILABLE,
            ErrorBody::new(
                "EXTRACT_UNAVAILABLE",
                "this deployment has no language model configured for extract with a prompt \
                 or a JSON Schema; a schema of selectors needs none",
            ),
        ),
        AppError::TooLarge(max) => {
            let mut resp = error_response(
                StatusCode::PAYLOAD_TOO_LARGE,
                ErrorBody::new(
                    "PAYLOAD_TOO_LARGE",
                    &format!("the body is larger than {max} bytes"),
                ),
            );
            resp.headers_mut().insert(
                http::header::CONNECTION,
                http::HeaderValue::from_static("close"),
            );
            resp
        }
        AppError::UnsupportedMediaType(message) => error_response(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ErrorBody::new("UNSUPPORTED_MEDIA_TYPE", &message),
        ),
        AppError::IdempotencyKeyReused => error_response(
            StatusCode::UNPROCESSABLE_ENTITY,
            ErrorBody::new(
                "IDEMPOTENCY_KEY_REUSED",
                "this Idempotency-Key was used with a different request",
            ),
        ),
        AppError::Store(e) => {
            tracing::error!(error = %e, "request failed");
            error_response(
                StatusCode::INTERNAL_SERVER_ERROR,
                ErrorBody::new("INTERNAL", "internal error"),
            )
        }
    }
}
