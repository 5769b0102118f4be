//! Map jobs end to end: every reachable URL of a site once, from its sitemaps (an index with a
//! gzipped child) and its pages; `limit`, `search` and robots.txt obeyed.

use e2e::{tree_paths, tree_site, Route, Serve, Site};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(60);
const PAGES: usize = 300;

/// The tree site plus pages listed only in sitemaps (one links to a page nothing else names),
/// and a robots.txt that keeps `/private/` out.
async fn site() -> Site {
    let mut routes = tree_site(PAGES);
    routes.insert(
        "/hidden/a.html".into(),
        Route::Html(
            "<html><head><title>Hidden A</title></head><body><a href=\"/hidden/b.html\">b</a> \
             <a href=\"/private/c.html\">c</a></body></html>"
                .into(),
        ),
    );
    routes.insert(
        "/hidden/b.html".into(),
        Route::Html("<html><head><title>Hidden B</title></head><body>b</body></html>".into()),
    );
    routes.insert(
        "/private/c.html".into(),
        Route::Html("<html><body>private</body></html>".into()),
    );
    // Sitemaps name absolute URLs on the fixture's port, known only once it listens.
    let holder: Arc<OnceLock<String>> = Arc::new(OnceLock::new());
    let base_of = holder.clone();
    let dynamic = Arc::new(move |path: &str, _q: Option<&str>| {
        let base = base_of.get()?.clone();
        match path {
            "/robots.txt" => Some(Route::typed(
                "text/plain",
                format!("User-agent: *\nDisallow: /private/\nSitemap: {base}/index.xml\n"),
            )),
            "/index.xml" => Some(Route::typed(
                "application/xml",
                format!(
                    "<sitemapindex><sitemap><loc>{base}/one.xml</loc></sitemap>\
                     <sitemap><loc>{base}/two.xml.gz</loc></sitemap></sitemapindex>"
                ),
            )),
            "/one.xml" => Some(Route::typed(
                "application/xml",
                format!(
                    "<urlset><url><loc>{base}/hidden/a.html</loc></url>\
                     <url><loc>{base}/p/1.html</loc></url></urlset>"
                ),
            )),
            "/two.xml.gz" => Some(Route::gzipped_file(&format!(
                "<urlset><url><loc>{base}/private/c.html</loc></url>\
                 <url><loc>{base}/files/report.pdf</loc></url>\
                 <url><loc>https://elsewhere.example/x</loc></url></urlset>"
            ))),
            _ => None,
        }
    });
    let site = Site::start_with(routes, Some(dynamic)).await;
    let _ = holder.set(site.url(""));
    site
}

/// `path -> source` of a finished map's links, each URL checked to appear once.
fn by_path(site: &Site, job: &Value) -> BTreeMap<String, String> {
    let links = job["result"]["links"].as_array().expect("links");
    let mut out = BTreeMap::new();
    for l in links {
        let url = l["url"].as_str().expect("url");
        let path = url.strip_prefix(&site.url("")).unwrap_or(url).to_string();
        let source = l["source"].as_str().expect("source").to_string();
        assert!(out.insert(path, source).is_none(), "{url} listed twice");
    }
    out
}

#[tokio::test(flavor = "multi_thread")]
async fn map_lists_every_reachable_url_once() {
    let site = site().await;
    let serve = Serve::start();
    let api = serve.api(None);
    let (id, job) = api.run("map", &json!({"url": site.url("/")}), WAIT).await;
    assert_eq!(job["status"], "completed", "{job}");
    let found = by_path(&site, &job);
    let mut expected: Vec<String> = tree_paths(PAGES, 50);
    expected.extend(["/hidden/a.html", "/hidden/b.html", "/files/report.pdf"].map(String::from));
    expected.sort();
    assert_eq!(found.keys().cloned().collect::<Vec<_>>(), expected);
    assert_eq!(found["/hidden/a.html"], "sitemap");
    assert_eq!(found["/files/report.pdf"], "sitemap");
    assert_eq!(
        found["/hidden/b.html"], "page",
        "found by reading a sitemap's page"
    );
    assert_eq!(
        found["/p/1.html"], "page",
        "linked from the root, read first"
    );
    // Titles come from the pages read; robots.txt kept /private/ out and unread; the PDF is
    // listed, not downloaded.
    let links = job["result"]["links"].as_array().unwrap();
    let a = links
        .iter()
        .find(|l| l["url"] == site.url("/hidden/a.html"))
        .unwrap();
    assert_eq!(a["title"], "Hidden A");
    assert_eq!(site.hits_of("/private/c.html"), 0);
    assert_eq!(site.hits_of("/files/report.pdf"), 0);
    for p in tree_paths(PAGES, 50) {
        assert_eq!(site.hits_of(&p), 1, "{p} read once");
    }
    let logs = api.all_logs(&id).await;
    assert!(logs.iter().any(|e| e["message"]
        .as_str()
        .unwrap_or_default()
        .starts_with("map: ")));
}

