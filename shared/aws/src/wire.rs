//! DynamoDB's and SQS's JSON protocols, and S3's `PutObject`, spoken directly. The SDK's
//! orchestration of a call (its interceptors, endpoint rules, identity resolution, retry
//! classifiers, request and answer serialisers) costs several times the call's own work on
//! the page path, where a page makes five or six small DynamoDB calls, one or two SQS calls
//! and stores one document; this client sends the same requests, built by the SDK's builders,
//! and answers with the SDK's outputs and errors, so the stores handle them as before.
//!
//! What it does that the SDK did: signature version 4 with the SDK's credentials chain (its
//! keys cached until five minutes before they expire, or for fifteen minutes), the endpoints
//! (`AWS_ENDPOINT_URL_<SERVICE>`, `AWS_ENDPOINT_URL`, or the region's; S3 path-style when
//! overridden, as the clients are), HTTPS on rustls with the Web PKI's roots and connections
//! kept open (its own HTTP/1.1 client, `http`), the deployment's timeouts (to connect, per try
//! with the answer read whole, and in all), and retries of throttles, 5xx answers, timeouts
//! and dropped connections with exponential backoff and full jitter. What it leaves out: FIPS
//! and dual-stack endpoints, proxies (`HTTPS_PROXY`), the SDK's client-side retry quota, and
//! S3's CRC checksums (the signed payload hash, which S3 checks, stands for them).

mod http;
mod json;
mod ops;
mod queue;
mod read;
mod sign;

pub(crate) use ops::PagesBy;
pub use ops::SendBy;

use aws_sdk_dynamodb::config::http::HttpResponse;
use aws_sdk_dynamodb::config::{Credentials, ProvideCredentials, SharedCredentialsProvider};
use aws_sdk_dynamodb::error::{ConnectorError, ErrorMetadata, SdkError};
use aws_sdk_dynamodb::types::CancellationReason;
use aws_sdk_s3::operation::put_object::PutObjectError;
use aws_smithy_types::body::SdkBody;
use bytes::Bytes;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

/// An SDK client as the stores use it: its builders make the requests (it derefs to it), and
/// the [`Wire`] sends them.
#[derive(Clone)]
pub struct WithWire<C> {
    sdk: C,
    wire: Wire,
}

/// DynamoDB's client with the wire.
pub type Dynamo = WithWire<aws_sdk_dynamodb::Client>;
/// SQS's client with the wire.
pub type Sqs = WithWire<aws_sdk_sqs::Client>;

impl<C> WithWire<C> {
    pub(crate) fn new(sdk: C, wire: Wire) -> Self {
        WithWire { sdk, wire }
    }

    /// The wire the stores send their requests through.
    pub fn wire(&self) -> &Wire {
        &self.wire
    }
}

impl<C> std::ops::Deref for WithWire<C> {
    type Target = C;
    fn deref(&self) -> &C {
        &self.sdk
    }
}

/// DynamoDB's, SQS's and S3's endpoints with the keys, region and HTTP client; cheap to clone.
#[derive(Clone)]
pub struct Wire(Arc<Inner>);

struct Inner {
    /// The HTTP client, or why there is none (every call fails with it).
    http: Result<http::Http, String>,
    /// DynamoDB's and SQS's endpoints, or why they are unusable (every call to them fails
    /// with it).
    dynamodb: Result<Endpoint, String>,
    sqs: Result<Endpoint, String>,
    /// S3's endpoint; objects are addressed by path on it (`/<bucket>/<key>`) when
    /// `s3_by_path`, else on `<bucket>.<host>`.
    s3: Result<Endpoint, String>,
    s3_by_path: bool,
    region: String,
    credentials: Option<SharedCredentialsProvider>,
    /// The keys last provided, and until when they are used.
    cached: Mutex<Option<(Credentials, SystemTime)>>,
    attempts: u32,
    attempt_timeout: Duration,
    operation_timeout: Duration,
}

/// Why a call failed, before it is dressed as the SDK's error of its operation.
pub(crate) enum Failure {
    /// The service refused it.
    Refused {
        status: u16,
        code: String,
        message: Option<String>,
        reasons: Option<Vec<CancellationReason>>,
        body: Bytes,
    },
    /// It did not get through: no connection, a connection lost, no answer in time, an
    /// answer that is not HTTP.
    Transport(http::Error),
    /// The call's whole time ran out.
    Timeout,
    /// The answer was longer than [`MAX_ANSWER`].
    Oversized,
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
    "RequestThrottled",
    "TooManyRequestsException",
    "SlowDown",
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
            Failure::Timeout
            | Failure::Oversized
            | Failure::Credentials(_)
            | Failure::Construction(_) => false,
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
            Failure::Oversized => SdkError::response_error(
                format!("an answer over {MAX_ANSWER} bytes"),
                response(200, Bytes::new()),
            ),
            Failure::Credentials(e) => SdkError::dispatch_failure(ConnectorError::other(e, None)),
            Failure::Construction(e) => SdkError::construction_failure(e),
        }
    }
}

