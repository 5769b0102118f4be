//! The HTTP side of the client: one request with the API key, 429 answered by waiting the
//! server's `Retry-After`, and submits that carry an `Idempotency-Key` and are retried with
//! the same key after a timeout or a 5xx, so a retry never starts a second job.

use super::Failure;
use serde_json::Value;
use std::time::Duration;

/// The path of job `id`: the id as one path segment, whatever its text, so that it can name no
/// other route (`x/../../health` stays an id, which is not found).
pub fn job_path(id: &str) -> String {
    // Form encoding writes a space as `+`, which a path keeps as a literal `+`: spell it `%20`
    // (a `+` of the id itself is already `%2B`).
    let id = url::form_urlencoded::byte_serialize(id.as_bytes()).collect::<String>();
    format!("/api/jobs/{}", id.replace('+', "%20"))
}

/// How many times a submit is sent at most, and the pause before each retry.
const SUBMIT_PAUSES: [Duration; 4] = [
    Duration::from_millis(500),
    Duration::from_secs(1),
    Duration::from_secs(2),
    Duration::from_secs(4),
];
/// A request's own deadline.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// Longest `Retry-After` the client waits out (a larger one is capped).
const MAX_RETRY_AFTER: Duration = Duration::from_secs(120);
/// Longest a document's upload through its link may take.
const UPLOAD_TIMEOUT: Duration = Duration::from_secs(300);
/// 429 answers in a row after which the client gives up.
const MAX_BUSY: u32 = 10;

/// An answer: status, `Retry-After` and the JSON body (Null when there is none).
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub retry_after: Option<Duration>,
    pub body: Value,
}

/// A body to send.
pub enum Body {
    None,
    Json(Value),
    Raw {
        content_type: String,
        bytes: Vec<u8>,
    },
}

/// The API at `base`, as one user.
pub struct Api {
    http: reqwest::Client,
    /// A client that follows no redirect: an artifact's link is read without the key.
    links: reqwest::Client,
    base: String,
    key: Option<String>,
}

impl Api {
    pub fn new(base: &str, key: Option<String>) -> Result<Self, Failure> {
        let client = |redirects| {
            reqwest::Client::builder()
                .timeout(REQUEST_TIMEOUT)
                .user_agent(concat!("sarvcrawl-cli/", env!("CARGO_PKG_VERSION")))
                .redirect(redirects)
                .build()
                .map_err(|e| Failure::Other(format!("cannot build the HTTP client: {e}")))
        };
        Ok(Api {
            http: client(reqwest::redirect::Policy::default())?,
            links: client(reqwest::redirect::Policy::none())?,
            base: base.trim_end_matches('/').to_string(),
            key,
        })
    }

    /// PUTs a document to the upload link an announced upload was answered with (the link
    /// carries its own authorisation: no key is sent).
    pub async fn put_link(
        &self,
        link: &str,
        content_type: &str,
        bytes: Vec<u8>,
    ) -> Result<(), Failure> {
        let net = |e: reqwest::Error| Failure::Network(e.to_string());
        let resp = self
            .links
            .put(link)
            .timeout(UPLOAD_TIMEOUT)
            .header(reqwest::header::CONTENT_TYPE, content_type)
            .body(bytes)
            .send()
            .await
            .map_err(net)?;
        if !resp.status().is_success() {
            return Err(Failure::Other(format!(
                "the upload link answered {}",
                resp.status().as_u16()
            )));
        }
        Ok(())
    }

    /// The bytes of a job's artifact at `path`: answered by the API, or by the short-lived
    /// link it redirects to (read without the key, which is the API's alone).
    pub async fn download(&self, path: &str) -> Result<Vec<u8>, Failure> {
        let net = |e: reqwest::Error| Failure::Network(e.to_string());
        let mut req = self.links.get(format!("{}{path}", self.base));
        if let Some(k) = &self.key {
            req = req.bearer_auth(k);
        }
        let mut resp = req.send().await.map_err(net)?;
        if resp.status().is_redirection() {
            let link = resp
                .headers()
                .get(reqwest::header::LOCATION)
                .and_then(|v| v.to_str().ok())
                .ok_or_else(|| Failure::Other(format!("{path}: a redirect without a link")))?
                .to_string();
            resp = self.links.get(link).send().await.map_err(net)?;
        }
        match resp.status().as_u16() {
            200 => Ok(resp.bytes().await.map_err(net)?.to_vec()),
            401 => Err(Failure::Auth),
            status => {
                let bytes = resp.bytes().await.map_err(net)?;
                Err(Failure::Api(Reply {
                    status,
                    retry_after: None,
                    body: serde_json::from_slice(&bytes).unwrap_or(Value::Null),
                }))
            }
        }
    }

