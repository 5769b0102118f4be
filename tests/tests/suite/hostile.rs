//! SECURITY.md V6: hostile content fails its own page, never the server. A corpus of pages and
//! files built to exhaust a parser (tags nested 20,000 and 100,000 deep, lists, tables whose
//! rows pad to 20,000 columns, a tag of 100,000 attributes, a formatting element whose 256
//! attributes are copied into 100,000 paragraphs, a PDF stream inflating to 255 MiB, 200 pages sharing it, deeply
//! nested PDF arrays) is scraped, crawled and uploaded, and a monitor diffs two 120,000-line
//! pages, while a probe calls `/api/health` and another user keeps scraping. Every item ends
//! with a clear error or a bounded result, the server keeps answering and never restarts, its
//! peak memory stays under 512 MiB, and the other user's scrapes finish within seconds.

use bytes::Bytes;
use e2e::{Api, Receiver, Route, Serve, Site};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const WAIT: Duration = Duration::from_secs(120);
const WORKERS: usize = 4;

/// One hostile item: where it is served, its type, and the error codes it may end with
/// (`None`: it may also complete, with a bounded result).
struct Item {
    name: String,
    content_type: &'static str,
    body: Bytes,
    scraped: &'static [&'static str],
    uploaded: &'static [&'static str],
}

fn nested(open: &str, n: usize) -> Bytes {
    Bytes::from(format!("<html><body>{}x", open.repeat(n)))
}

/// A PDF of `pages` pages that all show one content stream, stored deflated as given.
fn pdf_sharing(deflated: &[u8], pages: usize) -> Bytes {
    use lopdf::{dictionary, Document, Object, Stream};
    let mut doc = Document::with_version("1.5");
    let pages_id = doc.new_object_id();
    let font = doc
        .add_object(dictionary! {"Type" => "Font", "Subtype" => "Type1", "BaseFont" => "Courier"});
    let resources = doc.add_object(dictionary! {"Font" => dictionary! {"F1" => font}});
    let mut stream = Stream::new(dictionary! {"Filter" => "FlateDecode"}, deflated.to_vec());
    stream.allows_compression = false;
    let content = doc.add_object(stream);
    let kids: Vec<Object> = (0..pages)
        .map(|_| {
            doc.add_object(
                dictionary! {"Type" => "Page", "Parent" => pages_id, "Contents" => content},
            )
            .into()
        })
        .collect();
    doc.objects.insert(
        pages_id,
        Object::Dictionary(dictionary! {
            "Type" => "Pages", "Kids" => kids, "Count" => pages as i64, "Resources" => resources,
            "MediaBox" => vec![0.into(), 0.into(), 595.into(), 842.into()],
        }),
    );
    let catalog = doc.add_object(dictionary! {"Type" => "Catalog", "Pages" => pages_id});
    doc.trailer.set("Root", catalog);
    let mut out = Vec::new();
    doc.save_to(&mut out).unwrap();
    Bytes::from(out)
}

/// 255 MiB of text operators, deflated (about a quarter of a megabyte).
fn text_bomb() -> Vec<u8> {
    let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
    let chunk = "BT /F1 9 Tf (aaaaaaaa) Tj ET\n".repeat(1 << 15);
    let mut left = 255usize << 20;
    while left > 0 {
        let n = left.min(chunk.len());
        z.write_all(&chunk.as_bytes()[..n]).unwrap();
        left -= n;
    }
    z.finish().unwrap()
}

/// A PDF whose one page dictionary nests arrays 100,000 deep.
fn nested_arrays_pdf() -> Bytes {
    let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    let body = format!(
        "%PDF-1.4\n1 0 obj\n<< /Type /Catalog /Pages 2 0 R >>\nendobj\n\
         2 0 obj\n<< /Type /Pages /Kids [3 0 R] /Count 1 >>\nendobj\n\
         3 0 obj\n<< /Type /Page /Parent 2 0 R /Deep {deep} >>\nendobj\n\
         trailer\n<< /Root 1 0 R >>\n%%EOF\n"
    );
    Bytes::from(body)
}

