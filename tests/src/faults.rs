//! A proxy in front of the AWS emulator that answers a share of the calls itself, with the
//! faults AWS answers under load, without passing them on: DynamoDB throttling, transactions
//! cancelled for a `TransactionConflict` and 500s; SQS and S3 500s and 503s. The other calls
//! reach the emulator unchanged (their `Host` kept, so their signatures still hold).

use axum::body::{to_bytes, Body};
use axum::http::{HeaderMap, HeaderValue, Request, Response, StatusCode};
use axum::Router;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// What the proxy counted.
#[derive(Debug, Default, Clone)]
pub struct Tally {
    /// Calls received.
    pub calls: usize,
    /// Faults answered, by kind (e.g. `dynamodb TransactionConflict`).
    pub faults: BTreeMap<String, usize>,
    /// SQS receives, by queue URL.
    pub receives: BTreeMap<String, usize>,
}

impl Tally {
    /// Faults answered in all.
    pub fn faulted(&self) -> usize {
        self.faults.values().sum()
    }
}

struct State {
    upstream: String,
    /// Faults per million calls.
    share: AtomicU64,
    seed: AtomicU64,
    calls: AtomicUsize,
    faults: Mutex<BTreeMap<String, usize>>,
    receives: Mutex<BTreeMap<String, usize>>,
    http: reqwest::Client,
}

/// The proxy on 127.0.0.1.
pub struct Faults {
    /// Its endpoint, for `AWS_ENDPOINT_URL`.
    pub url: String,
    state: Arc<State>,
}

impl Faults {
    /// A proxy to `upstream` answering `share` (0 to 1) of the calls with a fault.
    pub async fn start(upstream: &str, share: f64) -> Faults {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the fault proxy");
        let url = format!("http://{}", listener.local_addr().expect("proxy address"));
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64);
        let state = Arc::new(State {
            upstream: upstream.trim_end_matches('/').to_string(),
            share: AtomicU64::new(0),
            seed: AtomicU64::new(seed),
            calls: AtomicUsize::new(0),
            faults: Mutex::new(BTreeMap::new()),
            receives: Mutex::new(BTreeMap::new()),
            http: reqwest::Client::new(),
        });
        let faults = Faults { url, state };
        faults.set_share(share);
        let app = Router::new()
            .fallback(handle)
            .with_state(faults.state.clone());
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        faults
    }

    /// Changes the share of calls answered with a fault.
    pub fn set_share(&self, share: f64) {
        let per_million = (share.clamp(0.0, 1.0) * 1e6) as u64;
        self.state.share.store(per_million, Ordering::SeqCst);
    }

    /// What the proxy saw so far.
    pub fn tally(&self) -> Tally {
        Tally {
            calls: self.state.calls.load(Ordering::SeqCst),
            faults: self
                .state
                .faults
                .lock()
                .map(|f| f.clone())
                .unwrap_or_default(),
            receives: self
                .state
                .receives
                .lock()
                .map(|r| r.clone())
                .unwrap_or_default(),
        }
    }
}

