//! Crawl jobs end to end over a generated site with a known link graph.

use e2e::{tree_nodes, tree_paths, tree_site, Route, Serve, Site};
use serde_json::{json, Value};
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(300);
const PAGES: usize = 364; // 1 + 3 + 9 + 27 + 81 + 243: depths 0 to 5

fn paths_of(site: &Site, docs: &[Value]) -> Vec<String> {
    let base = site.url("");
    let mut out: Vec<String> = docs
        .iter()
        .map(|d| {
            d["url"]
                .as_str()
                .unwrap()
                .trim_start_matches(&base)
                .to_string()
        })
        .collect();
    out.sort();
    out
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

#[tokio::test(flavor = "multi_thread")]
async fn full_crawl_fetches_every_page_once_with_exact_tree_and_counters() {
    let site = Site::start(tree_site(PAGES)).await;
    let serve = Serve::start();
    let api = serve.api(None);
    let (id, job) = api
        .run(
            "crawl",
            &json!({"url": site.url("/"), "limit": 1000, "use_sitemap": false}),
            WAIT,
        )
        .await;
    assert_eq!(job["status"], "completed", "{job}");
    assert_eq!(
        job["progress"],
        json!({"pages_discovered": PAGES, "pages_completed": PAGES, "pages_failed": 0, "pages_queued": 0})
    );
    assert!(
        job["result"].is_null(),
        "a crawl's pages are read from /results"
    );

    let docs = api.all_results(&id).await;
    assert_eq!(paths_of(&site, &docs), sorted(tree_paths(PAGES, 5)));
    let page7 = docs
        .iter()
        .find(|d| d["url"] == site.url("/p/7.html"))
        .unwrap();
    assert_eq!(
        page7["markdown"],
        format!(
            "# Page 7\n\nText of page 7.\n\n- [page 22]({0}/p/22.html)\n- [page 23]({0}/p/23.html)\n- [page 24]({0}/p/24.html)\n\n[elsewhere](https://example.org/7)",
            site.url("")
        )
    );
    // Each page fetched exactly once (a duplicated message finds the page leased or done);
    // robots.txt once.
    for p in tree_paths(PAGES, 5) {
        let hits = site.hits_of(&p);
        assert_eq!(hits, 1, "{p}");
    }
    assert_eq!(site.hits_of("/robots.txt"), 1);

    let tree = api.get(&format!("/api/jobs/{id}/tree")).await.body;
    let nodes = tree_nodes(&tree);
    assert_eq!(tree["nodes"], nodes.len());
    assert_eq!(
        nodes.len(),
        2 * PAGES,
        "every page and its external link, once each"
    );
    let urls: BTreeSet<&String> = nodes.iter().map(|n| &n.url).collect();
    assert_eq!(urls.len(), nodes.len(), "a URL appears once");
    for n in &nodes {
        let (url, status, reason, depth, parent) =
            (&n.url, &n.status, &n.reason, &n.depth, &n.parent);
        if url.starts_with("https://example.org/") {
            assert_eq!(
                (status.as_str(), reason.as_deref()),
                ("skipped", Some("external"))
            );
            continue;
        }
        assert_eq!(status, "completed", "{url}");
        let i: usize = url
            .trim_start_matches(&site.url("/p/"))
            .trim_end_matches(".html")
            .parse()
            .unwrap_or(0);
        let expected_parent = match i {
            0 => None,
            i if (i - 1) / 3 == 0 => Some(site.url("/")),
            i => Some(site.url(&format!("/p/{}.html", (i - 1) / 3))),
        };
        assert_eq!(parent, &expected_parent, "{url}");
        let expected_depth = (0..)
            .find(|d| tree_paths(PAGES, *d).iter().any(|p| site.url(p) == *url))
            .unwrap();
        assert_eq!(*depth, expected_depth as u64, "{url}");
    }

    // The log tells the story: start, every page, the totals with skips in aggregate.
    let logs = api.all_logs(&id).await;
    let messages: Vec<&str> = logs
        .iter()
        .map(|e| e["message"].as_str().unwrap())
        .collect();
    assert!(messages.contains(&"started crawl"));
    assert_eq!(
        messages
            .iter()
            .filter(|m| m.starts_with("fetched (200)"))
            .count(),
        PAGES
    );
    assert_eq!(
        *messages.last().unwrap(),
        format!("completed: {PAGES} pages completed, 0 failed; links skipped: external {PAGES}")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn limit_is_never_exceeded() {
    let site = Site::start(tree_site(PAGES)).await;
    let serve = Serve::start();
    let api = serve.api(None);
    let (id, job) = api
        .run(
            "crawl",
            &json!({"url": site.url("/"), "limit": 50, "use_sitemap": false}),
            WAIT,
        )
        .await;
    assert_eq!(job["status"], "completed");
    assert_eq!(
        job["progress"],
        json!({"pages_discovered": 50, "pages_completed": 50, "pages_failed": 0, "pages_queued": 0})
    );
    assert_eq!(api.all_results(&id).await.len(), 50);
    let page_hits = site
        .hits()
        .iter()
        .filter(|h| h.path != "/robots.txt")
        .count();
    assert_eq!(page_hits, 50);
    let tree = api.get(&format!("/api/jobs/{id}/tree")).await.body;
    let nodes = tree_nodes(&tree);
    let limited = nodes
        .iter()
        .filter(|n| n.reason.as_deref() == Some("limit"))
        .count();
    assert!(limited > 0);
    assert_eq!(nodes.iter().filter(|n| n.status == "completed").count(), 50);
}

#[tokio::test(flavor = "multi_thread")]
async fn max_depth_and_path_filters() {
    let site = Site::start(tree_site(PAGES)).await;
    let serve = Serve::start();
    let api = serve.api(None);
    let (id, job) = api
        .run(
            "crawl",
            &json!({"url": site.url("/"), "max_depth": 2, "use_sitemap": false}),
            WAIT,
        )
        .await;
    assert_eq!(job["progress"]["pages_completed"], 13);
    assert_eq!(
        paths_of(&site, &api.all_results(&id).await),
        sorted(tree_paths(PAGES, 2))
    );
    let tree = api.get(&format!("/api/jobs/{id}/tree")).await.body;
    let nodes = tree_nodes(&tree);
    assert_eq!(
        nodes
            .iter()
            .filter(|n| n.reason.as_deref() == Some("depth"))
            .count(),
        27
    );

    // Excluding page 1 prunes its subtree; including only /p/ paths keeps the rest.
    let (id, _) = api
        .run(
            "crawl",
            &json!({"url": site.url("/"), "max_depth": 2, "use_sitemap": false,
                    "exclude_paths": ["^/p/1\\.html$"], "include_paths": ["^/p/"]}),
            WAIT,
        )
        .await;
    let expected: Vec<String> = [
        "/",
        "/p/2.html",
        "/p/3.html",
        "/p/7.html",
        "/p/8.html",
        "/p/9.html",
        "/p/10.html",
        "/p/11.html",
        "/p/12.html",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    assert_eq!(
        paths_of(&site, &api.all_results(&id).await),
        sorted(expected)
    );
    let tree = api.get(&format!("/api/jobs/{id}/tree")).await.body;
    let nodes = tree_nodes(&tree);
    let filtered: Vec<&String> = nodes
        .iter()
        .filter(|n| n.reason.as_deref() == Some("filtered"))
        .map(|n| &n.url)
        .collect();
    assert_eq!(filtered, vec![&site.url("/p/1.html")]);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_page_of_many_external_links_records_each_once() {
    // More skipped links than one batched write takes (25), found again by a second page.
    const LINKS: usize = 60;
    let links: String = (0..LINKS)
        .map(|i| format!("<a href=\"https://example.org/{i}\">{i}</a>"))
        .collect();
    let routes: HashMap<String, Route> = [
        ("/", format!("<a href=\"/again\">again</a>{links}")),
        ("/again", links.clone()),
    ]
    .into_iter()
    .map(|(p, html)| (p.to_string(), Route::Html(html)))
    .collect();
    let site = Site::start(routes).await;
    let serve = Serve::start();
    let api = serve.api(None);
    let (id, job) = api
        .run(
            "crawl",
            &json!({"url": site.url("/"), "use_sitemap": false}),
            WAIT,
        )
        .await;
    assert_eq!(job["status"], "completed", "{job}");
    let tree = api.get(&format!("/api/jobs/{id}/tree")).await.body;
    let nodes = tree_nodes(&tree);
    let skipped: BTreeSet<&str> = nodes
        .iter()
        .filter(|n| n.status == "skipped" && n.reason.as_deref() == Some("external"))
        .map(|n| n.url.as_str())
        .collect();
    let expected: BTreeSet<String> = (0..LINKS)
        .map(|i| format!("https://example.org/{i}"))
        .collect();
    assert_eq!(
        skipped,
        expected.iter().map(String::as_str).collect(),
        "every external link recorded as skipped"
    );
    assert_eq!(nodes.len(), LINKS + 2, "each URL once: {tree}");
    let parents: BTreeSet<Option<&str>> = nodes
        .iter()
        .filter(|n| n.status == "skipped")
        .map(|n| n.parent.as_deref())
        .collect();
    let root = site.url("/");
    assert_eq!(
        parents,
        BTreeSet::from([Some(root.as_str())]),
        "found first on the root"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn sitemaps_index_and_gzip_add_unlinked_pages() {
    let mut routes: HashMap<String, Route> = HashMap::new();
    // Sitemaps name absolute URLs on the fixture's port, known only once it listens.
    let site_holder: Arc<std::sync::OnceLock<String>> = Arc::new(std::sync::OnceLock::new());
    routes.insert(
        "/".into(),
        Route::Html("<p>home</p><a href=\"/linked\">linked</a>".into()),
    );
    routes.insert("/linked".into(), Route::Html("<p>linked</p>".into()));
    for p in ["/hidden-1", "/hidden-2", "/hidden-3"] {
        routes.insert(p.into(), Route::Html(format!("<p>{p}</p>")));
    }
    let holder = site_holder.clone();
    let dynamic = Arc::new(move |path: &str, _q: Option<&str>| {
        let base = holder.get()?.clone();
        match path {
            "/robots.txt" => Some(Route::typed("text/plain", format!("User-agent: *\nAllow: /\nSitemap: {base}/index.xml\n"))),
            "/index.xml" => Some(Route::typed("application/xml", format!(
                "<?xml version=\"1.0\"?><sitemapindex><sitemap><loc>{base}/a.xml</loc></sitemap>\
                 <sitemap><loc>{base}/b.xml.gz</loc></sitemap></sitemapindex>"))),
            "/a.xml" => Some(Route::typed("application/xml", format!(
                "<urlset><url><loc>{base}/hidden-1</loc></url><url><loc>{base}/linked</loc></url></urlset>"))),
            "/b.xml.gz" => Some(Route::gzipped_file(&format!(
                "<urlset><url><loc>{base}/hidden-2</loc></url><url><loc>{base}/hidden-3</loc></url>\
                 <url><loc>https://elsewhere.example/x</loc></url></urlset>"))),
            _ => None,
        }
    });
    let site = Site::start_with(routes, Some(dynamic)).await;
    let _ = site_holder.set(site.url(""));
    let serve = Serve::start();
    let api = serve.api(None);

    let (id, job) = api.run("crawl", &json!({"url": site.url("/")}), WAIT).await;
    assert_eq!(job["status"], "completed");
    assert_eq!(
        paths_of(&site, &api.all_results(&id).await),
        sorted(
            ["/", "/hidden-1", "/hidden-2", "/hidden-3", "/linked"]
                .map(String::from)
                .to_vec()
        )
    );
    let logs = api.all_logs(&id).await;
    assert!(
        logs.iter()
            .any(|e| e["message"] == "sitemaps: 5 URLs from 4 sitemap documents"),
        "{logs:?}"
    );

    let (id, _) = api
        .run(
            "crawl",
            &json!({"url": site.url("/"), "use_sitemap": false}),
            WAIT,
        )
        .await;
    assert_eq!(
        paths_of(&site, &api.all_results(&id).await),
        vec!["/".to_string(), "/linked".to_string()]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn robots_rules_skip_links_and_can_be_ignored() {
    let routes: HashMap<String, Route> = [
        (
            "/robots.txt",
            Route::typed("text/plain", "User-agent: SarvCrawl\nDisallow: /private\n"),
        ),
        (
            "/",
            Route::Html("<a href=\"/open\">o</a><a href=\"/private/a\">p</a>".into()),
        ),
        ("/open", Route::Html("<p>open</p>".into())),
        ("/private/a", Route::Html("<p>private</p>".into())),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    let site = Site::start(routes).await;
    let serve = Serve::start();
    let api = serve.api(None);
    let (id, _) = api
        .run(
            "crawl",
            &json!({"url": site.url("/"), "use_sitemap": false}),
            WAIT,
        )
        .await;
    assert_eq!(
        paths_of(&site, &api.all_results(&id).await),
        vec!["/", "/open"]
    );
    assert_eq!(site.hits_of("/private/a"), 0);
    let tree = api.get(&format!("/api/jobs/{id}/tree")).await.body;
    let nodes = tree_nodes(&tree);
    let robots: Vec<_> = nodes
        .iter()
        .filter(|n| n.reason.as_deref() == Some("robots"))
        .map(|n| n.url.clone())
        .collect();
    assert_eq!(robots, vec![site.url("/private/a")]);

    let (id, _) = api
        .run(
            "crawl",
            &json!({"url": site.url("/"), "use_sitemap": false, "respect_robots": false}),
            WAIT,
        )
        .await;
    assert_eq!(
        paths_of(&site, &api.all_results(&id).await),
        vec!["/", "/open", "/private/a"]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn crawler_traps_stop_at_the_caps() {
    // /trap/... links to itself plus "a/" and "b/" (endless paths); /list?page=n links to n+1.
    let dynamic = Arc::new(|path: &str, query: Option<&str>| {
        if path.starts_with("/trap/") {
            return Some(Route::Html(
                "<a href=\"a/\">a</a> <a href=\"b/\">b</a>".into(),
            ));
        }
        if path == "/list" {
            let n: u64 = query
                .and_then(|q| q.strip_prefix("page="))
                .and_then(|n| n.parse().ok())
                .unwrap_or(0);
            return Some(Route::Html(format!(
                "<a href=\"/list?page={}\">next</a>",
                n + 1
            )));
        }
        None
    });
    let routes: HashMap<String, Route> = [(
        "/".to_string(),
        Route::Html("<a href=\"/trap/\">t</a><a href=\"/list?page=1\">l</a>".into()),
    )]
    .into();
    let site = Site::start_with(routes, Some(dynamic)).await;
    let serve = Serve::start();
    let api = serve.api(None);
    let (_, job) = api
        .run(
            "crawl",
            &json!({"url": site.url("/"), "use_sitemap": false, "limit": 40, "max_depth": 50}),
            WAIT,
        )
        .await;
    assert_eq!(job["status"], "completed");
    assert_eq!(job["progress"]["pages_completed"], 40);
    assert_eq!(
        site.hits()
            .iter()
            .filter(|h| h.path != "/robots.txt")
            .count(),
        40
    );

    let (_, job) = api.run("crawl", &json!({"url": site.url("/list?page=1"), "use_sitemap": false, "limit": 1000, "max_depth": 10}), WAIT).await;
    assert_eq!(job["progress"]["pages_completed"], 11, "depths 0..=10");
}

#[tokio::test(flavor = "multi_thread")]
async fn crawl_of_a_failing_root_fails_with_its_code() {
    let routes: HashMap<String, Route> = [("/".to_string(), Route::status(404))].into();
    let site = Site::start(routes).await;
    let serve = Serve::start();
    let api = serve.api(None);
    let (id, job) = api
        .run(
            "crawl",
            &json!({"url": site.url("/"), "use_sitemap": false}),
            WAIT,
        )
        .await;
    assert_eq!(job["status"], "failed");
    assert_eq!(job["error"]["code"], "HTTP_ERROR");
    assert_eq!(job["progress"]["pages_failed"], 1);
    let docs = api.all_results(&id).await;
    assert_eq!(docs[0]["error"]["code"], "HTTP_ERROR");
    assert_eq!(docs[0]["status_code"], 404);
}
