//! A local stand-in for a model vendor (and for an HTTP tool): it answers each
//! request with the next scripted reply, byte for byte, and records what it
//! was sent.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::Response;
use serde_json::Value;

/// One scripted answer.
#[derive(Clone, Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(&'static str, String)>,
    /// Body pieces, each sent after its pause.
    pub chunks: Vec<(Duration, String)>,
}

impl Reply {
    /// A 200 with these body pieces, sent at once.
    pub fn ok(content_type: &str, chunks: Vec<String>) -> Self {
        Self {
            status: 200,
            headers: vec![("content-type", content_type.to_owned())],
            chunks: chunks.into_iter().map(|c| (Duration::ZERO, c)).collect(),
        }
    }

    /// An SSE stream.
    pub fn sse(chunks: Vec<String>) -> Self {
        Self::ok("text/event-stream", chunks)
    }

    /// A plain JSON answer.
    pub fn json(status: u16, body: &str) -> Self {
        Self {
            status,
            headers: vec![("content-type", "application/json".to_owned())],
            chunks: vec![(Duration::ZERO, body.to_owned())],
        }
    }

    /// A 200 that echoes the request body as JSON.
    pub fn echo() -> Self {
        Self::json(200, "<echo>")
    }

    pub fn header(mut self, name: &'static str, value: &str) -> Self {
        self.headers.push((name, value.to_owned()));
        self
    }

    /// Every piece after `pause`.
    pub fn paced(mut self, pause: Duration) -> Self {
        for c in &mut self.chunks {
            c.0 = pause;
        }
        self
    }
}

/// What the mock was sent.
#[derive(Clone, Debug)]
pub struct Recorded {
    pub method: String,
    pub uri: String,
    pub headers: HeaderMap,
    pub body: Value,
}

#[derive(Default)]
struct Shared {
    replies: Mutex<VecDeque<Reply>>,
    requests: Mutex<Vec<Recorded>>,
    /// Set when a client went away before a streamed reply was finished.
    abandoned: AtomicBool,
}

/// The mock server.
#[derive(Clone)]
pub struct MockServer {
    pub addr: SocketAddr,
    shared: Arc<Shared>,
}

impl MockServer {
    pub async fn start(replies: Vec<Reply>) -> Self {
        let shared = Arc::new(Shared {
            replies: Mutex::new(replies.into()),
            ..Default::default()
        });
        let app = Router::new().fallback(answer).with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Self { addr, shared }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.shared.requests.lock().unwrap().clone()
    }

    /// Whether a client dropped a streamed reply before its end.
    pub fn abandoned(&self) -> bool {
        self.shared.abandoned.load(Ordering::SeqCst)
    }

    /// Whether a client dropped a streamed reply, waiting up to 2 s for it
    /// (a cancelled run drops its request as it ends, not before).
    pub async fn abandoned_soon(&self) -> bool {
        for _ in 0..100 {
            if self.abandoned() {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        false
    }
}

/// Sets `abandoned` when dropped before `finished`.
struct DropWatch {
    shared: Arc<Shared>,
    finished: bool,
}

impl DropWatch {
    fn finish(&mut self) {
        self.finished = true;
    }
}

impl Drop for DropWatch {
    fn drop(&mut self) {
        if !self.finished {
            self.shared.abandoned.store(true, Ordering::SeqCst);
        }
    }
}

async fn answer(
    State(shared): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    // Scripted replies answer POSTs; anything else (an availability probe)
    // gets a 404 and leaves the script alone.
    if method != Method::POST {
        return Response::builder().status(404).body(Body::empty()).unwrap();
    }
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let echo = body.to_string();
    shared.requests.lock().unwrap().push(Recorded {
        method: method.to_string(),
        uri: uri.to_string(),
        headers,
        body,
    });
    let reply = shared
        .replies
        .lock()
        .unwrap()
        .pop_front()
        .unwrap_or_else(|| {
            Reply::json(
                500,
                r#"{"error":{"message":"the mock has no more replies"}}"#,
            )
        });
    let watch = DropWatch {
        shared: shared.clone(),
        finished: false,
    };
    // `<echo>` answers with the request body itself.
    let chunks: VecDeque<(Duration, String)> = reply
        .chunks
        .into_iter()
        .map(|(pause, c)| {
            if c == "<echo>" {
                (pause, echo.clone())
            } else {
                (pause, c)
            }
        })
        .collect();
    let stream =
        futures_util::stream::unfold((chunks, watch), |(mut chunks, mut watch)| async move {
            match chunks.pop_front() {
                Some((pause, chunk)) => {
                    if !pause.is_zero() {
                        tokio::time::sleep(pause).await;
                    }
                    Some((
                        Ok::<_, std::convert::Infallible>(Bytes::from(chunk)),
                        (chunks, watch),
                    ))
                }
                None => {
                    watch.finish();
                    None
                }
            }
        });
    let mut response = Response::builder().status(StatusCode::from_u16(reply.status).unwrap());
    for (name, value) in reply.headers {
        response = response.header(name, value);
    }
    response.body(Body::from_stream(stream)).unwrap()
}
