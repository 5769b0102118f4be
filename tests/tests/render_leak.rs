//! Many renders in a row leave no browser processes or memory behind: after 200 pages the
//! Chromium process count is what it was after the first 10, and the memory of the worker and
//! its browser has not grown with the pages. (Alone in its test binary, so the processes
//! counted are this renderer's only.)

use e2e::fixture::{Route, Site};
use sarvcrawl_core::engine::guard::AddressPolicy;
use sarvcrawl_core::ports::{RenderRequest, Renderer};
use sarvcrawl_render::{locate, Chromium, ChromiumConfig};
use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

/// Processes below `root` (by parent id), and the resident memory of them and `root`, in KiB.
fn tree(root: u32) -> (usize, u64) {
    let mut parent = HashMap::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // The parent id is the second field after the command name in parentheses.
        let after = stat.rsplit_once(')').map_or("", |(_, r)| r);
        if let Some(ppid) = after
            .split_whitespace()
            .nth(1)
            .and_then(|p| p.parse::<u32>().ok())
        {
            parent.insert(pid, ppid);
        }
    }
    let below = |mut pid: u32| {
        while let Some(&p) = parent.get(&pid) {
            if p == root {
                return true;
            }
            pid = p;
        }
        false
    };
    let members: Vec<u32> = parent.keys().copied().filter(|&p| below(p)).collect();
    let rss = |pid: u32| {
        std::fs::read_to_string(format!("/proc/{pid}/status"))
            .ok()
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with("VmRSS:"))
                    .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
            })
            .unwrap_or(0)
    };
    let memory = members.iter().map(|&p| rss(p)).sum::<u64>() + rss(root);
    (members.len(), memory)
}

#[tokio::test(flavor = "multi_thread")]
async fn two_hundred_renders_leave_nothing_behind() {
    let explicit = std::env::var_os("SARVCRAWL_CHROMIUM").map(std::path::PathBuf::from);
    let executable = locate(explicit.as_deref())
        .ok()
        .flatten()
        .expect("Chromium is needed: install Debian's chromium package (scripts/test.sh does)");
    let page = r#"<html><body><main id="m"></main><script>
        const m = document.getElementById('m');
        for (let i = 0; i < 200; i++) { const p = document.createElement('p'); p.textContent = 'row ' + i; m.append(p); }
        window.big = new Array(200000).fill('x');
        </script></body></html>"#;
    let site = Site::start(HashMap::from([("/".to_string(), Route::Html(page.into()))])).await;
    let renderer = Chromium::new(
        ChromiumConfig {
            executable,
            user_agent: "SarvCrawl-test".into(),
            max_pages: 1,
        },
        AddressPolicy::new(vec!["127.0.0.1/32".parse().unwrap()]),
    );
    let url = url::Url::parse(&site.url("/")).unwrap();
    let headers = BTreeMap::new();
    let me = std::process::id();
    let mut after_10 = (0, 0);
    for n in 1..=200 {
        let r = renderer
            .render(RenderRequest {
                url: &url,
                headers: &headers,
                timeout: Duration::from_secs(20),
                wait_for: None,
                wait_ms: 0,
            })
            .await;
        let body = r.page.expect("rendered").body;
        assert!(String::from_utf8_lossy(&body).contains("row 199"));
        if n == 10 || n == 200 {
            // Let closed pages' processes exit before counting.
            tokio::time::sleep(Duration::from_secs(2)).await;
            let now = tree(me);
            println!(
                "after {n} renders: {} browser processes, {} MiB resident",
                now.0,
                now.1 / 1024
            );
            if n == 10 {
                after_10 = now;
            } else {
                assert!(
                    now.0 <= after_10.0,
                    "processes grew: {after_10:?} -> {now:?}"
                );
                assert!(
                    now.1 <= after_10.1 + after_10.1 / 2,
                    "memory grew by more than half: {after_10:?} -> {now:?}"
                );
            }
        }
    }
    renderer.shutdown().await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(tree(me).0, 0, "a browser process outlived the renderer");
}
