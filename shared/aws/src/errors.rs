//! AWS failures as [`StoreError`]s, classified once for DynamoDB, SQS and S3. A request the
//! service refuses as malformed or too large will be refused again: that is permanent.
//! Everything else may pass (the network, a timeout, a throttle, a conflict, a 5xx, and also a
//! missing resource or a denied permission, which an operator may be putting right) and is
//! retried.

// The SDKs share these types; they are named through one of them.
use aws_sdk_dynamodb::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use sarvcrawl_core::ports::StoreError;

/// Service error codes of requests that will be refused again as they are.
const PERMANENT: &[&str] = &[
    "ValidationException",
    "SerializationException",
    "ItemCollectionSizeLimitExceededException",
    "InvalidParameterValue",
    "InvalidParameterCombination",
    "InvalidArgument",
    "MissingParameter",
    "MalformedQueryString",
    "EntityTooLarge",
    "InvalidMessageContents",
    "BatchRequestTooLong",
];

/// An SDK error as a store error, its whole chain in the message and itself as the source.
pub(crate) fn sdk<E, R>(e: SdkError<E, R>) -> StoreError
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    R: std::fmt::Debug + Send + Sync + 'static,
{
    let retryable = match &e {
        SdkError::ServiceError(s) => !s.err().code().is_some_and(|c| PERMANENT.contains(&c)),
        SdkError::ConstructionFailure(_) => false,
        // Timeouts, connection failures and unreadable answers.
        _ => true,
    };
    let error = StoreError::new(Context(e));
    if retryable {
        error
    } else {
        error.for_good()
    }
}

/// An error shown with its whole chain of causes.
#[derive(Debug)]
struct Context<E: std::error::Error>(E);

impl<E: std::error::Error> std::fmt::Display for Context<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", DisplayErrorContext(&self.0))
    }
}

impl<E: std::error::Error + 'static> std::error::Error for Context<E> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.0)
    }
}