fn corpus() -> Vec<Item> {
    const COMPLEX: &[&str] = &["TOO_COMPLEX"];
    let mut items = Vec::new();
    for (kind, open) in [
        ("div", "<div>"),
        ("span", "<span>"),
        ("b", "<b>"),
        ("blockquote", "<blockquote>"),
        ("list", "<ul><li>"),
        ("table", "<table><tr><td>"),
    ] {
        for n in [20_000, 100_000] {
            items.push(Item {
                name: format!("{kind}-{n}.html"),
                content_type: "text/html",
                body: nested(open, n),
                scraped: COMPLEX,
                uploaded: COMPLEX,
            });
        }
    }
    items.push(Item {
        name: "list-5000.html".into(),
        content_type: "text/html",
        body: nested("<ul><li>", 5_000),
        scraped: COMPLEX,
        uploaded: COMPLEX,
    });
    // Every row is padded to the widest: 20,000 rows of 20,000 cells.
    items.push(Item {
        name: "wide-table.html".into(),
        content_type: "text/html",
        body: Bytes::from(format!(
            "<table>{}<tr>{}</tr></table>",
            "<tr><td>x</td></tr>".repeat(20_000),
            "<td>y</td>".repeat(20_000)
        )),
        scraped: &["TOO_LARGE"],
        uploaded: &["TOO_LARGE"],
    });
    // One tag of 100,000 attributes: the element keeps its first 256, at once.
    let many: String = (0..100_000).map(|i| format!(" a{i}")).collect();
    items.push(Item {
        name: "attributes-100000.html".into(),
        content_type: "text/html",
        body: Bytes::from(format!("<html><body><p{many}>x</p></body></html>")),
        scraped: &["completed"],
        uploaded: &["completed"],
    });
    // A formatting element of 256 attributes reopened in 100,000 paragraphs: uncapped, 25.6
    // million attributes copied into the tree.
    let few: String = (0..256).map(|i| format!(" a{i}")).collect();
    items.push(Item {
        name: "reopened-attributes.html".into(),
        content_type: "text/html",
        body: Bytes::from(format!(
            "<html><body><p><b{few}></p>{}",
            "<p>x".repeat(100_000)
        )),
        scraped: COMPLEX,
        uploaded: COMPLEX,
    });
    let bomb = text_bomb();
    for (name, pages) in [("bomb.pdf", 1), ("shared-200.pdf", 200)] {
        items.push(Item {
            name: name.into(),
            content_type: "application/pdf",
            body: pdf_sharing(&bomb, pages),
            // Fetched by URL, a PDF is read as an upload is.
            scraped: &["TOO_LARGE"],
            uploaded: &["TOO_LARGE"],
        });
    }
    items.push(Item {
        name: "nested-arrays.pdf".into(),
        content_type: "application/pdf",
        body: nested_arrays_pdf(),
        scraped: &["UNSUPPORTED_CONTENT", "TOO_COMPLEX", "completed"],
        uploaded: &["UNSUPPORTED_CONTENT", "TOO_COMPLEX", "completed"],
    });
    items
}

/// How a job ended: its error code, or `completed`.
fn outcome(job: &Value) -> String {
    match job["status"].as_str() {
        Some("completed") => "completed".into(),
        _ => job["error"]["code"].as_str().unwrap_or("?").to_string(),
    }
}

/// Calls `/api/health` every 100 ms until stopped: (answers, failures, slowest).
fn probe(
    base: String,
    stop: Arc<AtomicBool>,
) -> tokio::task::JoinHandle<(usize, Vec<String>, Duration)> {
    tokio::spawn(async move {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(3))
            .build()
            .unwrap();
        let (mut ok, mut failures, mut slowest) = (0, Vec::new(), Duration::ZERO);
        while !stop.load(Ordering::SeqCst) {
            let t = Instant::now();
            match http.get(format!("{base}/api/health")).send().await {
                Ok(r) if r.status() == 200 => ok += 1,
                Ok(r) => failures.push(format!("status {}", r.status())),
                Err(e) => failures.push(e.to_string()),
            }
            slowest = slowest.max(t.elapsed());
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        (ok, failures, slowest)
    })
}

