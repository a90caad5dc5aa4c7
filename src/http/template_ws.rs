//! Seed 004's WebSocket dialect at `/api/chat/ws?definition_id=AGENT`
//! (`&conversation_id=CHAT` to rejoin, `&last_seq=N` to get only what
//! followed N): an encoder of the same log as `/v1/ws`, so a template
//! conversation can be driven by seed 004's front end and by the native
//! protocol at once, and a rejoin replays what was missed.
//!
//! Client: `start`, `message {content}`, `ping`. Server: `connected`,
//! `content`, `widget`, `progress`, `message_complete`, `complete`, `error`,
//! `pong` (seed 004 §2.3–2.5). A `message` answers the widget waiting for the
//! user, if any (its `content` is the option or the text; `""` skips a
//! skippable widget; a JSON array chooses several options), else it is a
//! user message.

use axum::extract::ws::{CloseFrame, Message, Utf8Bytes, WebSocket, WebSocketUpgrade};
use axum::extract::{Query, State};
use axum::response::Response;
use futures_util::{SinkExt, StreamExt};
use serde::Deserialize;
use serde_json::{Value, json};
use uuid::Uuid;

use super::auth::AuthUser;
use super::error::ApiError;
use super::rate::FrameLimiter;
use super::state::AppState;
use super::ws::Read;
use crate::protocol::limits;
use crate::session::{Caller, Outbound, SessionError, Subscriber};
use crate::wire::template_ws::{Waiting, answer_of, encode, unreadable};

#[derive(Deserialize)]
pub(super) struct Params {
    definition_id: String,
    #[serde(default)]
    conversation_id: Option<Uuid>,
    #[serde(default)]
    last_seq: Option<u64>,
}

/// `GET /api/chat/ws`: 401 before the upgrade; an unknown agent is 422.
pub(super) async fn upgrade(
    State(state): State<AppState>,
    AuthUser { user, token, .. }: AuthUser,
    Query(params): Query<Params>,
    ws: WebSocketUpgrade,
) -> Result<Response, ApiError> {
    if state.registry.agents().get(&params.definition_id).is_none() {
        return Err(SessionError::UnknownAgent(params.definition_id).into());
    }
    let slot = state.sockets.take(&user)?;
    let max = state.config.max_message_bytes;
    Ok(super::ws::limited(ws, max).on_upgrade(move |socket| {
        let tracker = state.tracker.clone();
        tracker.track_future(async move {
            serve(socket, state, user, token, params).await;
            drop(slot);
        })
    }))
}

