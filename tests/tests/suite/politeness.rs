//! Rules that hold however many processes work the queue: a job's `max_concurrency` and
//! `delay_ms`, robots.txt fetched once per job, the deployment's per-host cap, and each job's
//! turn. On the AWS backend the suite runs them with several worker processes on one queue.

use e2e::{tree_site, Route, Serve, Site};
use serde_json::json;
use std::collections::HashMap;
use std::time::{Duration, Instant};

const WAIT: Duration = Duration::from_secs(300);

/// A site serving `routes`, each answered after `pause`.
async fn slow(mut routes: HashMap<String, Route>, pause: Duration) -> Site {
    for r in routes.values_mut() {
        *r = Route::Slow(pause, Box::new(r.clone()));
    }
    Site::start(routes).await
}

/// The time between one page request to `site` and the next (robots.txt aside).
fn gaps_between_pages(site: &Site) -> Vec<Duration> {
    let mut times: Vec<_> = site
        .hits()
        .into_iter()
        .filter(|h| h.path != "/robots.txt")
        .map(|h| h.at)
        .collect();
    times.sort();
    times.windows(2).map(|p| p[1] - p[0]).collect()
}

fn key_of(user: &str) -> String {
    format!("{user}-polite-key-0123456789")
}

/// A server with API keys for `users`, and extra arguments.
fn serve_for(users: &[&str], args: &[&str]) -> Serve {
    let keys: Vec<String> = users.iter().map(|u| format!("{u}:{}", key_of(u))).collect();
    let mut all = vec!["--allow-net", "127.0.0.1/32"];
    all.extend(args);
    Serve::with(&all, &[("SARVCRAWL_API_KEYS", &keys.join(","))])
}

#[tokio::test(flavor = "multi_thread")]
async fn max_concurrency_bounds_a_job_s_open_requests_and_robots_is_fetched_once() {
    let mut routes = tree_site(40);
    routes.insert(
        "/robots.txt".into(),
        Route::typed("text/plain", "User-agent: *\nDisallow: /private\n"),
    );
    let site = slow(routes, Duration::from_millis(300)).await;
    let serve = Serve::start();
    let api = serve.api(None);
    let body = json!({"url": site.url("/"), "use_sitemap": false, "max_concurrency": 2});
    let (_, job) = api.run("crawl", &body, WAIT).await;
    assert_eq!(job["progress"]["pages_completed"], 40, "{job}");
    assert!(site.max_open() <= 2, "{} open at once", site.max_open());
    assert_eq!(site.max_open(), 2, "pages are fetched two at a time");
    assert_eq!(site.hits_of("/robots.txt"), 1, "robots.txt once per job");
}

