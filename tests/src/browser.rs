//! Headless Chromium for the renderer's own tests: the executable, a renderer allowed to reach
//! loopback fixtures on 127.0.0.1, and one render with the defaults.

use sarvcrawl_core::engine::guard::AddressPolicy;
use sarvcrawl_core::ports::{RenderRequest, Rendered, Renderer};
use sarvcrawl_render::{locate, Chromium, ChromiumConfig};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

/// `SARVCRAWL_CHROMIUM`, or Chromium on `PATH`.
pub fn executable() -> PathBuf {
    let explicit = std::env::var_os("SARVCRAWL_CHROMIUM").map(PathBuf::from);
    locate(explicit.as_deref())
        .ok()
        .flatten()
        .expect("Chromium is needed: install Debian's chromium package (scripts/test.sh does)")
}

/// A renderer of `max_pages` pages at once whose browser may reach 127.0.0.1 only.
pub fn chromium(max_pages: usize) -> Chromium {
    let config = ChromiumConfig {
        executable: executable(),
        user_agent: "SarvCrawl-test".into(),
        max_pages,
    };
    Chromium::new(
        config,
        AddressPolicy::new(vec!["127.0.0.1/32".parse().expect("network")]),
    )
}

/// Renders `url` (20 s deadline, no extra headers, no pause), waiting for `wait_for`.
pub async fn render(c: &Chromium, url: &str, wait_for: Option<&str>) -> Rendered {
    let url = url::Url::parse(url).expect("URL");
    let headers = BTreeMap::new();
    c.render(RenderRequest {
        url: &url,
        headers: &headers,
        timeout: Duration::from_secs(20),
        wait_for,
        wait_ms: 0,
        screenshot: None,
    })
    .await
}
