//! Fixture websites served on loopback by the tests themselves, and connection taps.

use axum::body::Body;
use axum::extract::State;
use axum::http::{Request, Response, StatusCode};
use axum::Router;
use bytes::Bytes;
use std::collections::HashMap;
use std::io::Write;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What a fixture answers at one path.
#[derive(Clone)]
pub enum Route {
    /// 200 `text/html`.
    Html(String),
    /// Any status, headers and body.
    Raw {
        status: u16,
        headers: Vec<(String, String)>,
        body: Bytes,
    },
    /// 302 to the location.
    Redirect(String),
    /// The inner route after a pause.
    Slow(Duration, Box<Route>),
    /// 200 that sends one byte every `interval`, forever.
    Drip(Duration),
    /// 200 `text/html`, chunked, with no length, never ending.
    Endless,
    /// 429 with `Retry-After` (in seconds) for the first `n` requests, then the inner route.
    BusyFirst(usize, u64, Box<Route>),
    /// 503 with `Retry-After` as an HTTP date this long after the request, for the first `n`
    /// requests, then the inner route.
    BusyUntil(usize, Duration, Box<Route>),
}

impl Route {
    pub fn status(status: u16) -> Route {
        Route::Raw {
            status,
            headers: vec![("content-type".into(), "text/html".into())],
            body: Bytes::from(format!("<html><body>status {status}</body></html>")),
        }
    }

    pub fn typed(content_type: &str, body: impl Into<Bytes>) -> Route {
        Route::Raw {
            status: 200,
            headers: vec![("content-type".into(), content_type.into())],
            body: body.into(),
        }
    }

    /// 10 KiB on the wire that inflate to `inflated` bytes of HTML.
    pub fn gzip_bomb(inflated: usize) -> Route {
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        let _ = gz.write_all(b"<html><body><p>");
        let zeros = vec![b'a'; 1 << 20];
        let mut left = inflated;
        while left > 0 {
            let n = left.min(zeros.len());
            let _ = gz.write_all(&zeros[..n]);
            left -= n;
        }
        let body = gz.finish().unwrap_or_default();
        Route::Raw {
            status: 200,
            headers: vec![
                ("content-type".into(), "text/html".into()),
                ("content-encoding".into(), "gzip".into()),
            ],
            body: Bytes::from(body),
        }
    }

    /// A gzipped body served as a `.gz` file.
    pub fn gzipped_file(content: &str) -> Route {
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        let _ = gz.write_all(content.as_bytes());
        Route::typed("application/gzip", gz.finish().unwrap_or_default())
    }
}

/// One request a fixture received.
#[derive(Clone, Debug)]
pub struct Hit {
    pub path: String,
    pub at: Instant,
    pub user_agent: String,
    pub headers: axum::http::HeaderMap,
}

impl Hit {
    /// A request header's value, when it was sent.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

type Dynamic = Arc<dyn Fn(&str, Option<&str>) -> Option<Route> + Send + Sync>;

struct SiteState {
    routes: HashMap<String, Route>,
    dynamic: Option<Dynamic>,
    hits: Mutex<Vec<Hit>>,
    open: AtomicUsize,
    max_open: AtomicUsize,
}

/// A fixture website on 127.0.0.1 with a request log.
pub struct Site {
    pub addr: SocketAddr,
    state: Arc<SiteState>,
}

impl Site {
    /// Serves `routes` (path -> route); other paths are 404.
    pub async fn start(routes: HashMap<String, Route>) -> Site {
        Site::start_with(routes, None).await
    }

    /// Serves `routes`, asking `dynamic(path, query)` for paths not in it.
    pub async fn start_with(routes: HashMap<String, Route>, dynamic: Option<Dynamic>) -> Site {
        let state = Arc::new(SiteState {
            routes,
            dynamic,
            hits: Mutex::new(Vec::new()),
            open: AtomicUsize::new(0),
            max_open: AtomicUsize::new(0),
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind fixture");
        let addr = listener.local_addr().expect("fixture address");
        let app = Router::new().fallback(serve).with_state(state.clone());
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Site { addr, state }
    }

    /// `http://127.0.0.1:PORT` + path.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    pub fn hits(&self) -> Vec<Hit> {
        self.state
            .hits
            .lock()
            .map(|h| h.clone())
            .unwrap_or_default()
    }

    /// How many requests asked for `path` (with its query).
    pub fn hits_of(&self, path: &str) -> usize {
        self.hits().iter().filter(|h| h.path == path).count()
    }

    /// The most requests this site had open at once.
    pub fn max_open(&self) -> usize {
        self.state.max_open.load(Ordering::SeqCst)
    }
}

struct OpenGuard(Arc<SiteState>);

impl Drop for OpenGuard {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Ordering::SeqCst);
    }
}

