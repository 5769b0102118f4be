//! Writes DynamoDB refused only because they met another write at that moment, tried again.
//! The wire already retries throttling and 5xx answers; it does not retry a transaction
//! cancelled for a conflict with another transaction (`TransactionConflict`), nor a single
//! write that met a transaction in progress on its item (`TransactionConflictException`).
//! Both are safe to send again: the cancelled transaction changed nothing.

use crate::wire::SendBy;
use crate::Dynamo;
use aws_sdk_dynamodb::config::http::HttpResponse;
use aws_sdk_dynamodb::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::types::TransactWriteItem;
use std::future::Future;
use std::time::Duration;

/// Tries of a write that keeps meeting conflicts.
const TRIES: u32 = 8;

/// Cancellation reasons of a transaction that may pass when it is sent again.
const PASSING: &[&str] = &[
    "TransactionConflict",
    "ThrottlingError",
    "ProvisionedThroughputExceeded",
];

/// The pause before try `n + 1`: random (full jitter) up to a ceiling that doubles from 20 ms
/// to 1 s.
async fn pause(n: u32) {
    let ceiling = (20u64 << n.min(6)).min(1000);
    let ms = getrandom::u64().unwrap_or(0) % ceiling + 1;
    tokio::time::sleep(Duration::from_millis(ms)).await;
}

/// Why a transaction was cancelled: the code of each of its items (`None` for one that
/// passed).
pub(crate) fn reasons(
    e: &SdkError<TransactWriteItemsError, HttpResponse>,
) -> Option<Vec<Option<&str>>> {
    match e.as_service_error() {
        Some(TransactWriteItemsError::TransactionCanceledException(c)) => Some(
            c.cancellation_reasons()
                .iter()
                .map(|r| r.code().filter(|c| *c != "None"))
                .collect(),
        ),
        _ => None,
    }
}

/// Whether the cancellation is one that sending the transaction again may get past: no
/// condition failed, and some item met a conflict or a throttle.
fn passing(e: &SdkError<TransactWriteItemsError, HttpResponse>) -> bool {
    reasons(e).is_some_and(|codes| {
        codes.iter().any(|c| c.is_some()) && codes.iter().flatten().all(|c| PASSING.contains(c))
    })
}

/// Sends a transaction of `items`, again while it is cancelled only by conflicts or
/// throttles; each try carries a fresh client token, so the wire's own retries of one try stay
/// idempotent. A cancellation for a failed condition is returned as it is.
pub(crate) async fn transact(
    client: &Dynamo,
    items: Vec<TransactWriteItem>,
) -> Result<(), SdkError<TransactWriteItemsError, HttpResponse>> {
    let mut n = 0;
    loop {
        let r = client
            .transact_write_items()
            .client_request_token(ulid::Ulid::new().to_string())
            .set_transact_items(Some(items.clone()))
            .send_by(client.wire())
            .await;
        match r {
            Ok(_) => return Ok(()),
            Err(e) if passing(&e) && n + 1 < TRIES => {}
            Err(e) => return Err(e),
        }
        pause(n).await;
        n += 1;
    }
}

/// Runs a single write made by `op`, again while it meets a transaction in progress on its
/// item.
pub(crate) async fn write<T, E, F, Fut>(mut op: F) -> Result<T, SdkError<E, HttpResponse>>
where
    E: ProvideErrorMetadata,
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, SdkError<E, HttpResponse>>>,
{
    let mut n = 0;
    loop {
        match op().await {
            Err(e)
                if e.as_service_error().and_then(ProvideErrorMetadata::code)
                    == Some("TransactionConflictException")
                    && n + 1 < TRIES => {}
            other => return other,
        }
        pause(n).await;
        n += 1;
    }
}
