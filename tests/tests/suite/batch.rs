//! Batch scrapes end to end: a list of URLs as one job, each distinct URL fetched once, the
//! invalid ones refused or dropped, one active batch per user, cancel, and the CLI's `batch`.

use e2e::{tree_site, Route, Serve, Site};
use serde_json::{json, Value};
use std::collections::{BTreeSet, HashMap};
use std::time::{Duration, Instant};

const WAIT: Duration = Duration::from_secs(900);

/// The fixture's page paths `/p/1.html` ... `/p/{n}.html`.
fn pages(n: usize) -> Vec<String> {
    (1..=n).map(|i| format!("/p/{i}.html")).collect()
}

fn slow(routes: HashMap<String, Route>, pause: Duration) -> HashMap<String, Route> {
    routes
        .into_iter()
        .map(|(p, r)| (p, Route::Slow(pause, Box::new(r))))
        .collect()
}

/// How many jobs of the local backend's data directory `data` hold a blob called `name`.
async fn jobs_holding(data: &std::path::Path, name: &str) -> usize {
    use sarvcrawl_core::ports::BlobStore;
    let root = data.join("documents");
    let blobs = sarvcrawl_local::FsBlobs::new(root.clone());
    let mut held = 0;
    for user in std::fs::read_dir(&root).into_iter().flatten().flatten() {
        for job in std::fs::read_dir(user.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            let key = format!(
                "{}/{}/{name}",
                user.file_name().to_string_lossy(),
                job.file_name().to_string_lossy()
            );
            match blobs.get(&key).await {
                Ok(blob) => held += usize::from(blob.is_some()),
                Err(e) => panic!("{key}: {e}"),
            }
        }
    }
    held
}