/// The longest answer read: DynamoDB's longest (a `BatchGetItem` of 100 items of 400 KB) is
/// about 40 MB, SQS's about 2.6 MB (ten messages of 256 KiB).
const MAX_ANSWER: usize = 48 << 20;

/// An answer as the SDK's errors carry it.
pub(crate) fn response(status: u16, body: Bytes) -> HttpResponse {
    let status = status.try_into().unwrap_or_else(|_| {
        // AWS answers with valid statuses; a status out of range reads as a 500.
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
    /// A client of `config`'s endpoints, region and credentials.
    pub(crate) fn new(config: &aws_config::SdkConfig, limits: &Limits) -> Self {
        let region = config
            .region()
            .map(|r| r.as_ref().to_string())
            .unwrap_or_else(|| "us-east-1".to_string());
        let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        let overridden = |service: &str| {
            env(&format!("AWS_ENDPOINT_URL_{service}"))
                .or_else(|| config.endpoint_url().map(str::to_string))
        };
        let dynamodb = overridden("DYNAMODB")
            .unwrap_or_else(|| format!("https://dynamodb.{region}.amazonaws.com"));
        let sqs =
            overridden("SQS").unwrap_or_else(|| format!("https://sqs.{region}.amazonaws.com"));
        let s3 = overridden("S3");
        let s3_by_path = s3.is_some();
        let s3 = s3.unwrap_or_else(|| format!("https://s3.{region}.amazonaws.com"));
        let http = http::Http::new(limits.connect);
        Wire(Arc::new(Inner {
            http,
            dynamodb: Endpoint::parse(&dynamodb),
            sqs: Endpoint::parse(&sqs),
            s3: Endpoint::parse(&s3),
            s3_by_path,
            region,
            credentials: config.credentials_provider(),
            cached: Mutex::new(None),
            attempts: limits.attempts.max(1),
            attempt_timeout: limits.attempt,
            operation_timeout: limits.operation,
        }))
    }

    /// Sends `body` to the JSON operation `target` of `service` (`DynamoDB_20120810.GetItem`,
    /// `AmazonSQS.ReceiveMessage` ...); the answer's body. `longer` is added to the call's
    /// timeouts (a long poll's wait).
    pub(crate) async fn call(
        &self,
        service: Json,
        target: &str,
        body: Vec<u8>,
        longer: Duration,
    ) -> Result<Bytes, Failure> {
        let (endpoint, name) = match service {
            Json::DynamoDb => (&self.0.dynamodb, "dynamodb"),
            Json::Sqs => (&self.0.sqs, "sqs"),
        };
        let endpoint = endpoint.as_ref().map_err(|e| construction(e))?;
        let hash = sign::payload_hash(&body);
        let headers = [
            ("content-type", "application/x-amz-json-1.0"),
            ("x-amz-target", target),
        ];
        let call = Call {
            method: "POST",
            origin: &endpoint.origin,
            host: &endpoint.host,
            path: &endpoint.path,
            service: name,
            headers: &headers,
            payload_hash: &hash,
            longer,
        };
        self.send(&call, Bytes::from(body), read::json_refusal)
            .await
    }

    /// Stores `body` in S3 as the object `key` of `bucket`, of type `content_type`; the
    /// failure as S3's `PutObject` error.
    pub async fn put_object(
        &self,
        bucket: &str,
        key: &str,
        content_type: &str,
        body: Bytes,
    ) -> Result<(), SdkError<PutObjectError, HttpResponse>> {
        self.put(bucket, key, content_type, body)
            .await
            .map_err(|f| f.into_sdk(|meta, _| PutObjectError::generic(meta)))
    }

    async fn put(
        &self,
        bucket: &str,
        key: &str,
        content_type: &str,
        body: Bytes,
    ) -> Result<(), Failure> {
        let endpoint = self.0.s3.as_ref().map_err(|e| construction(e))?;
        let (origin, host, path) = endpoint.object(self.0.s3_by_path, bucket, key);
        let hash = sign::payload_hash(&body);
        let headers = [
            ("content-type", content_type),
            ("x-amz-content-sha256", hash.as_str()),
        ];
        let call = Call {
            method: "PUT",
            origin: &origin,
            host: &host,
            path: &path,
            service: "s3",
            headers: &headers,
            payload_hash: &hash,
            longer: Duration::ZERO,
        };
        self.send(&call, body, read::s3_refusal).await.map(|_| ())
    }

    /// Sends `call` with `body`, tried again while it fails in a way that may pass; `refusal`
    /// reads an error's body.
    async fn send(
        &self,
        call: &Call<'_>,
        body: Bytes,
        refusal: fn(u16, Bytes) -> Failure,
    ) -> Result<Bytes, Failure> {
        let tries = async {
            let mut n = 0;
            loop {
                match self.try_once(call, body.clone(), refusal).await {
                    Err(f) if f.passing() && n + 1 < self.0.attempts => {}
                    other => return other,
                }
                let ceiling = (50u64 << n.min(7)).min(5000);
                let ms = getrandom::u64().unwrap_or(0) % ceiling + 1;
                tokio::time::sleep(Duration::from_millis(ms)).await;
                n += 1;
            }
        };
        tokio::time::timeout(self.0.operation_timeout + call.longer * 2, tries)
            .await
            .unwrap_or(Err(Failure::Timeout))
    }

    async fn try_once(
        &self,
        call: &Call<'_>,
        body: Bytes,
        refusal: fn(u16, Bytes) -> Failure,
    ) -> Result<Bytes, Failure> {
        let http = self.0.http.as_ref().map_err(|e| construction(e))?;
        let keys = self.credentials().await?;
        let time = chrono::Utc::now().format("%Y%m%dT%H%M%SZ").to_string();
        let authorization = sign::sign(
            &sign::Request {
                method: call.method,
                host: call.host,
                path: call.path,
                service: call.service,
                region: &self.0.region,
                headers: call.headers,
                payload_hash: call.payload_hash,
            },
            &sign::Keys {
                id: keys.access_key_id(),
                secret: keys.secret_access_key(),
                token: keys.session_token(),
            },
            &time,
        );
        let mut headers = Vec::with_capacity(call.headers.len() + 3);
        headers.extend_from_slice(call.headers);
        headers.push(("x-amz-date", time.as_str()));
        headers.push(("authorization", authorization.as_str()));
        if let Some(token) = keys.session_token() {
            headers.push(("x-amz-security-token", token));
        }
        let request = http::Request {
            method: call.method,
            target: call.path,
            host: call.host,
            headers: &headers,
            body: &body,
        };
        let within = self.0.attempt_timeout + call.longer;
        let answer = tokio::time::timeout(within, http.send(call.origin, &request, MAX_ANSWER))
            .await
            .unwrap_or(Err(http::Error::Timeout(within)))
            .map_err(|e| match e {
                http::Error::Oversized => Failure::Oversized,
                http::Error::Request(what) => construction(what),
                e => Failure::Transport(e),
            })?;
        if answer.status == 200 {
            return Ok(answer.body);
        }
        Err(refusal(answer.status, answer.body))
    }

    /// The keys to sign with: the cached ones until five minutes before they expire (keys
    /// without an expiry are asked for again every fifteen minutes, as the SDK's cache does).
    async fn credentials(&self) -> Result<Credentials, Failure> {
        let now = SystemTime::now();
        if let Ok(cached) = self.0.cached.lock() {
            if let Some((c, _)) = cached.as_ref().filter(|(_, until)| *until > now) {
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
        let until = match c.expiry() {
            Some(expiry) => expiry
                .checked_sub(Duration::from_secs(300))
                .unwrap_or(expiry),
            None => now + Duration::from_secs(900),
        };
        if let Ok(mut cached) = self.0.cached.lock() {
            *cached = Some((c.clone(), until));
        }
        Ok(c)
    }
}

/// One request, as sent and as signed.
struct Call<'a> {
    method: &'a str,
    origin: &'a http::Origin,
    host: &'a str,
    path: &'a str,
    service: &'a str,
    headers: &'a [(&'a str, &'a str)],
    payload_hash: &'a str,
    /// Added to the timeouts.
    longer: Duration,
}

/// The services spoken in JSON.
#[derive(Clone, Copy)]
pub(crate) enum Json {
    DynamoDb,
    Sqs,
}

fn construction(e: &str) -> Failure {
    Failure::Construction(e.into())
}

/// Appends `s` percent-encoded as a path: every byte but the unreserved ones and `/`.
fn encode_path(path: &mut String, s: &str) {
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~/".contains(&b) {
            path.push(b as char);
        } else {
            path.push_str(&format!("%{b:02X}"));
        }
    }
}

/// Where requests go: the origin connected to, and the host and path as signed.
struct Endpoint {
    origin: http::Origin,
    host: String,
    path: String,
}

impl Endpoint {
    /// The origin, host and path of S3's object `key` of `bucket` on this endpoint: by path
    /// (`/<bucket>/<key>`) when `by_path` or the bucket's name has a dot (which a TLS
    /// certificate's wildcard does not cover), else on the bucket's own host.
    fn object(&self, by_path: bool, bucket: &str, key: &str) -> (http::Origin, String, String) {
        let mut path = String::with_capacity(self.path.len() + bucket.len() + key.len() + 8);
        path.push_str(self.path.trim_end_matches('/'));
        let (origin, host) = if by_path || bucket.contains('.') {
            path.push('/');
            encode_path(&mut path, bucket);
            (self.origin.clone(), self.host.clone())
        } else {
            let name = format!("{bucket}.{}", self.origin.host);
            (
                self.origin.with_host(&name),
                format!("{bucket}.{}", self.host),
            )
        };
        path.push('/');
        encode_path(&mut path, key);
        (origin, host, path)
    }

    fn parse(url: &str) -> Result<Self, String> {
        let parsed = url::Url::parse(url).map_err(|e| format!("DynamoDB endpoint {url}: {e}"))?;
        let host = match (parsed.host_str(), parsed.port()) {
            (Some(h), Some(p)) => format!("{h}:{p}"),
            (Some(h), None) => h.to_string(),
            (None, _) => return Err(format!("DynamoDB endpoint {url} has no host")),
        };
        Ok(Endpoint {
            origin: http::Origin::of(&parsed)?,
            path: parsed.path().to_string(),
            host,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_dynamodb::config::{Region, SharedCredentialsProvider};
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Keys expiring `valid` from when they are asked for, counting the asks.
    #[derive(Debug)]
    struct Counted {
        asked: Arc<AtomicUsize>,
        valid: Option<Duration>,
    }

    impl ProvideCredentials for Counted {
        fn provide_credentials<'a>(
            &'a self,
        ) -> aws_credential_types::provider::future::ProvideCredentials<'a>
        where
            Self: 'a,
        {
            self.asked.fetch_add(1, Ordering::SeqCst);
            let expiry = self.valid.map(|v| SystemTime::now() + v);
            aws_credential_types::provider::future::ProvideCredentials::ready(Ok(Credentials::new(
                "id", "secret", None, expiry, "test",
            )))
        }
    }

    /// A wire whose keys expire `valid` after they are given, to `endpoint` when given.
    fn wire(
        valid: Option<Duration>,
        endpoint: Option<String>,
        timeout: Duration,
    ) -> (Wire, Arc<AtomicUsize>) {
        let asked = Arc::new(AtomicUsize::new(0));
        let mut config = aws_config::SdkConfig::builder()
            .region(Region::new("eu-west-1"))
            .credentials_provider(SharedCredentialsProvider::new(Counted {
                asked: asked.clone(),
                valid,
            }));
        if let Some(e) = endpoint {
            config = config.endpoint_url(e);
        }
        let limits = Limits {
            attempts: 1,
            connect: Duration::from_secs(1),
            attempt: timeout,
            operation: timeout,
        };
        (Wire::new(&config.build(), &limits), asked)
    }

    /// Objects are addressed by path on an overridden endpoint and for dotted buckets, else on
    /// the bucket's host; keys are percent-encoded but for their slashes.
    #[test]
    fn objects_are_addressed_as_s3_expects() {
        let local = Endpoint::parse("http://127.0.0.1:4566").unwrap();
        let aws = Endpoint::parse("https://s3.eu-west-1.amazonaws.com").unwrap();
        let key = "docs/u s+é/job_1/a~b.json";
        let encoded = "docs/u%20s%2B%C3%A9/job_1/a~b.json";
        assert_eq!(
            local.object(true, "bucket", key),
            (
                http::Origin {
                    tls: false,
                    host: "127.0.0.1".into(),
                    port: 4566
                },
                "127.0.0.1:4566".to_string(),
                format!("/bucket/{encoded}")
            )
        );
        assert_eq!(
            aws.object(false, "bucket", key),
            (
                http::Origin {
                    tls: true,
                    host: "bucket.s3.eu-west-1.amazonaws.com".into(),
                    port: 443
                },
                "bucket.s3.eu-west-1.amazonaws.com".to_string(),
                format!("/{encoded}")
            )
        );
        assert_eq!(
            aws.object(false, "my.bucket", "k").2,
            "/my.bucket/k".to_string()
        );
    }

    /// An endless answer is given up once it passes the cap, not read until the try's
    /// timeout.
    #[tokio::test]
    async fn an_endless_answer_is_cut_off_at_the_cap() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut conn, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let mut request = [0u8; 8192];
                    let _ = conn.read(&mut request).await;
                    let head = "HTTP/1.1 200 OK\r\ncontent-type: application/x-amz-json-1.0\r\n\
                                transfer-encoding: chunked\r\n\r\n";
                    let _ = conn.write_all(head.as_bytes()).await;
                    let chunk = format!("100000\r\n{}\r\n", " ".repeat(1 << 20));
                    while conn.write_all(chunk.as_bytes()).await.is_ok() {}
                });
            }
        });
        let (wire, _) = wire(
            None,
            Some(format!("http://{addr}")),
            Duration::from_secs(20),
        );
        let started = std::time::Instant::now();
        let answer = wire
            .call(
                Json::DynamoDb,
                "DynamoDB_20120810.GetItem",
                b"{}".to_vec(),
                Duration::ZERO,
            )
            .await;
        assert!(matches!(answer, Err(Failure::Oversized)));
        assert!(started.elapsed() < Duration::from_secs(10));
    }

    /// A request the HTTP client will not write (a header value with a line break) fails as
    /// one that cannot be made, not as a transport failure worth another try.
    #[tokio::test]
    async fn a_request_that_cannot_be_written_is_not_tried_again() {
        let (wire, _) = wire(
            None,
            Some("http://127.0.0.1:9".into()),
            Duration::from_secs(1),
        );
        let answer = wire
            .call(
                Json::DynamoDb,
                "DynamoDB_20120810.GetItem\r\nx-injected: 1",
                b"{}".to_vec(),
                Duration::ZERO,
            )
            .await;
        assert!(matches!(answer, Err(Failure::Construction(_))));
    }

    /// A query's pages are followed while each names a new key to start from, and end when
    /// one names the key it started from.
    #[tokio::test]
    async fn a_query_ends_on_a_page_that_names_its_own_start() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let asked = Arc::new(AtomicUsize::new(0));
        let count = asked.clone();
        tokio::spawn(async move {
            while let Ok((mut conn, _)) = listener.accept().await {
                let count = count.clone();
                tokio::spawn(async move {
                    let mut request = [0u8; 8192];
                    while matches!(conn.read(&mut request).await, Ok(n) if n > 0) {
                        // The first two pages name new keys, then every page names "k2".
                        let n = count.fetch_add(1, Ordering::SeqCst).min(2);
                        let body = format!(
                            "{{\"Items\":[{{\"PK\":{{\"S\":\"{n}\"}}}}],\
                             \"LastEvaluatedKey\":{{\"PK\":{{\"S\":\"k{n}\"}}}}}}"
                        );
                        let answer = format!(
                            "HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n{body}",
                            body.len()
                        );
                        if conn.write_all(answer.as_bytes()).await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
        let (wire, _) = wire(None, Some(format!("http://{addr}")), Duration::from_secs(2));
        let config = aws_sdk_dynamodb::Config::builder()
            .behavior_version(aws_sdk_dynamodb::config::BehaviorVersion::latest())
            .build();
        let query = aws_sdk_dynamodb::Client::from_conf(config)
            .query()
            .table_name("t")
            .key_condition_expression("PK = :pk");
        let mut pages = ops::PagesBy::pages_by(query, &wire);
        let read = async {
            let mut items = 0;
            while let Some(item) = pages.next().await {
                item.unwrap();
                items += 1;
            }
            items
        };
        let items = tokio::time::timeout(Duration::from_secs(5), read).await;
        // k0, k1, k2, then k2 again: four pages read, the last one's key not followed.
        assert_eq!(items.ok(), Some(4));
        assert_eq!(asked.load(Ordering::SeqCst), 4);
    }

    /// Keys are asked for once while they have more than five minutes left, and every time
    /// once they have less.
    #[tokio::test]
    async fn keys_are_cached_until_five_minutes_before_they_expire() {
        for (valid, asks) in [
            (Some(Duration::from_secs(3600)), 1),
            (None, 1),
            (Some(Duration::from_secs(60)), 3),
        ] {
            let (wire, asked) = wire(valid, None, Duration::from_secs(1));
            for _ in 0..3 {
                assert!(wire.credentials().await.is_ok());
            }
            assert_eq!(asked.load(Ordering::SeqCst), asks, "{valid:?}");
        }
    }
}
