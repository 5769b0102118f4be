//! SECURITY.md I1: `Idempotency-Key` on submits. Twenty concurrent identical submits with one
//! key start one job; a changed body is refused with 422; keys are per user; a refused submit
//! does not use its key up; uploads and monitors replay too.

use e2e::{Reply, Route, Serve, Site};
use serde_json::{json, Value};
use std::collections::{HashMap, HashSet};
use std::time::Duration;

const ALICE: &str = "alice-key-0123456789";
const BOB: &str = "bob-key-0123456789ab";

async fn post(serve: &Serve, key: &str, idem: &str, path: &str, body: &Value) -> Reply {
    let resp = reqwest::Client::new()
        .post(format!("{}{path}", serve.base))
        .bearer_auth(key)
        .header("idempotency-key", idem)
        .json(body)
        .send()
        .await
        .expect("submit");
    Reply::read(resp).await
}

#[tokio::test(flavor = "multi_thread")]
async fn one_key_one_job_per_user() {
    let mut routes = HashMap::new();
    routes.insert(
        "/".to_string(),
        Route::Slow(
            Duration::from_secs(5),
            Box::new(Route::Html("<p>slow</p>".into())),
        ),
    );
    let site = Site::start(routes).await;
    let serve = Serve::with(
        &["--allow-net", "127.0.0.1/32"],
        &[("SARVCRAWL_API_KEYS", &format!("alice:{ALICE},bob:{BOB}"))],
    );
    let body = json!({"url": site.url("/"), "use_sitemap": false});

    let replies = futures::future::join_all(
        (0..20).map(|_| post(&serve, ALICE, "crawl-1", "/api/crawl", &body)),
    )
    .await;
    let ids: HashSet<String> = replies
        .iter()
        .map(|r| {
            assert_eq!(r.status, 202, "{}", r.body);
            r.body["job_id"].as_str().unwrap().to_string()
        })
        .collect();
    assert_eq!(ids.len(), 1, "one job for one key");
    let replayed = replies
        .iter()
        .filter(|r| r.header("idempotent-replayed") == Some("true"))
        .count();
    assert_eq!(replayed, 19);
    let id = ids.into_iter().next().unwrap();
    assert!(replies
        .iter()
        .all(|r| r.header("location") == Some(&format!("/api/jobs/{id}"))));

    // The same key with another body.
    let other = json!({"url": site.url("/"), "use_sitemap": false, "limit": 5});
    let r = post(&serve, ALICE, "crawl-1", "/api/crawl", &other).await;
    assert_eq!(r.status, 422);
    assert_eq!(r.body["error"]["code"], "IDEMPOTENCY_KEY_REUSED");

    // Keys are per user: Bob's "crawl-1" is his own.
    let r = post(&serve, BOB, "crawl-1", "/api/crawl", &body).await;
    assert_eq!(r.status, 202, "{}", r.body);
    assert_ne!(r.body["job_id"], id.as_str());
    assert!(r.header("idempotent-replayed").is_none());

    // A refused submit (Alice's crawl slot is taken) leaves its key free for a later try.
    let r = post(&serve, ALICE, "crawl-2", "/api/crawl", &body).await;
    assert_eq!(r.status, 429);
    let r = reqwest::Client::new()
        .delete(format!("{}/api/jobs/{id}/cancel", serve.base))
        .bearer_auth(ALICE)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let r = post(&serve, ALICE, "crawl-2", "/api/crawl", &body).await;
    assert_eq!(r.status, 202, "{}", r.body);

    // A finished job is replayed too; the job list holds each job once.
    let r = post(&serve, ALICE, "crawl-1", "/api/crawl", &body).await;
    assert_eq!(r.status, 202);
    assert_eq!(r.body["job_id"], id.as_str());
    let r = reqwest::Client::new()
        .get(format!("{}/api/jobs?kind=crawl", serve.base))
        .bearer_auth(ALICE)
        .send()
        .await
        .unwrap();
    let jobs = Reply::read(r).await;
    assert_eq!(jobs.body["jobs"].as_array().map(Vec::len), Some(2));

    // A key that is too long is refused.
    let r = post(&serve, ALICE, &"k".repeat(256), "/api/crawl", &body).await;
    assert_eq!(r.status, 400);
}

#[tokio::test(flavor = "multi_thread")]
async fn uploads_and_monitors_replay_their_first_answer() {
    let serve = Serve::with(
        &["--allow-net", "127.0.0.1/32"],
        &[("SARVCRAWL_MONITOR_MIN_INTERVAL", "60")],
    );
    let upload = || async {
        let resp = reqwest::Client::new()
            .post(format!("{}/api/upload?filename=a.md", serve.base))
            .header("content-type", "text/markdown")
            .header("idempotency-key", "up-1")
            .body("# A")
            .send()
            .await
            .unwrap();
        Reply::read(resp).await
    };
    let (a, b) = (upload().await, upload().await);
    assert_eq!(a.status, 202);
    assert_eq!(a.body["job_id"], b.body["job_id"]);
    assert_eq!(b.header("idempotent-replayed"), Some("true"));

    let body = json!({"url": "http://127.0.0.1:9/page", "notify_url": "http://127.0.0.1:9/hook"});
    let first = post(&serve, "", "mon-1", "/api/monitors", &body).await;
    let again = post(&serve, "", "mon-1", "/api/monitors", &body).await;
    assert_eq!(first.status, 202, "{}", first.body);
    assert_eq!(first.body["monitor_id"], again.body["monitor_id"]);
    assert_eq!(first.body["secret"], again.body["secret"]);
    let list = serve.api(None).get("/api/monitors").await;
    assert_eq!(list.body["monitors"].as_array().map(Vec::len), Some(1));
}