async fn serve(State(state): State<Arc<SiteState>>, req: Request<Body>) -> Response<Body> {
    let path = req.uri().path().to_string();
    let query = req.uri().query().map(str::to_string);
    let full = match &query {
        Some(q) => format!("{path}?{q}"),
        None => path.clone(),
    };
    let user_agent = req
        .headers()
        .get("user-agent")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let previous = {
        let mut hits = state.hits.lock().unwrap_or_else(|p| p.into_inner());
        let previous = hits.iter().filter(|h| h.path == full).count();
        hits.push(Hit {
            path: full,
            at: Instant::now(),
            user_agent,
            headers: req.headers().clone(),
        });
        previous
    };
    let open = state.open.fetch_add(1, Ordering::SeqCst) + 1;
    state.max_open.fetch_max(open, Ordering::SeqCst);
    let _guard = OpenGuard(state.clone());
    let route = state.routes.get(&path).cloned().or_else(|| {
        state
            .dynamic
            .as_ref()
            .and_then(|d| d(&path, query.as_deref()))
    });
    match route {
        Some(r) => respond(r, previous).await,
        None => simple(
            404,
            "text/html",
            Bytes::from_static(b"<html><body>not found</body></html>"),
        ),
    }
}

fn simple(status: u16, content_type: &str, body: Bytes) -> Response<Body> {
    Response::builder()
        .status(StatusCode::from_u16(status).unwrap_or(StatusCode::OK))
        .header("content-type", content_type)
        .body(Body::from(body))
        .unwrap_or_default()
}

