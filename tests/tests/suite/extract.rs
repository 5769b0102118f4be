//! Structured data from pages: a schema of CSS selectors gives the exact records of a fixture
//! shop (numbers with their separators, nested lists, defaults), on a scrape and on every page of
//! a crawl; a malformed selector is refused with its path; the metadata pages declare
//! (OpenGraph, Twitter, author, dates, keywords, favicon, JSON-LD) lands in `metadata`, an
//! invalid JSON-LD block skipped and logged (and not read when the metadata is not asked for).

use e2e::{Route, Serve, Site};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(60);

const LISTING: &str = r#"<html><head><title>Shop</title>
<meta property="og:title" content="The Shop"><meta property="og:image" content="https://cdn.example/shop.png">
<meta property="og:type" content="website"><meta name="twitter:card" content="summary">
<meta name="author" content="Jane Doe"><meta property="article:published_time" content="2026-11-01T10:00:00Z">
<meta name="keywords" content="shoes, boots , "><link rel="shortcut icon" href="/favicon.ico">
<script type="application/ld+json">{"@type": "Product", "name": "Trail Boot"}</script>
<script type="application/ld+json">{not json</script>
</head><body><h1>Our shoes</h1>
<div class="product"><h2><a href="/p/1">Trail  Boot</a></h2><span class="price">$1,299.50</span>
  <span class="stock">yes</span>
  <ul><li data-size="42">EU 42</li><li data-size="43">EU 43</li></ul></div>
<div class="product"><h2><a href="/p/2">City Shoe</a></h2><span class="price">89,90 €</span>
  <ul><li data-size="40">EU 40</li></ul></div>
</body></html>"#;

fn product(name: &str, price: &str) -> Route {
    Route::Html(format!(
        r#"<html><head><title>{name}</title></head><body><h1>{name}</h1><p class="price">{price}</p><a href="/">all shoes</a></body></html>"#
    ))
}

fn shop() -> HashMap<String, Route> {
    HashMap::from([
        ("/".to_string(), Route::Html(LISTING.into())),
        ("/p/1".to_string(), product("Trail Boot", "1.299,50 €")),
        ("/p/2".to_string(), product("City Shoe", "EUR 89.90")),
    ])
}

fn listing_schema() -> Value {
    json!({"base_selector": ".product", "fields": [
        {"name": "name", "selector": "h2", "type": "text"},
        {"name": "url", "selector": "h2 a", "type": "attribute", "attribute": "href"},
        {"name": "price", "selector": ".price", "type": "number"},
        {"name": "in_stock", "selector": ".stock", "type": "boolean", "default": false},
        {"name": "variants", "selector": "li", "type": "list", "fields": [
            {"name": "size", "type": "attribute", "attribute": "data-size"},
            {"name": "label", "type": "text"}]},
        {"name": "rating", "selector": ".rating", "type": "number", "default": 0}
    ]})
}

#[tokio::test(flavor = "multi_thread")]
async fn a_selector_schema_reads_the_shop_s_records() {
    let site = Site::start(shop()).await;
    let serve = Serve::start();
    let api = serve.api(None);

    let body = json!({"url": site.url("/"), "formats": ["json", "metadata"],
                      "extract": {"schema": listing_schema()}});
    let (id, job) = api.run("scrape", &body, WAIT).await;
    assert_eq!(job["status"], "completed", "{job}");
    let doc = &job["result"];
    assert_eq!(
        doc["json"],
        json!([
            {"name": "Trail Boot", "url": "/p/1", "price": 1299.5, "in_stock": true,
             "variants": [{"size": "42", "label": "EU 42"}, {"size": "43", "label": "EU 43"}],
             "rating": 0},
            {"name": "City Shoe", "url": "/p/2", "price": 89.9, "in_stock": false,
             "variants": [{"size": "40", "label": "EU 40"}], "rating": 0}
        ]),
        "{doc}"
    );
    assert!(doc.get("markdown").is_none(), "only the formats asked for");

    // What the page declares.
    let meta = &doc["metadata"];
    assert_eq!(meta["title"], "Shop");
    assert_eq!(meta["og_title"], "The Shop");
    assert_eq!(meta["og_image"], "https://cdn.example/shop.png");
    assert_eq!(meta["og_type"], "website");
    assert_eq!(meta["twitter_card"], "summary");
    assert_eq!(meta["author"], "Jane Doe");
    assert_eq!(meta["published_time"], "2026-11-01T10:00:00Z");
    assert_eq!(meta["keywords"], json!(["shoes", "boots"]));
    assert_eq!(meta["favicon"], site.url("/favicon.ico"));
    assert_eq!(
        meta["json_ld"],
        json!([{"@type": "Product", "name": "Trail Boot"}])
    );
    let logs = api.all_logs(&id).await;
    assert!(
        logs.iter().any(|l| l["level"] == "warn"
            && l["message"]
                .as_str()
                .is_some_and(|m| m.contains("1 JSON-LD block(s)"))),
        "{logs:?}"
    );

    // Without the metadata asked for, what the page declares is not read: no JSON-LD parsed,
    // no warning about the block that is not JSON.
    let body = json!({"url": site.url("/"), "formats": ["markdown"]});
    let (id, job) = api.run("scrape", &body, WAIT).await;
    assert_eq!(job["status"], "completed", "{job}");
    assert!(job["result"].get("metadata").is_none(), "{job}");
    let logs = api.all_logs(&id).await;
    assert!(
        !logs
            .iter()
            .any(|l| l["message"].as_str().is_some_and(|m| m.contains("JSON-LD"))),
        "{logs:?}"
    );

    // Without a base selector: one object; a missing element gives its default or null.
    let body = json!({"url": site.url("/"), "extract": {"schema": {"fields": [
        {"name": "heading", "selector": "h1", "type": "text"},
        {"name": "first", "selector": ".product", "type": "nested", "fields": [
            {"name": "price", "selector": ".price", "type": "number"}]},
        {"name": "sizes", "selector": "li", "type": "list"},
        {"name": "missing", "selector": ".nothing", "type": "text"},
        {"name": "note", "selector": ".nothing", "type": "text", "default": "n/a"}
    ]}}});
    let (_, job) = api.run("scrape", &body, WAIT).await;
    assert_eq!(
        job["result"]["json"],
        json!({"heading": "Our shoes", "first": {"price": 1299.5},
               "sizes": ["EU 42", "EU 43", "EU 40"], "missing": null, "note": "n/a"}),
        "{job}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn every_page_of_a_crawl_carries_its_json_and_bad_selectors_are_refused() {
    let site = Site::start(shop()).await;
    let serve = Serve::start();
    let api = serve.api(None);
    let schema = json!({"fields": [
        {"name": "name", "selector": "h1", "type": "text"},
        {"name": "price", "selector": "p.price", "type": "number"}
    ]});
    let body = json!({"url": site.url("/"), "limit": 10, "formats": ["markdown", "json"],
                      "extract": {"schema": schema}});
    let (id, job) = api.run("crawl", &body, WAIT).await;
    assert_eq!(job["status"], "completed", "{job}");
    let docs = api.all_results(&id).await;
    let by_url: HashMap<String, Value> = docs
        .iter()
        .map(|d| (d["url"].as_str().unwrap().to_string(), d["json"].clone()))
        .collect();
    assert_eq!(by_url.len(), 3, "{docs:?}");
    assert_eq!(
        by_url[&site.url("/p/1")],
        json!({"name": "Trail Boot", "price": 1299.5})
    );
    assert_eq!(
        by_url[&site.url("/p/2")],
        json!({"name": "City Shoe", "price": 89.9})
    );
    assert_eq!(
        by_url[&site.url("/")],
        json!({"name": "Our shoes", "price": null})
    );

    let bad = json!({"url": site.url("/"), "formats": ["json"], "extract": {"schema": {"fields": [
        {"name": "ok", "selector": "h1", "type": "text"},
        {"name": "list", "selector": "ul", "type": "list", "fields": [
            {"name": "broken", "selector": "li[", "type": "text"}]}
    ]}}});
    let r = api.post("/api/crawl", &bad).await;
    assert_eq!(r.status, 400, "{}", r.body);
    assert_eq!(
        r.body["error"]["details"][0]["field"],
        "extract.schema.fields[1].fields[0].selector"
    );
    let r = api
        .post(
            "/api/scrape",
            &json!({"url": site.url("/"), "formats": ["json"]}),
        )
        .await;
    assert_eq!(
        r.body["error"]["details"][0]["field"], "extract",
        "{}",
        r.body
    );
}

/// A server with the fixture model configured (and an API key for it).
fn with_model(model: &e2e::llm::FakeModel) -> Serve {
    with_model_at_once(model, "4")
}

/// [`with_model`] reading at most `at_once` pages at once.
fn with_model_at_once(model: &e2e::llm::FakeModel, at_once: &str) -> Serve {
    Serve::with(
        &["--allow-net", "127.0.0.1/32"],
        &[
            ("SARVCRAWL_LLM_BASE_URL", &model.base_url()),
            ("SARVCRAWL_LLM_MODEL", "test-model"),
            ("SARVCRAWL_LLM_API_KEY", "model-key"),
            ("SARVCRAWL_LLM_CONCURRENCY", at_once),
        ],
    )
}

fn product_schema() -> Value {
    json!({"type": "object", "required": ["name", "price"], "additionalProperties": false,
           "properties": {"name": {"type": "string"}, "price": {"type": "number"}}})
}

/// What the fixture model "reads" off a product page: its name and price from the Markdown it
/// was sent.
fn read_product(request: &Value) -> String {
    let text = e2e::llm::messages_text(request);
    if text.contains("Trail Boot") {
        r#"```json
{"name": "Trail Boot", "price": 1299.5}
```"#
            .into()
    } else if text.contains("City Shoe") {
        r#"{"name": "City Shoe", "price": 89.9}"#.into()
    } else {
        r#"{"name": "Our shoes", "price": 0}"#.into()
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn without_a_model_a_prompt_is_refused_and_nothing_is_stored() {
    let site = Site::start(shop()).await;
    let serve = Serve::start();
    let api = serve.api(None);
    let r = api
        .post(
            "/api/scrape",
            &json!({"url": site.url("/p/1"), "extract": {"prompt": "the price"}}),
        )
        .await;
    assert_eq!(r.status, 503, "{}", r.body);
    assert_eq!(r.body["error"]["code"], "EXTRACT_UNAVAILABLE");
    let r = api
        .post(
            "/api/batch/scrape",
            &json!({"urls": [site.url("/p/1")], "extract": {"schema": product_schema()}}),
        )
        .await;
    assert_eq!(r.status, 503, "{}", r.body);
    let jobs = api.get("/api/jobs").await;
    assert_eq!(jobs.body["jobs"].as_array().map(Vec::len), Some(0));
}

#[tokio::test(flavor = "multi_thread")]
async fn the_model_reads_the_page_s_markdown_and_its_answer_must_validate() {
    let site = Site::start(shop()).await;
    let model = e2e::llm::FakeModel::start(read_product).await;
    let serve = with_model(&model);
    let api = serve.api(None);

    let body = json!({"url": site.url("/p/1"), "formats": ["json"],
                      "extract": {"prompt": "The product's name and price.", "schema": product_schema()}});
    let (_, job) = api.run("scrape", &body, WAIT).await;
    assert_eq!(job["status"], "completed", "{job}");
    let doc = &job["result"];
    assert_eq!(doc["json"], json!({"name": "Trail Boot", "price": 1299.5}));
    assert!(
        doc.get("markdown").is_none(),
        "markdown was not asked for: {doc}"
    );
    assert_eq!(
        doc["extract_usage"],
        json!({"model": "test-model", "prompt_tokens": 100, "completion_tokens": 20})
    );
    assert_eq!(job["extract_tokens"], 120);
    // What the model was sent: the page's Markdown, the prompt and the schema, with the key.
    let requests = model.requests();
    assert_eq!(requests.len(), 1);
    let (token, request) = &requests[0];
    assert_eq!(token.as_deref(), Some("model-key"));
    assert_eq!(request["model"], "test-model");
    let text = e2e::llm::messages_text(request);
    for part in [
        "# Trail Boot",
        "1.299,50 €",
        "The product's name and price.",
        r#""required":["name","price"]"#,
    ] {
        assert!(text.contains(part), "{part:?} not in {text}");
    }

    // An answer that does not validate is sent back once with its errors; then the page fails.
    let wrong = e2e::llm::FakeModel::start(|_| r#"{"name": 5}"#.to_string()).await;
    let serve = with_model(&wrong);
    let api = serve.api(None);
    let (id, job) = api.run("scrape", &body, WAIT).await;
    assert_eq!(job["status"], "failed", "{job}");
    assert_eq!(job["error"]["code"], "EXTRACT_FAILED", "{job}");
    assert!(
        job["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("second try")),
        "{job}"
    );
    let requests = wrong.requests();
    assert_eq!(requests.len(), 2, "one retry");
    let retry = e2e::llm::messages_text(&requests[1].1);
    assert!(
        retry.contains("not valid") && retry.contains(r#"{"name": 5}"#),
        "{retry}"
    );
    assert!(
        retry.contains("price"),
        "the errors name what is missing: {retry}"
    );
    assert_eq!(
        api.job(&id).await["extract_tokens"],
        240,
        "both tries count"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_crawl_s_pages_are_each_read_by_the_model_and_the_tokens_add_up() {
    let site = Site::start(shop()).await;
    let model = e2e::llm::FakeModel::start(read_product).await;
    let serve = with_model(&model);
    let api = serve.api(None);
    let body = json!({"url": site.url("/"), "limit": 10, "formats": ["markdown"],
                      "extract": {"schema": product_schema()}});
    let (id, job) = api.run("crawl", &body, WAIT).await;
    assert_eq!(job["status"], "completed", "{job}");
    let docs = api.all_results(&id).await;
    assert_eq!(docs.len(), 3);
    let mut total = 0;
    for d in &docs {
        assert!(d["markdown"].is_string(), "markdown was asked for: {d}");
        let usage = &d["extract_usage"];
        total +=
            usage["prompt_tokens"].as_u64().unwrap() + usage["completion_tokens"].as_u64().unwrap();
    }
    let p1 = docs.iter().find(|d| d["url"] == site.url("/p/1")).unwrap();
    assert_eq!(p1["json"], json!({"name": "Trail Boot", "price": 1299.5}));
    assert_eq!(total, 360);
    assert_eq!(job["extract_tokens"], total);
    assert_eq!(model.requests().len(), 3);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_model_s_concurrency_limit_holds_across_the_deployment() {
    let site = Site::start(shop()).await;
    let model = e2e::llm::FakeModel::slow(Duration::from_millis(400), read_product).await;
    // On AWS the pages are read by several worker processes: the limit is the deployment's.
    let serve = with_model_at_once(&model, "1");
    let api = serve.api(None);
    let body = json!({"url": site.url("/"), "limit": 10, "max_concurrency": 8,
                      "extract": {"schema": product_schema()}});
    let (_, job) = api.run("crawl", &body, WAIT).await;
    assert_eq!(job["status"], "completed", "{job}");
    assert_eq!(model.requests().len(), 3);
    assert_eq!(model.most_at_once(), 1, "one page read at a time");
}

#[tokio::test(flavor = "multi_thread")]
async fn with_render_the_selectors_read_the_rendered_page() {
    let scripted = r#"<html><body><div id="app">loading</div><script>
      document.getElementById('app').innerHTML = '<span class="price">' + (40 + 2) + ' EUR</span>';
    </script></body></html>"#;
    let site = Site::start(HashMap::from([(
        "/".to_string(),
        Route::Html(scripted.into()),
    )]))
    .await;
    let serve = Serve::start();
    let api = serve.api(None);
    let schema = json!({"fields": [{"name": "price", "selector": ".price", "type": "number"}]});
    for (render, want) in [(false, Value::Null), (true, json!(42))] {
        let body = json!({"url": site.url("/"), "render": render, "extract": {"schema": schema}});
        let (_, job) = api.run("scrape", &body, WAIT).await;
        assert_eq!(
            job["result"]["json"],
            json!({"price": want}),
            "render {render}: {job}"
        );
    }
}
