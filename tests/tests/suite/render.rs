//! `render: true` end to end through `serve` and headless Chromium: text that only scripts
//! write, `wait_for`, links that exist only in the rendered DOM, search hits rendered, and the
//! address guard applied to every request the browser makes (SECURITY.md S9).

use e2e::fixture::{Tap, UdpTap};
use e2e::{Route, Serve, Site};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(60);

/// Text written by a script after load; absent from the raw HTML.
const SCRIPTED: &str = r#"<html><head><title>Scripted</title></head><body><main id="app">loading</main>
<script>
  window.addEventListener('load', () => {
    document.getElementById('app').innerHTML = '<h1>Rendered heading</h1><p>' + ['written', 'by', 'script'].join(' ') + '</p>';
  });
  setTimeout(() => {
    const late = document.createElement('section');
    late.id = 'late';
    late.textContent = 'arrived after one second';
    document.body.append(late);
  }, 1000);
</script></body></html>"#;

fn routes(pairs: Vec<(&str, Route)>) -> HashMap<String, Route> {
    pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
}

async fn scrape(api: &e2e::Api, body: Value) -> Value {
    let (_, job) = api.run("scrape", &body, WAIT).await;
    job
}

#[tokio::test(flavor = "multi_thread")]
async fn script_written_text_is_there_only_when_rendered() {
    let site = Site::start(routes(vec![("/", Route::Html(SCRIPTED.into()))])).await;
    let serve = Serve::start();
    let api = serve.api(None);
    let url = site.url("/");

    let plain = scrape(&api, json!({"url": url})).await;
    assert_eq!(plain["status"], "completed", "{plain}");
    let md = plain["result"]["markdown"].as_str().unwrap();
    assert!(
        !md.contains("written by script") && md.contains("loading"),
        "{md}"
    );

    let rendered = scrape(&api, json!({"url": url, "render": true})).await;
    assert_eq!(rendered["status"], "completed", "{rendered}");
    let doc = &rendered["result"];
    let md = doc["markdown"].as_str().unwrap();
    assert!(
        md.contains("# Rendered heading") && md.contains("written by script"),
        "{md}"
    );
    assert!(!md.contains("arrived after one second"), "{md}");
    assert_eq!(doc["status_code"], 200);
    assert_eq!(doc["url"], url);
    assert_eq!(doc["metadata"]["title"], "Scripted");

    let waited = scrape(
        &api,
        json!({"url": url, "render": true, "wait_for": "#late"}),
    )
    .await;
    assert_eq!(waited["status"], "completed", "{waited}");
    let md = waited["result"]["markdown"].as_str().unwrap();
    assert!(md.contains("arrived after one second"), "{md}");

    let never = scrape(
        &api,
        json!({"url": url, "render": true, "wait_for": "#never", "timeout_ms": 2000}),
    )
    .await;
    assert_eq!(never["status"], "failed", "{never}");
    assert_eq!(never["error"]["code"], "TIMEOUT", "{never}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rendered_page_reaches_no_blocked_address() {
    let tap = Tap::bind("127.0.0.2").await;
    let blocked = format!("http://{}", tap.addr);
    let page = format!(
        r#"<html><body><main><p>Visible text</p></main><img src="{blocked}/pixel.png">
        <iframe src="{blocked}/frame"></iframe>
        <script>
          const done = () => {{ const d = document.createElement('p'); d.id = 'done'; d.textContent = 'tried'; document.body.append(d); }};
          fetch('{blocked}/api').catch(() => {{}}).finally(() => {{
            try {{ const ws = new WebSocket('ws://{addr}/socket'); ws.onerror = done; ws.onclose = done; }} catch (e) {{ done(); }}
          }});
        </script></body></html>"#,
        addr = tap.addr
    );
    let away = r#"<html><body><p>Leaving</p><script>location.href = 'http://169.254.169.254/latest/meta-data/';</script></body></html>"#;
    let site = Site::start(routes(vec![
        ("/", Route::Html(page)),
        ("/away", Route::Html(away.into())),
        ("/redirect", Route::Redirect(format!("{blocked}/target"))),
    ]))
    .await;
    let serve = Serve::start();
    let api = serve.api(None);

    let (id, job) = api
        .run(
            "scrape",
            &json!({"url": site.url("/"), "render": true, "wait_for": "#done"}),
            WAIT,
        )
        .await;
    assert_eq!(job["status"], "completed", "{job}");
    assert!(job["result"]["markdown"]
        .as_str()
        .unwrap()
        .contains("Visible text"));
    let logs: Vec<String> = api
        .all_logs(&id)
        .await
        .iter()
        .map(|l| l["message"].as_str().unwrap_or_default().to_string())
        .collect();
    for what in ["/pixel.png", "/frame", "/api"] {
        assert!(
            logs.iter()
                .any(|l| l.contains("BLOCKED_ADDRESS") && l.contains(what)),
            "{what} not reported: {logs:?}"
        );
    }

    let (id, job) = api
        .run(
            "scrape",
            &json!({"url": site.url("/away"), "render": true, "wait_ms": 1500}),
            WAIT,
        )
        .await;
    assert_eq!(job["status"], "failed", "{job}");
    assert_eq!(job["error"]["code"], "BLOCKED_ADDRESS", "{job}");
    let logs = api.all_logs(&id).await;
    assert!(
        logs.iter().any(|l| l["message"]
            .as_str()
            .is_some_and(|m| m.contains("169.254.169.254"))),
        "{logs:?}"
    );

    let job = scrape(&api, json!({"url": site.url("/redirect"), "render": true})).await;
    assert_eq!(job["status"], "failed", "{job}");
    assert_eq!(job["error"]["code"], "BLOCKED_ADDRESS", "{job}");

    assert_eq!(tap.connections(), 0, "the blocked listener was reached");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rendered_page_sends_no_udp_to_a_blocked_address() {
    // S11: STUN and TURN (over UDP and over TCP) aimed at blocked addresses.
    let udp = UdpTap::bind("127.0.0.2").await;
    let tcp = Tap::bind("127.0.0.2").await;
    let udp6 = UdpTap::bind("::1").await;
    let page = format!(
        r#"<html><body><p>Peer</p><script>
          const done = (why) => {{ const d = document.createElement('p'); d.id = 'done'; d.textContent = String(why); document.body.append(d); }};
          (async () => {{
            const pc = new RTCPeerConnection({{iceServers: [
              {{urls: 'stun:{udp}'}}, {{urls: 'stun:[::1]:{udp6}'}},
              {{urls: 'turn:{udp}?transport=udp', username: 'u', credential: 'p'}},
              {{urls: 'turn:{tcp}?transport=tcp', username: 'u', credential: 'p'}}]}});
            pc.createDataChannel('probe');
            pc.onicecandidate = (e) => {{ if (!e.candidate) done('gathered'); }};
            await pc.setLocalDescription(await pc.createOffer());
            setTimeout(() => done('waited'), 4000);
          }})().catch((e) => done('refused: ' + e));
        </script></body></html>"#,
        udp = udp.addr,
        tcp = tcp.addr,
        udp6 = udp6.addr.port(),
    );
    let site = Site::start(routes(vec![("/", Route::Html(page))])).await;
    let serve = Serve::start();
    let api = serve.api(None);
    let job = scrape(
        &api,
        json!({"url": site.url("/"), "render": true, "wait_for": "#done", "wait_ms": 1000}),
    )
    .await;
    assert_eq!(job["status"], "completed", "{job}");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        udp.datagrams(),
        0,
        "STUN/TURN over UDP reached a blocked address"
    );
    assert_eq!(udp6.datagrams(), 0, "STUN reached ::1");
    assert_eq!(
        tcp.connections(),
        0,
        "TURN over TCP reached a blocked address"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_crawl_follows_links_that_only_the_rendered_dom_has() {
    // Each page writes its links with a script; the raw HTML has none.
    let page = |links: &[&str]| {
        let list: Vec<String> = links.iter().map(|l| format!("'{l}'")).collect();
        Route::Html(format!(
            r#"<html><body><main><p>page</p></main><script>
            for (const href of [{}]) {{
              const a = document.createElement('a'); a.href = href; a.textContent = href;
              document.querySelector('main').append(a);
            }}</script></body></html>"#,
            list.join(",")
        ))
    };
    let site = Site::start(routes(vec![
        ("/", page(&["/a", "/b"])),
        ("/a", page(&["/c"])),
        ("/b", page(&["/c", "/"])),
        ("/c", page(&["/d"])),
        ("/d", page(&[])),
    ]))
    .await;
    let serve = Serve::start();
    let api = serve.api(None);

    let (id, job) = api
        .run("crawl", &json!({"url": site.url("/"), "limit": 20}), WAIT)
        .await;
    assert_eq!(job["status"], "completed", "{job}");
    assert_eq!(
        api.all_results(&id).await.len(),
        1,
        "plain fetch sees no links"
    );

    let (id, job) = api
        .run(
            "crawl",
            &json!({"url": site.url("/"), "limit": 20, "render": true}),
            WAIT,
        )
        .await;
    assert_eq!(job["status"], "completed", "{job}");
    let mut urls: Vec<String> = api
        .all_results(&id)
        .await
        .iter()
        .map(|d| d["url"].as_str().unwrap_or_default().to_string())
        .collect();
    urls.sort();
    let expected: Vec<String> = ["/", "/a", "/b", "/c", "/d"]
        .iter()
        .map(|p| site.url(p))
        .collect();
    assert_eq!(urls, expected);
}

#[tokio::test(flavor = "multi_thread")]
async fn search_hits_are_rendered() {
    let holder: Arc<OnceLock<String>> = Arc::new(OnceLock::new());
    let base_of = holder.clone();
    let dynamic = Arc::new(move |path: &str, _: Option<&str>| {
        if path != "/engine/search" {
            return None;
        }
        let base = base_of.get()?.clone();
        let body = json!({"query": "q", "results": [
            {"url": format!("{base}/hit"), "title": "Hit", "content": "scripted"},
        ]});
        Some(Route::typed("application/json", body.to_string()))
    });
    let site = Site::start_with(
        routes(vec![("/hit", Route::Html(SCRIPTED.into()))]),
        Some(dynamic),
    )
    .await;
    let _ = holder.set(site.url(""));
    let engine = site.url("/engine");
    let serve = Serve::with(
        &["--allow-net", "127.0.0.1/32"],
        &[("SARVCRAWL_SEARXNG_URL", engine.as_str())],
    );
    let api = serve.api(None);
    let (id, job) = api
        .run(
            "search",
            &json!({"query": "q", "scrape": true, "render": true}),
            WAIT,
        )
        .await;
    assert_eq!(job["status"], "completed", "{job}");
    let text: String = api
        .all_results(&id)
        .await
        .iter()
        .map(Value::to_string)
        .collect();
    assert!(text.contains("written by script"), "{text}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_monitor_compares_rendered_pages() {
    // The visible text is written by a script from a value the test changes.
    let price = Arc::new(std::sync::Mutex::new("10"));
    let current = price.clone();
    let site = Site::start_with(
        HashMap::new(),
        Some(Arc::new(move |path: &str, _: Option<&str>| {
            (path == "/price").then(|| {
                let p = *current.lock().unwrap();
                Route::Html(format!(
                    "<html><body><main id=m>loading</main><script>\
                     document.getElementById('m').innerHTML = '<p>Price: ' + {p} + ' EUR</p>';\
                     </script></body></html>"
                ))
            })
        })),
    )
    .await;
    let receiver = e2e::Receiver::start(&[]).await;
    let serve = Serve::with(
        &["--allow-net", "127.0.0.1/32"],
        &[("SARVCRAWL_MONITOR_MIN_INTERVAL", "1")],
    );
    let api = serve.api(None);
    let r = api
        .post(
            "/api/monitors",
            &json!({"url": site.url("/price"), "notify_url": receiver.url("/hook"),
                    "interval_seconds": 1, "render": true}),
        )
        .await;
    assert_eq!(r.status, 202, "{}", r.body);
    let first = r.body["job_id"].as_str().unwrap().to_string();
    let baseline = api.wait(&first, WAIT).await;
    assert_eq!(baseline["status"], "completed", "{baseline}");
    assert_eq!(baseline["result"]["baseline"], true, "{baseline}");

    *price.lock().unwrap() = "12";
    let deadline = std::time::Instant::now() + WAIT;
    while receiver.received().is_empty() {
        assert!(std::time::Instant::now() < deadline, "no change notified");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let body: Value = serde_json::from_slice(&receiver.received()[0].body).unwrap();
    let diff = body["diff"].as_str().unwrap_or_default();
    assert!(
        diff.contains("-Price: 10 EUR") && diff.contains("+Price: 12 EUR"),
        "{body}"
    );
}

/// The first lines `serve` prints with `args`, up to the one saying it listens (or its exit).
fn start_up_lines(args: &[&str]) -> String {
    use std::io::{BufRead, BufReader};
    let dir = tempfile::tempdir().unwrap();
    let mut child = std::process::Command::new(e2e::server::binary())
        .args(["serve", "--addr", "127.0.0.1:0", "--data-dir"])
        .arg(dir.path())
        .args(args)
        .env("RUST_LOG", "info")
        .env("NO_COLOR", "1")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut seen = String::new();
    for line in BufReader::new(child.stderr.take().unwrap()).lines() {
        let Ok(line) = line else { break };
        seen.push_str(&line);
        seen.push('\n');
        if line.contains("listening on") {
            break;
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    seen
}

#[test]
fn serve_says_at_start_up_whether_it_renders() {
    let found = start_up_lines(&[]);
    assert!(
        found.contains("rendering (render: true) is available"),
        "{found}"
    );
    let off = start_up_lines(&["--no-render"]);
    assert!(off.contains("rendering (render: true) is off"), "{off}");
    let wrong = start_up_lines(&["--chromium", "/nonexistent/chromium"]);
    assert!(wrong.contains("is not an executable file"), "{wrong}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rendered_page_has_its_own_status_not_its_subresources() {
    // Its image and favicon are missing (404); a page that is missing itself answers 404.
    let page = r#"<html><head><title>Mine</title></head><body><p>Has a broken image</p>
        <img src="/missing.png"><script src="/missing.js"></script></body></html>"#;
    let site = Site::start(routes(vec![("/", Route::Html(page.into()))])).await;
    let serve = Serve::start();
    let api = serve.api(None);
    for wait_ms in [0, 1500] {
        let job = scrape(
            &api,
            json!({"url": site.url("/"), "render": true, "wait_ms": wait_ms}),
        )
        .await;
        assert_eq!(job["status"], "completed", "{job}");
        assert_eq!(job["result"]["status_code"], 200, "{job}");
    }
    assert!(site.hits_of("/missing.png") > 0);
    let gone = scrape(&api, json!({"url": site.url("/gone"), "render": true})).await;
    assert_eq!(gone["status"], "failed", "{gone}");
    assert_eq!(gone["error"]["code"], "HTTP_ERROR");
    assert_eq!(gone["result"]["status_code"], 404);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rendered_pages_headers_go_to_its_own_origin_only() {
    // S10 in the browser: `other` is another origin; the page loads an image and fetches from
    // it, and `/away` redirects there.
    let other = Site::start(routes(vec![
        ("/pixel.png", Route::typed("image/png", vec![0u8; 8])),
        ("/data", Route::typed("application/json", "{}")),
        ("/landing", Route::Html("<p>landed</p>".into())),
    ]))
    .await;
    let page = format!(
        r#"<html><body><p>Own</p><img src="{img}"><script src="/own.js"></script><script>
          fetch('{data}').finally(() => {{ const d = document.createElement('p'); d.id = 'done'; document.body.append(d); }});
        </script></body></html>"#,
        img = other.url("/pixel.png"),
        data = other.url("/data"),
    );
    let site = Site::start(routes(vec![
        ("/", Route::Html(page)),
        (
            "/own.js",
            Route::typed("text/javascript", "window.own = 1;"),
        ),
        ("/away", Route::Redirect(other.url("/landing"))),
    ]))
    .await;
    let serve = Serve::start();
    let api = serve.api(None);
    let headers = json!({"Authorization": "Bearer s3cret", "X-Trace": "t1"});
    for (path, wait_for) in [("/", Some("#done")), ("/away", None)] {
        let job = scrape(
            &api,
            json!({"url": site.url(path), "render": true, "headers": headers, "wait_for": wait_for}),
        )
        .await;
        assert_eq!(job["status"], "completed", "{path}: {job}");
    }
    let own: Vec<_> = site
        .hits()
        .into_iter()
        .filter(|h| h.path != "/robots.txt")
        .collect();
    assert!(own.iter().any(|h| h.path == "/own.js"));
    for hit in &own {
        assert_eq!(
            hit.header("authorization"),
            Some("Bearer s3cret"),
            "{}",
            hit.path
        );
        assert_eq!(hit.header("x-trace"), Some("t1"), "{}", hit.path);
    }
    let theirs: Vec<_> = other
        .hits()
        .into_iter()
        .filter(|h| h.path != "/robots.txt")
        .collect();
    for path in ["/pixel.png", "/data", "/landing"] {
        assert!(
            theirs.iter().any(|h| h.path == path),
            "{path} was not requested"
        );
    }
    for hit in &theirs {
        assert_eq!(hit.header("authorization"), None, "{}", hit.path);
        assert_eq!(hit.header("x-trace"), None, "{}", hit.path);
    }
}
