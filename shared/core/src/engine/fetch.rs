//! The one guarded HTTP client (SECURITY.md S1-S6, S8, V2, V3). Every outbound request of the
//! service goes through [`Fetcher`].

use super::guard::{resolve_checked, AddressPolicy, BlockedAddress, GuardedResolver};
use crate::domain::ErrorCode;
use bytes::{Bytes, BytesMut};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use url::Url;

/// Limits and identity of the fetcher.
#[derive(Debug, Clone)]
pub struct FetchConfig {
    pub user_agent: String,
    /// Cap on decoded body bytes of a page.
    pub max_body_bytes: usize,
    /// Cap on decoded body bytes of a document (a PDF or a Word document, by its type or its
    /// signature).
    pub max_document_bytes: usize,
    pub connect_timeout: Duration,
    /// Longest silence between two reads of a response.
    pub read_timeout: Duration,
    pub max_redirects: usize,
}

impl Default for FetchConfig {
    fn default() -> Self {
        FetchConfig {
            user_agent: default_user_agent(),
            max_body_bytes: 10 * 1024 * 1024,
            max_document_bytes: 25 * 1024 * 1024,
            connect_timeout: Duration::from_secs(10),
            read_timeout: Duration::from_secs(15),
            max_redirects: 5,
        }
    }
}

/// `SarvCrawl/<version> (+<project url>)`.
pub fn default_user_agent() -> String {
    format!(
        "SarvCrawl/{} (+https://github.com/sarvcrawl/sarvcrawl)",
        crate::VERSION
    )
}

/// Why a fetch failed. Messages never carry a resolved address or low-level detail (S8).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, serde::Serialize, serde::Deserialize)]
pub enum FetchError {
    #[error("the destination address is not allowed")]
    Blocked,
    #[error("the request timed out")]
    Timeout,
    #[error("the response body is larger than {0} bytes")]
    TooLarge(usize),
    #[error("more than {0} redirects")]
    TooManyRedirects(usize),
    #[error("redirect to an invalid or non-http(s) location")]
    BadRedirect,
    #[error("the page could not be fetched")]
    Failed,
}

impl FetchError {
    /// The API error code of this failure.
    pub fn code(&self) -> ErrorCode {
        match self {
            FetchError::Blocked => ErrorCode::BlockedAddress,
            FetchError::Timeout => ErrorCode::Timeout,
            FetchError::TooLarge(_) => ErrorCode::TooLarge,
            FetchError::TooManyRedirects(_) | FetchError::BadRedirect | FetchError::Failed => {
                ErrorCode::FetchFailed
            }
        }
    }
}

/// The answer to a POST: its status, and how long it asked to be left alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Posted {
    pub status: u16,
    pub retry_after: Option<Duration>,
}

/// A fetched response with its body read (and decoded) in full.
#[derive(Debug, Clone)]
pub struct Fetched {
    /// The URL after redirects.
    pub url: Url,
    pub status: u16,
    pub content_type: Option<String>,
    /// `Retry-After` in seconds, when the server sent one.
    pub retry_after: Option<Duration>,
    pub body: Bytes,
    pub elapsed: Duration,
}

/// One guarded HTTP client: checked destinations, no proxies, manual and re-checked
/// redirects, timeouts and a decoded-body cap.
pub struct Fetcher {
    client: reqwest::Client,
    policy: Arc<AddressPolicy>,
    config: FetchConfig,
}

impl Fetcher {
    pub fn new(policy: AddressPolicy, config: FetchConfig) -> Result<Self, reqwest::Error> {
        let policy = Arc::new(policy);
        let client = reqwest::Client::builder()
            .no_proxy()
            .redirect(reqwest::redirect::Policy::none())
            .dns_resolver(Arc::new(GuardedResolver::new(policy.clone())))
            .connect_timeout(config.connect_timeout)
            .read_timeout(config.read_timeout)
            .user_agent(config.user_agent.clone())
            .pool_idle_timeout(Duration::from_secs(30))
            .build()?;
        Ok(Fetcher {
            client,
            policy,
            config,
        })
    }

    pub fn policy(&self) -> &AddressPolicy {
        &self.policy
    }

    pub fn user_agent(&self) -> &str {
        &self.config.user_agent
    }

    /// Whether `url` leads to an address this client may reach: its IP literal, or every
    /// address its name resolves to, checked as a fetch would.
    pub async fn check_destination(&self, url: &Url) -> Result<(), FetchError> {
        self.policy
            .check_url(url)
            .map_err(|_| FetchError::Blocked)?;
        let Some(url::Host::Domain(name)) = url.host() else {
            return Ok(());
        };
        let port = url.port_or_known_default().unwrap_or(443);
        match resolve_checked(&self.policy, name, port).await {
            Ok(Some(_)) => Ok(()),
            Ok(None) => Err(FetchError::Blocked),
            Err(_) => Err(FetchError::Failed),
        }
    }

