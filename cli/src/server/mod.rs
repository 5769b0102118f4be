//! The local HTTP server: bounded connections, authentication and body limits, then the core's
//! handlers. Every client is a stranger (SECURITY.md V7): connections are capped, each has the
//! clock of [`conn`], a request's body must arrive within a deadline, and a declared length
//! over the limit is answered 413 before a byte of the body is read.

mod conn;

pub use conn::Timeouts;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use sarvcrawl_core::app::App;
use sarvcrawl_core::auth::Auth;
use sarvcrawl_core::http::{self as api, MAX_BODY};
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// What the server allows its clients.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Open connections at most; a connection beyond is closed at once.
    pub max_connections: usize,
    pub timeouts: Timeouts,
    /// Longest a request's body may take to arrive.
    pub body: Duration,
}

/// How long open connections may take to finish when the server stops.
const DRAIN: Duration = Duration::from_secs(10);

#[derive(Clone)]
struct Server {
    app: Arc<App>,
    auth: Arc<Auth>,
    body_timeout: Duration,
}

/// Serves the API on `listener` until `shutdown` completes, then lets open requests finish.
pub async fn serve(
    listener: tokio::net::TcpListener,
    app: Arc<App>,
    auth: Arc<Auth>,
    limits: Limits,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let server = Server {
        app,
        auth,
        body_timeout: limits.body,
    };
    let open = Arc::new(AtomicUsize::new(0));
    let (stop_tx, stop_rx) = watch::channel(false);
    tokio::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            a = listener.accept() => a,
            _ = &mut shutdown => break,
        };
        let stream = match accepted {
            Ok((stream, _)) => stream,
            Err(e) => {
                // Out of descriptors, most likely: wait for some to be freed.
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        if open.load(Ordering::SeqCst) >= limits.max_connections {
            drop(stream); // Closed at once: the client may try again.
            continue;
        }
        let _ = stream.set_nodelay(true);
        open.fetch_add(1, Ordering::SeqCst);
        let guard = OpenGuard(open.clone());
        let (server, stop) = (server.clone(), stop_rx.clone());
        tokio::spawn(async move {
            let _guard = guard;
            connection(stream, server, limits.timeouts, stop).await;
        });
    }
    let _ = stop_tx.send(true);
    let deadline = tokio::time::Instant::now() + DRAIN;
    while open.load(Ordering::SeqCst) > 0 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(())
}

struct OpenGuard(Arc<AtomicUsize>);

impl Drop for OpenGuard {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Serves one connection until it closes, times out, or the server stops.
async fn connection(
    stream: tokio::net::TcpStream,
    server: Server,
    timeouts: Timeouts,
    mut stop: watch::Receiver<bool>,
) {
    let io = conn::Clocked::new(stream, timeouts);
    let phase = io.phase();
    let service = hyper::service::service_fn(move |req: Request<Incoming>| {
        let (server, phase) = (server.clone(), phase.clone());
        async move {
            phase.busy();
            let answer = server.handle(req).await;
            phase.idle();
            answer
        }
    });
    let conn = hyper::server::conn::http1::Builder::new()
        .max_buf_size(64 * 1024)
        .serve_connection(TokioIo::new(io), service);
    tokio::pin!(conn);
    tokio::select! {
        _ = conn.as_mut() => return,
        _ = stop.changed() => {}
    }
    conn.as_mut().graceful_shutdown();
    let _ = conn.await;
}

/// Why a request got no answer: the connection is closed instead.
#[derive(Debug)]
struct Dropped;

impl std::fmt::Display for Dropped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the request's body did not arrive in time")
    }
}

impl std::error::Error for Dropped {}

fn reply(resp: Response<Bytes>) -> Response<Full<Bytes>> {
    resp.map(Full::new)
}

/// A refusal after which the rest of the request is not read: the connection closes.
fn closing(resp: Response<Bytes>) -> Response<Full<Bytes>> {
    let mut resp = reply(resp);
    resp.headers_mut().insert(
        http::header::CONNECTION,
        http::HeaderValue::from_static("close"),
    );
    resp
}

impl Server {
    async fn handle(&self, req: Request<Incoming>) -> Result<Response<Full<Bytes>>, Dropped> {
        if api::is_health(req.method(), req.uri().path()) {
            return Ok(reply(api::health()));
        }
        let authorization = req
            .headers()
            .get(http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok());
        let Some(user) = self.auth.authenticate(authorization).await else {
            return Ok(reply(api::unauthorized()));
        };
        let declared = req
            .headers()
            .get(http::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok());
        let (parts, mut body) = req.into_parts();
        if declared.is_some_and(|n| n > MAX_BODY as u64) {
            tokio::spawn(discard(body));
            return Ok(closing(api::too_large()));
        }
        let bytes = match tokio::time::timeout(self.body_timeout, read_body(&mut body)).await {
            Ok(Ok(bytes)) => bytes,
            // Over the limit (a chunked body declares no length).
            Ok(Err(BodyError::TooLarge)) => {
                tokio::spawn(discard(body));
                return Ok(closing(api::too_large()));
            }
            Ok(Err(BodyError::Broken)) | Err(_) => return Err(Dropped),
        };
        let resp = api::handle(&self.app, &user, Request::from_parts(parts, bytes)).await;
        Ok(reply(resp))
    }
}

/// How long, and how much of, a refused body is still read and thrown away so that its client,
/// still sending, gets to read the answer (closing at once would reset the connection under
/// it).
const DISCARD_TIME: Duration = Duration::from_secs(5);
const DISCARD_BYTES: usize = 16 * 1024 * 1024;

enum BodyError {
    TooLarge,
    Broken,
}

/// Reads a body of at most [`MAX_BODY`] bytes.
async fn read_body(body: &mut Incoming) -> Result<Bytes, BodyError> {
    let mut out = bytes::BytesMut::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|_| BodyError::Broken)?;
        if let Ok(data) = frame.into_data() {
            if out.len() + data.len() > MAX_BODY {
                return Err(BodyError::TooLarge);
            }
            out.extend_from_slice(&data);
        }
    }
    Ok(out.freeze())
}

/// Reads what is left of a refused body, within bounds, and drops it.
async fn discard(mut body: Incoming) {
    let drain = async {
        let mut seen = 0;
        while let Some(Ok(frame)) = body.frame().await {
            seen += frame.data_ref().map_or(0, |d| d.len());
            if seen > DISCARD_BYTES {
                return;
            }
        }
    };
    let _ = tokio::time::timeout(DISCARD_TIME, drain).await;
}

/// Raises this process's limit on open files to what the system allows, so the connection
/// cap, not the descriptor table, is what bounds clients. Returns the limit now in force.
pub fn raise_open_files() -> u64 {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit only read and write the struct passed to them.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
            return 1024;
        }
        if lim.rlim_cur < lim.rlim_max {
            let wanted = libc::rlimit {
                rlim_cur: lim.rlim_max,
                rlim_max: lim.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &wanted) == 0 {
                lim = wanted;
            }
        }
    }
    lim.rlim_cur
}
