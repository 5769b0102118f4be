//! DynamoDB's JSON protocol, spoken directly. The SDK's orchestration of a call (its
//! interceptors, endpoint rules, identity resolution, retry classifiers, request and answer
//! serialisers) cost several times the call's own work on the page path, where a page makes
//! five or six small calls; this client sends the same requests, built by the SDK's builders,
//! and answers with the SDK's outputs and errors, so the stores handle them as before.
//!
//! What it does that the SDK did: signature version 4 with the SDK's credentials chain (its
//! keys cached until five minutes before they expire), the endpoint (`AWS_ENDPOINT_URL_DYNAMODB`,
//! `AWS_ENDPOINT_URL`, or the region's), the deployment's timeouts (to connect, per try with
//! the answer read whole, and in all), and retries of throttles, 5xx answers, timeouts and
//! dropped connections with exponential backoff and full jitter. What it leaves out: FIPS and
//! dual-stack endpoints, and the SDK's client-side retry quota.

mod json;
mod ops;
mod read;
mod sign;

pub(crate) use ops::PagesBy;
pub use ops::SendBy;

use aws_sdk_dynamodb::config::http::HttpResponse;
use aws_sdk_dynamodb::config::{Credentials, ProvideCredentials, SharedCredentialsProvider};
use aws_sdk_dynamodb::error::{ConnectorError, ErrorMetadata, SdkError};
use aws_sdk_dynamodb::types::CancellationReason;
use aws_smithy_types::body::SdkBody;
use bytes::Bytes;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

/// DynamoDB as the stores use it: the SDK's client, whose builders make the requests (it
/// derefs to it), and the [`Wire`] that sends them.
#[derive(Clone)]
pub struct Dynamo {
    sdk: aws_sdk_dynamodb::Client,
    pub(crate) wire: Wire,
}

impl Dynamo {
    pub(crate) fn new(sdk: aws_sdk_dynamodb::Client, wire: Wire) -> Self {
        Dynamo { sdk, wire }
    }

    /// The wire the stores send their requests through.
    pub fn wire(&self) -> &Wire {
        &self.wire
    }
}

impl std::ops::Deref for Dynamo {
    type Target = aws_sdk_dynamodb::Client;
    fn deref(&self) -> &Self::Target {
        &self.sdk
    }
}

/// A DynamoDB endpoint with its keys, region and HTTP client; cheap to clone.
#[derive(Clone)]
pub struct Wire(Arc<Inner>);

struct Inner {
    /// The endpoint and the HTTP client, or why there are none (every call fails with it).
    endpoint: Result<(Endpoint, reqwest::Client), String>,
    region: String,
    credentials: Option<SharedCredentialsProvider>,
    cached: Mutex<Option<Credentials>>,
    attempts: u32,
    attempt_timeout: Duration,
    operation_timeout: Duration,
}

/// Why a call failed, before it is dressed as the SDK's error of its operation.
pub(crate) enum Failure {
    /// DynamoDB refused it.
    Refused {
        status: u16,
        code: String,
        message: Option<String>,
        reasons: Option<Vec<CancellationReason>>,
        body: Bytes,
    },
    /// It did not get through: no connection, a connection lost, no answer in time.
    Transport(reqwest::Error),
    /// The call's whole time ran out.
    Timeout,
    /// No keys to sign with (the credentials chain failed; it may pass later).
    Credentials(aws_sdk_dynamodb::error::BoxError),
    /// The request could not be made (an input this client cannot write).
    Construction(aws_sdk_dynamodb::error::BoxError),
}

/// Error codes worth another try.
const PASSING: &[&str] = &[
    "ThrottlingException",
    "ProvisionedThroughputExceededException",
    "RequestLimitExceeded",
    "RequestThrottledException",
    "TooManyRequestsException",
    "InternalServerError",
    "ServiceUnavailable",
];

impl Failure {
    fn passing(&self) -> bool {
        match self {
            Failure::Refused { status, code, .. } => {
                *status >= 500 || *status == 429 || PASSING.contains(&code.as_str())
            }
            Failure::Transport(_) => true,
            Failure::Timeout | Failure::Credentials(_) | Failure::Construction(_) => false,
        }
    }

    /// The SDK's error of an operation: `error` makes the operation's error of a refusal
    /// (from its code and message, and a cancellation's reasons).
    pub fn into_sdk<E>(
        self,
        error: impl FnOnce(ErrorMetadata, Option<Vec<CancellationReason>>) -> E,
    ) -> SdkError<E, HttpResponse> {
        match self {
            Failure::Refused {
                status,
                code,
                message,
                reasons,
                body,
            } => {
                let mut meta = ErrorMetadata::builder().code(code);
                if let Some(m) = message {
                    meta = meta.message(m);
                }
                SdkError::service_error(error(meta.build(), reasons), response(status, body))
            }
            Failure::Transport(e) if e.is_timeout() => SdkError::timeout_error(e),
            Failure::Transport(e) => SdkError::dispatch_failure(ConnectorError::io(e.into())),
            Failure::Timeout => SdkError::timeout_error("the call ran out of time"),
            Failure::Credentials(e) => SdkError::dispatch_failure(ConnectorError::other(e, None)),
            Failure::Construction(e) => SdkError::construction_failure(e),
        }
    }
}

/// An answer as the SDK's errors carry it.
pub(crate) fn response(status: u16, body: Bytes) -> HttpResponse {
    let status = status.try_into().unwrap_or_else(|_| {
        // DynamoDB answers with valid statuses; a status out of range reads as a 500.
        500u16.try_into().unwrap_or_else(|_| unreachable!())
    });
    HttpResponse::new(status, SdkBody::from(body))
}