    /// POSTs `body` to `url` once, within `deadline`, and returns the status and the
    /// answer's `Retry-After` (in seconds). Redirects are not followed (a 3xx is the answer);
    /// the destination is checked like every fetch's.
    pub async fn post(
        &self,
        url: &Url,
        headers: &[(String, String)],
        body: Bytes,
        deadline: Duration,
    ) -> Result<Posted, FetchError> {
        if !matches!(url.scheme(), "http" | "https") {
            return Err(FetchError::BadRedirect);
        }
        self.policy
            .check_url(url)
            .map_err(|_| FetchError::Blocked)?;
        let mut req = self.client.post(url.clone()).body(body);
        for (k, v) in headers {
            req = req.header(k, v);
        }
        let send = async {
            let resp = req.send().await.map_err(classify)?;
            let retry_after = resp
                .headers()
                .get(reqwest::header::RETRY_AFTER)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.trim().parse::<u64>().ok())
                .map(Duration::from_secs);
            Ok::<_, FetchError>(Posted {
                status: resp.status().as_u16(),
                retry_after,
            })
        };
        match tokio::time::timeout(deadline, send).await {
            Ok(r) => r,
            Err(_) => Err(FetchError::Timeout),
        }
    }

    /// GETs `url`, following at most the configured number of redirects, each re-checked,
    /// all within `deadline`.
    pub async fn get(
        &self,
        url: &Url,
        headers: &BTreeMap<String, String>,
        deadline: Duration,
    ) -> Result<Fetched, FetchError> {
        let started = Instant::now();
        match tokio::time::timeout(deadline, self.get_inner(url, headers, started)).await {
            Ok(r) => r,
            Err(_) => Err(FetchError::Timeout),
        }
    }

    async fn get_inner(
        &self,
        url: &Url,
        headers: &BTreeMap<String, String>,
        started: Instant,
    ) -> Result<Fetched, FetchError> {
        let mut current = url.clone();
        let mut hops = 0;
        // S10: credentials go to the requested origin only; once a redirect leaves it they are
        // dropped for good, as browsers do.
        let mut credentials = true;
        loop {
            if !matches!(current.scheme(), "http" | "https") {
                return Err(FetchError::BadRedirect);
            }
            self.policy
                .check_url(&current)
                .map_err(|_| FetchError::Blocked)?;
            let mut req = self.client.get(current.clone());
            credentials &= current.origin() == url.origin();
            for (k, v) in headers {
                if credentials || !is_credential(k) {
                    req = req.header(k, v);
                }
            }
            let mut resp = req.send().await.map_err(classify)?;
            let status = resp.status();
            if status.is_redirection() {
                if let Some(loc) = resp.headers().get(http::header::LOCATION) {
                    hops += 1;
                    if hops > self.config.max_redirects {
                        return Err(FetchError::TooManyRedirects(self.config.max_redirects));
                    }
                    let loc = loc.to_str().map_err(|_| FetchError::BadRedirect)?;
                    current = current.join(loc).map_err(|_| FetchError::BadRedirect)?;
                    current.set_fragment(None);
                    continue;
                }
            }
            let content_type = resp
                .headers()
                .get(http::header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string);
            let retry_after = resp
                .headers()
                .get(http::header::RETRY_AFTER)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| retry_after(v, chrono::Utc::now()));
            let document_cap = self.config.max_document_bytes;
            let mut cap = if content_type.as_deref().is_some_and(is_document_type) {
                document_cap
            } else {
                self.config.max_body_bytes
            };
            let mut body = BytesMut::new();
            while let Some(chunk) = resp.chunk().await.map_err(classify)? {
                if body.is_empty()
                    && (chunk.starts_with(b"%PDF-")
                        || (chunk.starts_with(b"PK\x03\x04")
                            && super::docx::is_docx_path(current.path())))
                {
                    cap = cap.max(document_cap);
                }
                if body.len() + chunk.len() > cap {
                    return Err(FetchError::TooLarge(cap));
                }
                body.extend_from_slice(&chunk);
            }
            return Ok(Fetched {
                url: current,
                status: status.as_u16(),
                content_type,
                retry_after,
                body: body.freeze(),
                elapsed: started.elapsed(),
            });
        }
    }
}

/// Whether a `Content-Type` names a document (read under the document cap).
fn is_document_type(ct: &str) -> bool {
    let media = ct.split(';').next().unwrap_or_default().trim();
    [
        "application/pdf",
        "application/x-pdf",
        super::docx::MEDIA_TYPE,
    ]
    .iter()
    .any(|d| media.eq_ignore_ascii_case(d))
}

/// Request headers that carry credentials (S10).
fn is_credential(name: &str) -> bool {
    ["authorization", "cookie", "proxy-authorization"]
        .iter()
        .any(|c| name.eq_ignore_ascii_case(c))
}

/// A `Retry-After` value: seconds, or an HTTP date (a date in the past means now).
pub fn retry_after(value: &str, now: chrono::DateTime<chrono::Utc>) -> Option<Duration> {
    let value = value.trim();
    if let Ok(secs) = value.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    let at = chrono::DateTime::parse_from_rfc2822(value).ok()?;
    Some(
        (at.with_timezone(&chrono::Utc) - now)
            .to_std()
            .unwrap_or(Duration::ZERO),
    )
}

fn classify(e: reqwest::Error) -> FetchError {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(&e);
    while let Some(s) = source {
        if s.downcast_ref::<BlockedAddress>().is_some() {
            return FetchError::Blocked;
        }
        source = s.source();
    }
    if e.is_timeout() {
        return FetchError::Timeout;
    }
    tracing::debug!(error = %e, "fetch failed");
    FetchError::Failed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_takes_seconds_and_http_dates() {
        let now = chrono::DateTime::parse_from_rfc3339("2026-11-30T12:00:00Z")
            .unwrap()
            .with_timezone(&chrono::Utc);
        assert_eq!(retry_after(" 7 ", now), Some(Duration::from_secs(7)));
        assert_eq!(
            retry_after("Mon, 30 Nov 2026 12:00:09 GMT", now),
            Some(Duration::from_secs(9))
        );
        assert_eq!(
            retry_after("Mon, 30 Nov 2026 11:00:00 GMT", now),
            Some(Duration::ZERO)
        );
        assert_eq!(retry_after("soon", now), None);
        assert!(is_credential("Cookie") && is_credential("AUTHORIZATION"));
        assert!(!is_credential("x-api-key"));
    }
}
