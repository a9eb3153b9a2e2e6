//! The HTTP server: an accept loop that serves the [`router`](crate::router)
//! over HTTP/1.1 and bounds what a slow or silent client can hold.
//!
//! Every limit is a `server.*` setting ([`ServerConfig`]):
//!
//! - `header_read_timeout_ms`: a request head (request line and headers)
//!   must arrive in full within this of the connection being accepted, or
//!   of its previous response; otherwise the connection is closed without
//!   an answer. This is hyper's header read timeout, which also runs while
//!   a keep-alive connection waits for its next request.
//! - `body_read_timeout_ms`: a request body must arrive in full within this
//!   of the end of its head. A body that does not (shorter than its
//!   `Content-Length`, or trickling in) makes the read fail with
//!   [`BodyReadTimeout`]; the request is answered 408 in the envelope with
//!   `Connection: close`, whatever route it was for, and the connection is
//!   closed.
//! - `idle_timeout_ms`: a connection with no request in progress and no
//!   byte read or written for this long is closed (a per-connection
//!   watchdog; it also ends a connection whose client stopped reading its
//!   response).
//! - `max_connections`: connections held at once. At the cap the loop stops
//!   accepting, so further clients wait in the listen backlog until a
//!   connection closes, which the timeouts above bound.
//!
//! A connection answered 413 or 408 closes with a lingering close, as
//! nginx's `lingering_close` does: the client may still be sending the body
//! that was refused, and closing a socket with unread input resets the
//! connection, so that the client's writes fail (and on some systems its
//! unread answer is dropped) before it reads why. After the answer the
//! server half-closes its side and reads and discards input until the
//! client closes, for at most [`LINGER_TIME`] in all, [`LINGER_IDLE`]
//! without a byte, and [`LINGER_BYTES`]. The connection keeps its place
//! under `max_connections` meanwhile.
//!
//! [`Server::run`] stops accepting when its token is cancelled, closes idle
//! connections and lets in-flight requests finish (the timeouts still
//! apply), then returns.

