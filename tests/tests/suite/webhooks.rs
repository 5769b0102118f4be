//! Webhooks of jobs end to end: a crawl's events in order and signed (checked by the reference
//! Standard Webhooks library), retries under one id, 410 stopping, a delivery pending across a
//! restart, both signatures after a rotation, and blocked addresses refused at submit and at
//! delivery.

use e2e::{tree_site, Received, Receiver, Route, Serve, Site, Tap};
use serde_json::{json, Value};
use std::collections::{BTreeSet, HashMap};
use std::time::{Duration, Instant};

const WAIT: Duration = Duration::from_secs(120);

async fn until(what: &str, mut ready: impl FnMut() -> bool) {
    let deadline = Instant::now() + WAIT;
    while !ready() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A site of one page, `/a`.
async fn one_page() -> Site {
    Site::start([("/a".to_string(), Route::Html("<p>a</p>".into()))].into()).await
}

/// A webhook of `url` for `job.completed` only.
fn completed_only(url: String) -> Value {
    json!({"url": url, "events": ["job.completed"]})
}

/// Runs a scrape of the site's `/a` with `hook` to its end; its job id.
async fn scrape_with(api: &e2e::Api, site: &Site, hook: Value) -> String {
    api.run(
        "scrape",
        &json!({"url": site.url("/a"), "webhook": hook}),
        WAIT,
    )
    .await
    .0
}

fn body_of(r: &Received) -> Value {
    serde_json::from_slice(&r.body).expect("a JSON event")
}

/// What the reference verifier (`standardwebhooks` from PyPI, in the project's `.venv`) says
/// of each delivery with `secret`: `(verifies, verifies with an altered body)`.
fn reference_verify(secret: &str, got: &[Received]) -> Vec<(bool, bool)> {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
    let deliveries: Vec<Value> = got
        .iter()
        .map(|r| {
            let headers: serde_json::Map<String, Value> =
                ["webhook-id", "webhook-timestamp", "webhook-signature"]
                    .iter()
                    .map(|h| (h.to_string(), json!(r.header(h))))
                    .collect();
            json!({"headers": headers, "body": String::from_utf8_lossy(&r.body)})
        })
        .collect();
    let input = json!({"secret": secret, "deliveries": deliveries}).to_string();
    let mut child = std::process::Command::new(format!("{root}/.venv/bin/python"))
        .arg(format!("{root}/scripts/verify_webhooks.py"))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("the reference verifier (.venv from scripts/aws-emulator.sh)");
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "verifier failed");
    let verdicts: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    verdicts
        .iter()
        .map(|v| (v["ok"] == true, v["altered"] == true))
        .collect()
}

async fn secret(api: &e2e::Api) -> String {
    let r = api.get("/api/webhooks/secret").await;
    assert_eq!(r.status, 200, "{}", r.body);
    r.body["secret"].as_str().unwrap().to_string()
}

