//! The accept loop: HTTP/1.1 connections served by hyper with the router.
//!
//! Ours rather than `axum::serve` because that one gives hyper no timer, so a
//! client that sends its headers a byte at a time (slowloris) or keeps an
//! idle connection open holds a socket forever. Here a client has
//! `http_header_timeout_seconds` to send a request's headers, and an idle
//! keep-alive connection is closed after the same time (hyper's header timer
//! runs while it waits for the next request). Upgraded WebSockets leave
//! hyper and live by their own rules (`ws`).
//!
//! A response sent before its request's body was read (a 401, a 413, a
//! route that takes no body) says `Connection: close`: hyper drops such a
//! connection after the response, unless the body had already arrived, and
//! a keep-alive client not told so sends its next request into a closed
//! socket. The rest of that body is still read and dropped, as nginx's
//! lingering close does: a connection closed with bytes unread is reset by
//! the kernel, and the reset can destroy the answer on its way to a client
//! that sends its whole body before it reads (Python's `httpx`), which then
//! sees a connection error instead of the 413. At most [`LINGER_BYTES`]
//! within [`LINGER_TIME`] are read, and only while they keep coming (a
//! pause of [`LINGER_IDLE`] ends it: a trickling client is let go).

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::http::{HeaderValue, header};
use axum::middleware::Next;
use axum::response::Response;
use futures_util::StreamExt;
use hyper::body::{Body as HttpBody, Frame, SizeHint};
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// The most of an unread body read and dropped after its answer.
pub const LINGER_BYTES: usize = 64 << 20;
/// How long an unread body is read after its answer, at most.
pub const LINGER_TIME: Duration = Duration::from_secs(10);
/// The longest pause between two pieces of a body read after its answer.
pub const LINGER_IDLE: Duration = Duration::from_secs(1);

/// Serves `app` on `listener` until `shutdown` resolves, then stops
/// accepting and lets requests in flight finish (at most `grace`).
pub async fn serve(
    listener: TcpListener,
    app: Router,
    header_timeout: Duration,
    shutdown: impl Future<Output = ()> + Send + 'static,
    grace: Duration,
) {
    // Cancelled at shutdown: each connection finishes its request in flight,
    // then closes; the tracker says when all have.
    let stopping = CancellationToken::new();
    let connections = TaskTracker::new();
    let mut shutdown = std::pin::pin!(shutdown);
    let app = app.layer(axum::middleware::from_fn(close_unread));
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(header_timeout)
        .keep_alive(true);
    loop {
        let tcp = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok((tcp, _)) => tcp,
                Err(e) => {
                    // Out of file descriptors and the like: wait, do not spin.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        // Envelopes are small writes that must leave at once: no Nagle (with
        // the peer's delayed ACKs it holds a write back by ~40 ms).
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!(error = %e, "cannot set TCP_NODELAY");
        }
        let service = TowerToHyperService::new(app.clone());
        let conn = builder
            .serve_connection(TokioIo::new(tcp), service)
            .with_upgrades();
        let stopping = stopping.clone();
        connections.spawn(async move {
            let mut conn = std::pin::pin!(conn);
            let result = tokio::select! {
                result = conn.as_mut() => result,
                () = stopping.cancelled() => {
                    conn.as_mut().graceful_shutdown();
                    conn.await
                }
            };
            if let Err(e) = result {
                tracing::debug!(error = %e, "connection ended with an error");
            }
        });
    }
    drop(listener);
    stopping.cancel();
    connections.close();
    if tokio::time::timeout(grace, connections.wait())
        .await
        .is_err()
    {
        tracing::warn!("HTTP requests still open after the shutdown grace");
    }
}

/// Adds `Connection: close` to the response of a request whose body was
/// not read to its end (see the module's doc).
async fn close_unread(request: Request, next: Next) -> Response {
    if request.body().is_end_stream() {
        return next.run(request).await;
    }
    let read = Arc::new(AtomicBool::new(false));
    // A client that waits for `100 Continue` sends nothing unless the body
    // is asked for: lingering on one never asked for would invite it to send
    // what was refused.
    let waits = request
        .headers()
        .get(header::EXPECT)
        .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"100-continue"));
    let request = request.map(|inner| {
        Body::new(Watched {
            inner,
            read: read.clone(),
            polled: !waits,
        })
    });
    let mut response = next.run(request).await;
    if !read.load(Ordering::Relaxed) {
        response
            .headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    response
}

/// A request body that says when it has been read to its end, and that is
/// read to its end (within the linger bounds) when dropped before.
struct Watched {
    inner: Body,
    read: Arc<AtomicBool>,
    /// Whether the body was asked for (or needs not be: no `Expect: 100-continue`).
    polled: bool,
}

impl HttpBody for Watched {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        self.polled = true;
        let frame = Pin::new(&mut self.inner).poll_frame(cx);
        if matches!(frame, Poll::Ready(None)) || self.inner.is_end_stream() {
            self.read.store(true, Ordering::Relaxed);
        }
        frame
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl Drop for Watched {
    fn drop(&mut self) {
        if !self.polled || self.read.load(Ordering::Relaxed) || self.inner.is_end_stream() {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        runtime.spawn(linger(std::mem::take(&mut self.inner)));
    }
}

/// Reads the rest of a body no route read, and drops it (within the bounds).
async fn linger(body: Body) {
    let mut stream = body.into_data_stream();
    let read = async {
        let mut total = 0_usize;
        while let Ok(Some(Ok(bytes))) = tokio::time::timeout(LINGER_IDLE, stream.next()).await {
            total += bytes.len();
            if total > LINGER_BYTES {
                return;
            }
        }
    };
    let _ = tokio::time::timeout(LINGER_TIME, read).await;
}