impl State {
    /// A pseudo-random number (splitmix64).
    fn random(&self) -> u64 {
        let mut z = self
            .seed
            .fetch_add(0x9E37_79B9_7F4A_7C15, Ordering::SeqCst)
            .wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn count(&self, kind: String) {
        if let Ok(mut f) = self.faults.lock() {
            *f.entry(kind).or_default() += 1;
        }
    }
}

async fn handle(
    axum::extract::State(state): axum::extract::State<Arc<State>>,
    req: Request<Body>,
) -> Response<Body> {
    state.calls.fetch_add(1, Ordering::SeqCst);
    let (parts, body) = req.into_parts();
    let Ok(body) = to_bytes(body, usize::MAX).await else {
        return answer(
            StatusCode::BAD_REQUEST,
            "text/plain",
            "unreadable body".into(),
        );
    };
    if parts
        .headers
        .get("x-amz-target")
        .and_then(|v| v.to_str().ok())
        == Some("AmazonSQS.ReceiveMessage")
    {
        let queue = serde_json::from_slice::<serde_json::Value>(&body)
            .ok()
            .and_then(|b| b["QueueUrl"].as_str().map(String::from))
            .unwrap_or_default();
        if let Ok(mut r) = state.receives.lock() {
            *r.entry(queue).or_default() += 1;
        }
    }
    if state.random() % 1_000_000 < state.share.load(Ordering::SeqCst) {
        let (kind, response) = fault(&state, &parts.headers, &body);
        state.count(kind);
        return response;
    }
    let path = parts
        .uri
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .to_string();
    let mut forward = state
        .http
        .request(parts.method.clone(), format!("{}{path}", state.upstream))
        .body(body);
    for (name, value) in &parts.headers {
        forward = forward.header(name, value);
    }
    match forward.send().await {
        Ok(resp) => {
            let status = resp.status();
            let headers = resp.headers().clone();
            let bytes = resp.bytes().await.unwrap_or_default();
            let mut out = Response::new(Body::from(bytes));
            *out.status_mut() = status;
            for (name, value) in &headers {
                if !matches!(
                    name.as_str(),
                    "transfer-encoding" | "connection" | "content-length"
                ) {
                    out.headers_mut().append(name, value.clone());
                }
            }
            out
        }
        Err(e) => answer(
            StatusCode::BAD_GATEWAY,
            "text/plain",
            format!("emulator unreachable: {e}"),
        ),
    }
}

/// A fault fit for the call: its kind and the answer.
fn fault(state: &State, headers: &HeaderMap, body: &[u8]) -> (String, Response<Body>) {
    let target = headers
        .get("x-amz-target")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let pick = state.random();
    if let Some(action) = target.strip_prefix("DynamoDB_20120810.") {
        let json = "application/x-amz-json-1.0";
        let error = |kind: &str, message: &str, extra: serde_json::Value| {
            let mut body = serde_json::json!({
                "__type": format!("com.amazonaws.dynamodb.v20120810#{kind}"),
                "message": message,
            });
            if let (Some(b), Some(e)) = (body.as_object_mut(), extra.as_object()) {
                b.extend(e.clone());
            }
            body.to_string()
        };
        let choices = if action == "TransactWriteItems" { 3 } else { 2 };
        return match pick % choices {
            0 => (
                "dynamodb ThrottlingException".into(),
                answer(
                    StatusCode::BAD_REQUEST,
                    json,
                    error(
                        "ThrottlingException",
                        "Rate of requests exceeds the allowed throughput.",
                        serde_json::Value::Null,
                    ),
                ),
            ),
            1 => (
                "dynamodb 500".into(),
                answer(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    json,
                    error(
                        "InternalServerError",
                        "Internal server error",
                        serde_json::Value::Null,
                    ),
                ),
            ),
            _ => {
                // The first item met another transaction; the others passed.
                let items = serde_json::from_slice::<serde_json::Value>(body)
                    .ok()
                    .and_then(|b| b["TransactItems"].as_array().map(Vec::len))
                    .unwrap_or(1)
                    .max(1);
                let reasons: Vec<serde_json::Value> = (0..items)
                    .map(|i| {
                        if i == 0 {
                            serde_json::json!({"Code": "TransactionConflict",
                                "Message": "Transaction is ongoing for the item"})
                        } else {
                            serde_json::json!({"Code": "None"})
                        }
                    })
                    .collect();
                (
                    "dynamodb TransactionConflict".into(),
                    answer(
                        StatusCode::BAD_REQUEST,
                        json,
                        error(
                            "TransactionCanceledException",
                            "Transaction cancelled, please refer cancellation reasons for \
                             specific reasons [TransactionConflict]",
                            serde_json::json!({"CancellationReasons": reasons}),
                        ),
                    ),
                )
            }
        };
    }
    let status = if pick.is_multiple_of(2) {
        StatusCode::INTERNAL_SERVER_ERROR
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    if target.starts_with("AmazonSQS.") {
        let kind = if status == StatusCode::SERVICE_UNAVAILABLE {
            "ServiceUnavailable"
        } else {
            "InternalError"
        };
        let body = serde_json::json!({"__type": format!("com.amazonaws.sqs#{kind}"),
            "message": "We encountered an internal error. Please try again."});
        return (
            format!("sqs {}", status.as_u16()),
            answer(status, "application/x-amz-json-1.0", body.to_string()),
        );
    }
    let code = if status == StatusCode::SERVICE_UNAVAILABLE {
        "SlowDown"
    } else {
        "InternalError"
    };
    let body = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>{code}</Code>\
         <Message>Please try again.</Message></Error>"
    );
    (
        format!("s3 {}", status.as_u16()),
        answer(status, "application/xml", body),
    )
}

fn answer(status: StatusCode, content_type: &str, body: String) -> Response<Body> {
    let mut r = Response::new(Body::from(body));
    *r.status_mut() = status;
    if let Ok(v) = HeaderValue::from_str(content_type) {
        r.headers_mut().insert("content-type", v);
    }
    r
}
