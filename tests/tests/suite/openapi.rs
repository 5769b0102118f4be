//! `openapi.yaml` against the running server: every route the server answers is described
//! there and every described route is answered, and real responses of each kind of route
//! validate against the schemas the file gives for them.

use e2e::{tree_site, Reply, Serve, Site};
use serde_json::{json, Value};
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(30);
const METHODS: [&str; 5] = ["get", "post", "put", "patch", "delete"];

fn spec() -> Value {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../openapi.yaml"))
        .expect("openapi.yaml");
    serde_yaml::from_str(&text).expect("openapi.yaml is YAML")
}

/// A concrete path for a templated one.
fn concrete(path: &str) -> String {
    path.replace("/jobs/{id}", "/jobs/job_01JD0000000000000000000000")
        .replace("/monitors/{id}", "/monitors/mon_01JD0000000000000000000000")
}

async fn send(serve: &Serve, method: &str, path: &str, body: Option<&Value>) -> Reply {
    let method = reqwest::Method::from_bytes(method.to_uppercase().as_bytes()).unwrap();
    serve.api(None).send(method, path, body).await
}

fn is_route(r: &Reply) -> bool {
    !(r.status == 404 && r.body["error"]["message"] == "no such route")
}

#[tokio::test(flavor = "multi_thread")]
async fn every_route_is_described_and_every_description_is_a_route() {
    let spec = spec();
    let serve = Serve::start();
    let paths = spec["paths"].as_object().expect("paths");
    for (path, item) in paths {
        for method in METHODS {
            let body = matches!(method, "post" | "put" | "patch").then(|| json!({}));
            let r = send(&serve, method, &concrete(path), body.as_ref()).await;
            let described = item.get(method).is_some();
            assert_eq!(
                is_route(&r),
                described,
                "{method} {path}: {} {}",
                r.status,
                r.body
            );
        }
    }
    // Paths the file does not have are not routes either.
    for path in [
        "/api",
        "/api/nothing",
        "/api/monitor",
        "/api/jobs/job_01JD0000000000000000000000/other",
    ] {
        for method in METHODS {
            let r = send(&serve, method, path, None).await;
            assert!(
                !is_route(&r),
                "{method} {path} answers but is not in openapi.yaml"
            );
        }
    }
}

/// The schema `spec` gives for an answer, with `$ref`s resolving inside the file.
fn validator(spec: &Value, path: &str, method: &str, status: u16) -> jsonschema::Validator {
    let mut response = &spec["paths"][path][method]["responses"][status.to_string()];
    if let Some(r) = response["$ref"].as_str() {
        let name = r.rsplit('/').next().unwrap();
        response = &spec["components"]["responses"][name];
    }
    let schema = response["content"]["application/json"]["schema"].clone();
    assert!(!schema.is_null(), "no schema for {method} {path} {status}");
    let mut root = spec.clone();
    root["x-checked"] = schema;
    root["$ref"] = json!("#/x-checked");
    jsonschema::options()
        .with_draft(jsonschema::Draft::Draft202012)
        .build(&root)
        .expect("a valid schema")
}

/// Asserts that `r`, an answer to `method path`, is described and valid.
fn check(spec: &Value, path: &str, method: &str, r: &Reply) {
    let v = validator(spec, path, method, r.status);
    let errors: Vec<String> = v.iter_errors(&r.body).map(|e| e.to_string()).collect();
    assert!(
        errors.is_empty(),
        "{method} {path} {}: {errors:?}\n{}",
        r.status,
        r.body
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn real_answers_validate_against_the_schemas() {
    let spec = spec();
    let site = Site::start(tree_site(5)).await;
    let serve = Serve::with(
        &["--allow-net", "127.0.0.1/32"],
        &[("SARVCRAWL_MONITOR_MIN_INTERVAL", "60")],
    );
    let api = serve.api(None);

    check(&spec, "/api/health", "get", &api.get("/api/health").await);
    let r = api
        .post("/api/scrape", &json!({"url": site.url("/")}))
        .await;
    check(&spec, "/api/scrape", "post", &r);
    let scrape = r.body["job_id"].as_str().unwrap().to_string();
    let busy = api
        .post("/api/scrape", &json!({"url": site.url("/")}))
        .await;
    if busy.status == 429 {
        check(&spec, "/api/scrape", "post", &busy);
    }
    api.wait(&scrape, WAIT).await;
    check(
        &spec,
        "/api/jobs/{id}",
        "get",
        &api.get(&format!("/api/jobs/{scrape}")).await,
    );

    let r = api
        .post(
            "/api/crawl",
            &json!({"url": site.url("/"), "use_sitemap": false}),
        )
        .await;
    check(&spec, "/api/crawl", "post", &r);
    let crawl = r.body["job_id"].as_str().unwrap().to_string();
    api.wait(&crawl, WAIT).await;
    for (path, sub) in [
        ("/api/jobs/{id}/results", "results"),
        ("/api/jobs/{id}/logs", "logs"),
        ("/api/jobs/{id}/tree", "tree"),
    ] {
        check(
            &spec,
            path,
            "get",
            &api.get(&format!("/api/jobs/{crawl}/{sub}")).await,
        );
    }
    check(
        &spec,
        "/api/jobs",
        "get",
        &api.get("/api/jobs?limit=1").await,
    );
    check(
        &spec,
        "/api/jobs/{id}/cancel",
        "delete",
        &api.delete(&format!("/api/jobs/{crawl}/cancel")).await,
    );

    let r = api.post("/api/map", &json!({"url": site.url("/")})).await;
    check(&spec, "/api/map", "post", &r);
    let map = r.body["job_id"].as_str().unwrap().to_string();
    api.wait(&map, WAIT).await;
    check(
        &spec,
        "/api/jobs/{id}",
        "get",
        &api.get(&format!("/api/jobs/{map}")).await,
    );
    check(
        &spec,
        "/api/search",
        "post",
        &api.post("/api/search", &json!({"query": "x"})).await,
    );

    let r = api
        .post(
            "/api/monitors",
            &json!({"url": site.url("/"), "notify_url": site.url("/hook")}),
        )
        .await;
    check(&spec, "/api/monitors", "post", &r);
    let monitor = r.body["monitor_id"].as_str().unwrap().to_string();
    check(
        &spec,
        "/api/monitors",
        "get",
        &api.get("/api/monitors").await,
    );
    check(
        &spec,
        "/api/monitors/{id}",
        "get",
        &api.get(&format!("/api/monitors/{monitor}")).await,
    );
    let r = api
        .send(
            reqwest::Method::PATCH,
            &format!("/api/monitors/{monitor}"),
            Some(&json!({"status": "paused"})),
        )
        .await;
    check(&spec, "/api/monitors/{id}", "patch", &r);

    // Errors: invalid, missing, finished.
    check(
        &spec,
        "/api/crawl",
        "post",
        &api.post("/api/crawl", &json!({"url": "ftp://x"})).await,
    );
    check(
        &spec,
        "/api/jobs/{id}",
        "get",
        &api.get("/api/jobs/job_01JD0000000000000000000000").await,
    );
    check(
        &spec,
        "/api/jobs/{id}/cancel",
        "delete",
        &api.delete(&format!("/api/jobs/{scrape}/cancel")).await,
    );
    check(
        &spec,
        "/api/jobs",
        "get",
        &api.get("/api/jobs?limit=0").await,
    );
}