/// Another user's small scrapes, one after the other until stopped: how long each took.
fn bystander(
    api: Api,
    url: String,
    stop: Arc<AtomicBool>,
) -> tokio::task::JoinHandle<Vec<Duration>> {
    tokio::spawn(async move {
        let mut took = Vec::new();
        while !stop.load(Ordering::SeqCst) {
            let t = Instant::now();
            let (_, job) = api.run("scrape", &json!({"url": url}), WAIT).await;
            assert_eq!(job["status"], "completed", "the bystander's scrape: {job}");
            took.push(t.elapsed());
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        took
    })
}

async fn upload(api: &Api, item: &Item) -> Value {
    let r = api
        .http
        .post(format!("{}/api/upload?filename={}", api.base, item.name))
        .bearer_auth(api_key(api))
        .header("content-type", item.content_type)
        .body(item.body.clone())
        .send()
        .await
        .unwrap();
    let reply = e2e::Reply::read(r).await;
    assert_eq!(reply.status, 202, "upload of {}: {}", item.name, reply.body);
    api.wait(reply.body["job_id"].as_str().unwrap(), WAIT).await
}

fn key_of(user: &str) -> String {
    format!("{user}-hostile-key-0123456789")
}

fn api_key(api: &Api) -> String {
    api.key().unwrap_or_default().to_string()
}

/// Two 120,000-line versions of one page: the first request gets one, every later one the
/// other.
fn big_page(served: Arc<AtomicUsize>) -> Route {
    let version = served.fetch_add(1, Ordering::SeqCst).min(1);
    let mut html = String::from("<html><body>");
    for i in 0..120_000 {
        html.push_str(&format!("<p>line {i} of version {version}</p>\n"));
    }
    Route::Html(html)
}

#[tokio::test(flavor = "multi_thread")]
async fn hostile_content_fails_its_own_page_and_nothing_else() {
    let items = Arc::new(corpus());
    let served = Arc::new(AtomicUsize::new(0));
    let mut routes: HashMap<String, Route> = items
        .iter()
        .map(|i| {
            (
                format!("/h/{}", i.name),
                Route::typed(i.content_type, i.body.clone()),
            )
        })
        .collect();
    let links: String = items
        .iter()
        .filter(|i| i.content_type == "text/html")
        .map(|i| format!("<a href=\"/h/{}\">{}</a>\n", i.name, i.name))
        .collect();
    routes.insert(
        "/".into(),
        Route::Html(format!("<html><body>{links}</body></html>")),
    );
    routes.insert("/small".into(), Route::Html("<p>a small page</p>".into()));
    let counter = served.clone();
    let site = Site::start_with(
        routes,
        Some(Arc::new(move |path: &str, _: Option<&str>| {
            (path == "/big").then(|| big_page(counter.clone()))
        })),
    )
    .await;
    let hook = Receiver::start(&[]).await;

    let users: Vec<String> = (0..WORKERS)
        .map(|n| format!("u{n}"))
        .chain(["crawler", "watcher", "bystander"].map(String::from))
        .collect();
    let keys: Vec<String> = users.iter().map(|u| format!("{u}:{}", key_of(u))).collect();
    let mut serve = Serve::with(
        &["--allow-net", "127.0.0.1/32", "--monitor-min-interval", "1"],
        &[("SARVCRAWL_API_KEYS", &keys.join(","))],
    );
    let pid = serve.pid();
    let api = |user: &str| serve.api(Some(&key_of(user)));

    let stop = Arc::new(AtomicBool::new(false));
    let health = probe(serve.base.clone(), stop.clone());
    let others = bystander(api("bystander"), site.url("/small"), stop.clone());
    let started = Instant::now();

    // Each worker user scrapes and uploads its share of the corpus.
    let work: Vec<_> = (0..WORKERS)
        .map(|w| {
            let (api, items, site_url) = (api(&format!("u{w}")), items.clone(), site.url("/h/"));
            tokio::spawn(async move {
                let mut seen = Vec::new();
                for item in items.iter().skip(w).step_by(WORKERS) {
                    let formats = ["markdown", "html", "text", "links", "metadata"];
                    let body =
                        json!({"url": format!("{site_url}{}", item.name), "formats": formats});
                    let (_, scraped) = api.run("scrape", &body, WAIT).await;
                    let uploaded = upload(&api, item).await;
                    seen.push((item.name.clone(), outcome(&scraped), outcome(&uploaded)));
                }
                seen
            })
        })
        .collect();
    // One crawl over every hostile page.
    let (crawler, root) = (api("crawler"), site.url("/"));
    let crawl = tokio::spawn(async move {
        crawler
            .run("crawl", &json!({"url": root, "use_sitemap": false}), WAIT)
            .await
    });
    // A monitor whose page changes every one of its 120,000 lines.
    let watcher = api("watcher");
    let r = watcher
        .post(
            "/api/monitors",
            &json!({"url": site.url("/big"), "notify_url": hook.url("/hook"), "interval_seconds": 1}),
        )
        .await;
    assert_eq!(r.status, 202, "{}", r.body);
    let monitor = r.body["monitor_id"].as_str().unwrap().to_string();
    let deadline = Instant::now() + WAIT;
    let changed = loop {
        let m = watcher.get(&format!("/api/monitors/{monitor}")).await.body;
        // The delivery is recorded on the monitor once the receiver has answered it.
        if m["changes"].as_u64() == Some(1)
            && m["last_delivery"]["status_code"] == 200
            && !hook.received().is_empty()
        {
            break m;
        }
        assert!(
            Instant::now() < deadline,
            "the change was never reported: {m}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(
        watcher
            .delete(&format!("/api/monitors/{monitor}"))
            .await
            .status,
        204
    );

    let (crawl_id, crawl_job) = crawl.await.unwrap();
    let crawler = api("crawler");
    let mut outcomes = Vec::new();
    for w in work {
        outcomes.extend(w.await.unwrap());
    }
    stop.store(true, Ordering::SeqCst);
    let (answers, failures, slowest) = health.await.unwrap();
    let scrapes = others.await.unwrap();
    let elapsed = started.elapsed();
    let peak_mib = serve.peak_rss_kib() / 1024;
    eprintln!(
        "hostile corpus: {} items in {elapsed:?}; health answered {answers} times, slowest \
         {slowest:?}; bystander scrapes {scrapes:?}; peak RSS {peak_mib} MiB",
        items.len()
    );

    // Every item ended with a clear error or a bounded result.
    assert_eq!(outcomes.len(), items.len());
    for (name, scraped, uploaded) in &outcomes {
        let item = items.iter().find(|i| &i.name == name).unwrap();
        assert!(
            item.scraped.contains(&scraped.as_str()),
            "scrape of {name}: {scraped}"
        );
        assert!(
            item.uploaded.contains(&uploaded.as_str()),
            "upload of {name}: {uploaded}"
        );
    }
    assert_eq!(crawl_job["status"], "completed", "{crawl_job}");
    let docs = crawler.all_results(&crawl_id).await;
    for item in items.iter().filter(|i| i.content_type == "text/html") {
        let doc = docs
            .iter()
            .find(|d| d["url"].as_str().is_some_and(|u| u.ends_with(&item.name)))
            .unwrap_or_else(|| panic!("{} was not crawled", item.name));
        let code = doc["error"]["code"].as_str().unwrap_or("completed");
        assert!(
            item.scraped.contains(&code),
            "crawl of {}: {code}",
            item.name
        );
    }
    // The change of two 120,000-line pages was reported with its diff cut to size or, when the
    // diff could not be made within the work limit on a busy machine, without it, saying why.
    assert_eq!(changed["last_delivery"]["status_code"], 200, "{changed}");
    let delivered: Value = serde_json::from_slice(&hook.received()[0].body).unwrap();
    match delivered["diff"].as_str() {
        Some(diff) => {
            assert!(
                diff.len() <= (1 << 20) + 1024,
                "a diff of {} bytes",
                diff.len()
            );
            assert!(diff.contains("more changed lines"), "{}", &diff[..200]);
        }
        None => {
            let why = delivered["diff_omitted"].as_str().unwrap_or_default();
            assert!(why.contains("longer than"), "{delivered}");
        }
    }

    // The server kept answering, never restarted, and stayed within its memory.
    assert!(
        failures.is_empty(),
        "health failed {} times: {failures:?}",
        failures.len()
    );
    assert!(answers > 10);
    assert!(
        serve.running() && serve.pid() == pid,
        "the server restarted"
    );
    assert!(peak_mib < 512, "peak RSS {peak_mib} MiB");
    // The other user's work went on: each of its scrapes finished within a few seconds.
    assert!(!scrapes.is_empty());
    for t in &scrapes {
        assert!(
            *t < Duration::from_secs(10),
            "a bystander's scrape took {t:?}"
        );
    }
}