use std::convert::Infallible;
use std::fmt::Debug;
use std::future::Future;
use std::io;
use std::pin::{pin, Pin};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::ConnectInfo;
use axum::http::{Request, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::serve::Listener;
use axum::Router;
use http_body::{Frame, SizeHint};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::Semaphore;
use tokio::time::{sleep_until, Instant, Sleep};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tower::ServiceExt;
use xtimer_core::config::ServerConfig;

use crate::ApiError;

/// How often, at most, reaching `server.max_connections` is logged.
const FULL_WARN_EVERY: Duration = Duration::from_secs(60);

/// Longest lingering close: input is discarded for at most this long after
/// a 413 or 408 before the connection is closed (nginx's `lingering_time`,
/// 30 s there; a refused body is worth less here).
pub const LINGER_TIME: Duration = Duration::from_secs(2);
/// A lingering close ends when no byte came in for this long (nginx's
/// `lingering_timeout`, 5 s there).
pub const LINGER_IDLE: Duration = Duration::from_secs(1);
/// A lingering close ends once it has discarded this many bytes.
pub const LINGER_BYTES: usize = 64 * 1024 * 1024;
/// Bytes read at a time while lingering.
const LINGER_READ_BYTES: usize = 16 * 1024;

/// The HTTP server of one node: `app` served on `listener` under the
/// limits of a [`ServerConfig`].
pub struct Server<L> {
    listener: L,
    app: Router,
    limits: Limits,
}

/// The connection limits, from [`ServerConfig`].
#[derive(Debug, Clone, Copy)]
struct Limits {
    header_read: Duration,
    body_read: Duration,
    idle: Duration,
    max_connections: usize,
}

impl<L> Server<L>
where
    L: Listener,
    L::Addr: Clone + Debug + Send + Sync + 'static,
{
    /// Serves `app` on `listener` with `config`'s timeouts and connection
    /// cap. The peer address of each connection is given to handlers as
    /// `ConnectInfo<L::Addr>` (the rate limit keys anonymous callers by it).
    pub fn new(listener: L, app: Router, config: &ServerConfig) -> Self {
        let limits = Limits {
            header_read: Duration::from_millis(config.header_read_timeout_ms),
            body_read: Duration::from_millis(config.body_read_timeout_ms),
            idle: Duration::from_millis(config.idle_timeout_ms),
            max_connections: config.max_connections.max(1),
        };
        Self { listener, app, limits }
    }

    /// Accepts and serves connections until `shutdown` is cancelled; then
    /// stops accepting (the listener is closed), lets every open connection
    /// finish its request in flight, and returns once all are closed.
    pub async fn run(self, shutdown: CancellationToken) {
        let Self { mut listener, app, limits } = self;
        let permits = Arc::new(Semaphore::new(limits.max_connections));
        let connections = TaskTracker::new();
        let mut http = http1::Builder::new();
        http.timer(TokioTimer::new()).header_read_timeout(limits.header_read);
        let mut warned_full: Option<Instant> = None;
        loop {
            let permit = match permits.clone().try_acquire_owned() {
                Ok(permit) => permit,
                Err(_) => {
                    if warned_full.is_none_or(|at| at.elapsed() >= FULL_WARN_EVERY) {
                        warned_full = Some(Instant::now());
                        tracing::warn!(
                            max_connections = limits.max_connections,
                            "Connection limit reached (server.max_connections): new clients wait until one closes."
                        );
                    }
                    tokio::select! {
                        () = shutdown.cancelled() => break,
                        permit = permits.clone().acquire_owned() => permit.expect("the semaphore is never closed"),
                    }
                }
            };
            let (io, remote) = tokio::select! {
                () = shutdown.cancelled() => break,
                accepted = listener.accept() => accepted,
            };
            tracing::trace!(?remote, "Connection accepted.");
            let connection =
                Connection { http: http.clone(), app: app.clone(), remote, limits, shutdown: shutdown.clone() };
            connections.spawn(async move {
                connection.serve(io).await;
                drop(permit);
            });
        }
        drop(listener);
        connections.close();
        connections.wait().await;
    }
}

/// One accepted connection and what serving it needs.
struct Connection<A> {
    http: http1::Builder,
    app: Router,
    remote: A,
    limits: Limits,
    shutdown: CancellationToken,
}

impl<A> Connection<A>
where
    A: Clone + Debug + Send + Sync + 'static,
{
    /// Serves requests on `io` until the client closes, a timeout closes
    /// it, or shutdown lets its last request finish.
    async fn serve<I>(self, io: I)
    where
        I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let Self { http, app, remote, limits, shutdown } = self;
        let activity = Arc::new(Activity::new());
        let linger = Arc::new(AtomicBool::new(false));
        let io = TokioIo::new(Lingering::new(Tracked { io, activity: activity.clone() }, linger.clone()));
        let service = RequestService { app, remote: remote.clone(), activity: activity.clone(), linger, limits };
        let mut conn = pin!(http.serve_connection(io, service));
        let mut draining = false;
        loop {
            let idle_at = activity.idle_deadline(limits.idle);
            tokio::select! {
                result = conn.as_mut() => {
                    if let Err(err) = result {
                        tracing::debug!(?remote, error = %err, "Connection ended with an error.");
                    }
                    return;
                }
                () = shutdown.cancelled(), if !draining => {
                    draining = true;
                    conn.as_mut().graceful_shutdown();
                }
                () = sleep_until(idle_at) => {
                    if activity.is_idle(limits.idle) {
                        tracing::debug!(?remote, "Closing an idle connection (server.idle_timeout_ms).");
                        return;
                    }
                }
            }
        }
    }
}

/// When a connection last moved a byte, and how many of its requests are
/// being handled.
struct Activity {
    start: Instant,
    /// Nanoseconds from `start` to the last byte read or written, or the
    /// last request handled.
    last: AtomicU64,
    in_flight: AtomicUsize,
}

impl Activity {
    fn new() -> Self {
        Self { start: Instant::now(), last: AtomicU64::new(0), in_flight: AtomicUsize::new(0) }
    }

