//! SECURITY.md T4: one auth rule on every backend. `serve --backend aws` keeps its keys in the
//! table: with none anywhere it serves loopback only, as the one open user; with keys in the
//! table every request is checked against them. These tests run on the AWS emulator that
//! `scripts/test.sh` starts, whichever backend the rest of the suite uses.

use e2e::server::{binary, bootstrap_aws};
use e2e::Serve;
use serde_json::json;
use std::time::{Duration, Instant};

/// Adds an API key for `user` to the table of the resources `envs` names and returns it.
fn add_key(envs: &[(String, String)], user: &str) -> String {
    let out = std::process::Command::new(binary())
        .args(["aws", "add-key", user])
        .envs(envs.iter().cloned())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[test]
fn without_keys_a_public_address_is_refused_on_the_aws_backend() {
    let dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(binary())
        .args([
            "serve",
            "--backend",
            "aws",
            "--addr",
            "0.0.0.0:0",
            "--data-dir",
        ])
        .arg(dir.path())
        .envs(bootstrap_aws())
        .env_remove("SARVCRAWL_API_KEYS")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("without API keys"), "{err}");
}

#[tokio::test(flavor = "multi_thread")]
async fn keys_in_the_table_are_checked_on_every_request() {
    // Keys first, then a server: it is keyed from the start, even on every address.
    let resources = bootstrap_aws();
    let key = add_key(&resources, "alice");
    let serve = Serve::on_aws("0.0.0.0:0", &[], resources);
    let api = serve.api(Some(&key));
    assert_eq!(serve.api(None).get("/api/health").await.status, 200);
    for bad in [None, Some("sc_not-a-key-0123456789"), Some("")] {
        let r = serve.api(bad).get("/api/jobs").await;
        assert_eq!(r.status, 401, "{bad:?}");
        assert_eq!(r.body["error"]["code"], "UNAUTHORIZED");
    }
    let r = api
        .post("/api/scrape", &json!({"url": "https://example.com/"}))
        .await;
    assert_eq!(r.status, 202, "{}", r.body);
    let listed = api.get("/api/jobs").await;
    assert_eq!(listed.status, 200);
    assert_eq!(listed.body["jobs"].as_array().unwrap().len(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_open_server_closes_once_a_key_is_added() {
    let resources = bootstrap_aws();
    let serve = Serve::on_aws("127.0.0.1:0", &[], resources.clone());
    assert_eq!(serve.api(None).get("/api/jobs").await.status, 200);
    let key = add_key(&resources, "bob");
    // The server looks for keys again within seconds; from then on every request needs one.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let status = serve.api(None).get("/api/jobs").await.status;
        if status == 401 {
            break;
        }
        assert_eq!(status, 200);
        assert!(
            Instant::now() < deadline,
            "still open after a key was added"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(serve.api(Some(&key)).get("/api/jobs").await.status, 200);
    assert_eq!(
        serve
            .api(Some("sc_bogus-0123456789abcdef"))
            .get("/api/jobs")
            .await
            .status,
        401
    );
}
