//! The Chromium renderer on its own, against fixture pages on loopback: scripts run, the
//! address guard sees every request of the browser, a page is read as it stands (a navigation
//! it starts does not hold the read), and browsers do not pile up.

use e2e::browser::{chromium, render};
use e2e::fixture::{Route, Site, Tap};
use sarvcrawl_core::engine::fetch::FetchError;
use sarvcrawl_render::Chromium;
use std::collections::HashMap;
use std::time::Duration;

async fn html(c: &Chromium, url: &str, wait_for: Option<&str>) -> (String, Vec<String>) {
    let r = render(c, url, wait_for).await;
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
    let c = chromium(2);
    let (page, refused) = html(&c, &site.url("/"), Some("#after")).await;
    assert!(page.contains("written by script"), "{page}");
    assert!(page.contains("fetched"), "{page}");
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
    let c = chromium(2);
    // Three hops are fine, seven are too many.
    let (page, _) = html(&c, &site.url("/r5"), None).await;
    assert!(page.contains("the end"), "{page}");
    let r = render(&c, &site.url("/r1"), None).await;
    assert_eq!(r.page.unwrap_err(), FetchError::TooManyRedirects(5));

    c.shutdown().await;
}

#[tokio::test]
async fn a_page_that_navigates_away_once_loaded_is_read_as_it_stands() {
    // Once loaded the page heads for a destination that answers only after the render's
    // deadline: the read does not wait for that navigation, the page is read as it stands.
    let hop = "<p>Still here</p><script>addEventListener('load', () => { location.href = '/late'; })</script>";
    let late = Route::Slow(
        Duration::from_secs(60),
        Box::new(Route::Html("late".into())),
    );
    let site = Site::start(HashMap::from([
        ("/".to_string(), Route::Html(hop.into())),
        ("/late".to_string(), late),
    ]))
    .await;
    let c = chromium(2);
    let (page, _) = html(&c, &site.url("/"), None).await;
    assert!(page.contains("Still here"), "{page}");
    c.shutdown().await;
}
