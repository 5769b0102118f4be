//! Scrape jobs end to end: extraction formats, non-HTML answers, HTTP failures, limits.

use e2e::{Route, Serve, Site};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const WAIT: Duration = Duration::from_secs(30);

const ARTICLE: &str = r#"<!doctype html><html lang="en"><head><title>Known page</title>
<meta name="description" content="A page with everything">
<link rel="canonical" href="/canonical">
<style>body { color: red }</style><script>var secret = "script text";</script></head>
<body><nav><a href="/nav-link">Navigation</a></nav><header>Site header</header>
<main><h1>Known page</h1>
<p>Intro with <strong>bold</strong>, <em>emphasis</em> and a <a href="/docs/x?y=1#frag">relative link</a>.</p>
<table><tr><th>Name</th><th>Value</th></tr><tr><td>alpha</td><td>1</td></tr></table>
<pre>fn main() {
    println!("&lt;kept&gt;   spacing");
}</pre>
<div class="ad">Advertisement</div>
</main><aside>Related</aside><footer>Site footer</footer></body></html>"#;

async fn scrape(api: &e2e::Api, body: Value) -> Value {
    let id = api.submit("scrape", &body).await;
    api.wait(&id, WAIT).await
}

fn site_routes(pairs: Vec<(&str, Route)>) -> HashMap<String, Route> {
    pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn markdown_and_every_format_of_a_known_page() {
    let site = Site::start(site_routes(vec![("/article", Route::Html(ARTICLE.into()))])).await;
    let serve = Serve::start();
    let api = serve.api(None);
    let job = scrape(
        &api,
        json!({"url": site.url("/article"),
               "formats": ["markdown", "html", "raw_html", "text", "links", "metadata"],
               "exclude_selectors": [".ad"]}),
    )
    .await;
    assert_eq!(job["status"], "completed", "{job}");
    let doc = &job["result"];
    let base = site.url("");
    assert_eq!(
        doc["markdown"],
        format!(
            "# Known page\n\nIntro with **bold**, *emphasis* and a [relative link]({base}/docs/x?y=1).\n\n\
             | Name | Value |\n| --- | --- |\n| alpha | 1 |\n\n\
             ```\nfn main() {{\n    println!(\"<kept>   spacing\");\n}}\n```"
        )
    );
    let text = doc["text"].as_str().unwrap();
    assert!(text.starts_with("Known page\n\nIntro with bold, emphasis and a relative link."));
    let html = doc["html"].as_str().unwrap();
    assert!(
        html.contains("<h1>Known page</h1>")
            && !html.contains("script")
            && !html.contains("Advertisement")
    );
    assert_eq!(doc["raw_html"], ARTICLE);
    assert_eq!(
        doc["links"],
        json!([format!("{base}/nav-link"), format!("{base}/docs/x?y=1")])
    );
    let meta = &doc["metadata"];
    assert_eq!(meta["title"], "Known page");
    assert_eq!(meta["description"], "A page with everything");
    assert_eq!(meta["language"], "en");
    assert_eq!(meta["canonical_url"], format!("{base}/canonical"));
    assert_eq!(meta["bytes"], ARTICLE.len());
    assert_eq!(doc["status_code"], 200);
    assert_eq!(doc["url"], site.url("/article"));
    for absent in [
        "script text",
        "color: red",
        "Navigation",
        "Site header",
        "Site footer",
        "Related",
    ] {
        assert!(
            !doc["markdown"].as_str().unwrap().contains(absent),
            "{absent}"
        );
    }
    // The page was read with an honest User-Agent.
    let hit = site
        .hits()
        .into_iter()
        .find(|h| h.path == "/article")
        .unwrap();
    assert!(
        hit.user_agent.starts_with("SarvCrawl/"),
        "{}",
        hit.user_agent
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn only_main_content_off_and_include_selectors() {
    let site = Site::start(site_routes(vec![("/article", Route::Html(ARTICLE.into()))])).await;
    let serve = Serve::start();
    let api = serve.api(None);
    let full = scrape(
        &api,
        json!({"url": site.url("/article"), "only_main_content": false}),
    )
    .await;
    let md = full["result"]["markdown"].as_str().unwrap();
    assert!(md.contains("Navigation") && md.contains("Site footer") && md.contains("Related"));
    assert!(
        full["result"].get("html").is_none(),
        "only requested formats"
    );
    let part = scrape(
        &api,
        json!({"url": site.url("/article"), "include_selectors": ["table"]}),
    )
    .await;
    assert_eq!(
        part["result"]["markdown"],
        "| Name | Value |\n| --- | --- |\n| alpha | 1 |"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn plain_text_passes_through_and_other_types_are_unsupported() {
    let site = Site::start(site_routes(vec![
        (
            "/notes.txt",
            Route::typed("text/plain; charset=utf-8", "line one\n*not emphasis*"),
        ),
        (
            "/readme.md",
            Route::typed("text/markdown", "# Title\n\nBody"),
        ),
        (
            "/image.png",
            Route::typed("image/png", vec![0x89, b'P', b'N', b'G']),
        ),
    ]))
    .await;
    let serve = Serve::start();
    let api = serve.api(None);
    let txt = scrape(
        &api,
        json!({"url": site.url("/notes.txt"), "formats": ["markdown", "text"]}),
    )
    .await;
    assert_eq!(txt["result"]["markdown"], "line one\n*not emphasis*");
    assert_eq!(txt["result"]["text"], "line one\n*not emphasis*");
    let md = scrape(&api, json!({"url": site.url("/readme.md")})).await;
    assert_eq!(md["result"]["markdown"], "# Title\n\nBody");
    let png = scrape(&api, json!({"url": site.url("/image.png")})).await;
    assert_eq!(png["status"], "failed");
    assert_eq!(png["error"]["code"], "UNSUPPORTED_CONTENT");
    assert_eq!(png["result"]["error"]["code"], "UNSUPPORTED_CONTENT");
}

#[tokio::test(flavor = "multi_thread")]
async fn http_errors_and_redirects() {
    let mut routes = site_routes(vec![
        ("/missing", Route::status(404)),
        ("/broken", Route::status(500)),
        ("/final", Route::Html("<p>arrived</p>".into())),
    ]);
    for i in 1..=3 {
        routes.insert(
            format!("/r{i}"),
            Route::Redirect(if i == 3 {
                "/final".into()
            } else {
                format!("/r{}", i + 1)
            }),
        );
    }
    for i in 1..=6 {
        routes.insert(
            format!("/loop{i}"),
            Route::Redirect(format!("/loop{}", i + 1)),
        );
    }
    routes.insert("/loop7".into(), Route::Html("<p>too far</p>".into()));
    let site = Site::start(routes).await;
    let serve = Serve::start();
    let api = serve.api(None);

    let missing = scrape(&api, json!({"url": site.url("/missing")})).await;
    assert_eq!(missing["status"], "failed");
    assert_eq!(missing["error"]["code"], "HTTP_ERROR");
    assert_eq!(missing["result"]["status_code"], 404);
    let broken = scrape(&api, json!({"url": site.url("/broken")})).await;
    assert_eq!(broken["error"]["code"], "HTTP_ERROR");
    assert_eq!(broken["result"]["status_code"], 500);

    let redirected = scrape(&api, json!({"url": site.url("/r1")})).await;
    assert_eq!(redirected["status"], "completed");
    assert_eq!(redirected["result"]["url"], site.url("/final"));
    assert_eq!(redirected["result"]["requested_url"], site.url("/r1"));
    assert_eq!(redirected["result"]["markdown"], "arrived");

    // Six hops: one more than allowed; the sixth is never requested.
    let looping = scrape(&api, json!({"url": site.url("/loop1")})).await;
    assert_eq!(looping["status"], "failed");
    assert_eq!(looping["error"]["code"], "FETCH_FAILED");
    assert_eq!(site.hits_of("/loop7"), 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn body_cap_counts_decoded_bytes() {
    let site = Site::start(site_routes(vec![
        ("/bomb", Route::gzip_bomb(64 << 20)),
        ("/endless", Route::Endless),
    ]))
    .await;
    let serve = Serve::start();
    let api = serve.api(None);
    let bomb = scrape(&api, json!({"url": site.url("/bomb")})).await;
    assert_eq!(bomb["status"], "failed", "{bomb}");
    assert_eq!(bomb["error"]["code"], "TOO_LARGE");
    let endless = scrape(&api, json!({"url": site.url("/endless")})).await;
    assert_eq!(endless["error"]["code"], "TOO_LARGE");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_that_drips_is_cut_off_with_timeout() {
    let site = Site::start(site_routes(vec![(
        "/drip",
        Route::Drip(Duration::from_secs(10)),
    )]))
    .await;
    let serve = Serve::start();
    let api = serve.api(None);
    let started = Instant::now();
    let job = scrape(&api, json!({"url": site.url("/drip"), "timeout_ms": 2000})).await;
    assert_eq!(job["status"], "failed");
    assert_eq!(job["error"]["code"], "TIMEOUT");
    assert!(started.elapsed() < Duration::from_secs(9));
}

#[tokio::test(flavor = "multi_thread")]
async fn busy_server_is_retried_after_retry_after() {
    let page = Route::Html("<p>finally</p>".into());
    let site = Site::start(site_routes(vec![(
        "/busy",
        Route::BusyFirst(2, 1, Box::new(page)),
    )]))
    .await;
    let serve = Serve::start();
    let api = serve.api(None);
    let job = scrape(&api, json!({"url": site.url("/busy")})).await;
    assert_eq!(job["status"], "completed", "{job}");
    assert_eq!(job["result"]["markdown"], "finally");
    let times: Vec<Instant> = site
        .hits()
        .into_iter()
        .filter(|h| h.path == "/busy")
        .map(|h| h.at)
        .collect();
    assert_eq!(times.len(), 3);
    for pair in times.windows(2) {
        assert!(
            pair[1] - pair[0] >= Duration::from_millis(950),
            "gap {:?}",
            pair[1] - pair[0]
        );
    }
    let logs = api.all_logs(job["job_id"].as_str().unwrap()).await;
    assert!(logs
        .iter()
        .any(|e| e["message"].as_str().unwrap().contains("answered 429")));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_retry_after_date_is_honoured() {
    let page = Route::Html("<p>back</p>".into());
    let site = Site::start(site_routes(vec![(
        "/busy",
        Route::BusyUntil(1, Duration::from_secs(4), Box::new(page)),
    )]))
    .await;
    let serve = Serve::start();
    let api = serve.api(None);
    let job = scrape(&api, json!({"url": site.url("/busy")})).await;
    assert_eq!(job["status"], "completed", "{job}");
    let times: Vec<Instant> = site
        .hits()
        .into_iter()
        .filter(|h| h.path == "/busy")
        .map(|h| h.at)
        .collect();
    assert_eq!(times.len(), 2);
    // The date is 4 s ahead, to the second: without it the service would wait its own 2 s.
    let gap = times[1] - times[0];
    assert!(gap >= Duration::from_millis(2900), "gap {gap:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn credentials_never_follow_a_redirect_to_another_origin() {
    // S10. `other` is another origin (another port); it bounces `/bounce` back to `site`.
    let back = Arc::new(Mutex::new(String::new()));
    let target = back.clone();
    let other = Site::start_with(
        site_routes(vec![("/landing", Route::Html("<p>elsewhere</p>".into()))]),
        Some(Arc::new(move |path: &str, _: Option<&str>| {
            (path == "/bounce").then(|| Route::Redirect(target.lock().unwrap().clone()))
        })),
    )
    .await;
    let site = Site::start(site_routes(vec![
        ("/away", Route::Redirect(other.url("/landing"))),
        ("/round", Route::Redirect(other.url("/bounce"))),
        ("/stay", Route::Redirect("/home".into())),
        ("/home", Route::Html("<p>home</p>".into())),
    ]))
    .await;
    *back.lock().unwrap() = site.url("/home");
    let serve = Serve::start();
    let api = serve.api(None);
    let headers = json!({"Authorization": "Bearer s3cret", "Cookie": "session=1", "X-Trace": "t1"});
    for path in ["/away", "/round", "/stay"] {
        let job = scrape(&api, json!({"url": site.url(path), "headers": headers})).await;
        assert_eq!(job["status"], "completed", "{path}: {job}");
    }
    let carries = |h: &e2e::fixture::Hit| {
        ["authorization", "cookie"]
            .iter()
            .map(|n| h.header(n).is_some())
            .collect::<Vec<_>>()
    };
    // The requested origin gets them, on its first hop and on a same-origin redirect.
    let away = site.hits().into_iter().find(|h| h.path == "/away").unwrap();
    assert_eq!(carries(&away), [true, true]);
    // Another origin never does, and neither does the original origin once a redirect left it.
    for hit in other.hits() {
        assert_eq!(carries(&hit), [false, false], "{}", hit.path);
        assert_eq!(hit.header("x-trace"), Some("t1"));
    }
    // The scrapes ran in order: /round's hop back home, then /stay's.
    let homes: Vec<_> = site
        .hits()
        .into_iter()
        .filter(|h| h.path == "/home")
        .collect();
    assert_eq!(homes.len(), 2);
    assert_eq!(
        carries(&homes[0]),
        [false, false],
        "/round came back via another origin"
    );
    assert_eq!(
        carries(&homes[1]),
        [true, true],
        "/stay -> /home keeps them"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn robots_txt_is_obeyed() {
    let site = Site::start(site_routes(vec![
        (
            "/robots.txt",
            Route::typed("text/plain", "User-agent: *\nDisallow: /private\n"),
        ),
        ("/private/page", Route::Html("<p>secret</p>".into())),
        ("/public", Route::Html("<p>open</p>".into())),
    ]))
    .await;
    let down = Site::start(site_routes(vec![
        ("/robots.txt", Route::status(503)),
        ("/page", Route::Html("<p>never</p>".into())),
    ]))
    .await;
    let missing = Site::start(site_routes(vec![(
        "/page",
        Route::Html("<p>allowed</p>".into()),
    )]))
    .await;
    let serve = Serve::start();
    let api = serve.api(None);

    let blocked = scrape(&api, json!({"url": site.url("/private/page")})).await;
    assert_eq!(blocked["status"], "failed");
    assert_eq!(blocked["error"]["code"], "BLOCKED_BY_ROBOTS");
    assert_eq!(site.hits_of("/private/page"), 0);
    assert_eq!(
        scrape(&api, json!({"url": site.url("/public")})).await["status"],
        "completed"
    );

    let unavailable = scrape(&api, json!({"url": down.url("/page")})).await;
    assert_eq!(unavailable["error"]["code"], "BLOCKED_BY_ROBOTS");
    assert_eq!(down.hits_of("/page"), 0);

    let allowed = scrape(&api, json!({"url": missing.url("/page")})).await;
    assert_eq!(allowed["status"], "completed");
    assert_eq!(missing.hits_of("/robots.txt"), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn render_without_a_browser_is_refused_and_stores_nothing() {
    let serve = Serve::with(&["--no-render"], &[]);
    let api = serve.api(None);
    let r = api
        .post(
            "/api/scrape",
            &json!({"url": "https://example.com/", "render": true}),
        )
        .await;
    assert_eq!(r.status, 503);
    assert_eq!(r.body["error"]["code"], "RENDER_UNAVAILABLE");
    let list = api.get("/api/jobs").await;
    assert_eq!(list.body["jobs"], json!([]));
}