    fn touch(&self) {
        let nanos = u64::try_from(self.start.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.last.fetch_max(nanos, Ordering::Relaxed);
    }

    fn last(&self) -> Instant {
        self.start + Duration::from_nanos(self.last.load(Ordering::Relaxed))
    }

    /// When the connection becomes idle if nothing happens: `idle` after
    /// the last activity, or (while a request is handled) `idle` from now,
    /// to look again then.
    fn idle_deadline(&self, idle: Duration) -> Instant {
        if self.in_flight.load(Ordering::Relaxed) > 0 {
            Instant::now() + idle
        } else {
            self.last() + idle
        }
    }

    /// Whether no request is handled and nothing moved for `idle`.
    fn is_idle(&self, idle: Duration) -> bool {
        self.in_flight.load(Ordering::Relaxed) == 0 && self.last() + idle <= Instant::now()
    }
}

/// A request being handled; counts in [`Activity::in_flight`] until dropped.
struct InFlight(Arc<Activity>);

impl InFlight {
    fn start(activity: &Arc<Activity>) -> Self {
        activity.in_flight.fetch_add(1, Ordering::Relaxed);
        Self(activity.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.touch();
        self.0.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A connection's IO that records every byte moved in its [`Activity`].
struct Tracked<I> {
    io: I,
    activity: Arc<Activity>,
}

impl<I: AsyncRead + Unpin> AsyncRead for Tracked<I> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let poll = Pin::new(&mut self.io).poll_read(cx, buf);
        if matches!(poll, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.activity.touch();
        }
        poll
    }
}

impl<I: AsyncWrite + Unpin> AsyncWrite for Tracked<I> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let poll = Pin::new(&mut self.io).poll_write(cx, buf);
        if matches!(poll, Poll::Ready(Ok(n)) if n > 0) {
            self.activity.touch();
        }
        poll
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let poll = Pin::new(&mut self.io).poll_write_vectored(cx, bufs);
        if matches!(poll, Poll::Ready(Ok(n)) if n > 0) {
            self.activity.touch();
        }
        poll
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

/// A connection's IO whose shutdown, once the connection's last answer
/// asked for it, is a lingering close: hyper flushes the answer and shuts
/// the IO down, which half-closes the write side and then discards input
/// until the client closes or a bound is reached ([`LINGER_TIME`],
/// [`LINGER_IDLE`], [`LINGER_BYTES`]); hyper drops the IO after that.
struct Lingering<I> {
    io: I,
    /// Set by [`RequestService`] after a 413 or 408.
    wanted: Arc<AtomicBool>,
    /// The discarding under way, once the write side is shut down.
    drain: Option<Drain>,
}

/// Input discarded by a lingering close, and when it ends.
struct Drain {
    /// [`LINGER_TIME`] after the close began.
    end: Instant,
    /// The earlier of `end` and [`LINGER_IDLE`] after the last byte.
    timer: Pin<Box<Sleep>>,
    discarded: usize,
    scratch: Box<[u8]>,
}

impl Drain {
    fn start() -> Self {
        let now = Instant::now();
        let end = now + LINGER_TIME;
        Self {
            end,
            timer: Box::pin(sleep_until(end.min(now + LINGER_IDLE))),
            discarded: 0,
            scratch: vec![0; LINGER_READ_BYTES].into_boxed_slice(),
        }
    }

    /// Reads and discards from `io` until it ends, fails, or a bound is
    /// reached.
    fn poll_discard<I: AsyncRead + Unpin>(&mut self, io: &mut I, cx: &mut Context<'_>) -> Poll<()> {
        while self.discarded < LINGER_BYTES {
            if self.timer.as_mut().poll(cx).is_ready() {
                return Poll::Ready(());
            }
            let mut buf = ReadBuf::new(&mut self.scratch);
            match Pin::new(&mut *io).poll_read(cx, &mut buf) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Ok(())) if !buf.filled().is_empty() => {
                    self.discarded += buf.filled().len();
                    let next = self.end.min(Instant::now() + LINGER_IDLE);
                    self.timer.as_mut().reset(next);
                }
                // The client closed (or reset) its side: nothing to wait for.
                Poll::Ready(_) => return Poll::Ready(()),
            }
        }
        Poll::Ready(())
    }
}

impl<I> Lingering<I> {
    fn new(io: I, wanted: Arc<AtomicBool>) -> Self {
        Self { io, wanted, drain: None }
    }
}

