//! One client connection's clock (SECURITY.md V7). Between requests a client has
//! `idle` to start the next one; once its first byte arrives, the request's head must be
//! complete within `header`; a response the client does not read for `write_stall` ends the
//! connection. While a request is being handled the connection is busy and reads are the
//! handler's business (it bounds the body's time itself).

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};

/// The timeouts of a connection.
#[derive(Debug, Clone, Copy)]
pub struct Timeouts {
    /// Longest wait for the first byte of a request, between requests.
    pub idle: Duration,
    /// Longest a request's head may take from its first byte.
    pub header: Duration,
    /// Longest a response may wait for the client to read it.
    pub write_stall: Duration,
}

/// Where a connection is between requests: shared by its I/O and its request handler.
pub struct Phase {
    busy: AtomicBool,
    /// When the connection last became idle (accepted, or a response was handed over).
    idle_since: Mutex<Instant>,
    /// When the first byte of the next request's head arrived.
    head_started: Mutex<Option<Instant>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Phase {
    fn new() -> Self {
        Phase {
            busy: AtomicBool::new(false),
            idle_since: Mutex::new(Instant::now()),
            head_started: Mutex::new(None),
        }
    }

    /// A request's head is complete: its handler runs.
    pub fn busy(&self) {
        self.busy.store(true, Ordering::SeqCst);
        *lock(&self.head_started) = None;
    }

    /// The handler answered: the clock of the next request starts.
    pub fn idle(&self) {
        *lock(&self.idle_since) = Instant::now();
        self.busy.store(false, Ordering::SeqCst);
    }

    /// When the connection is given up unless more arrives, while it waits for a request.
    fn read_deadline(&self, t: &Timeouts) -> Option<Instant> {
        if self.busy.load(Ordering::SeqCst) {
            return None;
        }
        Some(match *lock(&self.head_started) {
            Some(started) => started + t.header,
            None => *lock(&self.idle_since) + t.idle,
        })
    }
}

/// A stream with a connection's clock.
pub struct Clocked<S> {
    inner: S,
    phase: Arc<Phase>,
    timeouts: Timeouts,
    read_timer: Pin<Box<Sleep>>,
    write_timer: Pin<Box<Sleep>>,
    write_stalled: bool,
}

impl<S> Clocked<S> {
    pub fn new(inner: S, timeouts: Timeouts) -> Self {
        let far = Instant::now() + Duration::from_secs(86_400);
        Clocked {
            inner,
            phase: Arc::new(Phase::new()),
            timeouts,
            read_timer: Box::pin(tokio::time::sleep_until(far)),
            write_timer: Box::pin(tokio::time::sleep_until(far)),
            write_stalled: false,
        }
    }

    /// The phase its request handler reports to.
    pub fn phase(&self) -> Arc<Phase> {
        self.phase.clone()
    }
}

fn timed_out(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::TimedOut, what.to_string())
}

impl<S: AsyncRead + Unpin> AsyncRead for Clocked<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_read(cx, buf) {
            Poll::Ready(r) => {
                if buf.filled().len() > before && !this.phase.busy.load(Ordering::SeqCst) {
                    lock(&this.phase.head_started).get_or_insert_with(Instant::now);
                }
                Poll::Ready(r)
            }
            Poll::Pending => {
                let Some(deadline) = this.phase.read_deadline(&this.timeouts) else {
                    return Poll::Pending;
                };
                if this.read_timer.deadline() != deadline {
                    this.read_timer.as_mut().reset(deadline);
                }
                match this.read_timer.as_mut().poll(cx) {
                    Poll::Ready(()) => Poll::Ready(Err(timed_out("the client was too slow"))),
                    Poll::Pending => Poll::Pending,
                }
            }
        }
    }
}

impl<S: AsyncWrite + Unpin> Clocked<S> {
    /// A write that made no progress: start (or check) the stall clock.
    fn stalled<T>(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<T>> {
        if !self.write_stalled {
            self.write_stalled = true;
            let deadline = Instant::now() + self.timeouts.write_stall;
            self.write_timer.as_mut().reset(deadline);
        }
        match self.write_timer.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(timed_out("the client stopped reading"))),
            Poll::Pending => Poll::Pending,
        }
    }

    fn progressed<T>(
        &mut self,
        r: Poll<io::Result<T>>,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<T>> {
        match r {
            Poll::Pending => self.stalled(cx),
            ready => {
                self.write_stalled = false;
                ready
            }
        }
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Clocked<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write(cx, data);
        self.progressed(r, cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.progressed(r, cx)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let r = Pin::new(&mut self.inner).poll_flush(cx);
        self.progressed(r, cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let r = Pin::new(&mut self.inner).poll_shutdown(cx);
        self.progressed(r, cx)
    }
}
