//! The browser's only way out (SECURITY.md S9): an HTTP forward proxy on loopback that
//! resolves each destination itself, refuses any the address guard blocks, and connects to the
//! address it checked (S4, S5). Plain requests, `CONNECT` tunnels (HTTPS, WebSockets) and every
//! redirect hop arrive as separate requests, so each is checked (S6).

use sarvcrawl_core::engine::guard::{resolve_checked, AddressPolicy};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::{JoinHandle, JoinSet};

/// Longest request head the proxy reads.
const MAX_HEAD: usize = 64 * 1024;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Blocked destinations remembered per proxy (the rest are only counted out).
const MAX_BLOCKED: usize = 50;

/// A guarded proxy serving one browser context; stops (with its connections) when dropped.
pub struct GuardProxy {
    addr: SocketAddr,
    blocked: Arc<Mutex<Vec<String>>>,
    task: JoinHandle<()>,
}

impl GuardProxy {
    /// Listens on an ephemeral loopback port.
    pub async fn start(policy: Arc<AddressPolicy>) -> std::io::Result<Self> {
        let listener = TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, 0)).await?;
        let addr = listener.local_addr()?;
        let blocked = Arc::new(Mutex::new(Vec::new()));
        let task = tokio::spawn(serve(listener, policy, blocked.clone()));
        Ok(GuardProxy {
            addr,
            blocked,
            task,
        })
    }

    /// The proxy's address in the form Chromium's `proxyServer` takes.
    pub fn server(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The destinations refused so far, in order, each once.
    pub fn blocked(&self) -> Vec<String> {
        self.blocked.lock().map(|b| b.clone()).unwrap_or_default()
    }
}

impl Drop for GuardProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn serve(
    listener: TcpListener,
    policy: Arc<AddressPolicy>,
    blocked: Arc<Mutex<Vec<String>>>,
) {
    // Dropping the set (when this task is aborted) aborts every open connection.
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((client, _)) = accepted else { continue };
                connections.spawn(handle(client, policy.clone(), blocked.clone()));
            }
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}

/// A parsed request head: method, target and the raw header lines after the request line.
struct Head {
    method: String,
    target: String,
    version: String,
    headers: Vec<String>,
}

async fn handle(
    mut client: TcpStream,
    policy: Arc<AddressPolicy>,
    blocked: Arc<Mutex<Vec<String>>>,
) {
    let Some((head, rest)) = read_head(&mut client).await else {
        return;
    };
    let destination = if head.method.eq_ignore_ascii_case("CONNECT") {
        authority(&head.target)
    } else {
        url::Url::parse(&head.target)
            .ok()
            .filter(|u| u.scheme() == "http")
            .and_then(|u| Some((u.host_str()?.to_string(), u.port_or_known_default()?)))
    };
    let Some((host, port)) = destination else {
        let _ = client
            .write_all(answer(400, "Bad Request").as_bytes())
            .await;
        return;
    };
    let Some(mut server) = connect(&policy, &host, port).await else {
        record(&blocked, &head);
        // A tunnel is refused with a status; a plain request gets no answer at all, so the
        // browser sees a network error rather than a page at the refused URL.
        if head.method.eq_ignore_ascii_case("CONNECT") {
            let _ = client.write_all(answer(403, "Forbidden").as_bytes()).await;
        }
        return;
    };
    if head.method.eq_ignore_ascii_case("CONNECT") {
        if client
            .write_all(b"HTTP/1.1 200 Connection Established\r\n\r\n")
            .await
            .is_err()
        {
            return;
        }
    } else if server
        .write_all(origin_form(&head).as_bytes())
        .await
        .is_err()
    {
        return;
    }
    if !rest.is_empty() && server.write_all(&rest).await.is_err() {
        return;
    }
    let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
}

