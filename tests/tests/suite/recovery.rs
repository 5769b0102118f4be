//! Recovery (SECURITY.md I4, I5): a server killed mid-crawl loses nothing, a task that always
//! fails ends its job instead of blocking the user's slot, and a task the server keeps dying
//! on is not run into another crash.

use e2e::{tree_paths, tree_site, Route, Serve, Site};
use serde_json::json;
use std::time::{Duration, Instant};

#[tokio::test(flavor = "multi_thread")]
async fn sigkill_mid_crawl_then_restart_completes_every_page_once() {
    const PAGES: usize = 121; // depths 0 to 4
    let mut routes = tree_site(PAGES);
    for r in routes.values_mut() {
        *r = Route::Slow(Duration::from_millis(40), Box::new(r.clone()));
    }
    let site = Site::start(routes).await;
    let mut serve = Serve::with(&["--allow-net", "127.0.0.1/32", "--workers", "1"], &[]);
    let api = serve.api(None);
    let id = api
        .submit("crawl", &json!({"url": site.url("/"), "use_sitemap": false, "max_concurrency": 2, "limit": 1000}))
        .await;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let done = api.job(&id).await["progress"]["pages_completed"]
            .as_u64()
            .unwrap();
        if done >= 15 {
            break;
        }
        assert!(Instant::now() < deadline, "crawl made no progress");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    serve.restart();
    let api = serve.api(None);
    // The killed processes' pages come back after their visibility timeout and leases (30 s);
    // what was let go without being queued, after a redelivered task or the sweep queues it
    // again. On the AWS pass, with every other test on the same emulator, that takes a while.
    let job = api.wait(&id, Duration::from_secs(240)).await;
    assert_eq!(job["status"], "completed", "{job}");
    assert_eq!(
        job["progress"],
        json!({"pages_discovered": PAGES, "pages_completed": PAGES, "pages_failed": 0, "pages_queued": 0})
    );
    let docs = api.all_results(&id).await;
    let mut urls: Vec<String> = docs
        .iter()
        .map(|d| d["url"].as_str().unwrap().to_string())
        .collect();
    urls.sort();
    let mut expected: Vec<String> = tree_paths(PAGES, 4).iter().map(|p| site.url(p)).collect();
    expected.sort();
    assert_eq!(urls, expected, "every page exactly once");
    // Logs written before the kill are still there.
    let logs = api.all_logs(&id).await;
    assert!(logs.iter().any(|e| e["message"] == "started crawl"));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_page_slower_than_the_task_lease_is_fetched_once() {
    // The task lease (the visibility timeout) is 2 s and the page takes 7 s to answer: the
    // delivery fetching it renews its hold on the task and the page meanwhile, so no other
    // delivery takes the page over and fetches it again.
    let routes = [(
        "/slow".to_string(),
        Route::Slow(
            Duration::from_secs(7),
            Box::new(Route::Html("<p>worth the wait</p>".into())),
        ),
    )]
    .into();
    let site = Site::start(routes).await;
    let serve = Serve::with(
        &["--allow-net", "127.0.0.1/32", "--visibility-timeout", "2"],
        &[],
    );
    let api = serve.api(None);
    let (_, job) = api
        .run(
            "scrape",
            &json!({"url": site.url("/slow"), "timeout_ms": 20000}),
            Duration::from_secs(60),
        )
        .await;
    assert_eq!(job["status"], "completed", "{job}");
    assert!(job["result"]["markdown"]
        .as_str()
        .is_some_and(|m| m.contains("worth the wait")));
    assert_eq!(site.hits_of("/slow"), 1, "fetched by one delivery only");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_task_that_always_fails_fails_its_job_and_frees_the_slot() {
    let routes = [("/".to_string(), Route::Html("<p>fine</p>".into()))].into();
    let site = Site::start(routes).await;
    // Retries come after the worker's own short delays (1, 2, 4, 8 s); the visibility timeout
    // only has to outlast one attempt, so no attempt is ever delivered twice at once.
    let mut serve = Serve::with(
        &["--allow-net", "127.0.0.1/32", "--visibility-timeout", "10"],
        &[],
    );
    serve.break_documents();
    if e2e::server::aws_backend() {
        // The processes stopped by that restart left their long polls open at the queue, and
        // a poll of a dead process may still take the task (which then waits out its
        // visibility timeout, an attempt without a fetch): let those polls end first.
        tokio::time::sleep(sarvcrawl_core::app::worker::RECEIVE_WAIT + Duration::from_secs(1))
            .await;
    }
    let api = serve.api(None);
    let (_, job) = api
        .run(
            "scrape",
            &json!({"url": site.url("/")}),
            Duration::from_secs(120),
        )
        .await;
    assert_eq!(job["status"], "failed", "{job}");
    assert_eq!(job["error"]["code"], "INTERNAL");
    assert_eq!(job["error"]["message"], "gave up after 5 attempts");
    assert_eq!(site.hits_of("/"), 5, "one fetch per attempt");
    // The slot is free again.
    serve.repair_documents();
    let api = serve.api(None);
    let next = api.submit("scrape", &json!({"url": site.url("/")})).await;
    assert_eq!(
        api.wait(&next, Duration::from_secs(30)).await["status"],
        "completed"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_task_the_server_died_on_twice_is_given_up() {
    // The embedded server knows which task was running when it stopped (SQS cannot tell), so
    // this runs on the local backend whatever the suite's backend.
    let routes = [(
        "/hang".to_string(),
        Route::Slow(
            Duration::from_secs(60),
            Box::new(Route::Html("<p>late</p>".into())),
        ),
    )]
    .into();
    let site = Site::start(routes).await;
    let mut serve = Serve::on_local(&["--allow-net", "127.0.0.1/32"]);
    let id = serve
        .api(None)
        .submit(
            "scrape",
            &json!({"url": site.url("/hang"), "timeout_ms": 90000}),
        )
        .await;
    for hits in 1..=2 {
        // The page is being fetched: the server dies in the middle of the task.
        let deadline = Instant::now() + Duration::from_secs(30);
        while site.hits_of("/hang") < hits {
            assert!(Instant::now() < deadline, "attempt {hits} never started");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        serve.restart();
    }
    let api = serve.api(None);
    let job = api.wait(&id, Duration::from_secs(30)).await;
    assert_eq!(job["status"], "failed", "{job}");
    assert_eq!(job["error"]["code"], "INTERNAL");
    assert_eq!(
        job["error"]["message"],
        "gave up: the worker stopped 2 times while processing this page"
    );
    assert_eq!(site.hits_of("/hang"), 2, "not fetched a third time");
    // A server stopped on purpose (SIGTERM) hands its task back without counting it.
    let next = api
        .submit(
            "scrape",
            &json!({"url": site.url("/hang"), "timeout_ms": 90000}),
        )
        .await;
    for hits in 3..=5 {
        let deadline = Instant::now() + Duration::from_secs(30);
        while site.hits_of("/hang") < hits {
            assert!(Instant::now() < deadline, "attempt {hits} never started");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        serve.restart_gracefully();
    }
    let job = serve.api(None).job(&next).await;
    assert_eq!(job["status"], "running", "{job}");
}