async fn serve(
    socket: WebSocket,
    state: AppState,
    user: String,
    bearer: Option<String>,
    params: Params,
) {
    let _open = crate::metrics::ConnectionGauge::open("ws");
    let chat_id = params.conversation_id.unwrap_or_else(Uuid::new_v4);
    let (sub, mut rx) = Subscriber::channel(
        state
            .next_conn_id
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed),
        state.config.outbound_queue,
        state.config.outbound_queue_bytes,
    );
    let (mut sink, mut stream) = socket.split();
    let send = |v: Value| Message::Text(Utf8Bytes::from(v.to_string()));
    let hello = json!({"type": "connected", "conversation_id": chat_id, "definition_id": params.definition_id});
    if sink.send(send(hello)).await.is_err() {
        return;
    }
    let registry = state.registry.clone();
    let rejoin = params.conversation_id.is_some();
    if rejoin
        && let Err(e) = registry
            .resume(chat_id, &user, params.last_seq.unwrap_or(0), sub.clone())
            .await
    {
        let _ = sink.send(send(error_frame(&e))).await;
        let close = CloseFrame {
            code: 1000,
            reason: "cannot rejoin this conversation".into(),
        };
        let _ = sink.send(Message::Close(Some(close))).await;
        return;
    }
    let mut waiting = Waiting::new();
    let mut started = rejoin;
    let max = state.config.max_message_bytes;
    let frames = FrameLimiter::new(state.config.limits.frames_per_second);
    let close = loop {
        tokio::select! {
            () = state.shutdown.cancelled() => break (1001, "server shutting down"),
            // The chat found this connection too slow (1013): it resumes.
            () = sub.closer.closed() => break sub.closer.why(),
            out = rx.recv() => {
                let Some(out) = out else { break sub.closer.why() };
                let mut broken = false;
                let frames = match out {
                    Outbound::Event(json) => encode(&json, &mut waiting, &mut broken),
                    Outbound::Frame(text) => serde_json::from_str::<Value>(&text)
                        .ok()
                        .filter(|v| v["type"] == "chat.error")
                        .map(|v| vec![json!({"type": "error", "data": {"message": v["message"], "error_code": v["error_code"]}})])
                        .unwrap_or_default(),
                    Outbound::Replay(mut replay) => {
                        // Page by page: a long log never sits in memory whole.
                        let mut failed = None;
                        loop {
                            match replay.next_page().await {
                                Ok(Some(page)) => {
                                    for json in &page {
                                        for f in encode(json, &mut waiting, &mut broken) {
                                            if sink.feed(send(f)).await.is_err() {
                                                return;
                                            }
                                        }
                                        if broken {
                                            break;
                                        }
                                    }
                                    if broken {
                                        break;
                                    }
                                }
                                Ok(None) => break,
                                Err(e) => {
                                    tracing::error!(error = %e, "replay failed");
                                    failed = Some(unreadable());
                                    broken = true;
                                    break;
                                }
                            }
                        }
                        failed.into_iter().collect()
                    }
                };
                for f in frames {
                    if sink.feed(send(f)).await.is_err() {
                        return;
                    }
                }
                if sink.flush().await.is_err() {
                    return;
                }
                // Delivering anything after a gap would hide it: the client
                // rejoins (and meets the same envelope, loudly, again).
                if broken {
                    break (1011, "the chat log cannot be read");
                }
            }
            msg = stream.next() => {
                let read = super::ws::read(msg, max);
                if matches!(read, Read::Text(_) | Read::Binary)
                    && let Err(e) = frames.check()
                {
                    crate::metrics::error_sent(e.code().as_str());
                    let _ = sink.send(send(error_frame(&e))).await;
                    continue;
                }
                let text = match read {
                    Read::Text(text) => text,
                    Read::Binary => {
                        let e = json!({"type": "error", "data": {"message": super::ws::BINARY_REFUSED, "error_code": "SCHEMA_VALIDATION_FAILED"}});
                        let _ = sink.send(send(e)).await;
                        continue;
                    }
                    Read::Control => continue,
                    Read::Close(code, reason) => break (code, reason),
                    Read::Gone => break (1000, ""),
                };
                let Ok(v) = serde_json::from_str::<Value>(&text) else {
                    let e = json!({"type": "error", "data": {"message": "send one JSON object per message", "error_code": "SCHEMA_VALIDATION_FAILED"}});
                    let _ = sink.send(send(e)).await;
                    continue;
                };
                let caller = Caller::bearing(&user, bearer.as_deref());
                let result = match v["type"].as_str() {
                    Some("ping") => {
                        let _ = sink.send(send(json!({"type": "pong"}))).await;
                        Ok(())
                    }
                    Some("start") if !started => {
                        let result = registry.start(chat_id, caller, &params.definition_id, None, Some(sub.clone())).await;
                        // A refused start (a rate limit…) may be sent again.
                        started = result.is_ok();
                        result
                    }
                    Some("start") => Ok(()),
                    Some("message") => match v["content"].as_str() {
                        None => Err(SessionError::InvalidAnswer("`message` needs a string `content`".into())),
                        Some(content) if content.len() > limits::MAX_TEXT_BYTES => Err(SessionError::TooLarge(format!(
                            "`content` has {} bytes; at most {} are accepted", content.len(), limits::MAX_TEXT_BYTES
                        ))),
                        Some(content) => match waiting.iter().next().map(|(c, w)| (c.clone(), w.clone())) {
                            Some((corr, widget)) => {
                                registry.component_result(chat_id, &user, corr, answer_of(&widget, content)).await
                            }
                            None => registry.user_message(chat_id, caller, content.to_owned(), None, Some(crate::protocol::MultitaskStrategy::Reject)).await,
                        },
                    },
                    _ => Err(SessionError::InvalidAnswer("the messages are start, message and ping".into())),
                };
                if let Err(e) = result {
                    crate::metrics::error_sent(e.code().as_str());
                    let _ = sink.send(send(error_frame(&e))).await;
                }
            }
        }
    };
    registry.unsubscribe(chat_id, sub.conn_id).await;
    let (code, reason) = close;
    let frame = CloseFrame {
        code,
        reason: reason.into(),
    };
    let _ = tokio::time::timeout(std::time::Duration::from_secs(30), async {
        let _ = sink.send(Message::Close(Some(frame))).await;
        let _ = sink.close().await;
    })
    .await;
}

fn error_frame(e: &SessionError) -> Value {
    json!({"type": "error", "data": {"message": e.to_string(), "error_code": e.code().as_str()}})
}
