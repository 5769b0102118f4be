//! Search providers: the SearXNG JSON API and the Brave Search API, chosen by configuration.
//!
//! The provider is the operator's choice, so its requests go out on a plain client (no
//! redirects, no proxies, timeouts); the hits it returns are strangers' URLs and are fetched
//! through the guarded [`crate::engine::fetch::Fetcher`] like every other page.

use crate::ports::{SearchHit, SearchProvider, StoreError};
use async_trait::async_trait;
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;

/// The provider that `SARVCRAWL_SEARXNG_URL` or `SARVCRAWL_BRAVE_API_KEY` configures, if any
/// (SearXNG first when both are set).
pub fn from_env() -> Result<Option<Arc<dyn SearchProvider>>, String> {
    let var = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
    if let Some(base) = var("SARVCRAWL_SEARXNG_URL") {
        return Ok(Some(Arc::new(SearXng::new(&base)?)));
    }
    if let Some(key) = var("SARVCRAWL_BRAVE_API_KEY") {
        return Ok(Some(Arc::new(Brave::new(key)?)));
    }
    Ok(None)
}

fn client() -> Result<reqwest::Client, String> {
    reqwest::Client::builder()
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(Duration::from_secs(5))
        .timeout(Duration::from_secs(20))
        .user_agent(crate::engine::fetch::default_user_agent())
        .build()
        .map_err(|e| e.to_string())
}

async fn get_json(req: reqwest::RequestBuilder) -> Result<Value, StoreError> {
    let resp = req.send().await.map_err(StoreError::new)?;
    let status = resp.status();
    if !status.is_success() {
        return Err(StoreError::transient(format!(
            "the search provider answered {status}"
        )));
    }
    let body = resp.bytes().await.map_err(StoreError::new)?;
    serde_json::from_slice(&body).map_err(StoreError::new)
}

fn text(v: &Value, key: &str) -> String {
    v[key].as_str().unwrap_or_default().trim().to_string()
}

/// A SearXNG instance (`/search?q=...&format=json`).
pub struct SearXng {
    client: reqwest::Client,
    endpoint: url::Url,
}

impl SearXng {
    pub fn new(base: &str) -> Result<Self, String> {
        let base = url::Url::parse(base).map_err(|e| format!("SARVCRAWL_SEARXNG_URL: {e}"))?;
        let mut endpoint = base.clone();
        endpoint.set_path(&format!("{}/search", base.path().trim_end_matches('/')));
        Ok(SearXng {
            client: client()?,
            endpoint,
        })
    }
}

#[async_trait]
impl SearchProvider for SearXng {
    fn name(&self) -> &'static str {
        "searxng"
    }

    async fn search(&self, query: &str, limit: usize) -> Result<Vec<SearchHit>, StoreError> {
        let req = self
            .client
            .get(self.endpoint.clone())
            .query(&[("q", query), ("format", "json")]);
        let body = get_json(req).await?;
        Ok(hits(&body["results"], "content", limit))
    }
}

/// The Brave Search API.
pub struct Brave {
    client: reqwest::Client,
    key: String,
}

impl Brave {
    const ENDPOINT: &'static str = "https://api.search.brave.com/res/v1/web/search";

    pub fn new(key: String) -> Result<Self, String> {
        Ok(Brave {
            client: client()?,
            key,
        })
    }
}

#[async_trait]
impl SearchProvider for Brave {
    fn name(&self) -> &'static str {
        "brave"
    }

    async fn search(&self, query: &str, limit: usize) -> Result<Vec<SearchHit>, StoreError> {
        let count = limit.clamp(1, 20).to_string();
        let req = self
            .client
            .get(Self::ENDPOINT)
            .header("X-Subscription-Token", &self.key)
            .header("Accept", "application/json")
            .query(&[("q", query), ("count", count.as_str())]);
        let body = get_json(req).await?;
        Ok(hits(&body["web"]["results"], "description", limit))
    }
}

/// The http(s) hits of a provider's result list, each URL once.
fn hits(list: &Value, snippet_key: &str, limit: usize) -> Vec<SearchHit> {
    let mut seen = std::collections::HashSet::new();
    list.as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .filter_map(|r| {
            let url = crate::domain::validate::parse_web_url(r["url"].as_str()?).ok()?;
            seen.insert(url.to_string()).then(|| SearchHit {
                url: url.into(),
                title: text(r, "title"),
                snippet: text(r, snippet_key),
            })
        })
        .take(limit)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_searxng_and_brave_lists() {
        let searx = serde_json::json!({"results": [
            {"url": "https://a.example/", "title": " A ", "content": "about a"},
            {"url": "javascript:alert(1)", "title": "bad"},
            {"url": "https://a.example/", "title": "again"},
            {"url": "https://b.example/x", "title": "B", "content": "about b"}
        ]});
        let got = hits(&searx["results"], "content", 5);
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].title, "A");
        assert_eq!(got[1].snippet, "about b");
        let brave = serde_json::json!({"web": {"results": [
            {"url": "https://c.example/", "title": "C", "description": "about c"}
        ]}});
        let got = hits(&brave["web"]["results"], "description", 1);
        assert_eq!(got[0].snippet, "about c");
        assert!(SearXng::new("not a url").is_err());
    }
}
