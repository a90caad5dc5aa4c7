//! The Vercel AI SDK's WebSocket chat transport (`ai` 7's
//! `WebSocketChatTransport`) at `/v1/ai-sdk/ws`: one socket carries many
//! requests, each routed by its `requestId`.
//!
//! Client frames: `send {requestId, id, trigger, messageId?, messages, body}`
//! (what the HTTP transport posts: a turn, or the answers an assistant message
//! carries), `resume {requestId, id}` (the run in flight, replayed from its
//! start), `abort {requestId}` (cancels that request's run; a disconnect
//! does not). Server frames: `start`, `chunk {sequence, chunk}` (sequence
//! from 0 per request, as the transport requires), `end`, `error
//! {errorText}`, `no-active` (a resume with no run in flight). The chunks are
//! the HTTP transport's (`wire::AiSdk`). The token goes in the handshake
//! (`?access_token=`: the transport's `params`), as for `/v1/ws`.

use std::collections::HashMap;
use std::sync::atomic::Ordering;

use axum::extract::State;
use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade};
use axum::response::Response;
use futures_util::{SinkExt, StreamExt};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tracing::Instrument;

use super::ai_sdk::{AiSdkRequest, Prepared, reconnect, send};
use super::auth::AuthUser;
use super::error::ApiError;
use super::rate::FrameLimiter;
use super::state::AppState;
use super::ws::{Read, limited, read};

/// Requests in flight on one socket at most.
const MAX_REQUESTS: usize = 16;
/// Frames queued for the socket at most (a request's stream waits beyond).
const QUEUE: usize = 256;

/// A client frame.
#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
enum Frame {
    Send {
        #[serde(rename = "requestId")]
        request_id: String,
        /// The transport's `body` option (a new chat's `agent`).
        #[serde(default)]
        body: Value,
        #[serde(flatten)]
        request: Box<AiSdkRequest>,
    },
    Resume {
        #[serde(rename = "requestId")]
        request_id: String,
        id: String,
    },
    Abort {
        #[serde(rename = "requestId")]
        request_id: String,
    },
}

/// `GET /v1/ai-sdk/ws`: the upgrade (401 first without a valid token).
pub async fn upgrade(
    State(state): State<AppState>,
    AuthUser { user, token, .. }: AuthUser,
    ws: WebSocketUpgrade,
) -> Result<Response, ApiError> {
    let slot = state.sockets.take(&user)?;
    Ok(
        limited(ws, state.config.max_message_bytes).on_upgrade(move |socket| {
            let conn_id = state.next_conn_id.fetch_add(1, Ordering::Relaxed);
            let span = tracing::info_span!("ai_sdk_ws", conn_id, user = %user);
            let tracker = state.tracker.clone();
            let serving = async move {
                let _open = crate::metrics::ConnectionGauge::open("ai-sdk-ws");
                serve(state, user, token, socket).await;
                drop(slot);
            };
            tracker.track_future(serving.instrument(span))
        }),
    )
}

/// One request's stream, and the chat it runs in (for `abort`).
struct InFlight {
    task: JoinHandle<()>,
    chat: Option<String>,
}