impl<I: AsyncRead + Unpin> AsyncRead for Lingering<I> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl<I: AsyncRead + AsyncWrite + Unpin> AsyncWrite for Lingering<I> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if this.drain.is_none() {
            ready!(Pin::new(&mut this.io).poll_shutdown(cx))?;
            if !this.wanted.load(Ordering::Relaxed) {
                return Poll::Ready(Ok(()));
            }
        }
        this.drain.get_or_insert_with(Drain::start).poll_discard(&mut this.io, cx).map(Ok)
    }
}

/// The per-connection service: adds the peer address, puts the body under
/// its deadline, answers 408 when the body missed it, and asks for a
/// lingering close after a 413 or 408.
#[derive(Clone)]
struct RequestService<A> {
    app: Router,
    remote: A,
    activity: Arc<Activity>,
    /// Whether the connection's last answer asks for a lingering close.
    linger: Arc<AtomicBool>,
    limits: Limits,
}

impl<A> hyper::service::Service<Request<Incoming>> for RequestService<A>
where
    A: Clone + Send + Sync + 'static,
{
    type Response = Response;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response, Infallible>> + Send>>;

    fn call(&self, mut request: Request<Incoming>) -> Self::Future {
        let in_flight = InFlight::start(&self.activity);
        request.extensions_mut().insert(ConnectInfo(self.remote.clone()));
        let timeout = self.limits.body_read;
        let timed_out = Arc::new(AtomicBool::new(false));
        let request = request.map(|body| {
            Body::new(TimedBody {
                body,
                deadline: Instant::now() + timeout,
                sleep: None,
                timeout,
                timed_out: timed_out.clone(),
            })
        });
        let app = self.app.clone();
        let linger = self.linger.clone();
        Box::pin(async move {
            let response = app.oneshot(request).await;
            drop(in_flight);
            // Whatever the handler made of a body cut short (the /v1 routes
            // answer input errors in their own scheme), the answer is 408.
            let response = if timed_out.load(Ordering::Relaxed) {
                ApiError::BodyReadTimeout { timeout_ms: millis(timeout) }.into_response()
            } else {
                response?
            };
            linger.store(leaves_body_unread(&response), Ordering::Relaxed);
            Ok(response)
        })
    }
}

/// Whether `response` refuses a body it may not have read to its end (413,
/// 408), so that the client may still be sending it.
fn leaves_body_unread(response: &Response) -> bool {
    matches!(response.status(), StatusCode::PAYLOAD_TOO_LARGE | StatusCode::REQUEST_TIMEOUT)
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// The error of a request body read past `server.body_read_timeout_ms`;
/// [`crate::extract`] maps it to [`ApiError::BodyReadTimeout`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("request body not received in full within {timeout_ms} ms (server.body_read_timeout_ms)")]
pub struct BodyReadTimeout {
    /// The timeout, ms.
    pub timeout_ms: u64,
}

/// A request body that fails with [`BodyReadTimeout`] once its deadline
/// passes, and records that it did.
struct TimedBody<B> {
    body: B,
    deadline: Instant,
    sleep: Option<Pin<Box<Sleep>>>,
    timeout: Duration,
    timed_out: Arc<AtomicBool>,
}

impl<B> http_body::Body for TimedBody<B>
where
    B: http_body::Body<Data = Bytes> + Unpin,
    B::Error: Into<axum::BoxError>,
{
    type Data = Bytes;
    type Error = axum::BoxError;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = &mut *self;
        if let Poll::Ready(frame) = Pin::new(&mut this.body).poll_frame(cx) {
            return Poll::Ready(frame.map(|f| f.map_err(Into::into)));
        }
        // Waiting for more: only then is the deadline looked at, so what
        // already arrived is read however late the handler reads it, while
        // a body trickling in is cut off at its first wait past the deadline.
        let deadline = this.deadline;
        let sleep = this.sleep.get_or_insert_with(|| Box::pin(sleep_until(deadline)));
        if sleep.as_mut().poll(cx).is_ready() {
            this.timed_out.store(true, Ordering::Relaxed);
            return Poll::Ready(Some(Err(Box::new(BodyReadTimeout { timeout_ms: millis(this.timeout) }))));
        }
        Poll::Pending
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}
