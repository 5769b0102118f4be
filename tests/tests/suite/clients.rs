//! SECURITY.md V7: the API server bounds its clients. Slow and idle connections are closed, a
//! declared length over the limit is refused before its body, and thousands of slow clients do
//! not keep anyone else from being served.

use e2e::Serve;
use serde_json::json;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const KEY: &str = "client-key-0123456789";

fn addr(serve: &Serve) -> String {
    serve.base.trim_start_matches("http://").to_string()
}

/// Reads until the server closes the connection (or `within` passes): what it sent, and
/// whether it closed.
async fn read_to_close(stream: &mut TcpStream, within: Duration) -> (String, bool) {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let deadline = tokio::time::Instant::now() + within;
    loop {
        match tokio::time::timeout_at(deadline, stream.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return (String::from_utf8_lossy(&got).into(), true),
            Ok(Ok(n)) => got.extend_from_slice(&buf[..n]),
            Err(_) => return (String::from_utf8_lossy(&got).into(), false),
        }
    }
}

/// Lets this test process open thousands of sockets.
fn raise_open_files() {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: plain calls on a struct owned here.
    unsafe {
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim);
        lim.rlim_cur = lim.rlim_max;
        libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn slow_idle_and_oversized_clients_are_cut_off() {
    let serve = Serve::with(
        &["--header-timeout", "2", "--idle-timeout", "3"],
        &[("SARVCRAWL_API_KEYS", &format!("u:{KEY}"))],
    );
    let at = addr(&serve);

    // A head that never ends is closed after the header timeout.
    let started = Instant::now();
    let mut slow = TcpStream::connect(&at).await.unwrap();
    slow.write_all(b"GET /api/health HTTP/1.1\r\nHost: x\r\n")
        .await
        .unwrap();
    let (_, closed) = read_to_close(&mut slow, Duration::from_secs(10)).await;
    assert!(closed, "a slow head was not cut off");
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(1800) && took < Duration::from_secs(6),
        "{took:?}"
    );

    // A connection that says nothing is closed after the idle timeout, and so is one that
    // stays silent after a request.
    let started = Instant::now();
    let mut idle = TcpStream::connect(&at).await.unwrap();
    let (_, closed) = read_to_close(&mut idle, Duration::from_secs(10)).await;
    assert!(closed);
    assert!(
        started.elapsed() >= Duration::from_millis(2800),
        "{:?}",
        started.elapsed()
    );
    let mut kept = TcpStream::connect(&at).await.unwrap();
    kept.write_all(b"GET /api/health HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let (answer, closed) = read_to_close(&mut kept, Duration::from_secs(10)).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(closed, "an idle keep-alive connection was kept");

    // A declared length over the limit is answered at once, without waiting for the body.
    let started = Instant::now();
    let mut big = TcpStream::connect(&at).await.unwrap();
    let head = format!(
        "POST /api/upload HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\n\
         Content-Type: text/html\r\nContent-Length: 99999999999999\r\n\r\n"
    );
    big.write_all(head.as_bytes()).await.unwrap();
    let mut answer = String::new();
    let mut buf = [0u8; 4096];
    while !answer.contains("PAYLOAD_TOO_LARGE") {
        let n = tokio::time::timeout(Duration::from_secs(5), big.read(&mut buf))
            .await
            .expect("an answer at once")
            .unwrap();
        assert!(n > 0, "closed without an answer: {answer}");
        answer.push_str(&String::from_utf8_lossy(&buf[..n]));
    }
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert!(
        answer.to_ascii_lowercase().contains("connection: close"),
        "{answer}"
    );
    let took = started.elapsed();
    assert!(took < Duration::from_secs(2), "{took:?}");
    // Nothing was stored.
    let jobs = serve.api(Some(KEY)).get("/api/jobs").await;
    assert_eq!(jobs.body["jobs"], json!([]));
}

#[tokio::test(flavor = "multi_thread")]
async fn connections_over_the_cap_are_closed_at_once() {
    let serve = Serve::with(&["--max-connections", "20"], &[]);
    let at = addr(&serve);
    let mut held = Vec::new();
    for _ in 0..20 {
        let mut s = TcpStream::connect(&at).await.unwrap();
        s.write_all(b"GET /api/health HTTP/1.1\r\n").await.unwrap();
        held.push(s);
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut extra = TcpStream::connect(&at).await.unwrap();
    let _ = extra
        .write_all(b"GET /api/health HTTP/1.1\r\nHost: x\r\n\r\n")
        .await;
    let (answer, closed) = read_to_close(&mut extra, Duration::from_secs(3)).await;
    assert!(closed && answer.is_empty(), "{answer}");
    // Once the holders let go, the server answers again.
    drop(held);
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        if let Ok(r) = reqwest::get(format!("{}/api/health", serve.base)).await {
            if r.status() == 200 {
                break;
            }
        }
        assert!(Instant::now() < deadline, "the server did not recover");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn two_thousand_slow_clients_do_not_starve_the_others() {
    raise_open_files();
    let serve = Serve::with(&[], &[("SARVCRAWL_API_KEYS", &format!("u:{KEY}"))]);
    let at = addr(&serve);
    // 2,000 connections that each send a head byte by byte, slower than anyone reads.
    let attackers: Vec<_> = (0..2000)
        .map(|_| {
            let at = at.clone();
            tokio::spawn(async move {
                let Ok(mut s) = TcpStream::connect(&at).await else {
                    return false;
                };
                let head = b"POST /api/scrape HTTP/1.1\r\nHost: x\r\nX-Padding: aaaaaaaaaaaa";
                for b in head.iter().cycle().take(40) {
                    if s.write_all(&[*b]).await.is_err() {
                        return true;
                    }
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
                true
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let connected = attackers.iter().filter(|a| !a.is_finished()).count();
    assert!(
        connected >= 1900,
        "only {connected} slow clients are connected"
    );

    let api = serve.api(Some(KEY));
    for _ in 0..5 {
        let t = Instant::now();
        let health = reqwest::get(format!("{}/api/health", serve.base))
            .await
            .unwrap();
        assert_eq!(health.status(), 200);
        let health_took = t.elapsed();
        let t = Instant::now();
        let r = api
            .post("/api/map", &json!({"url": "https://example.com/"}))
            .await;
        let submit_took = t.elapsed();
        assert_eq!(r.status, 202, "{}", r.body);
        assert!(
            health_took < Duration::from_secs(1),
            "health took {health_took:?}"
        );
        assert!(
            submit_took < Duration::from_secs(1),
            "a submit took {submit_took:?}"
        );
        api.delete(&format!(
            "/api/jobs/{}/cancel",
            r.body["job_id"].as_str().unwrap()
        ))
        .await;
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    for a in attackers {
        a.abort();
    }
}
