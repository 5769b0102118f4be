//! The wire's HTTP/1.1 client: a request written in one piece on a kept connection and its
//! answer read whole in the calling task. A general client (reqwest over hyper) hands every
//! request to a connection task through channels and back, parses the URL again and builds a
//! header map each time; the wire's calls are small, many and all alike (a few known
//! headers, a body of known length, an answer read whole), so it speaks to AWS directly.
//!
//! Connections are kept per origin for [`IDLE_FOR`]; one found closed before it is reused is
//! dropped, and one that fails before a byte of its answer came is replaced by a new one for
//! a second try (a server may close a kept connection as a request is written on it).
//! Answers come with a length or chunked, or end with their connection; heads are read up
//! to [`MAX_HEAD`] and bodies up to the caller's cap.

use bytes::{Buf, Bytes, BytesMut};
use std::collections::HashMap;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;

/// How long a connection is kept unused.
const IDLE_FOR: Duration = Duration::from_secs(30);
/// Most connections kept unused per origin.
const MAX_IDLE: usize = 64;
/// The longest answer head read.
const MAX_HEAD: usize = 64 << 10;
/// Most header lines of an answer.
const MAX_HEADERS: usize = 64;
/// Most interim (`1xx`) answers before the answer.
const MAX_INTERIM: usize = 8;
/// A body up to this long is written with its head in one piece.
const WITH_HEAD: usize = 64 << 10;
/// An answer's body up to this long is copied out of the connection's read buffer, which the
/// next answer reuses; a longer one takes the buffer with it.
const COPIED: usize = 16 << 10;
/// A connection's read buffer grown past this (by a long chunk) is not kept with it.
const KEPT_BUFFER: usize = 64 << 10;

/// Where a connection goes.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Origin {
    pub tls: bool,
    /// The name or address connected to (an IPv6 address without brackets).
    pub host: String,
    pub port: u16,
}

impl Origin {
    /// The origin of `url`.
    pub fn of(url: &url::Url) -> Result<Self, String> {
        let tls = match url.scheme() {
            "https" => true,
            "http" => false,
            other => return Err(format!("{url}: scheme {other} is not http or https")),
        };
        let host = match url.host() {
            Some(url::Host::Domain(d)) => d.to_string(),
            Some(url::Host::Ipv4(a)) => a.to_string(),
            Some(url::Host::Ipv6(a)) => a.to_string(),
            None => return Err(format!("{url} has no host")),
        };
        let port = url
            .port_or_known_default()
            .ok_or_else(|| format!("{url} has no port"))?;
        Ok(Origin { tls, host, port })
    }

    /// This origin with another host name (S3's bucket hosts), on the same scheme and port.
    pub fn with_host(&self, host: &str) -> Self {
        Origin {
            tls: self.tls,
            host: host.to_string(),
            port: self.port,
        }
    }
}

/// A request: a method, the request target (an encoded path), the `host` header and the
/// other headers, and the body.
pub(crate) struct Request<'a> {
    pub method: &'a str,
    pub target: &'a str,
    pub host: &'a str,
    pub headers: &'a [(&'a str, &'a str)],
    pub body: &'a Bytes,
}

/// An answer: its status and its body.
pub(crate) struct Answer {
    pub status: u16,
    pub body: Bytes,
}