async fn serve(state: AppState, user: String, token: Option<String>, socket: WebSocket) {
    let (mut sink, mut stream) = socket.split();
    let (tx, mut rx) = mpsc::channel::<String>(QUEUE);
    let writer = tokio::spawn(async move {
        while let Some(frame) = rx.recv().await {
            if sink.send(Message::Text(frame.into())).await.is_err() {
                break;
            }
        }
        sink
    });
    let mut requests: HashMap<String, InFlight> = HashMap::new();
    let frames = FrameLimiter::new(state.config.limits.frames_per_second);
    let shutdown = state.shutdown.clone();
    // How the socket closes: as `/v1/ws` does (1001 at shutdown, 1009 for a
    // message over the limit…).
    let close: (u16, &str) = loop {
        let msg = tokio::select! {
            () = shutdown.cancelled() => break (1001, "server shutting down"),
            msg = stream.next() => msg,
        };
        let text = match read(msg, state.config.max_message_bytes) {
            Read::Text(text) => text,
            Read::Binary => {
                let _ = tx.try_send(error_frame("", "binary frames are not supported"));
                continue;
            }
            Read::Control => continue,
            Read::Close(code, reason) => break (code, reason),
            Read::Gone => break (1000, ""),
        };
        requests.retain(|_, r| !r.task.is_finished());
        if let Err(e) = frames.check() {
            // Never awaited: a client that does not read is not read either.
            let _ = tx.try_send(error_frame(&request_id_of(&text), &e.to_string()));
            continue;
        }
        let frame = match serde_json::from_str::<Frame>(&text) {
            Ok(frame) => frame,
            Err(e) => {
                let why = format!("invalid frame: {e}");
                let _ = tx.try_send(error_frame(&request_id_of(&text), &why));
                continue;
            }
        };
        match frame {
            Frame::Abort { request_id } => {
                if let Some(r) = requests.remove(&request_id) {
                    r.task.abort();
                    if let Some(chat) = r.chat {
                        let (chat_id, _) = super::sse::conversation_chat(&user, Some(&chat));
                        if let Err(e) = state.registry.cancel(chat_id, &user).await {
                            tracing::debug!(error = %e, "abort: nothing to cancel");
                        }
                    }
                }
            }
            Frame::Send { request_id, .. } | Frame::Resume { request_id, .. }
                if requests.contains_key(&request_id) || requests.len() >= MAX_REQUESTS =>
            {
                let why = if requests.contains_key(&request_id) {
                    "this requestId is in flight already"
                } else {
                    "too many requests in flight on this socket"
                };
                let _ = tx.try_send(error_frame(&request_id, why));
            }
            Frame::Send {
                request_id,
                body,
                mut request,
            } => {
                if request.agent.is_none() {
                    request.agent = body["agent"].as_str().map(str::to_owned);
                }
                let chat = Some(request.id.clone());
                let (state, user, token, tx) =
                    (state.clone(), user.clone(), token.clone(), tx.clone());
                let id = request_id.clone();
                let task = tokio::spawn(async move {
                    let prepared = send(&state, &user, token.as_deref(), *request).await;
                    answer(prepared.map(Some), &id, &tx).await;
                });
                requests.insert(request_id, InFlight { task, chat });
            }
            Frame::Resume { request_id, id } => {
                let chat = Some(id.clone());
                let (state, user, tx) = (state.clone(), user.clone(), tx.clone());
                let rid = request_id.clone();
                let task = tokio::spawn(async move {
                    answer(reconnect(&state, &user, &id).await, &rid, &tx).await;
                });
                requests.insert(request_id, InFlight { task, chat });
            }
        }
    };
    // The socket is gone: its streams stop; the runs go on.
    for r in requests.into_values() {
        r.task.abort();
    }
    drop(tx);
    if let Ok(mut sink) = writer.await {
        let (code, reason) = close;
        let frame = CloseFrame {
            code,
            reason: reason.into(),
        };
        let _ = sink.send(Message::Close(Some(frame))).await;
        let _ = sink.close().await;
    }
}

/// Streams one request's response as frames.
async fn answer(prepared: Result<Option<Prepared>, ApiError>, id: &str, tx: &mpsc::Sender<String>) {
    let prepared = match prepared {
        Ok(Some(p)) => p,
        Ok(None) => {
            let _ = tx
                .send(json!({"type": "no-active", "requestId": id}).to_string())
                .await;
            return;
        }
        Err(e) => {
            let _ = tx.send(error_frame(id, &e.to_string())).await;
            return;
        }
    };
    if tx
        .send(json!({"type": "start", "requestId": id}).to_string())
        .await
        .is_err()
    {
        return;
    }
    let items = prepared.items();
    tokio::pin!(items);
    // The chunks are JSON already (the encoder wrote them): spliced into
    // their frames, not parsed again.
    let request = Value::from(id).to_string();
    let mut sequence = 0u64;
    while let Some(item) = items.next().await {
        if item.out.data == "[DONE]" {
            continue;
        }
        let frame = format!(
            r#"{{"type":"chunk","requestId":{request},"sequence":{sequence},"chunk":{}}}"#,
            item.out.data
        );
        if tx.send(frame).await.is_err() {
            return;
        }
        sequence += 1;
    }
    let _ = tx
        .send(json!({"type": "end", "requestId": id}).to_string())
        .await;
}

fn error_frame(request_id: &str, why: &str) -> String {
    json!({"type": "error", "requestId": request_id, "errorText": why}).to_string()
}

/// The `requestId` of a frame that could not be read, if it has one.
fn request_id_of(text: &str) -> String {
    serde_json::from_str::<Value>(text)
        .ok()
        .and_then(|v| v["requestId"].as_str().map(str::to_owned))
        .unwrap_or_default()
}