/// The limits of [`Wire::new`]'s calls.
pub(crate) struct Limits {
    pub attempts: u32,
    pub connect: Duration,
    pub attempt: Duration,
    pub operation: Duration,
}

impl Wire {
    /// A client of `config`'s DynamoDB endpoint, region and credentials.
    pub(crate) fn new(config: &aws_config::SdkConfig, limits: &Limits) -> Self {
        let region = config
            .region()
            .map(|r| r.as_ref().to_string())
            .unwrap_or_else(|| "us-east-1".to_string());
        let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        let url = env("AWS_ENDPOINT_URL_DYNAMODB")
            .or_else(|| config.endpoint_url().map(str::to_string))
            .unwrap_or_else(|| format!("https://dynamodb.{region}.amazonaws.com"));
        let http = reqwest::Client::builder()
            .connect_timeout(limits.connect)
            .pool_idle_timeout(Duration::from_secs(30))
            .no_gzip()
            .no_brotli()
            .no_zstd()
            .no_deflate()
            .http1_only()
            .build()
            .map_err(|e| format!("HTTP client: {e}"));
        Wire(Arc::new(Inner {
            endpoint: Endpoint::parse(&url).and_then(|e| Ok((e, http?))),
            region,
            credentials: config.credentials_provider(),
            cached: Mutex::new(None),
            attempts: limits.attempts.max(1),
            attempt_timeout: limits.attempt,
            operation_timeout: limits.operation,
        }))
    }

    /// Sends `body` to the operation `target` (`DynamoDB_20120810.GetItem` ...), tried again
    /// while it fails in a way that may pass; the answer's body on success.
    pub(crate) async fn call(&self, target: &str, body: Vec<u8>) -> Result<Bytes, Failure> {
        let body = Bytes::from(body);
        let tries = async {
            let mut n = 0;
            loop {
                match self.try_once(target, body.clone()).await {
                    Err(f) if f.passing() && n + 1 < self.0.attempts => {}
                    other => return other,
                }
                let ceiling = (50u64 << n.min(7)).min(5000);
                let ms = getrandom::u64().unwrap_or(0) % ceiling + 1;
                tokio::time::sleep(Duration::from_millis(ms)).await;
                n += 1;
            }
        };
        tokio::time::timeout(self.0.operation_timeout, tries)
            .await
            .unwrap_or(Err(Failure::Timeout))
    }

    async fn try_once(&self, target: &str, body: Bytes) -> Result<Bytes, Failure> {
        let (endpoint, http) = self
            .0
            .endpoint
            .as_ref()
            .map_err(|e| Failure::Construction(e.clone().into()))?;
        let keys = self.credentials().await?;
        let time = chrono::Utc::now().format("%Y%m%dT%H%M%SZ").to_string();
        let signed = sign::sign(
            &sign::Request {
                host: &endpoint.host,
                path: &endpoint.path,
                region: &self.0.region,
                target,
                body: &body,
            },
            &sign::Keys {
                id: keys.access_key_id(),
                secret: keys.secret_access_key(),
                token: keys.session_token(),
            },
            &time,
        );
        let mut request = http
            .post(&endpoint.url)
            .timeout(self.0.attempt_timeout)
            .header("content-type", sign::CONTENT_TYPE)
            .header("x-amz-target", target)
            .header("x-amz-date", signed.date)
            .header("authorization", signed.authorization);
        if let Some(token) = keys.session_token() {
            request = request.header("x-amz-security-token", token);
        }
        let answer = request
            .body(body)
            .send()
            .await
            .map_err(Failure::Transport)?;
        let status = answer.status().as_u16();
        let bytes = answer.bytes().await.map_err(Failure::Transport)?;
        if status == 200 {
            return Ok(bytes);
        }
        let mut refusal: read::Refusal = serde_json::from_slice(&bytes).unwrap_or_default();
        let code = match refusal.code() {
            "" => format!("HTTP {status}"),
            c => c.to_string(),
        };
        Err(Failure::Refused {
            status,
            code,
            message: refusal.message.take(),
            reasons: refusal.reasons(),
            body: bytes,
        })
    }

    /// The keys to sign with: the cached ones until five minutes before they expire.
    async fn credentials(&self) -> Result<Credentials, Failure> {
        let fresh = |c: &Credentials| {
            c.expiry()
                .is_none_or(|e| e > SystemTime::now() + Duration::from_secs(300))
        };
        if let Ok(cached) = self.0.cached.lock() {
            if let Some(c) = cached.as_ref().filter(|c| fresh(c)) {
                return Ok(c.clone());
            }
        }
        let Some(provider) = &self.0.credentials else {
            return Err(Failure::Credentials("no AWS credentials".into()));
        };
        let c = provider
            .provide_credentials()
            .await
            .map_err(|e| Failure::Credentials(e.into()))?;
        if let Ok(mut cached) = self.0.cached.lock() {
            *cached = Some(c.clone());
        }
        Ok(c)
    }
}

/// Where requests go: the URL, and its host and path as signed.
struct Endpoint {
    url: String,
    host: String,
    path: String,
}

impl Endpoint {
    fn parse(url: &str) -> Result<Self, String> {
        let parsed = url::Url::parse(url).map_err(|e| format!("DynamoDB endpoint {url}: {e}"))?;
        let host = match (parsed.host_str(), parsed.port()) {
            (Some(h), Some(p)) => format!("{h}:{p}"),
            (Some(h), None) => h.to_string(),
            (None, _) => return Err(format!("DynamoDB endpoint {url} has no host")),
        };
        Ok(Endpoint {
            path: parsed.path().to_string(),
            url: parsed.to_string(),
            host,
        })
    }
}
