//! The API contract: auth and tenancy, validation, the per-user limit, cancel, paging.

use e2e::{tree_site, Route, Serve, Site};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::time::{Duration, Instant};

const WAIT: Duration = Duration::from_secs(60);
const ALICE: &str = "alice-key-0123456789";
const BOB: &str = "bob-key-0123456789ab";

fn keyed() -> Serve {
    Serve::with(
        &["--allow-net", "127.0.0.1/32"],
        &[("SARVCRAWL_API_KEYS", &format!("alice:{ALICE},bob:{BOB}"))],
    )
}

fn slow_site(pages: usize, pause_ms: u64) -> HashMap<String, Route> {
    let mut routes = tree_site(pages);
    for r in routes.values_mut() {
        *r = Route::Slow(Duration::from_millis(pause_ms), Box::new(r.clone()));
    }
    routes
}

#[tokio::test(flavor = "multi_thread")]
async fn keys_are_required_and_users_see_only_their_jobs() {
    let site = Site::start(tree_site(4)).await;
    let serve = keyed();
    let alice = serve.api(Some(ALICE));
    let bob = serve.api(Some(BOB));

    assert_eq!(serve.api(None).get("/api/health").await.status, 200);
    for key in [None, Some("wrong-key-0123456789"), Some("")] {
        let r = serve
            .api(key)
            .post("/api/scrape", &json!({"url": site.url("/")}))
            .await;
        assert_eq!(r.status, 401, "{key:?}");
        assert_eq!(r.body["error"]["code"], "UNAUTHORIZED");
    }
    let raw = reqwest::Client::new()
        .get(format!("{}/api/jobs", serve.base))
        .header("authorization", "Bearer ")
        .send()
        .await
        .unwrap();
    assert_eq!(raw.status(), 401);

    let id = alice
        .submit(
            "crawl",
            &json!({"url": site.url("/"), "use_sitemap": false}),
        )
        .await;
    alice.wait(&id, WAIT).await;
    let missing = bob.get("/api/jobs/job_00000000000000000000000000").await;
    assert_eq!(missing.status, 404);
    for path in ["", "/logs", "/tree", "/results"] {
        let r = bob.get(&format!("/api/jobs/{id}{path}")).await;
        assert_eq!(r.status, 404, "{path}");
        assert_eq!(r.body, missing.body, "no existence leak on {path}");
    }
    let r = bob.delete(&format!("/api/jobs/{id}/cancel")).await;
    assert_eq!((r.status, &r.body), (404, &missing.body));
    assert_eq!(bob.get("/api/jobs").await.body["jobs"], json!([]));
    assert_eq!(alice.get("/api/jobs").await.body["jobs"][0]["job_id"], id);
    // Bob's own crawl slot is his, whatever Alice does.
    bob.submit(
        "crawl",
        &json!({"url": site.url("/"), "use_sitemap": false}),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn invalid_requests_get_details_and_store_nothing() {
    let serve = Serve::start();
    let api = serve.api(None);
    let cases: Vec<(&str, Value, Vec<&str>)> = vec![
        ("scrape", json!({}), vec!["url"]),
        ("scrape", json!({"url": "file:///etc/passwd"}), vec!["url"]),
        ("scrape", json!({"url": "ftp://example.com/"}), vec!["url"]),
        (
            "scrape",
            json!({"url": "gopher://example.com/"}),
            vec!["url"],
        ),
        ("scrape", json!({"url": "data:text/html,hi"}), vec!["url"]),
        ("scrape", json!({"url": "javascript:alert(1)"}), vec!["url"]),
        (
            "scrape",
            json!({"url": format!("https://e.com/{}", "a".repeat(2100))}),
            vec!["url"],
        ),
        (
            "scrape",
            json!({"url": "https://e.com/", "formats": ["pdf"], "timeout_ms": 5}),
            vec!["formats", "timeout_ms"],
        ),
        (
            "scrape",
            json!({"url": "https://e.com/", "headers": {"Host": "x"}}),
            vec!["headers"],
        ),
        (
            "scrape",
            json!({"url": "https://e.com/", "exclude_selectors": ["<<<"]}),
            vec!["exclude_selectors"],
        ),
        (
            "scrape",
            json!({"url": "https://e.com/", "surprise": 1}),
            vec!["surprise"],
        ),
        (
            "crawl",
            json!({"url": "https://e.com/", "limit": 0, "max_depth": 51}),
            vec!["limit", "max_depth"],
        ),
        (
            "crawl",
            json!({"url": "https://e.com/", "limit": 10001}),
            vec!["limit"],
        ),
        (
            "crawl",
            json!({"url": "https://e.com/", "include_paths": ["("]}),
            vec!["include_paths"],
        ),
        (
            "crawl",
            json!({"url": "https://e.com/", "exclude_paths": ["(a{1000}){1000}"]}),
            vec!["exclude_paths"],
        ),
        (
            "crawl",
            json!({"url": "https://e.com/", "max_concurrency": "8"}),
            vec!["max_concurrency"],
        ),
        ("crawl", json!(["not", "an", "object"]), vec!["body"]),
    ];
    for (kind, body, fields) in cases {
        let r = api.post(&format!("/api/{kind}"), &body).await;
        assert_eq!(r.status, 400, "{body}");
        assert_eq!(r.body["error"]["code"], "INVALID_REQUEST");
        let mut got: Vec<&str> = r.body["error"]["details"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["field"].as_str().unwrap())
            .collect();
        got.sort();
        got.dedup();
        assert_eq!(got, fields, "{body}");
    }
    let bad_json = api
        .http
        .post(format!("{}/api/scrape", serve.base))
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(bad_json.status(), 400);
    // Its own client: the server closes a connection whose body it refused to read.
    let huge = reqwest::Client::new()
        .post(format!("{}/api/scrape", serve.base))
        .body(vec![b' '; 2 << 20])
        .send()
        .await
        .unwrap();
    assert_eq!(huge.status(), 413);
    assert_eq!(api.get("/api/jobs").await.body["jobs"], json!([]));
    for bad in [
        "/api/jobs?limit=0",
        "/api/jobs?limit=101",
        "/api/jobs?kind=nope",
        "/api/jobs?status=done",
        "/api/jobs?cursor=x",
    ] {
        assert_eq!(api.get(bad).await.status, 400, "{bad}");
    }
    assert_eq!(api.get("/api/nope").await.status, 404);
    assert_eq!(
        api.get("/api/jobs/not-a-job").await.body["error"]["code"],
        "NOT_FOUND"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn one_active_crawl_per_user_under_a_race() {
    let site = Site::start(slow_site(30, 100)).await;
    let serve = Serve::start();
    let api = serve.api(None);
    let body = json!({"url": site.url("/"), "use_sitemap": false});
    let replies = futures::future::join_all((0..20).map(|_| api.post("/api/crawl", &body))).await;
    let winners: Vec<&e2e::server::Reply> = replies.iter().filter(|r| r.status == 202).collect();
    assert_eq!(winners.len(), 1);
    let id = winners[0].body["job_id"].as_str().unwrap();
    for r in replies.iter().filter(|r| r.status != 202) {
        assert_eq!(r.status, 429);
        assert_eq!(r.header("retry-after"), Some("5"));
        assert_eq!(r.body["error"]["code"], "CONCURRENCY_LIMIT");
        assert_eq!(r.body["error"]["limit"], "crawl");
        assert_eq!(r.body["error"]["active_job_id"], id);
    }
    assert_eq!(
        api.get("/api/jobs").await.body["jobs"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    // The scrape slot is separate.
    let scrape = api
        .submit("scrape", &json!({"url": site.url("/p/1.html")}))
        .await;
    api.wait(&scrape, WAIT).await;
    // Completion frees the crawl slot.
    api.wait(id, WAIT).await;
    api.submit("crawl", &body).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn submit_answers_202_with_location_and_job_is_readable_at_once() {
    let site = Site::start(slow_site(4, 300)).await;
    let serve = Serve::start();
    let api = serve.api(None);
    let r = api
        .post("/api/scrape", &json!({"url": site.url("/")}))
        .await;
    assert_eq!(r.status, 202);
    let id = r.body["job_id"].as_str().unwrap();
    assert!(id.starts_with("job_"));
    assert_eq!(
        r.header("location"),
        Some(format!("/api/jobs/{id}").as_str())
    );
    assert_eq!(r.header("retry-after"), Some("1"));
    assert_eq!(r.body["kind"], "scrape");
    assert_eq!(r.body["status"], "queued");
    assert_eq!(r.body["links"]["cancel"], format!("/api/jobs/{id}/cancel"));
    let now = api.get(&format!("/api/jobs/{id}")).await;
    assert_eq!(now.status, 200);
    assert!(matches!(
        now.body["status"].as_str(),
        Some("queued" | "running")
    ));
    assert_eq!(now.header("retry-after"), Some("1"));
    let done = api.wait(id, WAIT).await;
    assert_eq!(done["status"], "completed");
    assert!(api
        .get(&format!("/api/jobs/{id}"))
        .await
        .header("retry-after")
        .is_none());
    let tree = api.get(&format!("/api/jobs/{id}/tree")).await.body;
    assert_eq!(tree["nodes"], 1);
    assert_eq!(tree["root"]["status_code"], 200);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_tree_shows_a_page_being_fetched_as_running() {
    let site = Site::start(slow_site(1, 3000)).await;
    let serve = Serve::start();
    let api = serve.api(None);
    let id = api.submit("scrape", &json!({"url": site.url("/")})).await;
    let deadline = Instant::now() + WAIT;
    while site.hits_of("/") == 0 {
        assert!(Instant::now() < deadline);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let tree = api.get(&format!("/api/jobs/{id}/tree")).await.body;
    assert_eq!(tree["root"]["status"], "running", "{tree}");
    assert_eq!(api.wait(&id, WAIT).await["status"], "completed");
    let tree = api.get(&format!("/api/jobs/{id}/tree")).await.body;
    assert_eq!(tree["root"]["status"], "completed", "{tree}");
}

#[tokio::test(flavor = "multi_thread")]
async fn cancel_stops_fetching_keeps_results_and_frees_the_slot() {
    let site = Site::start(slow_site(121, 150)).await;
    let serve = Serve::start();
    let api = serve.api(None);
    let body =
        json!({"url": site.url("/"), "use_sitemap": false, "limit": 1000, "max_concurrency": 2});
    let id = api.submit("crawl", &body).await;
    api.wait_for_pages(&id, 4, WAIT).await;
    let r = api.delete(&format!("/api/jobs/{id}/cancel")).await;
    let cancelled_at = Instant::now();
    assert_eq!(r.status, 200);
    assert_eq!(r.body, json!({"job_id": id, "status": "cancelled"}));
    // The slot is free at once.
    let other = Site::start(tree_site(3)).await;
    let next = api
        .submit(
            "crawl",
            &json!({"url": other.url("/"), "use_sitemap": false}),
        )
        .await;
    tokio::time::sleep(Duration::from_millis(800)).await;
    let late: Vec<_> = site
        .hits()
        .into_iter()
        .filter(|h| h.at > cancelled_at + Duration::from_millis(100))
        .collect();
    assert!(late.is_empty(), "fetches started after cancel: {late:?}");
    let job = api.job(&id).await;
    assert_eq!(job["status"], "cancelled");
    let done = job["progress"]["pages_completed"].as_u64().unwrap();
    assert!((4..121).contains(&done));
    assert_eq!(
        api.all_results(&id).await.len() as u64,
        done + job["progress"]["pages_failed"].as_u64().unwrap()
    );
    // Cancel is idempotent; a finished job cannot be cancelled.
    assert_eq!(
        api.delete(&format!("/api/jobs/{id}/cancel")).await.status,
        200
    );
    api.wait(&next, WAIT).await;
    let r = api.delete(&format!("/api/jobs/{next}/cancel")).await;
    assert_eq!(r.status, 409);
    assert_eq!(r.body["error"]["code"], "JOB_FINISHED");
    let logs = api.all_logs(&id).await;
    assert!(logs.iter().any(|e| e["message"] == "cancelled by the user"));
}

#[tokio::test(flavor = "multi_thread")]
async fn results_logs_and_jobs_page_with_cursors() {
    let site = Site::start(tree_site(30)).await;
    let serve = Serve::start();
    let api = serve.api(None);
    let (id, _) = api
        .run(
            "crawl",
            &json!({"url": site.url("/"), "use_sitemap": false}),
            WAIT,
        )
        .await;
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    let mut pages = 0;
    loop {
        let path = match &cursor {
            Some(c) => format!("/api/jobs/{id}/results?limit=7&cursor={c}"),
            None => format!("/api/jobs/{id}/results?limit=7"),
        };
        let r = api.get(&path).await.body;
        assert_eq!(r["total"], 30);
        pages += 1;
        seen.extend(
            r["data"]
                .as_array()
                .unwrap()
                .iter()
                .map(|d| d["url"].as_str().unwrap().to_string()),
        );
        match r["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_string()),
            None => break,
        }
    }
    assert_eq!(pages, 5);
    let mut unique = seen.clone();
    unique.sort();
    unique.dedup();
    assert_eq!((seen.len(), unique.len()), (30, 30));

    let first = api.get(&format!("/api/jobs/{id}/logs?limit=3")).await.body;
    assert_eq!(first["entries"].as_array().unwrap().len(), 3);
    let after = first["next_after"].as_u64().unwrap();
    let rest = api
        .get(&format!("/api/jobs/{id}/logs?after={after}&limit=1000"))
        .await
        .body;
    let all = api.all_logs(&id).await;
    assert_eq!(3 + rest["entries"].as_array().unwrap().len(), all.len());
    assert_eq!(
        rest["entries"][0]["seq"].as_u64().unwrap(),
        all[3]["seq"].as_u64().unwrap()
    );

    for _ in 0..3 {
        let s = api.submit("scrape", &json!({"url": site.url("/")})).await;
        api.wait(&s, WAIT).await;
    }
    let page1 = api.get("/api/jobs?limit=2").await.body;
    let page2 = api
        .get(&format!(
            "/api/jobs?limit=2&cursor={}",
            page1["next_cursor"].as_str().unwrap()
        ))
        .await
        .body;
    let ids: Vec<&str> = page1["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .chain(page2["jobs"].as_array().unwrap())
        .map(|j| j["job_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids.len(), 4);
    assert_eq!(ids[3], id, "newest first; the crawl was first");
    assert!(page2["next_cursor"].is_null());
    let crawls = api.get("/api/jobs?kind=crawl&status=completed").await.body;
    assert_eq!(crawls["jobs"].as_array().unwrap().len(), 1);
}

#[test]
fn serve_without_keys_refuses_a_public_address() {
    let dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(e2e::server::binary())
        .args(["serve", "--addr", "0.0.0.0:0", "--data-dir"])
        .arg(dir.path())
        .env_remove("SARVCRAWL_API_KEYS")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("without API keys"), "{err}");
}

#[test]
fn help_explains_every_flag() {
    let out = std::process::Command::new(e2e::server::binary())
        .args(["serve", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    for flag in [
        "--addr",
        "--data-dir",
        "--workers",
        "--allow-net",
        "--api-keys-file",
        "SARVCRAWL_ALLOW_NETS",
    ] {
        assert!(help.contains(flag), "{flag} missing from:\n{help}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn large_results_page_under_a_byte_budget() {
    let filler = "<p>".to_string() + &"lorem ipsum ".repeat(130_000) + "</p>";
    let mut routes = tree_site(6);
    for r in routes.values_mut() {
        if let Route::Html(h) = r {
            *h = h.replace("</main>", &format!("{filler}</main>"));
        }
    }
    let site = Site::start(routes).await;
    let serve = Serve::start();
    let api = serve.api(None);
    let (id, job) = api
        .run(
            "crawl",
            &json!({"url": site.url("/"), "use_sitemap": false, "formats": ["raw_html"]}),
            WAIT,
        )
        .await;
    assert_eq!(job["progress"]["pages_completed"], 6);
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    let mut pages = 0;
    loop {
        let path = match &cursor {
            Some(c) => format!("/api/jobs/{id}/results?limit=100&cursor={c}"),
            None => format!("/api/jobs/{id}/results?limit=100"),
        };
        let r = api.get(&path).await.body;
        let data = r["data"].as_array().unwrap();
        assert!(
            !data.is_empty() && data.len() < 6,
            "a page holds part of the results"
        );
        assert!(r.to_string().len() < 5 << 20, "under the budget");
        seen.extend(data.iter().map(|d| d["url"].as_str().unwrap().to_string()));
        pages += 1;
        match r["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_string()),
            None => break,
        }
    }
    assert!(pages >= 2);
    seen.sort();
    seen.dedup();
    assert_eq!(seen.len(), 6, "every document once");
}
