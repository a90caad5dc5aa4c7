//! The accept loop: HTTP/1.1 connections served by hyper with the router.
//!
//! Ours rather than `axum::serve` because that one gives hyper no timer, so a
//! client that sends its headers a byte at a time (slowloris) or keeps an
//! idle connection open holds a socket forever. Here a client has
//! `http_header_timeout_seconds` to send a request's headers, and an idle
//! keep-alive connection is closed after the same time (hyper's header timer
//! runs while it waits for the next request). Upgraded WebSockets leave
//! hyper and live by their own rules (`ws`).

use std::time::Duration;

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

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
