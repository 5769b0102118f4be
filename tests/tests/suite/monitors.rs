//! Monitors end to end: a baseline, no notification while the page stays the same, one signed
//! webhook with the right diff after a change (retried with the same `webhook-id` after a
//! 500), pause and resume, delete, and a notify URL on a blocked address refused.

use base64::Engine;
use e2e::{Received, Receiver, Route, Serve, Site};
use hmac::{Hmac, Mac};
use serde_json::{json, Value};
use sha2::Sha256;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const WAIT: Duration = Duration::from_secs(30);

/// Checks a Standard Webhooks signature independently of the service.
fn verify(secret: &str, r: &Received, body: &[u8]) -> bool {
    let key = base64::engine::general_purpose::STANDARD
        .decode(secret.strip_prefix("whsec_").expect("whsec_ prefix"))
        .expect("base64 secret");
    let mut mac = Hmac::<Sha256>::new_from_slice(&key).unwrap();
    mac.update(
        format!(
            "{}.{}.",
            r.header("webhook-id"),
            r.header("webhook-timestamp")
        )
        .as_bytes(),
    );
    mac.update(body);
    let expected = format!(
        "v1,{}",
        base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes())
    );
    r.header("webhook-signature") == expected
}

async fn until(what: &str, mut ready: impl FnMut() -> bool) {
    let deadline = Instant::now() + WAIT;
    while !ready() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn monitor(api: &e2e::Api, id: &str) -> Value {
    let r = api.get(&format!("/api/monitors/{id}")).await;
    assert_eq!(r.status, 200, "{}", r.body);
    r.body
}

async fn checks_reach(api: &e2e::Api, id: &str, n: u64) {
    let deadline = Instant::now() + WAIT;
    loop {
        let m = monitor(api, id).await;
        if m["checks"].as_u64().unwrap_or(0) >= n {
            return;
        }
        assert!(Instant::now() < deadline, "checks stuck: {m}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_change_is_notified_once_signed_with_its_diff() {
    let content = Arc::new(Mutex::new(
        "<h1>Version one</h1><p>Stable line</p>".to_string(),
    ));
    let page = content.clone();
    let site = Site::start_with(
        Default::default(),
        Some(Arc::new(move |path: &str, _q: Option<&str>| {
            (path == "/watched").then(|| Route::Html(page.lock().unwrap().clone()))
        })),
    )
    .await;
    let receiver = Receiver::start(&[500]).await;
    let serve = Serve::with(
        &["--allow-net", "127.0.0.1/32"],
        &[
            ("SARVCRAWL_MONITOR_MIN_INTERVAL", "1"),
            ("SARVCRAWL_WEBHOOK_RETRIES", "1,3"),
        ],
    );
    let api = serve.api(None);

    let r = api
        .post(
            "/api/monitors",
            &json!({"url": site.url("/watched"), "notify_url": receiver.url("/hook"), "interval_seconds": 1}),
        )
        .await;
    assert_eq!(r.status, 202, "{}", r.body);
    let id = r.body["monitor_id"].as_str().unwrap().to_string();
    let secret = r.body["secret"].as_str().unwrap().to_string();
    assert!(secret.starts_with("whsec_"));
    let first = r.body["job_id"].as_str().unwrap().to_string();
    let baseline = api.wait(&first, WAIT).await;
    assert_eq!(baseline["kind"], "monitor");
    assert_eq!(baseline["status"], "completed", "{baseline}");
    assert_eq!(baseline["result"]["baseline"], true);

    // Unchanged: checks go on, nothing is sent.
    checks_reach(&api, &id, 3).await;
    assert!(receiver.received().is_empty());

    *content.lock().unwrap() = "<h1>Version two</h1><p>Stable line</p>".to_string();
    until("two delivery tries", || receiver.received().len() >= 2).await;
    let got = receiver.received();
    assert_eq!(
        got[0].header("webhook-id"),
        got[1].header("webhook-id"),
        "a retry keeps its id"
    );
    for r in &got {
        assert!(
            verify(&secret, r, &r.body),
            "signature of {}",
            r.header("webhook-id")
        );
        assert!(
            !verify(&secret, r, b"{\"altered\": true}"),
            "an altered body fails"
        );
    }
    let payload: Value = serde_json::from_slice(&got[1].body).unwrap();
    assert_eq!(payload["type"], "monitor.changed");
    assert_eq!(payload["monitor_id"], id.as_str());
    assert_eq!(payload["url"], site.url("/watched"));
    assert_ne!(payload["previous"]["hash"], payload["current"]["hash"]);
    let diff = payload["diff"].as_str().unwrap();
    assert!(
        diff.contains("-# Version one") && diff.contains("+# Version two"),
        "{diff}"
    );
    assert!(!diff.contains("-Stable line"), "{diff}");

    let check = payload["job_id"].as_str().unwrap();
    let job = api.wait(check, WAIT).await;
    assert_eq!(job["result"]["changed"], true, "{job}");
    // The try's log line and the monitor's last delivery are written once it is answered.
    let deadline = Instant::now() + WAIT;
    while monitor(&api, &id).await["last_delivery"]["status_code"] != 200 {
        assert!(Instant::now() < deadline, "the delivery is not recorded");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let logs: Vec<String> = api
        .all_logs(check)
        .await
        .iter()
        .map(|e| e["message"].as_str().unwrap_or_default().to_string())
        .collect();
    assert!(
        logs.iter().any(|l| l.starts_with(
            "webhook monitor.changed #1 try 1: the receiver answered 500; next try in"
        )),
        "{logs:?}"
    );
    assert!(
        logs.contains(&"webhook monitor.changed #1 try 2: delivered (200)".to_string()),
        "{logs:?}"
    );
    let m = monitor(&api, &id).await;
    assert_eq!(m["changes"], 1, "{m}");
    assert_eq!(m["last_delivery"]["status_code"], 200);
    assert!(m["last_changed_at"].is_string());
    assert!(m.get("secret").is_none(), "the secret is shown once");

    // Still the same content: no further notification.
    let checks = m["checks"].as_u64().unwrap();
    checks_reach(&api, &id, checks + 2).await;
    assert_eq!(receiver.received().len(), 2);

    // Paused: no check runs.
    let r = api
        .send(
            reqwest::Method::PATCH,
            &format!("/api/monitors/{id}"),
            Some(&json!({"status": "paused"})),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["status"], "paused");
    tokio::time::sleep(Duration::from_millis(1500)).await; // a check already running ends
    let paused_at = monitor(&api, &id).await["checks"].as_u64().unwrap();
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        monitor(&api, &id).await["checks"].as_u64().unwrap(),
        paused_at
    );
    let r = api
        .send(
            reqwest::Method::PATCH,
            &format!("/api/monitors/{id}"),
            Some(&json!({"status": "active"})),
        )
        .await;
    assert_eq!(r.status, 200);
    checks_reach(&api, &id, paused_at + 1).await;

    // Deleted: gone, and a later change is never sent.
    assert_eq!(api.delete(&format!("/api/monitors/{id}")).await.status, 204);
    assert_eq!(api.get(&format!("/api/monitors/{id}")).await.status, 404);
    *content.lock().unwrap() = "<h1>Version three</h1>".to_string();
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(receiver.received().len(), 2);

    let jobs = api.get("/api/jobs?kind=monitor&limit=100").await;
    assert!(jobs.body["jobs"].as_array().unwrap().len() >= 5);
}

#[tokio::test(flavor = "multi_thread")]
async fn monitors_are_validated_and_private() {
    let serve = Serve::with(
        &["--allow-net", "127.0.0.1/32"],
        &[("SARVCRAWL_MONITOR_MIN_INTERVAL", "1")],
    );
    let api = serve.api(None);
    for notify in [
        "http://169.254.169.254/latest",
        "http://10.0.0.1/hook",
        "http://[::1]/x",
    ] {
        let r = api
            .post(
                "/api/monitors",
                &json!({"url": "https://example.com/", "notify_url": notify}),
            )
            .await;
        assert_eq!(r.status, 400, "{notify}: {}", r.body);
        assert_eq!(r.body["error"]["details"][0]["field"], "notify_url");
        assert!(!r.body.to_string().contains("169.254"), "no address echoed");
    }
    let r = api
        .post("/api/monitors", &json!({"url": "https://example.com/", "notify_url": "https://example.com/h", "interval_seconds": 0}))
        .await;
    assert_eq!(r.status, 400);
    assert_eq!(r.body["error"]["details"][0]["field"], "interval_seconds");
    let r = api.get("/api/monitors").await;
    assert_eq!(
        r.body["monitors"].as_array().map(Vec::len),
        Some(0),
        "nothing stored"
    );
    assert_eq!(
        api.get("/api/monitors/mon_01JD0000000000000000000000")
            .await
            .status,
        404
    );
    assert_eq!(api.delete("/api/monitors/nope").await.status, 404);
}
