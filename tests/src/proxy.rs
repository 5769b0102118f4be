//! A recording HTTP/1.1 proxy in front of a server, for client tests: it logs every request
//! and can misbehave on the first submit (drop its answer after forwarding it, or answer 429
//! itself).

use std::sync::{Arc, Mutex};
use std::time::Instant;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

/// How the proxy treats the first POST it sees.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FirstPost {
    Forward,
    /// Forward it, then close the connection without an answer (a lost response).
    DropAnswer,
    /// Answer 429 with this `Retry-After` without forwarding.
    Busy(u64),
}

/// One request the proxy saw: method, path (with query) and when.
#[derive(Clone, Debug)]
pub struct Seen {
    pub method: String,
    pub path: String,
    pub at: Instant,
}

#[derive(Default)]
struct State {
    seen: Vec<Seen>,
    posts: usize,
}

/// The proxy on 127.0.0.1.
pub struct Proxy {
    pub base: String,
    state: Arc<Mutex<State>>,
}

impl Proxy {
    pub async fn start(upstream: &str, first_post: FirstPost) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind proxy");
        let base = format!("http://{}", listener.local_addr().expect("proxy address"));
        let state = Arc::new(Mutex::new(State::default()));
        let (upstream, shared) = (upstream.to_string(), state.clone());
        tokio::spawn(async move {
            let client = reqwest::Client::new();
            while let Ok((sock, _)) = listener.accept().await {
                let (client, upstream, state) = (client.clone(), upstream.clone(), shared.clone());
                tokio::spawn(async move {
                    let _ = connection(sock, &client, &upstream, &state, first_post).await;
                });
            }
        });
        Proxy { base, state }
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.state
            .lock()
            .map(|s| s.seen.clone())
            .unwrap_or_default()
    }
}

async fn connection(
    sock: TcpStream,
    client: &reqwest::Client,
    upstream: &str,
    state: &Mutex<State>,
    first_post: FirstPost,
) -> std::io::Result<()> {
    let mut sock = BufReader::new(sock);
    loop {
        let mut head = String::new();
        loop {
            let mut line = String::new();
            if sock.read_line(&mut line).await? == 0 {
                return Ok(());
            }
            if line == "\r\n" {
                break;
            }
            head.push_str(&line);
        }
        let mut lines = head.lines();
        let request_line = lines.next().unwrap_or_default().to_string();
        let mut parts = request_line.split(' ');
        let (method, path) = (
            parts.next().unwrap_or_default().to_string(),
            parts.next().unwrap_or_default().to_string(),
        );
        let headers: Vec<(String, String)> = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
            .collect();
        let length = headers
            .iter()
            .find(|(k, _)| k == "content-length")
            .and_then(|(_, v)| v.parse().ok())
            .unwrap_or(0usize);
        let mut body = vec![0; length];
        sock.read_exact(&mut body).await?;
        let post_no = {
            let mut s = state.lock().unwrap_or_else(|p| p.into_inner());
            s.seen.push(Seen {
                method: method.clone(),
                path: path.clone(),
                at: Instant::now(),
            });
            if method == "POST" {
                s.posts += 1;
            }
            s.posts
        };
        let first = method == "POST" && post_no == 1;
        if let (true, FirstPost::Busy(after)) = (first, first_post) {
            let body = r#"{"error":{"code":"RATE_LIMITED","message":"slow down"}}"#;
            let answer = format!(
                "HTTP/1.1 429 Too Many Requests\r\nretry-after: {after}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
                body.len()
            );
            sock.get_mut().write_all(answer.as_bytes()).await?;
            continue;
        }
        let method_v =
            reqwest::Method::from_bytes(method.as_bytes()).unwrap_or(reqwest::Method::GET);
        let mut req = client
            .request(method_v, format!("{upstream}{path}"))
            .body(body);
        for (k, v) in &headers {
            if !matches!(k.as_str(), "host" | "content-length" | "connection") {
                req = req.header(k, v);
            }
        }
        let Ok(resp) = req.send().await else {
            return Ok(());
        };
        if first && first_post == FirstPost::DropAnswer {
            return Ok(()); // the server did the work; the client never hears of it
        }
        let status = resp.status();
        let mut answer = format!(
            "HTTP/1.1 {} {}\r\n",
            status.as_u16(),
            status.canonical_reason().unwrap_or("")
        );
        for (k, v) in resp.headers() {
            if !matches!(
                k.as_str(),
                "content-length" | "transfer-encoding" | "connection"
            ) {
                answer.push_str(&format!("{k}: {}\r\n", v.to_str().unwrap_or_default()));
            }
        }
        let bytes = resp.bytes().await.unwrap_or_default();
        answer.push_str(&format!("content-length: {}\r\n\r\n", bytes.len()));
        let out = sock.get_mut();
        out.write_all(answer.as_bytes()).await?;
        out.write_all(&bytes).await?;
    }
}
