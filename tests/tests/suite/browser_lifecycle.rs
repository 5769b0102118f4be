//! The browser's life: many renders in a row leave no processes or memory behind (after 200
//! pages the Chromium process count is what it was after the first 10, and the browser's memory
//! has not grown with the pages); a killed browser is replaced; none outlives the renderer.
//! Only this renderer's browser and its children are counted (and killed): other tests of the
//! suite run their own processes meanwhile. A server's browsers leave no files behind either,
//! even when the server is killed outright.

use e2e::browser::{chromium, render};
use e2e::fixture::{Route, Site};
use e2e::procs::{footprint, kill, members};
use e2e::Serve;
use serde_json::json;
use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(60);

/// The browser's process count (itself and its children) and their memory.
fn browser(root: u32) -> (usize, u64) {
    let (children, memory) = footprint(root);
    (children + 1, memory)
}

/// [`browser`] once two readings half a second apart agree on the count.
async fn settled(root: u32) -> (usize, u64) {
    let mut last = browser(root);
    for _ in 0..20 {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let now = browser(root);
        if now.0 == last.0 {
            return now;
        }
        last = now;
    }
    last
}

/// Whether a process runs (a zombie waiting to be reaped does not).
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        let state = stat.rsplit_once(')').map_or("", |(_, r)| r).trim_start();
        !state.starts_with('Z')
    })
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
    let mut after_10 = (0, 0);
    for n in 1..=200 {
        let r = render(&renderer, &url, None).await;
        let body = r.page.expect("rendered").body;
        assert!(String::from_utf8_lossy(&body).contains("row 199"));
        if n == 10 {
            let root = renderer.browser_pid().await.expect("a browser runs");
            after_10 = settled(root).await;
            println!(
                "after 10 renders: {} browser processes, {} MiB resident",
                after_10.0,
                after_10.1 / 1024
            );
        }
    }
    // Closed contexts' processes exit on their own time: give them a few seconds.
    let root = renderer.browser_pid().await.expect("a browser runs");
    let mut now = settled(root).await;
    for _ in 0..20 {
        if now.0 <= after_10.0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
        now = browser(root);
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

    // Kill every process of the browser: the next render starts a new browser.
    let mut before = members(root);
    before.push(root);
    before.iter().for_each(|&pid| kill(pid));
    tokio::time::sleep(Duration::from_millis(500)).await;
    let r = render(&renderer, &url, None).await;
    assert!(r.page.is_ok(), "no render after the browser was killed");
    let new_root = renderer.browser_pid().await.expect("a new browser runs");
    assert!(!before.contains(&new_root));
    let mut last = members(new_root);
    last.push(new_root);

    renderer.shutdown().await;
    let gone = |pids: &[u32]| pids.iter().all(|&p| !alive(p));
    for _ in 0..20 {
        if gone(&last) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert!(gone(&last), "a browser process outlived the renderer");
}

/// The names in `dir`, sorted.
fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("read the server's temporary directory")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[tokio::test(flavor = "multi_thread")]
async fn a_servers_browsers_leave_no_files_behind_even_when_it_is_killed() {
    let site = Site::start(HashMap::from([(
        "/".to_string(),
        Route::Html("<html><body><p>Rendered here</p></body></html>".into()),
    )]))
    .await;
    let temp = tempfile::tempdir().expect("temp dir");
    let tmpdir = temp.path().to_string_lossy().into_owned();
    let mut serve = Serve::with(&["--allow-net", "127.0.0.1/32"], &[("TMPDIR", &tmpdir)]);
    let body = json!({"url": site.url("/"), "render": true});
    let rendered = |job: &serde_json::Value| {
        assert_eq!(job["status"], "completed", "{job}");
        assert!(job["result"]["markdown"]
            .as_str()
            .is_some_and(|m| m.contains("Rendered here")));
    };
    let profiles = |dir: &Path| -> Vec<String> {
        names(dir)
            .into_iter()
            .filter(|n| n.starts_with("sarvcrawl-chromium-"))
            .collect()
    };

    let (_, job) = serve.api(None).run("scrape", &body, WAIT).await;
    rendered(&job);
    // The browser's own temporary files are inside its profile.
    let first = profiles(temp.path());
    assert_eq!(first.len(), 1, "{:?}", names(temp.path()));
    assert!(
        names(temp.path())
            .iter()
            .all(|n| !n.starts_with("org.chromium")),
        "{:?}",
        names(temp.path())
    );

    // Killed outright, the server leaves its browser's profile; the next browser started in
    // that directory removes it.
    serve.restart();
    assert_eq!(profiles(temp.path()), first);
    let (_, job) = serve.api(None).run("scrape", &body, WAIT).await;
    rendered(&job);
    let second = profiles(temp.path());
    assert_eq!(second.len(), 1, "{:?}", names(temp.path()));
    assert_ne!(second, first);

    // Stopped as an operator stops it, the server removes its browser's files itself.
    serve.restart_gracefully();
    assert_eq!(names(temp.path()), Vec::<String>::new());
}