/// Connects to `host:port` when the guard allows every address it resolves to; `None` when
/// it does not (or nothing answers).
async fn connect(policy: &AddressPolicy, host: &str, port: u16) -> Option<TcpStream> {
    let addrs = resolve_checked(policy, host, port).await.ok()??;
    for addr in addrs {
        if let Ok(Ok(s)) = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(addr)).await {
            return Some(s);
        }
    }
    None
}

fn record(blocked: &Mutex<Vec<String>>, head: &Head) {
    let what = if head.method.eq_ignore_ascii_case("CONNECT") {
        head.target.clone()
    } else {
        head.target.chars().take(300).collect()
    };
    if let Ok(mut b) = blocked.lock() {
        if !b.contains(&what) && b.len() < MAX_BLOCKED {
            b.push(what);
        }
    }
}

fn answer(code: u16, reason: &str) -> String {
    format!("HTTP/1.1 {code} {reason}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
}

/// `host:port` of a `CONNECT` target (IPv6 literals in brackets).
fn authority(target: &str) -> Option<(String, u16)> {
    let (host, port) = target.rsplit_once(':')?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    Some((host.to_string(), port.parse().ok()?)).filter(|(h, _)| !h.is_empty())
}

/// The head to send the origin server: the path instead of the absolute URL, hop-by-hop
/// headers dropped, and `Connection: close` so one connection carries one request.
fn origin_form(head: &Head) -> String {
    let path = url::Url::parse(&head.target)
        .map(|u| {
            let mut p = u.path().to_string();
            if let Some(q) = u.query() {
                p.push('?');
                p.push_str(q);
            }
            p
        })
        .unwrap_or_else(|_| "/".into());
    let mut out = format!("{} {} {}\r\n", head.method, path, head.version);
    for line in &head.headers {
        let name = line.split(':').next().unwrap_or_default().trim();
        if [
            "connection",
            "proxy-connection",
            "keep-alive",
            "proxy-authorization",
        ]
        .iter()
        .any(|h| name.eq_ignore_ascii_case(h))
        {
            continue;
        }
        out.push_str(line);
        out.push_str("\r\n");
    }
    out.push_str("Connection: close\r\n\r\n");
    out
}

/// Reads up to the end of the request head; returns it parsed and whatever followed it.
async fn read_head(stream: &mut (impl AsyncRead + Unpin)) -> Option<(Head, Vec<u8>)> {
    let mut buf = Vec::with_capacity(4096);
    let end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i;
        }
        if buf.len() > MAX_HEAD {
            return None;
        }
        let mut chunk = [0u8; 4096];
        let n = tokio::time::timeout(CONNECT_TIMEOUT, stream.read(&mut chunk))
            .await
            .ok()?
            .ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let text = std::str::from_utf8(&buf[..end]).ok()?;
    let mut lines = text.split("\r\n");
    let mut first = lines.next()?.split(' ');
    let head = Head {
        method: first.next()?.to_string(),
        target: first.next()?.to_string(),
        version: first.next()?.to_string(),
        headers: lines.map(str::to_string).collect(),
    };
    Some((head, buf[end + 4..].to_vec()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connect_targets_parse() {
        assert_eq!(
            authority("example.com:443"),
            Some(("example.com".into(), 443))
        );
        assert_eq!(authority("[::1]:8080"), Some(("::1".into(), 8080)));
        assert_eq!(authority(":443"), None);
        assert_eq!(authority("example.com"), None);
    }

    #[test]
    fn plain_requests_go_out_in_origin_form_without_hop_headers() {
        let head = Head {
            method: "GET".into(),
            target: "http://example.com:8080/a/b?x=1".into(),
            version: "HTTP/1.1".into(),
            headers: vec![
                "Host: example.com:8080".into(),
                "Proxy-Connection: keep-alive".into(),
                "Accept: */*".into(),
            ],
        };
        assert_eq!(
            origin_form(&head),
            "GET /a/b?x=1 HTTP/1.1\r\nHost: example.com:8080\r\nAccept: */*\r\nConnection: close\r\n\r\n"
        );
    }
}
