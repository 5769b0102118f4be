//! SECURITY.md S1-S8: blocked destinations never see a connection, whatever the URL's disguise.

use e2e::{Route, Serve, Site, Tap};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(30);

async fn scrape(api: &e2e::Api, url: &str) -> Value {
    let id = api
        .submit("scrape", &json!({"url": url, "timeout_ms": 5000}))
        .await;
    api.wait(&id, WAIT).await
}

#[tokio::test(flavor = "multi_thread")]
async fn loopback_in_every_disguise_is_blocked_without_the_allow_list() {
    let tap = Tap::bind("127.0.0.1").await;
    let port = tap.addr.port();
    // No --allow-net: loopback is closed (S7).
    let serve = Serve::with(&[], &[]);
    let api = serve.api(None);
    let urls = [
        format!("http://127.0.0.1:{port}/"),
        format!("http://2130706433:{port}/"),
        format!("http://0x7f.0.0.1:{port}/"),
        format!("http://0177.0.0.1:{port}/"),
        format!("http://127.1:{port}/"),
        format!("http://0:{port}/"),
        format!("http://[::ffff:127.0.0.1]:{port}/"),
        format!("http://localhost:{port}/"),
        format!("http://localhost.:{port}/"),
        format!("http://sub.localhost:{port}/"),
        "http://169.254.169.254/latest/meta-data/".to_string(),
        "http://[::ffff:a9fe:a9fe]/".to_string(),
        "http://[64:ff9b::a9fe:a9fe]/".to_string(),
        "http://[fd00:ec2::254]/".to_string(),
        // IPv4-translated (::ffff:0:0:0/96), local-use NAT64 (64:ff9b:1::/48), site-local.
        format!("http://[::ffff:0:127.0.0.1]:{port}/"),
        "http://[::ffff:0:a9fe:a9fe]/".to_string(),
        "http://[64:ff9b:1::a9fe:a9fe]/".to_string(),
        "http://[fec0::1]/".to_string(),
    ];
    for url in &urls {
        let job = scrape(&api, url).await;
        assert_eq!(job["status"], "failed", "{url}");
        assert_eq!(job["error"]["code"], "BLOCKED_ADDRESS", "{url}: {job}");
    }
    // A crawl aimed at a blocked address fails the same way.
    let (_, job) = api
        .run(
            "crawl",
            &json!({"url": format!("http://127.0.0.1:{port}/")}),
            WAIT,
        )
        .await;
    assert_eq!(
        (job["status"].as_str(), job["error"]["code"].as_str()),
        (Some("failed"), Some("BLOCKED_ADDRESS"))
    );
    // A monitor cannot notify such an address either (W3).
    for notify in [
        "http://[fec0::1]/hook",
        "http://[64:ff9b:1::a9fe:a9fe]/hook",
        "http://[::ffff:0:a9fe:a9fe]/hook",
    ] {
        let r = api
            .post(
                "/api/monitors",
                &json!({"url": "https://example.com/", "notify_url": notify}),
            )
            .await;
        assert_eq!(r.status, 400, "{notify}: {}", r.body);
        assert_eq!(r.body["error"]["details"][0]["field"], "notify_url");
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(tap.connections(), 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn allow_list_opens_only_the_listed_network() {
    let tap = Tap::bind("127.0.0.2").await;
    let blocked = format!("http://{}/", tap.addr);
    let routes: HashMap<String, Route> = [
        ("/hop".to_string(), Route::Redirect(blocked.clone())),
        (
            "/links".to_string(),
            Route::Html(format!("<a href=\"{blocked}\">x</a><a href=\"/ok\">ok</a>")),
        ),
        ("/ok".to_string(), Route::Html("<p>fine</p>".into())),
    ]
    .into();
    let site = Site::start(routes).await;
    let serve = Serve::start(); // --allow-net 127.0.0.1/32
    let api = serve.api(None);

    assert_eq!(scrape(&api, &site.url("/ok")).await["status"], "completed");
    let direct = scrape(&api, &blocked).await;
    assert_eq!(direct["error"]["code"], "BLOCKED_ADDRESS");
    // S6: a redirect from an allowed page to a blocked one is checked again.
    let hop = scrape(&api, &site.url("/hop")).await;
    assert_eq!(hop["error"]["code"], "BLOCKED_ADDRESS");
    // A crawled link to a blocked address fails that page only.
    let (id, job) = api
        .run(
            "crawl",
            &json!({"url": site.url("/links"), "allow_external": true, "use_sitemap": false}),
            WAIT,
        )
        .await;
    assert_eq!(job["status"], "completed");
    assert_eq!(job["progress"]["pages_completed"], 2);
    assert_eq!(job["progress"]["pages_failed"], 1);
    let docs = api.all_results(&id).await;
    let failed: Vec<&Value> = docs.iter().filter(|d| d.get("error").is_some()).collect();
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0]["error"]["code"], "BLOCKED_ADDRESS");
    let logs = api.all_logs(&id).await;
    assert!(logs.iter().any(|e| e["message"]
        .as_str()
        .unwrap()
        .starts_with("failed: BLOCKED_ADDRESS")));
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(tap.connections(), 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn errors_do_not_reveal_addresses_or_details() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let routes: HashMap<String, Route> =
        [("/slow".to_string(), Route::Drip(Duration::from_secs(10)))].into();
    let site = Site::start(routes).await;
    let serve = Serve::start();
    let api = serve.api(None);
    let refused = scrape(&api, &format!("http://{closed}/")).await;
    let blocked = scrape(&api, "http://10.0.0.1/").await;
    let id = api
        .submit(
            "scrape",
            &json!({"url": site.url("/slow"), "timeout_ms": 1000}),
        )
        .await;
    let timeout = api.wait(&id, WAIT).await;
    assert_eq!(refused["error"]["code"], "FETCH_FAILED");
    assert_eq!(blocked["error"]["code"], "BLOCKED_ADDRESS");
    assert_eq!(timeout["error"]["code"], "TIMEOUT");
    for job in [&refused, &blocked, &timeout] {
        let message = job["error"]["message"].as_str().unwrap();
        assert!(
            !message.contains("127.0.0")
                && !message.contains("10.0.0")
                && !message.contains("os error"),
            "{message}"
        );
    }
}
