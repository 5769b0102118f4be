//! Search jobs end to end against a local server that answers in SearXNG's JSON format: hits
//! scraped with the request's formats, a failing hit recorded without failing the job, and no
//! provider -> 503.

use e2e::{Route, Serve, Site};
use serde_json::json;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(30);

/// A site with two pages, and a search engine whose hits are those pages and a missing one;
/// the engine records the queries it was asked.
async fn engine_and_site() -> (Site, Arc<Mutex<Vec<String>>>) {
    let mut routes = HashMap::new();
    routes.insert(
        "/one".to_string(),
        Route::Html(
            "<html><head><title>One</title></head><body><h1>First hit</h1></body></html>".into(),
        ),
    );
    routes.insert(
        "/two".to_string(),
        Route::Html(
            "<html><head><title>Two</title></head><body><p>Second hit</p></body></html>".into(),
        ),
    );
    let holder: Arc<OnceLock<String>> = Arc::new(OnceLock::new());
    let asked = Arc::new(Mutex::new(Vec::new()));
    let (base_of, log) = (holder.clone(), asked.clone());
    let dynamic = Arc::new(move |path: &str, query: Option<&str>| {
        if path != "/engine/search" {
            return None;
        }
        log.lock()
            .unwrap()
            .push(query.unwrap_or_default().to_string());
        let base = base_of.get()?.clone();
        let body = json!({"query": "q", "results": [
            {"url": format!("{base}/one"), "title": "One", "content": "the first"},
            {"url": format!("{base}/missing"), "title": "Gone", "content": "a dead link"},
            {"url": format!("{base}/two"), "title": "Two", "content": "the second"},
        ]});
        Some(Route::typed("application/json", body.to_string()))
    });
    let site = Site::start_with(routes, Some(dynamic)).await;
    let _ = holder.set(site.url(""));
    (site, asked)
}

#[tokio::test(flavor = "multi_thread")]
async fn hits_are_scraped_and_a_failing_hit_does_not_fail_the_job() {
    let (site, asked) = engine_and_site().await;
    let engine = site.url("/engine");
    let serve = Serve::with(
        &["--allow-net", "127.0.0.1/32"],
        &[("SARVCRAWL_SEARXNG_URL", engine.as_str())],
    );
    let api = serve.api(None);
    let (id, job) = api
        .run(
            "search",
            &json!({"query": "rust crawler", "limit": 3, "formats": ["markdown"]}),
            WAIT,
        )
        .await;
    assert_eq!(job["status"], "completed", "{job}");
    let asked = asked.lock().unwrap().clone();
    assert_eq!(asked.len(), 1);
    assert!(
        asked[0].contains("q=rust+crawler") && asked[0].contains("format=json"),
        "{asked:?}"
    );
    let results = job["result"]["results"].as_array().expect("results");
    assert_eq!(results.len(), 3);
    assert_eq!(results[0]["title"], "One");
    assert_eq!(results[0]["snippet"], "the first");
    assert_eq!(results[0]["document"]["markdown"], "# First hit");
    assert!(
        results[0]["document"].get("metadata").is_none(),
        "only the asked formats"
    );
    assert_eq!(results[1]["document"]["error"]["code"], "HTTP_ERROR");
    assert_eq!(results[2]["document"]["markdown"], "Second hit");
    let logs = api.all_logs(&id).await;
    assert!(
        logs.iter().any(|e| e["url"] == site.url("/missing")
            && e["message"]
                .as_str()
                .unwrap_or_default()
                .starts_with("failed: HTTP_ERROR")),
        "{logs:?}"
    );

    // Without scraping, only the hits.
    let (_, job) = api
        .run("search", &json!({"query": "x", "scrape": false}), WAIT)
        .await;
    let results = job["result"]["results"].as_array().expect("results");
    assert_eq!(results.len(), 3);
    assert!(results.iter().all(|r| r.get("document").is_none()));
    assert_eq!(
        site.hits_of("/one"),
        1,
        "the unscraped search fetched nothing"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn without_a_provider_search_answers_503_and_stores_nothing() {
    let serve = Serve::start();
    let api = serve.api(None);
    let r = api.post("/api/search", &json!({"query": "anything"})).await;
    assert_eq!(r.status, 503);
    assert_eq!(r.body["error"]["code"], "SEARCH_UNAVAILABLE");
    let jobs = api.get("/api/jobs").await;
    assert_eq!(jobs.body["jobs"].as_array().map(Vec::len), Some(0));
    // Validation still comes first.
    let r = api.post("/api/search", &json!({"query": ""})).await;
    assert_eq!(r.status, 400);
}