#[tokio::test(flavor = "multi_thread")]
async fn delay_ms_spaces_the_fetches_of_a_crawl() {
    let site = Site::start(tree_site(6)).await;
    let serve = Serve::start();
    let api = serve.api(None);
    let body =
        json!({"url": site.url("/"), "use_sitemap": false, "delay_ms": 300, "max_concurrency": 4});
    let (_, job) = api.run("crawl", &body, WAIT).await;
    assert_eq!(job["progress"]["pages_completed"], 6);
    let gaps = gaps_between_pages(&site);
    assert_eq!(gaps.len(), 5);
    for gap in gaps {
        assert!(gap >= Duration::from_millis(300), "gap of {gap:?}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn crawl_delay_in_robots_txt_spaces_the_fetches() {
    let mut routes = tree_site(5);
    routes.insert(
        "/robots.txt".into(),
        Route::typed("text/plain", "User-agent: *\nCrawl-delay: 1\n"),
    );
    let site = Site::start(routes).await;
    let serve = Serve::start();
    let api = serve.api(None);
    let (id, job) = api
        .run(
            "crawl",
            &json!({"url": site.url("/"), "use_sitemap": false, "max_concurrency": 5}),
            WAIT,
        )
        .await;
    assert_eq!(job["progress"]["pages_completed"], 5);
    for gap in gaps_between_pages(&site) {
        assert!(gap >= Duration::from_millis(950), "gap of {gap:?}");
    }
    let logs = api.all_logs(&id).await;
    assert!(logs
        .iter()
        .any(|e| e["message"].as_str().unwrap().contains("Crawl-delay 1 s")));
}

#[tokio::test(flavor = "multi_thread")]
async fn jobs_of_two_users_on_one_host_share_the_per_host_cap() {
    let site = slow(tree_site(30), Duration::from_millis(300)).await;
    let serve = serve_for(&["ann", "bob"], &["--per-host-concurrency", "3"]);
    let body = json!({"url": site.url("/"), "use_sitemap": false, "max_concurrency": 4});
    let (ann, bob) = (
        serve.api(Some(&key_of("ann"))),
        serve.api(Some(&key_of("bob"))),
    );
    let (a, b) = tokio::join!(ann.run("crawl", &body, WAIT), bob.run("crawl", &body, WAIT));
    for (_, job) in [a, b] {
        assert_eq!(job["progress"]["pages_completed"], 30, "{job}");
    }
    assert!(site.max_open() <= 3, "{} open at once", site.max_open());
    assert!(site.max_open() >= 2, "pages are fetched in parallel");
}

#[tokio::test(flavor = "multi_thread")]
async fn another_user_s_scrape_is_not_held_up_by_a_big_crawl() {
    let big = slow(tree_site(300), Duration::from_millis(50)).await;
    let small = Site::start(tree_site(1)).await;
    let serve = serve_for(&["big", "small"], &[]);
    let (a, b) = (
        serve.api(Some(&key_of("big"))),
        serve.api(Some(&key_of("small"))),
    );
    let crawl = a
        .submit(
            "crawl",
            &json!({"url": big.url("/"), "use_sitemap": false, "max_concurrency": 8}),
        )
        .await;
    // Wait until the crawl is well under way: its pages are being fetched.
    let deadline = Instant::now() + WAIT;
    while a.job(&crawl).await["progress"]["pages_completed"].as_u64() < Some(20) {
        assert!(Instant::now() < deadline, "the crawl made no progress");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let submitted = Instant::now();
    let (_, scrape) = b.run("scrape", &json!({"url": small.url("/")}), WAIT).await;
    let took = submitted.elapsed();
    assert_eq!(scrape["status"], "completed", "{scrape}");
    let crawl_job = a.job(&crawl).await;
    eprintln!(
        "fairness: the scrape took {took:?} while the crawl had {} of 300 pages done",
        crawl_job["progress"]["pages_completed"]
    );
    assert_eq!(
        crawl_job["status"], "running",
        "the scrape ended before the crawl"
    );
    assert!(took < Duration::from_secs(10), "the scrape took {took:?}");
    assert_eq!(
        a.delete(&format!("/api/jobs/{crawl}/cancel")).await.status,
        200
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_crawl_waiting_in_the_queue_keeps_its_slot_past_the_lease() {
    let site = Site::start(tree_site(5)).await;
    // No worker: the crawl's root task waits in the queue for longer than the slot lease.
    let lease = ["--slot-lease", "2"];
    let mut serve = serve_for(&["wait"], &[&lease[..], &["--workers", "0"]].concat());
    let api = serve.api(Some(&key_of("wait")));
    let body = json!({"url": site.url("/"), "use_sitemap": false});
    let id = api.submit("crawl", &body).await;
    tokio::time::sleep(Duration::from_secs(7)).await;
    let second = api.post("/api/crawl", &body).await;
    assert_eq!(second.status, 429, "{}", second.body);
    assert_eq!(second.body["error"]["code"], "CONCURRENCY_LIMIT");
    assert_eq!(api.job(&id).await["status"], "queued");
    // Workers start: the crawl runs to its end.
    let mut args = vec!["--allow-net", "127.0.0.1/32"];
    args.extend(lease);
    serve.restart_with(&args);
    let api = serve.api(Some(&key_of("wait")));
    let job = api.wait(&id, WAIT).await;
    assert_eq!(job["status"], "completed", "{job}");
    assert_eq!(job["progress"]["pages_completed"], 5);
}
