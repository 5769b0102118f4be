//! The AWS backend under the faults AWS answers under load, injected by a proxy in front of
//! the emulator: the server's processes (one serving the API, several working the queue) reach
//! AWS only through it. Runs on the AWS backend whatever the suite runs against.

use e2e::faults::Faults;
use e2e::{tree_paths, tree_site, Route, Serve, Site};
use serde_json::json;
use std::collections::HashMap;
use std::time::Duration;

const PAGES: usize = 300;
const SHARE: f64 = 0.10;

fn key_of(user: &str) -> String {
    format!("{user}-faults-key-0123456789")
}

#[tokio::test(flavor = "multi_thread")]
async fn under_injected_faults_a_crawl_fetches_every_page_once_and_submits_never_answer_500() {
    let endpoint =
        std::env::var("AWS_ENDPOINT_URL").expect("the AWS emulator: run scripts/test.sh");
    let faults = Faults::start(&endpoint, SHARE).await;
    let site = Site::start(tree_site(PAGES)).await;
    let keys = ["crawler", "racer"].map(|u| format!("{u}:{}", key_of(u)));
    let serve = Serve::on_aws(
        "127.0.0.1:0",
        &["--allow-net", "127.0.0.1/32"],
        vec![
            ("AWS_ENDPOINT_URL".into(), faults.url.clone()),
            ("SARVCRAWL_API_KEYS".into(), keys.join(",")),
        ],
    );
    let crawler = serve.api(Some(&key_of("crawler")));
    let body = json!({"url": site.url("/"), "use_sitemap": false, "limit": 1000,
                      "max_depth": 10, "max_concurrency": 8});
    let (id, job) = crawler.run("crawl", &body, Duration::from_secs(600)).await;

    // Every page once: in the results, on the site, and in the counters.
    assert_eq!(job["status"], "completed", "{job}");
    assert_eq!(
        job["progress"],
        json!({"pages_discovered": PAGES, "pages_completed": PAGES, "pages_failed": 0,
               "pages_queued": 0})
    );
    let docs = crawler.all_results(&id).await;
    let paths = tree_paths(PAGES, 10);
    let hits: Vec<usize> = paths.iter().map(|p| site.hits_of(p)).collect();
    let lost = hits.iter().filter(|h| **h == 0).count();
    let duplicated: usize = hits.iter().map(|h| h.saturating_sub(1)).sum();
    let logs = crawler.all_logs(&id).await;
    let endings = logs
        .iter()
        .filter(|l| {
            l["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("completed:"))
        })
        .count();

    // The slot is free again; 50 submits at once of one user take it once. The crawl that
    // takes it stays active through them (its page answers after a minute): a submit held up
    // by faults must not find the slot freed by that crawl's end.
    let racer = serve.api(Some(&key_of("racer")));
    let page = Route::Html("<html><body>late</body></html>".into());
    let late = Site::start(HashMap::from([(
        "/".to_string(),
        Route::Slow(Duration::from_secs(60), Box::new(page)),
    )]))
    .await;
    let long = json!({"url": late.url("/"), "use_sitemap": false, "limit": 1});
    let answers = futures::future::join_all((0..50).map(|_| racer.post("/api/crawl", &long))).await;
    let mut statuses = std::collections::BTreeMap::<u16, usize>::new();
    for a in &answers {
        *statuses.entry(a.status).or_default() += 1;
    }
    let quick = json!({"url": site.url("/"), "use_sitemap": false, "limit": 1});
    let again = crawler.post("/api/crawl", &quick).await;

    let tally = faults.tally();
    eprintln!(
        "faults: {} calls, {} faults injected {:?}; {} pages, {} documents, lost {lost}, \
         duplicated {duplicated}; 50 submits answered {statuses:?}",
        tally.calls,
        tally.faulted(),
        tally.faults,
        PAGES,
        docs.len()
    );
    assert_eq!(docs.len(), PAGES);
    assert_eq!((lost, duplicated), (0, 0), "pages lost, fetched twice");
    assert_eq!(endings, 1, "one final status");
    assert_eq!(
        again.status, 202,
        "the crawl's slot is free: {}",
        again.body
    );
    assert_eq!(statuses.get(&202), Some(&1), "{statuses:?}");
    assert_eq!(statuses.get(&429), Some(&49), "{statuses:?}");
    for a in answers.iter().filter(|a| a.status == 429) {
        assert_eq!(a.body["error"]["code"], "CONCURRENCY_LIMIT");
    }
    assert!(
        tally.faulted() * 20 >= tally.calls,
        "faults were injected: {tally:?}"
    );
    for kind in [
        "dynamodb TransactionConflict",
        "dynamodb ThrottlingException",
        "dynamodb 500",
    ] {
        assert!(
            tally.faults.get(kind).is_some_and(|n| *n > 0),
            "no {kind}: {tally:?}"
        );
    }
}

/// An idle server long-polls: each of its queues (the work queue, the dead-letter queue) is
/// asked at most once per 20 s, by the API process and by each worker process.
#[tokio::test(flavor = "multi_thread")]
async fn an_idle_server_asks_each_queue_at_most_once_per_20_s() {
    let endpoint =
        std::env::var("AWS_ENDPOINT_URL").expect("the AWS emulator: run scripts/test.sh");
    let proxy = Faults::start(&endpoint, 0.0).await;
    let serve = Serve::on_aws(
        "127.0.0.1:0",
        &["--allow-net", "127.0.0.1/32"],
        vec![("AWS_ENDPOINT_URL".into(), proxy.url.clone())],
    );
    let api = serve.api(None);
    assert_eq!(api.get("/api/health").await.status, 200);
    // Past the first polls of every process, a window of 40 s.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let before = proxy.tally().receives;
    tokio::time::sleep(Duration::from_secs(40)).await;
    let after = proxy.tally().receives;
    assert!(!after.is_empty(), "the server receives from its queues");
    // Each process keeps one poll open per queue it works: in 40 s at most 2 each, and one
    // more when a window edge splits a poll.
    let processes = 1 + e2e::server::AWS_WORKER_PROCESSES;
    for (queue, n) in &after {
        let asked = n - before.get(queue).copied().unwrap_or(0);
        assert!(
            asked <= 3 * processes,
            "{queue} was asked {asked} times in 40 s by {processes} processes"
        );
    }
}