fn respond(
    route: Route,
    previous: usize,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = Response<Body>> + Send>> {
    Box::pin(async move {
        match route {
            Route::Html(h) => simple(200, "text/html; charset=utf-8", Bytes::from(h)),
            Route::Raw {
                status,
                headers,
                body,
            } => {
                let mut b = Response::builder()
                    .status(StatusCode::from_u16(status).unwrap_or(StatusCode::OK));
                for (k, v) in headers {
                    b = b.header(k, v);
                }
                b.body(Body::from(body)).unwrap_or_default()
            }
            Route::Redirect(to) => Response::builder()
                .status(StatusCode::FOUND)
                .header("location", to)
                .body(Body::empty())
                .unwrap_or_default(),
            Route::Slow(pause, inner) => {
                tokio::time::sleep(pause).await;
                respond(*inner, previous).await
            }
            Route::Drip(interval) => {
                let stream = futures::stream::unfold((), move |_| async move {
                    tokio::time::sleep(interval).await;
                    Some((Ok::<_, std::io::Error>(Bytes::from_static(b"a")), ()))
                });
                Response::builder()
                    .header("content-type", "text/html")
                    .body(Body::from_stream(stream))
                    .unwrap_or_default()
            }
            Route::Endless => {
                let chunk = Bytes::from(vec![b'a'; 64 * 1024]);
                let stream =
                    futures::stream::repeat_with(move || Ok::<_, std::io::Error>(chunk.clone()));
                Response::builder()
                    .header("content-type", "text/html")
                    .body(Body::from_stream(stream))
                    .unwrap_or_default()
            }
            Route::BusyFirst(n, retry_after, inner) => {
                if previous < n {
                    Response::builder()
                        .status(StatusCode::TOO_MANY_REQUESTS)
                        .header("retry-after", retry_after.to_string())
                        .body(Body::empty())
                        .unwrap_or_default()
                } else {
                    respond(*inner, previous).await
                }
            }
            Route::BusyUntil(n, wait, inner) => {
                if previous < n {
                    let at =
                        chrono::Utc::now() + chrono::Duration::from_std(wait).unwrap_or_default();
                    Response::builder()
                        .status(StatusCode::SERVICE_UNAVAILABLE)
                        .header(
                            "retry-after",
                            at.format("%a, %d %b %Y %H:%M:%S GMT").to_string(),
                        )
                        .body(Body::empty())
                        .unwrap_or_default()
                } else {
                    respond(*inner, previous).await
                }
            }
        }
    })
}

/// A ternary tree of `n` pages: `/` is page 0, `/p/{i}.html` page i, and page i links to
/// pages 3i+1..3i+3 (those below `n`), back to `/` and its parent, and to one external URL.
/// Depth is unique: page i sits at its depth in the tree.
pub fn tree_site(n: usize) -> HashMap<String, Route> {
    let path = |i: usize| {
        if i == 0 {
            "/".to_string()
        } else {
            format!("/p/{i}.html")
        }
    };
    (0..n)
        .map(|i| {
            let mut links = String::new();
            for c in (3 * i + 1)..=(3 * i + 3) {
                if c < n {
                    links.push_str(&format!("<li><a href=\"{}\">page {c}</a></li>", path(c)));
                }
            }
            let parent = if i == 0 { 0 } else { (i - 1) / 3 };
            let html = format!(
                "<html><head><title>Page {i}</title></head><body>\
                 <nav><a href=\"/\">home</a> <a href=\"{}#top\">up</a></nav>\
                 <main><h1>Page {i}</h1><p>Text of page {i}.</p><ul>{links}</ul>\
                 <a href=\"https://example.org/{i}\">elsewhere</a></main></body></html>",
                path(parent)
            );
            (path(i), Route::Html(html))
        })
        .collect()
}

/// The tree page paths within `max_depth` of the root.
pub fn tree_paths(n: usize, max_depth: usize) -> Vec<String> {
    let mut out = Vec::new();
    let mut level = vec![0usize];
    for _ in 0..=max_depth {
        let mut next = Vec::new();
        for &i in &level {
            out.push(if i == 0 {
                "/".to_string()
            } else {
                format!("/p/{i}.html")
            });
            next.extend(((3 * i + 1)..=(3 * i + 3)).filter(|&c| c < n));
        }
        level = next;
    }
    out
}

/// A listener that accepts and counts connections, and answers nothing.
pub struct Tap {
    pub addr: SocketAddr,
    count: Arc<AtomicUsize>,
}

impl Tap {
    pub async fn bind(ip: &str) -> Tap {
        let listener = tokio::net::TcpListener::bind((ip, 0))
            .await
            .expect("bind tap");
        let addr = listener.local_addr().expect("tap address");
        let count = Arc::new(AtomicUsize::new(0));
        let c = count.clone();
        tokio::spawn(async move {
            while let Ok((sock, _)) = listener.accept().await {
                c.fetch_add(1, Ordering::SeqCst);
                drop(sock);
            }
        });
        Tap { addr, count }
    }

    pub fn connections(&self) -> usize {
        self.count.load(Ordering::SeqCst)
    }
}

/// A UDP socket that counts the datagrams it receives.
pub struct UdpTap {
    pub addr: SocketAddr,
    count: Arc<AtomicUsize>,
}

impl UdpTap {
    pub async fn bind(ip: &str) -> UdpTap {
        let socket = tokio::net::UdpSocket::bind((ip, 0))
            .await
            .expect("bind udp tap");
        let addr = socket.local_addr().expect("udp tap address");
        let count = Arc::new(AtomicUsize::new(0));
        let c = count.clone();
        tokio::spawn(async move {
            let mut buf = [0u8; 2048];
            while socket.recv_from(&mut buf).await.is_ok() {
                c.fetch_add(1, Ordering::SeqCst);
            }
        });
        UdpTap { addr, count }
    }

    pub fn datagrams(&self) -> usize {
        self.count.load(Ordering::SeqCst)
    }
}

/// One request a [`Receiver`] got.
#[derive(Clone, Debug)]
pub struct Received {
    pub headers: axum::http::HeaderMap,
    pub body: Bytes,
    /// When it arrived.
    pub at: std::time::Instant,
}

impl Received {
    pub fn header(&self, name: &str) -> &str {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
    }
}

struct ReceiverState {
    got: Mutex<Vec<Received>>,
    answers: Mutex<std::collections::VecDeque<u16>>,
    /// `Retry-After` seconds sent with a 429 or 503.
    retry_after: Option<u64>,
}

/// A webhook receiver on 127.0.0.1: records every POST and answers the given statuses in
/// turn, then 200.
pub struct Receiver {
    pub addr: SocketAddr,
    state: Arc<ReceiverState>,
}

impl Receiver {
    pub async fn start(answers: &[u16]) -> Receiver {
        Receiver::asking_for_pauses(answers, None).await
    }

    /// A receiver whose 429 and 503 answers carry `Retry-After: retry_after`.
    pub async fn asking_for_pauses(answers: &[u16], retry_after: Option<u64>) -> Receiver {
        let state = Arc::new(ReceiverState {
            got: Mutex::new(Vec::new()),
            answers: Mutex::new(answers.iter().copied().collect()),
            retry_after,
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind receiver");
        let addr = listener.local_addr().expect("receiver address");
        let app = Router::new().fallback(receive).with_state(state.clone());
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Receiver { addr, state }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    pub fn received(&self) -> Vec<Received> {
        self.state.got.lock().map(|g| g.clone()).unwrap_or_default()
    }
}

async fn receive(
    State(state): State<Arc<ReceiverState>>,
    req: Request<Body>,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    let (parts, body) = req.into_parts();
    let body = axum::body::to_bytes(body, 16 << 20)
        .await
        .unwrap_or_default();
    if let Ok(mut got) = state.got.lock() {
        got.push(Received {
            headers: parts.headers,
            body,
            at: std::time::Instant::now(),
        });
    }
    let status = state
        .answers
        .lock()
        .ok()
        .and_then(|mut a| a.pop_front())
        .unwrap_or(200);
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::OK);
    match state.retry_after {
        Some(s) if matches!(status.as_u16(), 429 | 503) => {
            (status, [("retry-after", s.to_string())]).into_response()
        }
        _ => status.into_response(),
    }
}
