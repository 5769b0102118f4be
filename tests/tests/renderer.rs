//! The Chromium renderer on its own, against fixture pages on loopback: scripts run, the
//! address guard sees every request of the browser, and browsers do not pile up.

use e2e::fixture::{Route, Site, Tap};
use sarvcrawl_core::engine::fetch::FetchError;
use sarvcrawl_core::engine::guard::AddressPolicy;
use sarvcrawl_core::ports::{RenderRequest, Renderer};
use sarvcrawl_render::{locate, Chromium, ChromiumConfig};
use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

fn chromium() -> Chromium {
    let explicit = std::env::var_os("SARVCRAWL_CHROMIUM").map(std::path::PathBuf::from);
    let executable = locate(explicit.as_deref())
        .ok()
        .flatten()
        .expect("Chromium is needed: install Debian's chromium package (scripts/test.sh does)");
    Chromium::new(
        ChromiumConfig {
            executable,
            user_agent: "SarvCrawl-test".into(),
            max_pages: 2,
        },
        AddressPolicy::new(vec!["127.0.0.1/32".parse().unwrap()]),
    )
}

async fn render(c: &Chromium, url: &str, wait_for: Option<&str>) -> (String, Vec<String>) {
    let url = url::Url::parse(url).unwrap();
    let headers = BTreeMap::new();
    let r = c
        .render(RenderRequest {
            url: &url,
            headers: &headers,
            timeout: Duration::from_secs(20),
            wait_for,
            wait_ms: 0,
        })
        .await;
    let page = r.page.expect("rendered");
    (String::from_utf8_lossy(&page.body).into_owned(), r.blocked)
}

#[tokio::test]
async fn chromium_runs_scripts_and_blocked_requests_never_leave_it() {
    let tap = Tap::bind("127.0.0.2").await;
    let blocked = format!("http://{}/", tap.addr);
    let page = format!(
        r#"<html><body><main id="m"></main><img src="{blocked}pixel.png">
        <script>
          document.getElementById('m').textContent = 'written by script';
          fetch('{blocked}data').catch(() => {{}}).finally(() => {{
            const d = document.createElement('p'); d.id = 'after'; d.textContent = 'fetched';
            document.body.append(d);
          }});
        </script></body></html>"#
    );
    let site = Site::start(HashMap::from([("/".to_string(), Route::Html(page))])).await;
    let c = chromium();
    let (html, refused) = render(&c, &site.url("/"), Some("#after")).await;
    assert!(html.contains("written by script"), "{html}");
    assert!(html.contains("fetched"), "{html}");
    assert_eq!(tap.connections(), 0, "the blocked listener was reached");
    assert!(
        refused.iter().any(|b| b.contains("pixel.png"))
            && refused.iter().any(|b| b.contains("/data")),
        "{refused:?}"
    );
    c.shutdown().await;
}

#[tokio::test]
async fn chromium_caps_redirects() {
    let mut routes = HashMap::new();
    for i in 1..=7 {
        routes.insert(format!("/r{i}"), Route::Redirect(format!("/r{}", i + 1)));
    }
    routes.insert("/r8".to_string(), Route::Html("<p>the end</p>".into()));
    let site = Site::start(routes).await;
    let c = chromium();
    // Three hops are fine, seven are too many.
    let (html, _) = render(&c, &site.url("/r5"), None).await;
    assert!(html.contains("the end"), "{html}");
    let url = url::Url::parse(&site.url("/r1")).unwrap();
    let headers = BTreeMap::new();
    let r = c
        .render(RenderRequest {
            url: &url,
            headers: &headers,
            timeout: Duration::from_secs(20),
            wait_for: None,
            wait_ms: 0,
        })
        .await;
    assert_eq!(r.page.unwrap_err(), FetchError::TooManyRedirects(5));

    c.shutdown().await;
}
