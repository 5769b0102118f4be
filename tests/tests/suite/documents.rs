//! Documents by URL: a PDF or a Word document fetched by a scrape or a crawl is extracted,
//! whatever type it is served with; a crawl follows links to PDFs unless told not to; a PDF
//! over the document cap, a zip bomb named `.docx` and a broken PDF fail their page and the
//! server keeps serving.

use bytes::Bytes;
use e2e::{Route, Serve, Site};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(120);

fn served(content_type: Option<&str>, body: Vec<u8>) -> Route {
    Route::Raw {
        status: 200,
        headers: content_type
            .map(|ct| vec![("content-type".to_string(), ct.to_string())])
            .unwrap_or_default(),
        body: Bytes::from(body),
    }
}

fn report() -> Vec<u8> {
    e2e::pdf(
        &["Quarterly figures rose", "Outlook remains steady"],
        Some(("Quarterly Report", "Finance Team")),
    )
}

fn site_routes() -> HashMap<String, Route> {
    let mut routes = HashMap::new();
    routes.insert(
        "/".to_string(),
        Route::Html(
            r#"<html><body><h1>Reports</h1><a href="/report.pdf">the report</a> <a href="/about.html">about</a></body></html>"#
                .into(),
        ),
    );
    routes.insert(
        "/about.html".to_string(),
        Route::Html("<h1>About</h1><p>We publish reports.</p>".into()),
    );
    routes.insert(
        "/report.pdf".to_string(),
        served(Some("application/pdf"), report()),
    );
    routes.insert(
        "/mislabelled".to_string(),
        served(Some("text/html"), report()),
    );
    routes.insert("/untyped".to_string(), served(None, report()));
    // Over the 25 MiB document cap once read.
    let mut huge = b"%PDF-1.5\n".to_vec();
    huge.resize(30 << 20, b' ');
    routes.insert(
        "/huge.pdf".to_string(),
        served(Some("application/pdf"), huge),
    );
    let docx_type = "application/vnd.openxmlformats-officedocument.wordprocessingml.document";
    routes.insert(
        "/review.docx".to_string(),
        served(Some(docx_type), e2e::docx()),
    );
    routes.insert(
        "/files/review.docx".to_string(),
        served(Some("application/octet-stream"), e2e::docx()),
    );
    routes.insert("/bomb.docx".to_string(), served(None, e2e::docx_bomb(100)));
    routes.insert(
        "/broken.pdf".to_string(),
        served(
            Some("application/pdf"),
            b"%PDF-1.7\nthis is not a PDF".to_vec(),
        ),
    );
    routes
}

async fn scrape(api: &e2e::Api, url: &str) -> Value {
    api.run(
        "scrape",
        &json!({"url": url, "formats": ["markdown", "text", "metadata"]}),
        WAIT,
    )
    .await
    .1
}

#[tokio::test(flavor = "multi_thread")]
async fn pdf_and_word_documents_by_url_are_extracted_whatever_type_they_are_served_with() {
    let site = Site::start(site_routes()).await;
    let serve = Serve::start();
    let api = serve.api(None);
    for path in ["/report.pdf", "/mislabelled", "/untyped"] {
        let job = scrape(&api, &site.url(path)).await;
        assert_eq!(job["status"], "completed", "{path}: {job}");
        let doc = &job["result"];
        assert_eq!(
            doc["markdown"],
            "## Page 1\n\nQuarterly figures rose\n\n## Page 2\n\nOutlook remains steady",
            "{path}"
        );
        assert!(doc["text"]
            .as_str()
            .unwrap()
            .contains("Outlook remains steady"));
        assert_eq!(doc["metadata"]["title"], "Quarterly Report", "{path}");
        assert_eq!(doc["metadata"]["author"], "Finance Team");
        assert_eq!(doc["metadata"]["pages"], 2);
        assert_eq!(doc["url"], site.url(path));
    }

    for path in ["/review.docx", "/files/review.docx"] {
        let job = scrape(&api, &site.url(path)).await;
        assert_eq!(job["status"], "completed", "{path}: {job}");
        let doc = &job["result"];
        assert_eq!(doc["markdown"], e2e::DOCX_MARKDOWN, "{path}");
        assert_eq!(doc["metadata"]["title"], "Annual Review");
        assert_eq!(doc["metadata"]["author"], "Ada Lovelace");
    }
    let bomb = scrape(&api, &site.url("/bomb.docx")).await;
    assert_eq!(bomb["status"], "failed");
    assert_eq!(bomb["error"]["code"], "TOO_LARGE", "{bomb}");

    let huge = scrape(&api, &site.url("/huge.pdf")).await;
    assert_eq!(huge["status"], "failed");
    assert_eq!(huge["error"]["code"], "TOO_LARGE", "{huge}");
    let broken = scrape(&api, &site.url("/broken.pdf")).await;
    assert_eq!(broken["status"], "failed");
    assert_eq!(broken["error"]["code"], "UNSUPPORTED_CONTENT", "{broken}");
    // The server is still there.
    assert_eq!(
        scrape(&api, &site.url("/about.html")).await["status"],
        "completed"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_crawl_follows_links_to_pdfs_unless_told_not_to() {
    let site = Site::start(site_routes()).await;
    let serve = Serve::start();
    let api = serve.api(None);
    let (id, job) = api
        .run(
            "crawl",
            &json!({"url": site.url("/"), "use_sitemap": false}),
            WAIT,
        )
        .await;
    assert_eq!(job["status"], "completed", "{job}");
    assert_eq!(job["progress"]["pages_completed"], 3);
    let docs = api.all_results(&id).await;
    let pdf = docs
        .iter()
        .find(|d| d["url"] == site.url("/report.pdf"))
        .expect("the linked PDF is a document of the crawl");
    assert!(pdf["markdown"]
        .as_str()
        .unwrap()
        .contains("## Page 2\n\nOutlook remains steady"));

    let (id, job) = api
        .run(
            "crawl",
            &json!({"url": site.url("/"), "use_sitemap": false, "include_documents": false}),
            WAIT,
        )
        .await;
    assert_eq!(job["progress"]["pages_completed"], 2, "{job}");
    let tree = api.get(&format!("/api/jobs/{id}/tree")).await.body;
    let skipped: Vec<(String, String)> = e2e::tree_nodes(&tree)
        .into_iter()
        .filter(|n| n.status == "skipped")
        .map(|n| (n.url, n.reason.unwrap_or_default()))
        .collect();
    assert_eq!(
        skipped,
        [(site.url("/report.pdf"), "filtered".to_string())],
        "{tree}"
    );
}