#[tokio::test(flavor = "multi_thread")]
async fn map_stops_at_limit_and_filters_by_search() {
    let site = site().await;
    let serve = Serve::start();
    let api = serve.api(None);
    let (_, job) = api
        .run(
            "map",
            &json!({"url": site.url("/"), "limit": 25, "use_sitemap": false}),
            WAIT,
        )
        .await;
    assert_eq!(job["status"], "completed");
    let found = by_path(&site, &job);
    assert_eq!(found.len(), 25);
    let read = site
        .hits()
        .iter()
        .filter(|h| h.path.starts_with("/p/"))
        .count();
    assert!(
        read < 40,
        "stopped reading near the limit: {read} pages read"
    );

    let (_, job) = api
        .run(
            "map",
            &json!({"url": site.url("/"), "search": "HIDDEN"}),
            WAIT,
        )
        .await;
    let found = by_path(&site, &job);
    assert_eq!(
        found.keys().cloned().collect::<Vec<_>>(),
        ["/hidden/a.html", "/hidden/b.html"]
    );

    let bad = api
        .post("/api/map", &json!({"url": site.url("/"), "limit": 30001}))
        .await;
    assert_eq!(bad.status, 400);
    assert_eq!(bad.body["error"]["details"][0]["field"], "limit");
}

#[tokio::test(flavor = "multi_thread")]
async fn map_search_and_upload_share_the_cap_on_active_jobs() {
    let mut routes = std::collections::HashMap::new();
    routes.insert(
        "/".to_string(),
        Route::Slow(
            Duration::from_secs(20),
            Box::new(Route::Html("<p>slow</p>".into())),
        ),
    );
    let site = Site::start(routes).await;
    let serve = Serve::with(
        &["--allow-net", "127.0.0.1/32", "--max-active-jobs", "2"],
        &[],
    );
    let api = serve.api(None);
    let first = api.submit("map", &json!({"url": site.url("/")})).await;
    let second = api.submit("map", &json!({"url": site.url("/")})).await;
    let third = api.post("/api/map", &json!({"url": site.url("/")})).await;
    assert_eq!(third.status, 429, "{}", third.body);
    assert_eq!(third.body["error"]["code"], "CONCURRENCY_LIMIT");
    assert_eq!(third.body["error"]["limit"], "jobs");
    let holder = third.body["error"]["active_job_id"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(holder == first || holder == second, "{holder}");
    assert!(third.header("retry-after").is_some());
    // An upload counts against the same cap; a scrape has its own slot.
    let upload = api
        .http
        .post(format!("{}/api/upload", api.base))
        .header("content-type", "text/plain")
        .body("hello")
        .send()
        .await
        .unwrap();
    assert_eq!(upload.status().as_u16(), 429);
    api.submit("scrape", &json!({"url": site.url("/")})).await;
    // Cancelling one frees a place at once.
    assert_eq!(
        api.delete(&format!("/api/jobs/{first}/cancel"))
            .await
            .status,
        200
    );
    api.submit("map", &json!({"url": site.url("/")})).await;
    let jobs = api.get("/api/jobs?kind=map").await;
    assert_eq!(jobs.body["jobs"].as_array().map(Vec::len), Some(3));
}