    async fn send_once(
        &self,
        method: reqwest::Method,
        path: &str,
        body: &Body,
        idempotency_key: Option<&str>,
    ) -> Result<Reply, reqwest::Error> {
        let mut req = self.http.request(method, format!("{}{path}", self.base));
        if let Some(k) = &self.key {
            req = req.bearer_auth(k);
        }
        if let Some(k) = idempotency_key {
            req = req.header("idempotency-key", k);
        }
        req = match body {
            Body::None => req,
            Body::Json(v) => req
                .header("content-type", "application/json")
                .body(v.to_string()),
            Body::Raw {
                content_type,
                bytes,
            } => req.header("content-type", content_type).body(bytes.clone()),
        };
        let resp = req.send().await?;
        let status = resp.status().as_u16();
        let retry_after = resp
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(Duration::from_secs);
        let bytes = resp.bytes().await?;
        Ok(Reply {
            status,
            retry_after,
            body: serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        })
    }

    /// Sends a request; a 429 is waited out (its `Retry-After`, never less than a second) and
    /// sent again. 401 and other errors come back as [`Failure`]s.
    pub async fn send(
        &self,
        method: reqwest::Method,
        path: &str,
        body: &Body,
        idempotency_key: Option<&str>,
    ) -> Result<Reply, Failure> {
        let mut busy = 0;
        loop {
            let reply = self
                .send_once(method.clone(), path, body, idempotency_key)
                .await
                .map_err(|e| Failure::Network(e.to_string()))?;
            match reply.status {
                401 => return Err(Failure::Auth),
                429 if reply.body["error"]["code"] == "CONCURRENCY_LIMIT" => {
                    return Err(Failure::Api(reply))
                }
                429 if busy < MAX_BUSY => {
                    busy += 1;
                    let pause = reply
                        .retry_after
                        .unwrap_or(Duration::from_secs(1))
                        .clamp(Duration::from_secs(1), MAX_RETRY_AFTER);
                    eprintln!("rate limited: waiting {} s", pause.as_secs());
                    tokio::time::sleep(pause).await;
                }
                s if (200..300).contains(&s) => return Ok(reply),
                _ => return Err(Failure::Api(reply)),
            }
        }
    }

    pub async fn get(&self, path: &str) -> Result<Reply, Failure> {
        self.send(reqwest::Method::GET, path, &Body::None, None)
            .await
    }

    /// Submits a job with a fresh `Idempotency-Key`, retrying a timed-out, unanswered or 5xx
    /// submit with the same key.
    pub async fn submit(&self, path: &str, body: Body) -> Result<Reply, Failure> {
        let key = format!("cli-{}", ulid::Ulid::new());
        let mut pauses = SUBMIT_PAUSES.iter();
        loop {
            let r = self
                .send(reqwest::Method::POST, path, &body, Some(&key))
                .await;
            let retry = match &r {
                Err(Failure::Network(_)) => true,
                Err(Failure::Api(reply)) => reply.status >= 500,
                _ => false,
            };
            match pauses.next() {
                Some(pause) if retry => {
                    eprintln!("submit not answered; sending it again with the same key");
                    tokio::time::sleep(*pause).await;
                }
                _ => return r,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::job_path;

    #[test]
    fn a_job_id_is_one_path_segment_spelled_exactly() {
        assert_eq!(job_path("job_01JD"), "/api/jobs/job_01JD");
        assert_eq!(job_path("a b+c"), "/api/jobs/a%20b%2Bc");
        assert_eq!(job_path("x/../../health"), "/api/jobs/x%2F..%2F..%2Fhealth");
        // The URL a request is sent to keeps it as it is: one segment, the same id.
        let url = url::Url::parse("http://127.0.0.1/").unwrap();
        assert_eq!(
            url.join(&job_path("a b")).unwrap().path(),
            "/api/jobs/a%20b"
        );
    }
}