/// Why an exchange failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Error {
    #[error("connection: {0}")]
    Io(#[from] io::Error),
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    #[error("malformed answer: {0}")]
    Malformed(&'static str),
    #[error("request not written: {0}")]
    Request(&'static str),
    #[error("an answer over the cap")]
    Oversized,
}

impl Error {
    /// Whether the time ran out.
    pub fn is_timeout(&self) -> bool {
        matches!(self, Error::Timeout(_))
            || matches!(self, Error::Io(e) if e.kind() == io::ErrorKind::TimedOut)
    }
}

/// An exchange that failed before a byte of its answer came: on a kept connection, the
/// server had closed it, and a new one may be tried.
struct Stale(Error);

trait Io: AsyncRead + AsyncWrite + Send + Unpin {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin> Io for T {}

/// A connection and what was read on it past the last answer (nothing, between answers).
struct Conn {
    io: Box<dyn Io>,
    read: BytesMut,
}

/// The client: TLS settings and the kept connections; share it.
pub(crate) struct Http {
    tls: tokio_rustls::TlsConnector,
    connect: Duration,
    idle: Mutex<HashMap<Origin, Vec<(Conn, Instant)>>>,
}

impl Http {
    /// A client connecting within `connect` (TCP and TLS each), trusting the Web PKI's roots.
    pub fn new(connect: Duration) -> Result<Self, String> {
        Self::trusting(
            connect,
            rustls::RootCertStore {
                roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
            },
        )
    }

    /// A client trusting `roots`.
    fn trusting(connect: Duration, roots: rustls::RootCertStore) -> Result<Self, String> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("TLS: {e}"))?
            .with_root_certificates(roots)
            .with_no_client_auth();
        Ok(Http {
            tls: tokio_rustls::TlsConnector::from(Arc::new(config)),
            connect,
            idle: Mutex::new(HashMap::new()),
        })
    }

    /// Sends `request` to `origin`; its answer, with a body of at most `cap` bytes.
    pub async fn send(
        &self,
        origin: &Origin,
        request: &Request<'_>,
        cap: usize,
    ) -> Result<Answer, Error> {
        let head = head(request)?;
        let plain = |e: Result<Error, Stale>| e.unwrap_or_else(|Stale(e)| e);
        if let Some(conn) = self.take(origin) {
            match self
                .exchange_on(conn, origin, &head, request.body, cap)
                .await
            {
                // Closed as it was reused: again on a new connection.
                Err(Err(Stale(_))) => {}
                done => return done.map_err(plain),
            }
        }
        let conn = self.connect(origin).await?;
        self.exchange_on(conn, origin, &head, request.body, cap)
            .await
            .map_err(plain)
    }

    /// [`exchange`] on `conn`, kept afterwards when it may be.
    async fn exchange_on(
        &self,
        mut conn: Conn,
        origin: &Origin,
        head: &[u8],
        body: &Bytes,
        cap: usize,
    ) -> Result<Answer, Result<Error, Stale>> {
        let (answer, keep) = exchange(&mut conn, head, body, cap).await?;
        if keep {
            self.keep(origin, conn);
        }
        Ok(answer)
    }

    /// A kept connection to `origin` that is still open, if any.
    fn take(&self, origin: &Origin) -> Option<Conn> {
        let mut idle = self.idle.lock().ok()?;
        let kept = idle.get_mut(origin)?;
        while let Some((mut conn, since)) = kept.pop() {
            if since.elapsed() < IDLE_FOR && open(&mut conn) {
                return Some(conn);
            }
        }
        None
    }

    fn keep(&self, origin: &Origin, conn: Conn) {
        let Ok(mut idle) = self.idle.lock() else {
            return;
        };
        // The origin's name is copied only the first time (`entry` would copy it each time).
        if !idle.contains_key(origin) {
            idle.insert(origin.clone(), Vec::new());
        }
        let Some(kept) = idle.get_mut(origin) else {
            return;
        };
        kept.retain(|(_, since)| since.elapsed() < IDLE_FOR);
        if kept.len() < MAX_IDLE {
            kept.push((conn, Instant::now()));
        }
    }

    async fn connect(&self, origin: &Origin) -> Result<Conn, Error> {
        let within = |what| Error::Io(io::Error::new(io::ErrorKind::TimedOut, what));
        let tcp = tokio::time::timeout(
            self.connect,
            TcpStream::connect((origin.host.as_str(), origin.port)),
        )
        .await
        .map_err(|_| within("no connection in time"))??;
        tcp.set_nodelay(true)?;
        let io: Box<dyn Io> = if origin.tls {
            let name = rustls::pki_types::ServerName::try_from(origin.host.clone())
                .map_err(|_| Error::Request("not a server name"))?;
            let tls = tokio::time::timeout(self.connect, self.tls.connect(name, tcp))
                .await
                .map_err(|_| within("no TLS handshake in time"))??;
            Box::new(tls)
        } else {
            Box::new(tcp)
        };
        Ok(Conn {
            io,
            read: BytesMut::with_capacity(8 << 10),
        })
    }
}

/// Whether a kept connection is still open: nothing (no end, no stray bytes) is waiting on it.
fn open(conn: &mut Conn) -> bool {
    if !conn.read.is_empty() {
        return false;
    }
    let mut byte = [0u8; 1];
    let mut buf = ReadBuf::new(&mut byte);
    let mut cx = Context::from_waker(Waker::noop());
    matches!(
        Pin::new(&mut conn.io).poll_read(&mut cx, &mut buf),
        Poll::Pending
    )
}

/// The request's head: its line, `host`, `content-length` and its headers, followed by the
/// body when it is short. A target or header value with a space or control byte where none
/// may be is refused.
fn head(request: &Request<'_>) -> Result<Vec<u8>, Error> {
    let body = request.body.len();
    let length = body.to_string();
    let headers = [("host", request.host), ("content-length", length.as_str())];
    let all = headers.iter().chain(request.headers);
    let mut out = Vec::with_capacity(
        64 + request.target.len()
            + all
                .clone()
                .map(|(n, v)| n.len() + v.len() + 4)
                .sum::<usize>()
            + if body <= WITH_HEAD { body } else { 0 },
    );
    if request.target.bytes().any(|b| b <= b' ' || b == 0x7f) {
        return Err(Error::Request("a target with a space or control byte"));
    }
    out.extend_from_slice(request.method.as_bytes());
    out.push(b' ');
    out.extend_from_slice(request.target.as_bytes());
    out.extend_from_slice(b" HTTP/1.1\r\n");
    for (name, value) in all {
        if value.bytes().any(|b| b == b'\r' || b == b'\n' || b == 0) {
            return Err(Error::Request("a header value with a line break"));
        }
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"\r\n");
    if body <= WITH_HEAD {
        out.extend_from_slice(request.body);
    }
    Ok(out)
}

/// Writes the request on `conn` and reads its answer; whether the connection may be kept.
/// A failure before any byte of the answer came is [`Stale`].
async fn exchange(
    conn: &mut Conn,
    head: &[u8],
    body: &Bytes,
    cap: usize,
) -> Result<(Answer, bool), Result<Error, Stale>> {
    let written = async {
        conn.io.write_all(head).await?;
        if body.len() > WITH_HEAD {
            conn.io.write_all(body).await?;
        }
        conn.io.flush().await
    };
    if let Err(e) = written.await {
        return Err(Err(Stale(e.into())));
    }
    let head = match read_head(conn).await {
        Ok(head) => head,
        Err(e) if conn.read.is_empty() && matches!(e, Error::Io(_)) => return Err(Err(Stale(e))),
        Err(e) => return Err(Ok(e)),
    };
    let body = read_body(conn, &head, cap).await.map_err(Ok)?;
    let keep = head.keep_alive && head.framed && conn.read.is_empty();
    if conn.read.capacity() > KEPT_BUFFER {
        conn.read = BytesMut::new();
    }
    Ok((
        Answer {
            status: head.status,
            body,
        },
        keep,
    ))
}

/// What an answer's head says.
struct Head {
    status: u16,
    length: Option<usize>,
    chunked: bool,
    keep_alive: bool,
    /// Its body ends by its length or its chunks (not with the connection).
    framed: bool,
}

/// Reads an answer's head, past at most [`MAX_INTERIM`] interim (`1xx`) ones, and takes it
/// off the connection's read bytes.
async fn read_head(conn: &mut Conn) -> Result<Head, Error> {
    let mut interim = 0;
    loop {
        if !conn.read.is_empty() {
            let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
            let mut answer = httparse::Response::new(&mut headers);
            match answer.parse(&conn.read) {
                Ok(httparse::Status::Complete(n)) => {
                    let status = answer.code.unwrap_or(0);
                    let version = answer.version.unwrap_or(0);
                    let mut head = Head {
                        status,
                        length: None,
                        chunked: false,
                        keep_alive: version == 1,
                        framed: false,
                    };
                    for h in answer.headers.iter() {
                        if h.name.eq_ignore_ascii_case("content-length") {
                            let n = std::str::from_utf8(h.value)
                                .ok()
                                .and_then(|v| v.trim().parse::<usize>().ok())
                                .ok_or(Error::Malformed("content-length"))?;
                            if head.length.is_some_and(|m| m != n) {
                                return Err(Error::Malformed("two content-lengths"));
                            }
                            head.length = Some(n);
                        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
                            let last = h.value.rsplit(|&b| b == b',').next().unwrap_or(b"");
                            head.chunked = last.trim_ascii().eq_ignore_ascii_case(b"chunked");
                            if !head.chunked {
                                return Err(Error::Malformed("transfer-encoding"));
                            }
                        } else if h.name.eq_ignore_ascii_case("connection") {
                            for token in h.value.split(|&b| b == b',') {
                                let token = token.trim_ascii();
                                if token.eq_ignore_ascii_case(b"close") {
                                    head.keep_alive = false;
                                } else if token.eq_ignore_ascii_case(b"keep-alive") && version == 0
                                {
                                    head.keep_alive = true;
                                }
                            }
                        }
                    }
                    conn.read.advance(n);
                    if (100..200).contains(&status) {
                        interim += 1;
                        if interim > MAX_INTERIM {
                            return Err(Error::Malformed("interim answers without end"));
                        }
                        continue;
                    }
                    if head.chunked {
                        head.length = None;
                    }
                    head.framed =
                        head.chunked || head.length.is_some() || status == 204 || status == 304;
                    return Ok(head);
                }
                Ok(httparse::Status::Partial) => {}
                Err(_) => return Err(Error::Malformed("head")),
            }
        }
        if conn.read.len() > MAX_HEAD {
            return Err(Error::Malformed("a head too long"));
        }
        fill(conn, 8 << 10).await?;
    }
}

/// Reads more bytes onto the connection's read bytes (room for `at_least`); an end of the
/// connection is an error.
async fn fill(conn: &mut Conn, at_least: usize) -> Result<(), Error> {
    conn.read.reserve(at_least);
    if conn.io.read_buf(&mut conn.read).await? == 0 {
        return Err(Error::Io(io::ErrorKind::UnexpectedEof.into()));
    }
    Ok(())
}

/// Reads the body `head` announces, of at most `cap` bytes.
async fn read_body(conn: &mut Conn, head: &Head, cap: usize) -> Result<Bytes, Error> {
    if head.status == 204 || head.status == 304 {
        return Ok(Bytes::new());
    }
    if head.chunked {
        return read_chunks(conn, cap).await;
    }
    match head.length {
        Some(n) if n > cap => Err(Error::Oversized),
        Some(n) => {
            while conn.read.len() < n {
                fill(conn, n - conn.read.len()).await?;
            }
            if n <= COPIED {
                let body = Bytes::copy_from_slice(&conn.read[..n]);
                conn.read.advance(n);
                return Ok(body);
            }
            let body = conn.read.split_to(n).freeze();
            // The body keeps the bytes read; the connection starts anew.
            conn.read = BytesMut::new();
            Ok(body)
        }
        // Ends with the connection.
        None => {
            loop {
                if conn.read.len() > cap {
                    return Err(Error::Oversized);
                }
                conn.read.reserve(8 << 10);
                if conn.io.read_buf(&mut conn.read).await? == 0 {
                    break;
                }
            }
            Ok(conn.read.split().freeze())
        }
    }
}

/// Reads a chunked body of at most `cap` bytes, and its trailers.
async fn read_chunks(conn: &mut Conn, cap: usize) -> Result<Bytes, Error> {
    let mut body = BytesMut::new();
    loop {
        let (at, size) = loop {
            match httparse::parse_chunk_size(&conn.read) {
                Ok(httparse::Status::Complete((at, size))) => break (at, size),
                Ok(httparse::Status::Partial) if conn.read.len() < MAX_HEAD => {
                    fill(conn, 8 << 10).await?
                }
                _ => return Err(Error::Malformed("chunk size")),
            }
        };
        conn.read.advance(at);
        if size == 0 {
            break;
        }
        let size = usize::try_from(size).map_err(|_| Error::Oversized)?;
        if body.len().saturating_add(size) > cap {
            return Err(Error::Oversized);
        }
        while conn.read.len() < size + 2 {
            fill(conn, size + 2 - conn.read.len()).await?;
        }
        body.extend_from_slice(&conn.read[..size]);
        if &conn.read[size..size + 2] != b"\r\n" {
            return Err(Error::Malformed("chunk end"));
        }
        conn.read.advance(size + 2);
    }
    // Trailers, up to the empty line.
    loop {
        match memchr::memmem::find(&conn.read, b"\r\n") {
            Some(0) => {
                conn.read.advance(2);
                return Ok(body.freeze());
            }
            Some(at) => conn.read.advance(at + 2),
            None if conn.read.len() < MAX_HEAD => fill(conn, 1024).await?,
            None => return Err(Error::Malformed("trailers")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use tokio::net::TcpListener;

    /// A server answering each request on a connection with the next of `answers`, then
    /// closing the connection (at once, or as the next request comes with `read_one_more`);
    /// the requests (heads and bodies) it read, and how many connections it took.
    struct Server {
        origin: Origin,
        accepted: Arc<AtomicUsize>,
        requests: Arc<Mutex<Vec<String>>>,
    }

    async fn server(answers: Vec<&'static [u8]>) -> Server {
        server_then(answers, false).await
    }

    async fn server_then(answers: Vec<&'static [u8]>, read_one_more: bool) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let accepted = Arc::new(AtomicUsize::new(0));
        let requests = Arc::new(Mutex::new(Vec::new()));
        let (count, seen) = (accepted.clone(), requests.clone());
        tokio::spawn(async move {
            while let Ok((mut conn, _)) = listener.accept().await {
                count.fetch_add(1, Ordering::SeqCst);
                let (answers, seen) = (answers.clone(), seen.clone());
                tokio::spawn(async move {
                    let mut read = Vec::new();
                    for answer in answers {
                        let Some(request) = read_request(&mut conn, &mut read).await else {
                            return;
                        };
                        seen.lock().unwrap().push(request);
                        if conn.write_all(answer).await.is_err() {
                            return;
                        }
                    }
                    if read_one_more {
                        let _ = read_request(&mut conn, &mut read).await;
                    }
                });
            }
        });
        Server {
            origin: Origin {
                tls: false,
                host: "127.0.0.1".into(),
                port,
            },
            accepted,
            requests,
        }
    }

    /// One request (head and `content-length` bytes of body) off `conn`.
    async fn read_request<S: AsyncRead + Unpin>(
        conn: &mut S,
        read: &mut Vec<u8>,
    ) -> Option<String> {
        loop {
            if let Some(end) = memchr::memmem::find(read, b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&read[..end]).to_string();
                let length: usize = head
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length: "))
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(0);
                if read.len() >= end + 4 + length {
                    let request = String::from_utf8_lossy(&read[..end + 4 + length]).to_string();
                    read.drain(..end + 4 + length);
                    return Some(request);
                }
            }
            let mut buf = [0u8; 8192];
            match conn.read(&mut buf).await {
                Ok(0) | Err(_) => return None,
                Ok(n) => read.extend_from_slice(&buf[..n]),
            }
        }
    }

    fn request<'a>(body: &'a Bytes, headers: &'a [(&'a str, &'a str)]) -> Request<'a> {
        Request {
            method: "POST",
            target: "/a%20b",
            host: "example:1",
            headers,
            body,
        }
    }

    fn client() -> Http {
        Http::new(Duration::from_secs(2)).unwrap()
    }

    const LENGTH: &[u8] = b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nhello";
    const CHUNKED: &[u8] = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n\
                             3\r\nhel\r\n2;x=y\r\nlo\r\n0\r\nx-trailer: 1\r\n\r\n";

    /// A request goes out as written (line, host, length, headers, body); answers framed by
    /// length, by chunks (with an interim `100` before) and by the connection's end are read
    /// whole; the first two keep their connection, the last does not.
    #[tokio::test]
    async fn answers_are_read_whole_by_their_framing() {
        let s = server(vec![
            LENGTH,
            b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 404 Not Found\r\ntransfer-encoding: chunked\r\n\r\n\
              3\r\nhel\r\n2;x=y\r\nlo\r\n0\r\nx-trailer: 1\r\n\r\n",
            b"HTTP/1.0 200 OK\r\n\r\nhello, until the end",
        ])
        .await;
        let http = client();
        let body = Bytes::from_static(b"{\"k\":1}");
        let headers = [("x-amz-target", "DynamoDB_20120810.GetItem")];
        let first = http
            .send(&s.origin, &request(&body, &headers), 1 << 20)
            .await
            .unwrap();
        assert_eq!((first.status, &first.body[..]), (200, &b"hello"[..]));
        let second = http
            .send(&s.origin, &request(&body, &headers), 1 << 20)
            .await
            .unwrap();
        assert_eq!((second.status, &second.body[..]), (404, &b"hello"[..]));
        let third = http
            .send(&s.origin, &request(&body, &headers), 1 << 20)
            .await
            .unwrap();
        assert_eq!(&third.body[..], b"hello, until the end");
        assert_eq!(s.accepted.load(Ordering::SeqCst), 1);
        assert_eq!(
            s.requests.lock().unwrap()[0],
            "POST /a%20b HTTP/1.1\r\nhost: example:1\r\ncontent-length: 7\r\n\
             x-amz-target: DynamoDB_20120810.GetItem\r\n\r\n{\"k\":1}"
        );
        // The third answer ended its connection: the next request takes a new one.
        let _ = http
            .send(&s.origin, &request(&body, &headers), 1 << 20)
            .await;
        assert_eq!(s.accepted.load(Ordering::SeqCst), 2);
    }

    /// A kept connection the server closed (here after each answer, without saying so) is
    /// replaced by a new one, whether it is found closed before the request or fails with it.
    #[tokio::test]
    async fn a_kept_connection_closed_by_the_server_is_replaced() {
        let http = client();
        let body = Bytes::from_static(b"x");
        // Closed by the server after each answer; then open when taken and closed by the
        // server as the request comes: the request goes again on a new connection.
        for (read_one_more, calls) in [(false, 5), (true, 3)] {
            let s = server_then(vec![LENGTH], read_one_more).await;
            for _ in 0..calls {
                let answer = http
                    .send(&s.origin, &request(&body, &[]), 1 << 20)
                    .await
                    .unwrap();
                assert_eq!(&answer.body[..], b"hello");
            }
            assert_eq!(s.accepted.load(Ordering::SeqCst), calls);
            assert_eq!(s.requests.lock().unwrap().len(), calls);
        }
    }

    /// Long bodies are written after their head; a body over the cap is refused by its
    /// announced length or as its chunks come; heads too long, broken framing and header
    /// values with line breaks are errors, not answers.
    #[tokio::test]
    async fn bodies_and_heads_are_bounded() {
        let s = server(vec![LENGTH]).await;
        let http = client();
        let long = Bytes::from(vec![b'a'; 200 << 10]);
        let answer = http
            .send(&s.origin, &request(&long, &[]), 1 << 20)
            .await
            .unwrap();
        assert_eq!(&answer.body[..], b"hello");
        assert!(s.requests.lock().unwrap()[0].ends_with(&"a".repeat(200 << 10)));

        let body = Bytes::from_static(b"x");
        // Each answer, the cap, and the error it makes.
        let cases: [(&'static [u8], usize, &str); 7] = [
            (
                b"HTTP/1.1 200 OK\r\ncontent-length: 100000000\r\n\r\n",
                1 << 20,
                "an answer over the cap",
            ),
            (CHUNKED, 4, "an answer over the cap"),
            (
                b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\ncontent-length: 6\r\n\r\nhello!",
                1 << 20,
                "malformed answer: two content-lengths",
            ),
            (
                b"HTTP/1.1 200 OK\r\ntransfer-encoding: gzip\r\n\r\n",
                1 << 20,
                "malformed answer: transfer-encoding",
            ),
            (
                b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n",
                1 << 20,
                "malformed answer: chunk size",
            ),
            (
                b"SSH-2.0-OpenSSH\r\n\r\n",
                1 << 20,
                "malformed answer: head",
            ),
            (
                b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nhel",
                1 << 20,
                "connection: unexpected end of file",
            ),
        ];
        for (answer, cap, expected) in cases {
            let s = server(vec![answer]).await;
            let e = http.send(&s.origin, &request(&body, &[]), cap).await;
            assert_eq!(e.err().map(|e| e.to_string()).as_deref(), Some(expected));
        }
        let endless: &'static [u8] = Box::leak(
            [
                b"HTTP/1.1 200 OK\r\n".as_slice(),
                &b"x-a: b\r\n".repeat(10_000),
            ]
            .concat()
            .into_boxed_slice(),
        );
        let interims: &'static [u8] = Box::leak(
            b"HTTP/1.1 100 Continue\r\n\r\n"
                .repeat(20)
                .into_boxed_slice(),
        );
        let s = server(vec![interims]).await;
        let e = http.send(&s.origin, &request(&body, &[]), 1 << 20).await;
        assert_eq!(
            e.err().map(|e| e.to_string()).as_deref(),
            Some("malformed answer: interim answers without end")
        );
        let s = server(vec![endless]).await;
        assert!(matches!(
            http.send(&s.origin, &request(&body, &[]), 1 << 20).await,
            Err(Error::Malformed(_))
        ));
        for headers in [[("x-a", "b\r\nx-b: c")], [("x-a", "b\nc")]] {
            assert!(matches!(
                http.send(&s.origin, &request(&body, &headers), 1 << 20)
                    .await,
                Err(Error::Request(_))
            ));
        }
        let mut bad = request(&body, &[]);
        bad.target = "/a b";
        assert!(matches!(
            http.send(&s.origin, &bad, 1 << 20).await,
            Err(Error::Request(_))
        ));
    }

    /// Over TLS: the server's certificate is checked against the roots and the origin's name,
    /// and the exchange is the same; a name the certificate does not cover is refused.
    #[tokio::test]
    async fn tls_checks_the_name_and_the_chain() {
        use rustls::pki_types::pem::PemObject;
        use rustls::pki_types::{CertificateDer, PrivateKeyDer};
        let cert =
            CertificateDer::from_pem_slice(include_bytes!("testdata/localhost.pem")).unwrap();
        let ca = CertificateDer::from_pem_slice(include_bytes!("testdata/ca.pem")).unwrap();
        let key = PrivateKeyDer::from_pem_slice(include_bytes!("testdata/localhost.key")).unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(vec![cert], key)
            .unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            while let Ok((conn, _)) = listener.accept().await {
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    let Ok(mut tls) = acceptor.accept(conn).await else {
                        return;
                    };
                    let mut read = Vec::new();
                    while read_request(&mut tls, &mut read).await.is_some() {
                        if tls.write_all(LENGTH).await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
        let mut roots = rustls::RootCertStore::empty();
        roots.add(ca).unwrap();
        let http = Http::trusting(Duration::from_secs(2), roots).unwrap();
        let origin = Origin {
            tls: true,
            host: "localhost".into(),
            port,
        };
        let body = Bytes::from_static(b"x");
        for _ in 0..2 {
            let answer = http
                .send(&origin, &request(&body, &[]), 1 << 20)
                .await
                .unwrap();
            assert_eq!(&answer.body[..], b"hello");
        }
        let by_address = origin.with_host("127.0.0.1");
        assert!(http
            .send(&by_address, &request(&body, &[]), 1 << 20)
            .await
            .is_err());
        // The Web PKI's roots do not include the test's.
        assert!(client()
            .send(&origin, &request(&body, &[]), 1 << 20)
            .await
            .is_err());
    }
}
