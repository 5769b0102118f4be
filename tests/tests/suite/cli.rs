//! The client commands run as a user would, against `serve`: waiting, deadlines, JSON output,
//! trees and results, and the manners: a lost submit answer retried with its key (one job), a
//! 429 waited out, few polls for a slow job.

use e2e::{tree_site, FirstPost, Proxy, Route, Serve, Site};
use serde_json::Value;
use std::collections::HashMap;
use std::time::Duration;

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

/// Runs `sarvcrawl --api-url <api> <args>` to its end.
async fn cli(api: &str, args: &[&str]) -> Run {
    cli_reading(api, args, "").await
}

/// [`cli`] with `input` on its standard input.
async fn cli_reading(api: &str, args: &[&str], input: &str) -> Run {
    use std::io::Write;
    let mut cmd = std::process::Command::new(e2e::server::binary());
    cmd.arg("--api-url").arg(api).args(args);
    cmd.env_remove("SARVCRAWL_API_KEY");
    cmd.stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let input = input.to_string();
    let out = tokio::task::spawn_blocking(move || {
        let mut child = cmd.spawn()?;
        if let Some(mut stdin) = child.stdin.take() {
            stdin.write_all(input.as_bytes())?;
        }
        child.wait_with_output()
    })
    .await
    .unwrap()
    .expect("run sarvcrawl");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// The job id a command's stderr names.
fn named_job(stderr: &str) -> String {
    stderr
        .split_whitespace()
        .find(|w| w.starts_with("job_"))
        .expect("the job id is named")
        .to_string()
}

fn page_site(pause: Option<Duration>) -> HashMap<String, Route> {
    let html = Route::Html(
        "<html><head><title>CLI page</title></head><body><h1>Hello CLI</h1><p>Body text.</p></body></html>"
            .into(),
    );
    let mut routes = HashMap::new();
    routes.insert(
        "/page".to_string(),
        match pause {
            Some(p) => Route::Slow(p, Box::new(html)),
            None => html,
        },
    );
    routes
}

#[tokio::test(flavor = "multi_thread")]
async fn scrape_wait_prints_the_document_and_crawl_json_ends_with_the_job() {
    let site = Site::start(page_site(None)).await;
    let serve = Serve::with(&["--allow-net", "127.0.0.1/32", "--no-render"], &[]);
    let r = cli(&serve.base, &["scrape", &site.url("/page"), "--wait"]).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.stdout.trim(), "# Hello CLI\n\nBody text.");
    assert!(r.stderr.contains("job job_"), "{}", r.stderr);

    let tree = Site::start(tree_site(13)).await;
    let dir = tempfile::tempdir().unwrap();
    let job_file = dir.path().join("job");
    let r = cli(
        &serve.base,
        &[
            "crawl",
            &tree.url("/"),
            "--no-sitemap",
            "--wait",
            "--json",
            "--job-file",
            job_file.to_str().unwrap(),
        ],
    )
    .await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    let last: Value = serde_json::from_str(r.stdout.lines().last().unwrap()).unwrap();
    assert_eq!(last["status"], "completed");
    assert_eq!(last["progress"]["pages_completed"], 13);
    let id = std::fs::read_to_string(&job_file)
        .unwrap()
        .trim()
        .to_string();
    assert_eq!(last["job_id"], id.as_str());

    let r = cli(&serve.base, &["tree", &id]).await;
    assert_eq!(r.code, 0);
    assert_eq!(
        r.stdout
            .lines()
            .filter(|l| l.trim_start().starts_with('✓'))
            .count(),
        13
    );
    assert!(
        r.stdout
            .lines()
            .any(|l| l.starts_with("  ✓ ") && l.ends_with("/p/1.html (200)")),
        "{}",
        r.stdout
    );
    let out = dir.path().join("pages");
    let r = cli(
        &serve.base,
        &["results", &id, "--all", "--out", out.to_str().unwrap()],
    )
    .await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(std::fs::read_dir(&out).unwrap().count(), 13);

    let r = cli(
        &serve.base,
        &[
            "scrape",
            &site.url("/page"),
            "--render",
            "--wait-for",
            "main",
        ],
    )
    .await;
    assert_eq!(r.code, 6);
    assert!(r.stderr.contains("503 RENDER_UNAVAILABLE"), "{}", r.stderr);
    let r = cli(
        &serve.base,
        &["scrape", &site.url("/page"), "--header", "Host: x"],
    )
    .await;
    assert_eq!(r.code, 6);
    assert!(
        r.stderr.contains("headers: \"Host\" cannot be set"),
        "{}",
        r.stderr
    );

    let r = cli(&serve.base, &["status", "job_01JD0000000000000000000000"]).await;
    assert_eq!(r.code, 6);
    assert!(r.stderr.contains("NOT_FOUND"), "{}", r.stderr);
    // An id is one path segment, whatever its text: this one does not reach the health route.
    let r = cli(&serve.base, &["status", "x/../../health"]).await;
    assert_eq!(r.code, 6, "{}", r.stdout);
    assert!(r.stderr.contains("NOT_FOUND"), "{}", r.stderr);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_deadline_names_the_job_and_can_cancel_it() {
    let site = Site::start(page_site(Some(Duration::from_secs(10)))).await;
    let serve = Serve::start();
    let api = serve.api(None);
    let r = cli(
        &serve.base,
        &[
            "scrape",
            &site.url("/page"),
            "--wait",
            "--deadline",
            "1s",
            "--on-deadline",
            "cancel",
        ],
    )
    .await;
    assert_eq!(r.code, 4, "{}", r.stderr);
    let id = named_job(&r.stderr);
    assert!(
        r.stderr.contains(&format!("deadline passed; job {id}")),
        "{}",
        r.stderr
    );
    assert_eq!(api.job(&id).await["status"], "cancelled");

    let r = cli(
        &serve.base,
        &["scrape", &site.url("/page"), "--wait", "--deadline", "1s"],
    )
    .await;
    assert_eq!(r.code, 4, "{}", r.stderr);
    let id = named_job(&r.stderr);
    assert_eq!(api.job(&id).await["status"], "running", "left running");

    let keyed = Serve::with(
        &["--allow-net", "127.0.0.1/32"],
        &[("SARVCRAWL_API_KEYS", "alice:alice-key-0123456789")],
    );
    let r = cli(&keyed.base, &["jobs"]).await;
    assert_eq!(r.code, 5, "{}", r.stderr);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_lost_submit_answer_is_retried_with_the_same_key() {
    let site = Site::start(page_site(None)).await;
    let serve = Serve::start();
    let proxy = Proxy::start(&serve.base, FirstPost::DropAnswer).await;
    let r = cli(&proxy.base, &["scrape", &site.url("/page")]).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    let posts = proxy.seen().iter().filter(|s| s.method == "POST").count();
    assert_eq!(posts, 2, "the submit was sent again");
    let jobs = serve.api(None).get("/api/jobs").await.body;
    let jobs = jobs["jobs"].as_array().unwrap();
    assert_eq!(jobs.len(), 1, "exactly one job");
    assert_eq!(r.stdout.trim(), jobs[0]["job_id"].as_str().unwrap());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_429_is_waited_out_before_the_next_request() {
    let site = Site::start(page_site(None)).await;
    let serve = Serve::start();
    let proxy = Proxy::start(&serve.base, FirstPost::Busy(2)).await;
    let r = cli(&proxy.base, &["scrape", &site.url("/page")]).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    let seen = proxy.seen();
    assert_eq!(seen.len(), 2);
    let gap = seen[1].at - seen[0].at;
    assert!(gap >= Duration::from_secs(2), "retried after {gap:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_slow_job_is_polled_a_few_times() {
    // Five pages 5 s apart: a crawl of about 20 s.
    let site = Site::start(tree_site(5)).await;
    let serve = Serve::start();
    let proxy = Proxy::start(&serve.base, FirstPost::Forward).await;
    let args = [
        "crawl",
        &site.url("/"),
        "--no-sitemap",
        "--delay-ms",
        "5000",
        "--wait",
        "--json",
    ];
    let started = std::time::Instant::now();
    let r = cli(&proxy.base, &args).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    let took = started.elapsed();
    assert!(took >= Duration::from_secs(19), "a job of about 20 s");
    let polls = proxy
        .seen()
        .iter()
        .filter(|s| s.method == "GET" && s.path.starts_with("/api/jobs/"))
        .count();
    // Backing off from half a second, about seven polls in 20 s; a busy machine that makes
    // the job last longer gets a few more, never one every two seconds (a client polling at
    // a fixed half second would make 40).
    let most = 2 + took.as_secs() as usize / 2;
    assert!(
        (2..=most).contains(&polls),
        "{polls} polls for a job of {took:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn results_out_gives_every_document_a_file_of_its_own() {
    // Three URLs whose file names would be the same.
    let page = |t: &str| Route::Html(format!("<p>{t}</p>"));
    let routes: HashMap<String, Route> = [
        (
            "/".to_string(),
            Route::Html(r#"<a href="/x/y">1</a><a href="/x_y">2</a><a href="/x?y">3</a>"#.into()),
        ),
        ("/x/y".to_string(), page("slash")),
        ("/x_y".to_string(), page("underscore")),
        ("/x".to_string(), page("query")),
    ]
    .into();
    let site = Site::start(routes).await;
    let serve = Serve::with(&["--allow-net", "127.0.0.1/32", "--no-render"], &[]);
    let r = cli(
        &serve.base,
        &["crawl", &site.url("/"), "--no-sitemap", "--wait", "--json"],
    )
    .await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    let last: Value = serde_json::from_str(r.stdout.lines().last().unwrap()).unwrap();
    assert_eq!(last["progress"]["pages_completed"], 4);
    let id = last["job_id"].as_str().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("pages");
    let r = cli(
        &serve.base,
        &["results", id, "--all", "--out", out.to_str().unwrap()],
    )
    .await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stderr.contains("4 documents written"), "{}", r.stderr);
    let mut texts: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap())
        .collect();
    texts.sort();
    assert_eq!(texts.len(), 4);
    for t in ["query", "slash", "underscore"] {
        assert!(texts.iter().any(|x| x == t), "{t} missing: {texts:?}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn batch_reads_a_file_of_urls_waits_and_writes_each_document() {
    let site = Site::start(tree_site(6)).await;
    let serve = Serve::start();
    let dir = tempfile::tempdir().unwrap();
    let list = dir.path().join("urls.txt");
    let mut text = String::from("# pages to read\n\n");
    for i in 1..=5 {
        text.push_str(&format!("  {}\n", site.url(&format!("/p/{i}.html"))));
    }
    text.push_str("not a url\n");
    std::fs::write(&list, text).unwrap();
    let out = dir.path().join("docs");
    let args = [
        "batch",
        list.to_str().unwrap(),
        "--ignore-invalid-urls",
        "--wait",
        "--out",
        out.to_str().unwrap(),
    ];
    let r = cli(&serve.base, &args).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stderr.contains("1 invalid URLs ignored:\n  not a url"),
        "{}",
        r.stderr
    );
    assert!(r.stderr.contains("5 documents written"), "{}", r.stderr);
    let mut written: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap())
        .collect();
    written.sort();
    assert_eq!(written.len(), 5);
    assert!(written[0].contains("# Page 1"), "{}", written[0]);

    // Without --ignore-invalid-urls the list is refused, naming the line's entry.
    let r = cli(&serve.base, &["batch", list.to_str().unwrap()]).await;
    assert_eq!(r.code, 6, "{}", r.stderr);
    assert!(r.stderr.contains("urls[5]"), "{}", r.stderr);
    // --out needs --wait.
    let r = cli(
        &serve.base,
        &["batch", list.to_str().unwrap(), "--out", "x"],
    )
    .await;
    assert_eq!(r.code, 2, "{}", r.stderr);
}

#[tokio::test(flavor = "multi_thread")]
async fn scrape_out_writes_the_markdown_and_the_screenshot_beside_it() {
    let site = Site::start(page_site(None)).await;
    let serve = Serve::start();
    let out = tempfile::tempdir().unwrap();
    let dir = out.path().join("pages");
    let url = site.url("/page");
    let args = [
        "scrape",
        url.as_str(),
        "--render",
        "--screenshot",
        "--window",
        "640x480",
        "--out",
        dir.to_str().unwrap(),
    ];
    let r = cli(&serve.base, &args).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stderr.contains("1 screenshots written"), "{}", r.stderr);
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    assert_eq!(files.len(), 2, "{files:?}");
    assert_eq!(files[0].with_extension("png"), files[1], "{files:?}");
    let markdown = std::fs::read_to_string(&files[0]).unwrap();
    assert!(markdown.contains("# Hello CLI"), "{markdown}");
    let png = std::fs::read(&files[1]).unwrap();
    let info = png::Decoder::new(std::io::Cursor::new(png))
        .read_info()
        .unwrap()
        .info()
        .clone();
    assert_eq!((info.width, info.height), (640, 480));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_big_upload_goes_where_the_deployment_takes_it() {
    let serve = Serve::start();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("big.pdf");
    std::fs::write(&file, e2e::pdf_padded(&["Big report page"], 12 << 20)).unwrap();
    let r = cli(
        &serve.base,
        &[
            "upload",
            file.to_str().unwrap(),
            "--format",
            "markdown",
            "--wait",
        ],
    )
    .await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stdout.contains("## Page 1\n\nBig report page"),
        "{}",
        r.stdout
    );
    // On AWS the document went through the link the API answered with, not the API itself;
    // the embedded server took it as the body.
    let linked = r.stderr.contains("to the link the API gave");
    assert_eq!(linked, e2e::server::aws_backend(), "{}", r.stderr);
    let id = named_job(&r.stderr);
    let job = serve.api(None).job(&id).await;
    assert_eq!(job["status"], "completed", "{job}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_webhook_from_the_command_line_is_signed_with_the_secret_it_shows() {
    let site = Site::start(page_site(None)).await;
    let receiver = e2e::Receiver::start(&[]).await;
    let serve = Serve::start();
    let secret = cli(&serve.base, &["webhook-secret"]).await;
    assert_eq!(secret.code, 0, "{}", secret.stderr);
    let secret = secret.stdout.trim().to_string();
    assert!(secret.starts_with("whsec_"), "{secret}");
    let run = cli(
        &serve.base,
        &[
            "scrape",
            &site.url("/page"),
            "--webhook",
            &receiver.url("/hook"),
            "--webhook-events",
            "job.completed",
            "--webhook-metadata",
            r#"{"from":"cli"}"#,
            "--wait",
        ],
    )
    .await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    let id = named_job(&run.stderr);
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while receiver.received().is_empty() {
        assert!(std::time::Instant::now() < deadline, "no delivery");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let got = receiver.received();
    let event: Value = serde_json::from_slice(&got[0].body).unwrap();
    assert_eq!(event["type"], "job.completed");
    assert_eq!(event["job_id"], id.as_str());
    assert_eq!(event["metadata"]["from"], "cli");
    // The delivery is counted once its receiver has answered.
    loop {
        let status = cli(&serve.base, &["status", &id]).await;
        if status
            .stdout
            .contains("webhook 1 delivered, 0 failed, 0 pending")
        {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{}", status.stdout);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let rotated = cli(&serve.base, &["webhook-secret", "--rotate"]).await;
    assert_eq!(rotated.code, 0, "{}", rotated.stderr);
    assert_ne!(rotated.stdout.trim(), secret);
    assert!(rotated
        .stderr
        .contains("the previous secret signs too until"));
    let bad = cli(
        &serve.base,
        &[
            "scrape",
            &site.url("/page"),
            "--webhook",
            &receiver.url("/"),
            "--webhook-metadata",
            "{",
        ],
    )
    .await;
    assert_ne!(bad.code, 0);
    assert!(
        bad.stderr.contains("--webhook-metadata is not JSON"),
        "{}",
        bad.stderr
    );
}