/// The job's status once its webhook has nothing pending.
async fn settled(api: &e2e::Api, id: &str) -> Value {
    let deadline = Instant::now() + WAIT;
    loop {
        let job = api.job(id).await;
        let w = &job["webhook"];
        if job["finished_at"].is_string() && w["pending"] == 0 {
            return job;
        }
        assert!(Instant::now() < deadline, "webhook not settled: {job}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_crawl_sends_started_each_page_and_completed_signed_and_in_order() {
    let site = Site::start(tree_site(13)).await;
    let receiver = Receiver::start(&[]).await;
    let serve = Serve::start();
    let api = serve.api(None);
    let secret = secret(&api).await;
    assert!(secret.starts_with("whsec_"));
    assert_eq!(secret, self::secret(&api).await, "made once, then kept");
    let r = api
        .post(
            "/api/crawl",
            &json!({
                "url": site.url("/"), "use_sitemap": false,
                "webhook": {"url": receiver.url("/hook"), "metadata": {"run": "nightly", "n": 7}}
            }),
        )
        .await;
    assert_eq!(r.status, 202, "{}", r.body);
    let id = r.body["job_id"].as_str().unwrap().to_string();
    let job = settled(&api, &id).await;
    assert_eq!(job["status"], "completed");
    assert_eq!(job["progress"]["pages_completed"], 13);
    let w = &job["webhook"];
    assert_eq!(w["url"], receiver.url("/hook"));
    assert_eq!(
        (w["delivered"].as_u64(), w["failed"].as_u64()),
        (Some(15), Some(0)),
        "{w}"
    );
    assert_eq!(w["last_delivery"]["type"], "job.completed");
    assert_eq!(w["last_delivery"]["status_code"], 200);

    let got = receiver.received();
    assert_eq!(got.len(), 15, "started, 13 pages, completed");
    let events: Vec<Value> = got.iter().map(body_of).collect();
    let types: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(types[0], "job.started");
    assert!(types[1..14].iter().all(|t| *t == "job.page"), "{types:?}");
    assert_eq!(types[14], "job.completed");
    let sequences: Vec<u64> = events
        .iter()
        .map(|e| e["sequence"].as_u64().unwrap())
        .collect();
    assert_eq!(sequences, (1..=15).collect::<Vec<_>>());
    let ids: BTreeSet<&str> = got.iter().map(|r| r.header("webhook-id")).collect();
    assert_eq!(ids.len(), 15, "one id per event");
    for e in &events {
        assert_eq!(e["job_id"], id.as_str());
        assert_eq!(e["kind"], "crawl");
        assert_eq!(e["metadata"], json!({"run": "nightly", "n": 7}));
        assert!(e["at"].is_string() && e["progress"].is_object());
    }
    let pages: BTreeSet<String> = events[1..14]
        .iter()
        .map(|e| e["document"]["url"].as_str().unwrap().to_string())
        .collect();
    let expected: BTreeSet<String> = api
        .all_results(&id)
        .await
        .iter()
        .map(|d| d["url"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(pages, expected, "one job.page per page, with its document");
    assert!(events[1]["document"]["markdown"]
        .as_str()
        .unwrap()
        .contains("# Page"));
    assert_eq!(events[14]["status"], "completed");
    assert_eq!(events[14]["progress"]["pages_completed"], 13);

    for (ok, altered) in reference_verify(&secret, &got) {
        assert!(ok, "the reference verifier accepts every delivery");
        assert!(!altered, "and refuses an altered body");
    }
    let logs = api.all_logs(&id).await;
    let tries = logs
        .iter()
        .filter(|l| l["message"].as_str().unwrap().starts_with("webhook job."))
        .count();
    assert_eq!(tries, 15, "every try is in the job's log");
}

#[tokio::test(flavor = "multi_thread")]
async fn failed_tries_are_retried_under_one_id_and_410_stops_them() {
    let site = one_page().await;
    let serve = Serve::with(
        &["--allow-net", "127.0.0.1/32"],
        &[("SARVCRAWL_WEBHOOK_RETRIES", "1,1,1")],
    );
    let api = serve.api(None);

    let flaky = Receiver::start(&[500, 500]).await;
    let only_completed = completed_only(flaky.url("/"));
    let id = scrape_with(&api, &site, only_completed).await;
    let job = settled(&api, &id).await;
    let got = flaky.received();
    assert_eq!(got.len(), 3, "500, 500, then 200");
    let ids: BTreeSet<&str> = got.iter().map(|r| r.header("webhook-id")).collect();
    assert_eq!(ids.len(), 1, "the same webhook-id on every try");
    assert!(got.iter().all(|r| body_of(r)["type"] == "job.completed"));
    assert_eq!(job["webhook"]["delivered"], 1);
    assert_eq!(job["webhook"]["failed"], 0);
    assert_eq!(job["webhook"]["last_delivery"]["attempt"], 3);
    let logs = api.all_logs(&id).await;
    let lines: Vec<&str> = logs
        .iter()
        .map(|l| l["message"].as_str().unwrap())
        .filter(|m| m.starts_with("webhook"))
        .collect();
    assert_eq!(lines.len(), 3, "{lines:?}");
    assert!(lines[0].contains("try 1: the receiver answered 500; next try in"));
    assert!(lines[2].contains("try 3: delivered (200)"));

    let gone = Receiver::start(&[410]).await;
    let id = scrape_with(&api, &site, json!({"url": gone.url("/")})).await;
    let job = settled(&api, &id).await;
    assert_eq!(
        gone.received().len(),
        1,
        "410 Gone: one try, and nothing after"
    );
    assert_eq!(job["webhook"]["delivered"], 0);
    assert_eq!(job["webhook"]["failed"], 2, "started and completed");

    // Given up after the last retry.
    let down = Receiver::start(&[500, 500, 500, 500, 500]).await;
    let only_completed = completed_only(down.url("/"));
    let id = scrape_with(&api, &site, only_completed).await;
    let job = settled(&api, &id).await;
    assert_eq!(down.received().len(), 4, "one try and three retries");
    assert_eq!(job["webhook"]["failed"], 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_429_or_503_with_retry_after_is_waited_out() {
    let site = one_page().await;
    let serve = Serve::with(
        &["--allow-net", "127.0.0.1/32"],
        &[("SARVCRAWL_WEBHOOK_RETRIES", "1,1")],
    );
    let api = serve.api(None);
    let receiver = Receiver::asking_for_pauses(&[429, 503], Some(3)).await;
    let id = scrape_with(&api, &site, completed_only(receiver.url("/"))).await;
    let job = settled(&api, &id).await;
    assert_eq!(job["webhook"]["delivered"], 1);
    let got = receiver.received();
    assert_eq!(got.len(), 3);
    for pair in got.windows(2) {
        assert!(
            pair[1].at - pair[0].at >= Duration::from_millis(2900),
            "a retry came {:?} after a Retry-After of 3 s",
            pair[1].at - pair[0].at
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_delivery_pending_when_the_server_dies_is_made_after_its_restart() {
    let site = one_page().await;
    let mut serve = Serve::with(
        &["--allow-net", "127.0.0.1/32"],
        &[("SARVCRAWL_WEBHOOK_RETRIES", "3")],
    );
    let api = serve.api(None);
    let receiver = Receiver::start(&[503]).await;
    let hook = completed_only(receiver.url("/"));
    let id = scrape_with(&api, &site, hook).await;
    until("the first try", || !receiver.received().is_empty()).await;
    serve.kill();
    serve.restart();
    let api = serve.api(None);
    until("the retry after the restart", || {
        receiver.received().len() >= 2
    })
    .await;
    let job = settled(&api, &id).await;
    let got = receiver.received();
    assert_eq!(got.len(), 2);
    assert_eq!(got[0].header("webhook-id"), got[1].header("webhook-id"));
    assert_eq!(job["webhook"]["delivered"], 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn after_a_rotation_both_the_old_and_the_new_secret_verify() {
    let site = one_page().await;
    let serve = Serve::start();
    let api = serve.api(None);
    let old = secret(&api).await;
    let r = api.post("/api/webhooks/secret/rotate", &json!({})).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let new = r.body["secret"].as_str().unwrap().to_string();
    assert_ne!(new, old);
    assert!(r.body["previous_expires_at"].is_string());
    assert_eq!(secret(&api).await, new);

    let receiver = Receiver::start(&[]).await;
    let id = scrape_with(&api, &site, json!({"url": receiver.url("/")})).await;
    settled(&api, &id).await;
    let got = receiver.received();
    assert_eq!(got.len(), 2);
    assert_eq!(got[0].header("webhook-signature").split(' ').count(), 2);
    for s in [&old, &new] {
        for (ok, altered) in reference_verify(s, &got) {
            assert!(ok && !altered, "a receiver holding one secret verifies");
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_webhook_on_a_blocked_address_is_refused_at_submit_and_at_delivery() {
    let tap = Tap::bind("127.0.0.2").await;
    let site = Site::start(
        [
            ("/a".to_string(), Route::Html("<p>a</p>".into())),
            // A receiver that sends its deliveries elsewhere: redirects are not followed.
            (
                "/moved".to_string(),
                Route::Redirect(format!("http://{}/", tap.addr)),
            ),
        ]
        .into(),
    )
    .await;
    let mut serve = Serve::with(
        &["--allow-net", "127.0.0.1/32"],
        &[("SARVCRAWL_WEBHOOK_RETRIES", "4")],
    );
    let api = serve.api(None);
    let r = api
        .post(
            "/api/scrape",
            &json!({"url": site.url("/a"), "webhook": {"url": format!("http://{}/", tap.addr)}}),
        )
        .await;
    assert_eq!(r.status, 400, "{}", r.body);
    assert_eq!(r.body["error"]["details"][0]["field"], "webhook.url");

    let r = api
        .post(
            "/api/crawl",
            &json!({"url": site.url("/a"), "webhook": {"url": "https://example.com/", "events": ["job.nope"]}}),
        )
        .await;
    assert_eq!(r.status, 400, "{}", r.body);
    assert_eq!(r.body["error"]["details"][0]["field"], "webhook.events");

    let redirected = scrape_with(&api, &site, completed_only(site.url("/moved"))).await;
    let job = settled(&api, &redirected).await;
    assert_eq!(job["webhook"]["failed"], 1, "a 3xx is a failed try: {job}");
    // The receiver's address is blocked after the submit (the operator narrowed the allow
    // list): the pending retry is checked again and never connects.
    let receiver = Receiver::start(&[500]).await;
    let hook = completed_only(receiver.url("/"));
    let id = scrape_with(&api, &site, hook).await;
    until("the first try", || !receiver.received().is_empty()).await;
    serve.restart_with(&["--allow-net", "10.99.0.0/16"]);
    let api = serve.api(None);
    let job = settled(&api, &id).await;
    assert_eq!(job["webhook"]["failed"], 1, "{job}");
    assert_eq!(receiver.received().len(), 1);
    let logs = api.all_logs(&id).await;
    assert!(
        logs.iter()
            .any(|l| l["message"].as_str().unwrap().contains("BLOCKED_ADDRESS")),
        "{logs:?}"
    );
    assert_eq!(tap.connections(), 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_batch_sends_one_page_event_per_url_and_map_search_upload_take_webhooks_too() {
    let mut routes: HashMap<String, Route> = (1..=4)
        .map(|i| (format!("/b{i}"), Route::Html(format!("<h1>B{i}</h1>"))))
        .collect();
    // A page whose document is over 256 KiB: sent by reference.
    let big = format!(
        "<h1>B5</h1>{}",
        "<p>a long paragraph of text</p>".repeat(12_000)
    );
    routes.insert("/b5".into(), Route::Html(big));
    let site = Site::start(routes).await;
    let receiver = Receiver::start(&[]).await;
    let serve = Serve::start();
    let api = serve.api(None);
    let urls: Vec<String> = (1..=5).map(|i| site.url(&format!("/b{i}"))).collect();
    let r = api
        .post(
            "/api/batch/scrape",
            &json!({"urls": urls, "webhook": {"url": receiver.url("/"), "events": ["job.page", "job.completed"]}}),
        )
        .await;
    assert_eq!(r.status, 202, "{}", r.body);
    let id = r.body["job_id"].as_str().unwrap().to_string();
    let job = settled(&api, &id).await;
    assert_eq!(job["webhook"]["delivered"], 6, "{job}");
    let events: Vec<Value> = receiver.received().iter().map(body_of).collect();
    let inline: BTreeSet<&str> = events[..5]
        .iter()
        .filter_map(|e| e["document"]["requested_url"].as_str())
        .collect();
    assert_eq!(inline.len(), 4, "the four small pages inline");
    let by_reference: Vec<&Value> = events[..5]
        .iter()
        .filter(|e| e["document"].is_null())
        .collect();
    assert_eq!(by_reference.len(), 1);
    let page = &by_reference[0]["page"];
    assert_eq!(page["url"], site.url("/b5"));
    assert_eq!(page["status_code"], 200);
    assert!(page["bytes"].as_u64().unwrap() > 256 * 1024, "{page}");
    let r = api.get(page["results_url"].as_str().unwrap()).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(
        r.body["data"][0]["url"],
        site.url("/b5"),
        "where to read it"
    );
    assert_eq!(events[5]["type"], "job.completed");
    assert_eq!(
        events[5]["sequence"], 7,
        "the started event is numbered though not sent"
    );

    let before = receiver.received().len();
    let hook = completed_only(receiver.url("/"));
    let (map_id, _) = api
        .run(
            "map",
            &json!({"url": site.url("/b1"), "webhook": hook}),
            WAIT,
        )
        .await;
    settled(&api, &map_id).await;
    let upload = api
        .http
        .post(format!(
            "{}/api/upload?filename=a.html&webhook_url={}&webhook_events=job.completed",
            serve.base,
            receiver.url("/")
        ))
        .header("content-type", "text/html")
        .body("<h1>Uploaded</h1>")
        .send()
        .await
        .unwrap();
    assert_eq!(upload.status(), 202);
    let upload: Value = upload.json().await.unwrap();
    settled(&api, upload["job_id"].as_str().unwrap()).await;
    let kinds: Vec<Value> = receiver.received()[before..]
        .iter()
        .map(|r| body_of(r)["kind"].clone())
        .collect();
    assert_eq!(kinds, [json!("map"), json!("upload")]);
}
