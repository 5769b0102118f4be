//! The browser's life: many renders in a row leave no processes or memory behind (after 200
//! pages the Chromium process count is what it was after the first 10, and the memory of the
//! worker and its browser has not grown with the pages); a killed browser is replaced; none
//! outlives the renderer. (Alone in its test binary, so the processes counted are this
//! renderer's only.)

use e2e::browser::{chromium, render};
use e2e::fixture::{Route, Site};
use e2e::procs::{footprint, kill, members};
use std::collections::HashMap;
use std::time::Duration;

/// The process count and memory once two readings half a second apart agree on the count.
async fn settled(me: u32) -> (usize, u64) {
    let mut last = footprint(me);
    for _ in 0..20 {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let now = footprint(me);
        if now.0 == last.0 {
            return now;
        }
        last = now;
    }
    last
}

#[tokio::test(flavor = "multi_thread")]
async fn chromium_leaves_nothing_behind_and_is_replaced_when_killed() {
    let page = r#"<html><body><main id="m"></main><script>
        const m = document.getElementById('m');
        for (let i = 0; i < 200; i++) { const p = document.createElement('p'); p.textContent = 'row ' + i; m.append(p); }
        window.big = new Array(200000).fill('x');
        </script></body></html>"#;
    let site = Site::start(HashMap::from([("/".to_string(), Route::Html(page.into()))])).await;
    let renderer = chromium(1);
    let url = site.url("/");
    let me = std::process::id();
    let mut after_10 = (0, 0);
    for n in 1..=200 {
        let r = render(&renderer, &url, None).await;
        let body = r.page.expect("rendered").body;
        assert!(String::from_utf8_lossy(&body).contains("row 199"));
        if n == 10 {
            after_10 = settled(me).await;
            println!(
                "after 10 renders: {} browser processes, {} MiB resident",
                after_10.0,
                after_10.1 / 1024
            );
        }
    }
    // Closed contexts' processes exit on their own time: give them a few seconds.
    let mut now = settled(me).await;
    for _ in 0..20 {
        if now.0 <= after_10.0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
        now = footprint(me);
    }
    println!(
        "after 200 renders: {} browser processes, {} MiB resident",
        now.0,
        now.1 / 1024
    );
    assert!(
        now.0 <= after_10.0,
        "processes grew: {after_10:?} -> {now:?}"
    );
    assert!(
        now.1 <= after_10.1 + after_10.1 / 2,
        "memory grew by more than half: {after_10:?} -> {now:?}"
    );

    // Kill every browser process: the next render starts a new browser.
    let before = members(me);
    before.iter().for_each(|&pid| kill(pid));
    tokio::time::sleep(Duration::from_millis(500)).await;
    let r = render(&renderer, &url, None).await;
    assert!(r.page.is_ok(), "no render after the browser was killed");
    let after = members(me);
    assert!(!after.is_empty() && after.iter().all(|p| !before.contains(p)));

    renderer.shutdown().await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        footprint(me).0,
        0,
        "a browser process outlived the renderer"
    );
}