#[tokio::test(flavor = "multi_thread")]
async fn a_thousand_urls_with_duplicates_and_invalid_ones_fetch_each_url_once() {
    const DISTINCT: usize = 977;
    let site = Site::start(tree_site(DISTINCT + 1)).await;
    let serve = Serve::start();
    let api = serve.api(None);
    let mut urls: Vec<Value> = pages(DISTINCT).iter().map(|p| json!(site.url(p))).collect();
    // Twenty repeats, some equal only once normalised (a fragment, an empty query).
    for i in 1..=20 {
        let again = match i % 3 {
            0 => site.url(&format!("/p/{i}.html")),
            1 => site.url(&format!("/p/{i}.html#part")),
            _ => site.url(&format!("/p/{i}.html?")),
        };
        urls.insert(i * 40, json!(again));
    }
    let invalid = [json!("not a url"), json!("ftp://example.com/x"), json!(42)];
    for (n, bad) in invalid.iter().enumerate() {
        urls.insert(100 + n * 300, bad.clone());
    }
    assert_eq!(urls.len(), 1000);
    let body = json!({"urls": urls, "ignore_invalid_urls": true, "max_concurrency": 16});
    let r = api.post("/api/batch/scrape", &body).await;
    assert_eq!(r.status, 202, "{}", r.body);
    assert_eq!(r.body["kind"], "batch");
    assert_eq!(
        r.body["invalid_urls"],
        json!(["not a url", "ftp://example.com/x", "42"])
    );
    let id = r.body["job_id"].as_str().unwrap().to_string();
    let job = api.wait(&id, WAIT).await;
    assert_eq!(job["status"], "completed", "{job}");
    assert_eq!(
        job["progress"],
        json!({"pages_discovered": DISTINCT, "pages_completed": DISTINCT, "pages_failed": 0, "pages_queued": 0})
    );
    assert!(
        job["result"].is_null(),
        "a batch's pages are read from /results"
    );

    let docs = api.all_results(&id).await;
    assert_eq!(docs.len(), DISTINCT);
    let requested: BTreeSet<String> = docs
        .iter()
        .map(|d| d["requested_url"].as_str().unwrap().to_string())
        .collect();
    let expected: BTreeSet<String> = pages(DISTINCT).iter().map(|p| site.url(p)).collect();
    assert_eq!(requested, expected);
    let page7 = docs
        .iter()
        .find(|d| d["requested_url"] == site.url("/p/7.html"))
        .unwrap();
    assert!(page7["markdown"]
        .as_str()
        .unwrap()
        .starts_with("# Page 7\n\nText of page 7."));
    let first = site.hits().first().map(|h| h.at);
    for p in pages(DISTINCT) {
        // When a page is fetched twice, when each fetch came (from the site's first request)
        // and the job's log tell how.
        let seen: Vec<_> = site
            .hits()
            .into_iter()
            .filter(|h| h.path == p)
            .map(|h| (first.map(|f| h.at - f), h.headers))
            .collect();
        if seen.len() != 1 {
            let logs = api.get(&format!("/api/jobs/{id}/logs?limit=1000")).await;
            panic!("{p} fetched {} times: {seen:?}\n{}", seen.len(), logs.body);
        }
    }
    assert_eq!(site.hits_of("/"), 0, "links are not followed");
    assert_eq!(site.hits_of("/robots.txt"), 1, "robots.txt once per origin");

    let tree = api.get(&format!("/api/jobs/{id}/tree")).await.body;
    assert_eq!(tree["nodes"], DISTINCT + 1);
    assert_eq!(tree["root"]["url"], format!("batch:{DISTINCT}-urls"));
    assert_eq!(tree["root"]["status"], "completed");
    let children = tree["root"]["children"].as_array().unwrap();
    assert_eq!(children.len(), DISTINCT);
    assert!(children
        .iter()
        .all(|c| c["status"] == "completed" && c["depth"] == 1 && c["status_code"] == 200));

    let logs = api.all_logs(&id).await;
    let messages: Vec<&str> = logs
        .iter()
        .map(|e| e["message"].as_str().unwrap())
        .collect();
    assert!(messages.contains(&"started batch"), "{messages:?}");
    assert!(messages.contains(
        &format!("{DISTINCT} URLs to fetch, 20 duplicates fetched once, 3 invalid URLs ignored")
            .as_str()
    ));
    assert_eq!(
        messages
            .iter()
            .filter(|m| m.starts_with("fetched (200)"))
            .count(),
        DISTINCT
    );
    // The totals end the story (a page's line written beside the last completion may land
    // after them).
    assert_eq!(
        *messages
            .iter()
            .rev()
            .find(|m| !m.starts_with("fetched"))
            .unwrap(),
        format!("completed: {DISTINCT} pages completed, 0 failed")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn invalid_lists_are_refused_with_the_index_of_each_bad_url() {
    let serve = Serve::start();
    let api = serve.api(None);
    let ok = "http://127.0.0.1:9/a";
    let r = api
        .post(
            "/api/batch/scrape",
            &json!({"urls": [ok, "nope", ok, {"u": 1}, "javascript:alert(1)"]}),
        )
        .await;
    assert_eq!(r.status, 400, "{}", r.body);
    assert_eq!(r.body["error"]["code"], "INVALID_REQUEST");
    let fields: Vec<&str> = r.body["error"]["details"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["field"].as_str().unwrap())
        .collect();
    assert_eq!(fields, ["urls[1]", "urls[3]", "urls[4]"]);
    let too_many: Vec<String> = (0..10_001).map(|i| format!("http://e.com/{i}")).collect();
    for (body, field) in [
        (json!({}), "urls"),
        (json!({"urls": []}), "urls"),
        (json!({"urls": "http://e.com/"}), "urls"),
        (json!({"urls": too_many}), "urls"),
        (
            json!({"urls": ["nope"], "ignore_invalid_urls": true}),
            "urls",
        ),
        (
            json!({"urls": [ok], "max_concurrency": 0}),
            "max_concurrency",
        ),
        (json!({"urls": [ok], "follow": true}), "follow"),
    ] {
        let r = api.post("/api/batch/scrape", &body).await;
        assert_eq!(r.status, 400, "{}", r.body);
        assert_eq!(r.body["error"]["details"][0]["field"], field, "{}", r.body);
    }
    assert_eq!(
        api.get("/api/jobs").await.body["jobs"],
        json!([]),
        "a refused batch stores nothing"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn one_active_batch_per_user_and_cancel_keeps_what_was_stored() {
    const N: usize = 60;
    let site = Site::start(slow(tree_site(N + 1), Duration::from_millis(150))).await;
    let serve = Serve::start();
    let api = serve.api(None);
    let urls: Vec<String> = pages(N).iter().map(|p| site.url(p)).collect();
    let body = json!({"urls": urls, "max_concurrency": 2});
    let id = api.submit("batch/scrape", &body).await;
    let r = api.post("/api/batch/scrape", &body).await;
    assert_eq!(r.status, 429, "{}", r.body);
    assert_eq!(r.body["error"]["code"], "CONCURRENCY_LIMIT");
    assert_eq!(r.body["error"]["limit"], "batch");
    assert_eq!(r.body["error"]["active_job_id"], id);
    if !e2e::server::aws_backend() {
        // The refused batch's list was removed again: one list is stored, the running one's.
        assert_eq!(jobs_holding(&serve.data_dir, "batch-urls.json").await, 1);
    }
    // A batch's slot is its own: a crawl and a scrape run beside it.
    let crawl = api
        .submit("crawl", &json!({"url": site.url("/"), "limit": 1}))
        .await;
    api.wait(&crawl, WAIT).await;

    api.wait_for_pages(&id, 4, WAIT).await;
    let r = api.delete(&format!("/api/jobs/{id}/cancel")).await;
    assert_eq!(r.status, 200);
    let cancelled_at = Instant::now();
    // The slot is free at once.
    let next = api
        .submit("batch/scrape", &json!({"urls": [site.url("/p/1.html")]}))
        .await;
    tokio::time::sleep(Duration::from_millis(800)).await;
    // The next batch fetches its page, and robots.txt again on a worker process that has not
    // read it yet.
    let late: Vec<_> = site
        .hits()
        .into_iter()
        .filter(|h| h.at > cancelled_at + Duration::from_millis(100))
        .filter(|h| h.path != "/p/1.html" && h.path != "/robots.txt")
        .collect();
    assert!(late.is_empty(), "fetches started after cancel: {late:?}");
    let job = api.job(&id).await;
    assert_eq!(job["status"], "cancelled");
    let p = &job["progress"];
    let done = p["pages_completed"].as_u64().unwrap();
    assert!((4..N as u64).contains(&done), "{job}");
    assert_eq!(p["pages_discovered"], N);
    assert_eq!(
        api.all_results(&id).await.len() as u64,
        done + p["pages_failed"].as_u64().unwrap()
    );
    assert_eq!(api.wait(&next, WAIT).await["status"], "completed");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_batch_of_unreachable_pages_fails_with_their_error() {
    let site = Site::start(tree_site(3)).await;
    let serve = Serve::start();
    let api = serve.api(None);
    let urls = [site.url("/missing-1"), site.url("/missing-2")];
    let (id, job) = api.run("batch/scrape", &json!({"urls": urls}), WAIT).await;
    assert_eq!(job["status"], "failed", "{job}");
    assert_eq!(job["error"]["code"], "HTTP_ERROR");
    assert_eq!(
        job["progress"],
        json!({"pages_discovered": 2, "pages_completed": 0, "pages_failed": 2, "pages_queued": 0})
    );
    assert_eq!(api.all_results(&id).await.len(), 2);
}
