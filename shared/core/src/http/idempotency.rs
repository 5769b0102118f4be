//! `Idempotency-Key` on submits (API.md, SECURITY.md I1): within 24 hours the same key with the
//! same request replays the first 202 and starts nothing; with another request it answers 422.
//! Keys are per user. Only a 202 is remembered: a refused submit may be retried with its key.

use super::{accepted_body, invalid};
use crate::app::{App, AppError};
use crate::domain::UserId;
use crate::ports::{Reservation, StoreError};
use bytes::Bytes;
use http::{Request, Response, StatusCode};
use sha2::{Digest, Sha256};
use std::future::Future;
use std::time::{Duration, Instant};

/// How long an answer is replayed.
const KEEP: chrono::Duration = chrono::Duration::hours(24);
/// How long a reservation holds while its submit runs (a submit that died frees the key then).
const HOLD: chrono::Duration = chrono::Duration::seconds(60);
/// How long a submit waits for another with the same key to finish.
const WAIT: Duration = Duration::from_secs(30);

/// The request's fingerprint: method, path, query, content type and body.
fn fingerprint(req: &Request<Bytes>) -> String {
    let mut h = Sha256::new();
    h.update(req.method().as_str());
    h.update([0]);
    h.update(req.uri().path());
    h.update([0]);
    h.update(req.uri().query().unwrap_or_default());
    h.update([0]);
    if let Some(ct) = req.headers().get(http::header::CONTENT_TYPE) {
        h.update(ct.as_bytes());
    }
    h.update([0]);
    h.update(req.body());
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// Runs `submit` unless the request's `Idempotency-Key` already has an answer.
pub(super) async fn once(
    app: &App,
    user: &UserId,
    req: &Request<Bytes>,
    submit: impl Future<Output = Result<Response<Bytes>, AppError>>,
) -> Result<Response<Bytes>, AppError> {
    let Some(key) = req.headers().get("idempotency-key") else {
        return submit.await;
    };
    let key = match key.to_str() {
        Ok(k) if (1..=255).contains(&k.len()) => k.to_string(),
        _ => {
            return Err(invalid(
                "Idempotency-Key",
                "must be 1 to 255 visible ASCII characters",
            ))
        }
    };
    let hash = fingerprint(req);
    let started = Instant::now();
    loop {
        let now = app.clock.now();
        match app
            .idempotency
            .reserve(user, &key, &hash, now, now + HOLD)
            .await?
        {
            Reservation::Reserved => break,
            Reservation::Done { hash: h, .. } | Reservation::Pending { hash: h } if h != hash => {
                return Err(AppError::IdempotencyKeyReused)
            }
            Reservation::Done { response, .. } => return Ok(replay(&response)),
            Reservation::Pending { .. } if started.elapsed() < WAIT => {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Reservation::Pending { .. } => {
                return Err(AppError::Store(StoreError::transient(
                    "a submit with this Idempotency-Key is still running",
                )))
            }
        }
    }
    let result = submit.await;
    match &result {
        Ok(resp) if resp.status() == StatusCode::ACCEPTED => {
            let body = String::from_utf8_lossy(resp.body());
            app.idempotency
                .complete(user, &key, &body, app.clock.now() + KEEP)
                .await?;
        }
        _ => app.idempotency.release(user, &key).await?,
    }
    result
}

/// The first answer again, marked as a replay.
fn replay(stored: &str) -> Response<Bytes> {
    let body = serde_json::from_str(stored).unwrap_or_default();
    let mut resp = accepted_body(&body);
    resp.headers_mut().insert(
        "idempotent-replayed",
        http::HeaderValue::from_static("true"),
    );
    resp
}
