//! The CPU one SDK call costs this process, against an endpoint that answers at once (so that
//! only the client's work is counted: building, signing and sending the request, reading and
//! parsing the answer). Run by `bench/sdk_calls.sh`, which serves such an endpoint with nginx.
//!
//!     AWS_ENDPOINT_URL=http://127.0.0.1:PORT call_cpu OPERATION CALLS AT_ONCE
//!
//! OPERATION: `get` (DynamoDB GetItem), `query` (DynamoDB Query), `put-object` (S3
//! PutObject of a 73 KB document, the generated benchmark site's average page) or `bare-get`
//! (the same GetItem without the SDK: its JSON written directly, signed with SigV4 by hand,
//! sent through a pooled hyper client; what a lean client of the page path could cost).

use aws_sdk_dynamodb::types::AttributeValue;
use std::time::Instant;

/// CPU seconds this process used so far (user and system).
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit(')')
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (ticks(11) + ticks(12)) / 100.0
}

async fn call(
    clients: &sarvcrawl_aws::Clients,
    bare: &bare::Client,
    op: &str,
    body: &bytes::Bytes,
) {
    let done = match op {
        "bare-get" => bare.get_item().await,
        "get" => clients
            .dynamo
            .get_item()
            .table_name("t")
            .key("PK", AttributeValue::S("JOB#u#j".into()))
            .key("SK", AttributeValue::S("URL#0123456789abcdef".into()))
            .send()
            .await
            .map(|_| ())
            .map_err(|e| e.to_string()),
        "query" => clients
            .dynamo
            .query()
            .table_name("t")
            .key_condition_expression("PK = :pk AND SK BETWEEN :c AND :j")
            .expression_attribute_values(":pk", AttributeValue::S("JOB#u#j".into()))
            .expression_attribute_values(":c", AttributeValue::S("COUNT".into()))
            .expression_attribute_values(":j", AttributeValue::S("JOB".into()))
            .send()
            .await
            .map(|_| ())
            .map_err(|e| e.to_string()),
        _ => clients
            .s3
            .put_object()
            .bucket("b")
            .key("docs/j/0123456789abcdef.json")
            .body(body.clone().into())
            .send()
            .await
            .map(|_| ())
            .map_err(|e| e.to_string()),
    };
    if let Err(e) = done {
        eprintln!("call failed: {e}");
        std::process::exit(1);
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let op = args.get(1).map_or("get", String::as_str).to_string();
    let calls: usize = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(5000);
    let at_once: usize = args.get(3).and_then(|a| a.parse().ok()).unwrap_or(1).max(1);
    let clients = std::sync::Arc::new(sarvcrawl_aws::Clients::from_env().await);
    let body = bytes::Bytes::from(vec![b'x'; 73 * 1024]);
    let bare = std::sync::Arc::new(bare::Client::from_env());
    // Warm up: connections, credentials, the SDK's caches.
    for _ in 0..100 {
        call(&clients, &bare, &op, &body).await;
    }
    let per_task = calls / at_once;
    let (cpu0, wall0) = (cpu_seconds(), Instant::now());
    let tasks: Vec<_> = (0..at_once)
        .map(|_| {
            let (clients, bare, op, body) =
                (clients.clone(), bare.clone(), op.clone(), body.clone());
            tokio::spawn(async move {
                for _ in 0..per_task {
                    call(&clients, &bare, &op, &body).await;
                }
            })
        })
        .collect();
    for t in tasks {
        let _ = t.await;
    }
    let (cpu, wall) = (cpu_seconds() - cpu0, wall0.elapsed().as_secs_f64());
    let n = (per_task * at_once) as f64;
    println!(
        "{op:<10} {at_once:>3} at once: {:>6.0} us of CPU a call, {:>6.0} calls/s",
        cpu * 1e6 / n,
        n / wall
    );
}

/// A DynamoDB GetItem made without the SDK.
mod bare {
    use hmac::{Hmac, Mac};
    use http_body_util::{BodyExt, Full};
    use hyper_util::client::legacy::{connect::HttpConnector, Client as Hyper};
    use hyper_util::rt::TokioExecutor;
    use sha2::{Digest, Sha256};
    use std::collections::HashMap;
    use std::fmt::Write;

    type HmacSha256 = Hmac<Sha256>;

    pub struct Client {
        http: Hyper<HttpConnector, Full<bytes::Bytes>>,
        endpoint: String,
        host: String,
        access_key: String,
        secret: String,
        region: String,
    }

    /// One attribute value of an answer's item (the shapes the store reads).
    #[derive(serde::Deserialize)]
    #[allow(dead_code)]
    pub enum Value {
        S(String),
        N(String),
        #[serde(rename = "BOOL")]
        Bool(bool),
    }

    #[derive(serde::Deserialize)]
    #[serde(rename_all = "PascalCase")]
    #[allow(dead_code)]
    struct Answer {
        item: Option<HashMap<String, Value>>,
    }

    fn hex(bytes: &[u8]) -> String {
        let mut out = String::with_capacity(bytes.len() * 2);
        for b in bytes {
            let _ = write!(out, "{b:02x}");
        }
        out
    }

    fn mac(key: &[u8], data: &[u8]) -> Vec<u8> {
        // HMAC takes a key of any length: this never returns early.
        let Ok(mut m) = HmacSha256::new_from_slice(key) else {
            return Vec::new();
        };
        m.update(data);
        m.finalize().into_bytes().to_vec()
    }

    impl Client {
        pub fn from_env() -> Self {
            let var = |k: &str| std::env::var(k).unwrap_or_default();
            let endpoint = var("AWS_ENDPOINT_URL");
            let host = endpoint
                .trim_start_matches("http://")
                .trim_end_matches('/')
                .to_string();
            Client {
                http: Hyper::builder(TokioExecutor::new()).build_http(),
                endpoint,
                host,
                access_key: var("AWS_ACCESS_KEY_ID"),
                secret: var("AWS_SECRET_ACCESS_KEY"),
                region: var("AWS_REGION"),
            }
        }

        pub async fn get_item(&self) -> Result<(), String> {
            let target = "DynamoDB_20120810.GetItem";
            let body = serde_json::json!({
                "TableName": "t",
                "Key": {"PK": {"S": "JOB#u#j"}, "SK": {"S": "URL#0123456789abcdef"}},
            })
            .to_string();
            let now = chrono::Utc::now();
            let stamp = now.format("%Y%m%dT%H%M%SZ").to_string();
            let day = &stamp[..8];
            let scope = format!("{day}/{}/dynamodb/aws4_request", self.region);
            let canonical = format!(
                "POST\n/\n\ncontent-type:application/x-amz-json-1.0\nhost:{}\nx-amz-date:{stamp}\n\
                 x-amz-target:{target}\n\ncontent-type;host;x-amz-date;x-amz-target\n{}",
                self.host,
                hex(&Sha256::digest(body.as_bytes()))
            );
            let to_sign = format!(
                "AWS4-HMAC-SHA256\n{stamp}\n{scope}\n{}",
                hex(&Sha256::digest(canonical.as_bytes()))
            );
            let key = mac(format!("AWS4{}", self.secret).as_bytes(), day.as_bytes());
            let key = mac(&key, self.region.as_bytes());
            let key = mac(&key, b"dynamodb");
            let key = mac(&key, b"aws4_request");
            let signature = hex(&mac(&key, to_sign.as_bytes()));
            let request = http::Request::post(&self.endpoint)
                .header("content-type", "application/x-amz-json-1.0")
                .header("x-amz-date", &stamp)
                .header("x-amz-target", target)
                .header(
                    "authorization",
                    format!(
                        "AWS4-HMAC-SHA256 Credential={}/{scope}, \
                         SignedHeaders=content-type;host;x-amz-date;x-amz-target, \
                         Signature={signature}",
                        self.access_key
                    ),
                )
                .body(Full::new(bytes::Bytes::from(body)))
                .map_err(|e| e.to_string())?;
            let answer = self
                .http
                .request(request)
                .await
                .map_err(|e| e.to_string())?;
            if !answer.status().is_success() {
                return Err(format!("status {}", answer.status()));
            }
            let bytes = answer
                .into_body()
                .collect()
                .await
                .map_err(|e| e.to_string())?
                .to_bytes();
            serde_json::from_slice::<Answer>(&bytes).map_err(|e| e.to_string())?;
            Ok(())
        }
    }
}
