//! `/v1/ws`: one connection, any number of chats.
//!
//! Two tasks per connection, both pure I/O. The reader parses and validates
//! each text frame and turns it into a [`Registry`] call; the writer drains the
//! connection's bounded outbound queue, shared by all its chats, into the
//! socket. Either side can close the connection through its [`Closer`]:
//! 1000 when the client left, 1001 at shutdown, 1009 for an oversized message,
//! 1013 when a chat found the queue full.

use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::time::Duration;

use axum::extract::State;
use axum::extract::ws::{CloseFrame, Message, Utf8Bytes, WebSocket, WebSocketUpgrade};
use axum::response::Response;
use futures_util::stream::{SplitSink, SplitStream};
use futures_util::{SinkExt, StreamExt};
use tokio::sync::mpsc;
use uuid::Uuid;

use super::AppState;
use super::auth::AuthUser;
use crate::protocol::{ClientFrame, ErrorCode, connection_error, parse_client_frame, pong};
use crate::session::{Caller, Closer, Outbound, Registry, SessionError, Subscriber};

/// Most chats one connection may follow at once.
const MAX_CHATS_PER_CONNECTION: usize = 1024;
/// How long a closing connection may take to send its close frame.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(30);

/// The read buffer of a connection (see `upgrade`).
const READ_BUFFER: usize = 2048;

/// The largest message the WebSocket layer reads at all (beyond it, the
/// connection is dropped mid-message).
fn hard_cap(limit: usize) -> usize {
    limit.saturating_mul(4).max(16 << 20)
}

/// The upgrade handler: authentication happens before the upgrade (401).
pub async fn upgrade(
    State(state): State<AppState>,
    AuthUser { user, token }: AuthUser,
    ws: WebSocketUpgrade,
) -> Response {
    // The WebSocket layer reads messages up to a hard cap; `on_text` refuses
    // those over the configured limit itself. Reading an oversized message whole
    // lets the close frame (1009) reach the client: closing with unread bytes
    // in the socket would reset the connection before the client reads it.
    let cap = hard_cap(state.config.max_message_bytes);
    ws.max_message_size(cap)
        .max_frame_size(cap)
        // tungstenite allocates its whole read buffer per connection up front
        // (128 KiB by default): most of an idle connection's memory. Inbound
        // messages are small; a large one is read in more calls.
        .read_buffer_size(READ_BUFFER)
        .on_upgrade(move |socket| {
            let tracker = state.tracker.clone();
            tracker.track_future(serve(socket, state, user, token))
        })
}

#[tracing::instrument(skip_all, fields(conn_id, user = %user))]
async fn serve(socket: WebSocket, state: AppState, user: String, bearer: Option<String>) {
    let conn_id = state.next_conn_id.fetch_add(1, Ordering::Relaxed);
    tracing::Span::current().record("conn_id", conn_id);
    let _open = crate::metrics::ConnectionGauge::open("ws");
    let (tx, rx) = mpsc::channel(state.config.outbound_queue);
    let closer = Closer::default();
    let (sink, stream) = socket.split();
    let writer = tokio::spawn(write_loop(sink, rx, closer.clone()));
    let mut conn = Connection {
        registry: state.registry.clone(),
        user,
        bearer,
        sub: Subscriber {
            conn_id,
            tx,
            closer: closer.clone(),
        },
        chats: HashSet::new(),
        max_message_bytes: state.config.max_message_bytes,
    };
    tokio::select! {
        _ = state.shutdown.cancelled() => closer.close(1001, "server shutting down"),
        _ = closer.closed() => {}
        () = conn.read_loop(stream) => {}
    }
    // The reader is done; let the writer say goodbye.
    closer.close(1000, "");
    for chat_id in conn.chats.drain() {
        Box::pin(conn.registry.unsubscribe(chat_id, conn_id)).await;
    }
    let _ = writer.await;
}

/// The reading side of one connection.
struct Connection {
    registry: Registry,
    user: String,
    /// The token the connection presented, forwarded to HTTP tools of the
    /// runs it starts.
    bearer: Option<String>,
    sub: Subscriber,
    /// Chats this connection is subscribed to.
    chats: HashSet<Uuid>,
    /// The configured message size limit.
    max_message_bytes: usize,
}

impl Connection {
    async fn read_loop(&mut self, mut stream: SplitStream<WebSocket>) {
        while let Some(msg) = stream.next().await {
            match msg {
                Ok(Message::Text(text)) => {
                    // Boxed: only a message being handled needs its state.
                    Box::pin(self.on_text(&text)).await;
                    if self.sub.closer.is_closed() {
                        return;
                    }
                }
                Ok(Message::Binary(_)) => {
                    self.send_error(
                        None,
                        ErrorCode::SchemaValidationFailed,
                        "binary frames are not supported: send one JSON object per text frame",
                        None,
                    )
                    .await;
                }
                Ok(Message::Close(_)) => return,
                // Pings are answered by the WebSocket layer itself.
                Ok(Message::Ping(_) | Message::Pong(_)) => {}
                Err(e) => {
                    if is_too_big(e) {
                        self.sub.closer.close(1009, "message too big");
                    }
                    return;
                }
            }
        }
    }

    async fn send(&self, frame: String) {
        // Waits when the queue is full: a client that does not read stops
        // being read (and its chats close it with 1013 meanwhile).
        let _ = self.sub.tx.send(Outbound::Frame(frame)).await;
    }

    async fn send_error(
        &self,
        chat_id: Option<Uuid>,
        code: ErrorCode,
        message: &str,
        details: Option<serde_json::Value>,
    ) {
        crate::metrics::error_sent(code.as_str());
        self.send(connection_error(chat_id, code, message, details, true))
            .await;
    }

    async fn on_text(&mut self, text: &str) {
        if text.len() > self.max_message_bytes {
            tracing::info!(bytes = text.len(), "message too big; closing with 1009");
            return self.sub.closer.close(1009, "message too big");
        }
        let frame = match parse_client_frame(text) {
            Ok(frame) => frame,
            Err(e) => {
                return self
                    .send_error(
                        e.chat_id,
                        ErrorCode::SchemaValidationFailed,
                        &e.message,
                        e.details,
                    )
                    .await;
            }
        };
        let chat_id = frame.chat_id();
        // Boxed: a dispatch's future is large and lives only while it runs.
        if let Err(e) = Box::pin(self.dispatch(frame)).await {
            crate::metrics::error_sent(e.code().as_str());
            let frame = connection_error(chat_id, e.code(), &e.to_string(), None, e.recoverable());
            self.send(frame).await;
        }
    }

    /// Makes sure the connection may follow one more chat.
    fn admit(&self, chat_id: Uuid) -> Result<(), SessionError> {
        if self.chats.len() >= MAX_CHATS_PER_CONNECTION && !self.chats.contains(&chat_id) {
            return Err(SessionError::TooManySubscriptions);
        }
        Ok(())
    }

    async fn dispatch(&mut self, frame: ClientFrame) -> Result<(), SessionError> {
        let reg = &self.registry;
        let user = self.user.as_str();
        match frame {
            ClientFrame::Ping => {
                self.send(pong()).await;
                Ok(())
            }
            ClientFrame::ChatStart {
                chat_id,
                agent,
                message,
                context,
            } => {
                self.admit(chat_id)?;
                let caller = Caller {
                    user,
                    bearer: self.bearer.as_deref(),
                    context_type: None,
                    context: context.as_ref(),
                };
                reg.start(chat_id, caller, &agent, message, Some(self.sub.clone()))
                    .await?;
                self.chats.insert(chat_id);
                Ok(())
            }
            ClientFrame::ClientResume {
                chat_id,
                last_client_index,
            } => {
                self.admit(chat_id)?;
                reg.resume(
                    chat_id,
                    user,
                    last_client_index.unwrap_or(0),
                    self.sub.clone(),
                )
                .await?;
                self.chats.insert(chat_id);
                Ok(())
            }
            ClientFrame::UserMessage {
                chat_id,
                text,
                client_msg_id,
            } => {
                let caller = Caller {
                    user,
                    bearer: self.bearer.as_deref(),
                    context_type: None,
                    context: None,
                };
                reg.user_message(chat_id, caller, text, client_msg_id).await
            }
            ClientFrame::UserInputSubmit {
                chat_id,
                request_id,
                text,
                ..
            } => reg.submit_input(chat_id, user, request_id, text).await,
            ClientFrame::InlineComponentResult {
                chat_id,
                corr,
                data,
            } => reg.component_result(chat_id, user, corr, data).await,
            ClientFrame::ArtifactPatch {
                chat_id,
                corr,
                patch,
            } => reg.artifact_patch(chat_id, user, corr, patch).await,
            ClientFrame::ChatCancel { chat_id } => reg.cancel(chat_id, user).await,
            ClientFrame::ChatPause { chat_id } => reg.pause(chat_id, user).await,
            ClientFrame::ChatResumeRun { chat_id } => reg.resume_run(chat_id, user).await,
            ClientFrame::ClientUnsubscribe { chat_id } => {
                if self.chats.remove(&chat_id) {
                    reg.unsubscribe(chat_id, self.sub.conn_id).await;
                }
                Ok(())
            }
        }
    }
}

/// Whether a read failed because the message exceeded the size limit.
fn is_too_big(e: axum::Error) -> bool {
    e.into_inner()
        .downcast_ref::<tungstenite::Error>()
        .is_some_and(|e| matches!(e, tungstenite::Error::Capacity(_)))
}

/// Drains the outbound queue into the socket until a close is requested.
async fn write_loop(
    mut sink: SplitSink<WebSocket, Message>,
    mut rx: mpsc::Receiver<Outbound>,
    closer: Closer,
) {
    let work = async {
        while let Some(item) = rx.recv().await {
            let sent = match item {
                Outbound::Event(json) => sink.feed(Message::Text(Utf8Bytes::from(&*json))).await,
                Outbound::Frame(text) => sink.feed(Message::Text(text.into())).await,
                Outbound::Replay(mut replay) => {
                    let mut result = Ok(());
                    loop {
                        match replay.next_page().await {
                            Ok(Some(page)) => {
                                for json in page {
                                    result = sink.feed(Message::Text(json.into())).await;
                                    if result.is_err() {
                                        break;
                                    }
                                }
                                if result.is_err() {
                                    break;
                                }
                            }
                            Ok(None) => {
                                result = sink.feed(Message::Text(replay.boundary().into())).await;
                                break;
                            }
                            Err(e) => {
                                // Live events of the chat follow in the queue:
                                // delivering them would leave a gap, so the
                                // connection closes and the client resumes.
                                tracing::error!(error = %e, "replay failed");
                                let frame = connection_error(
                                    Some(replay.chat_id()),
                                    ErrorCode::ResumeFailed,
                                    "the chat log could not be read; reconnect and resume",
                                    None,
                                    true,
                                );
                                result = sink.feed(Message::Text(frame.into())).await;
                                closer.close(1011, "replay failed: resume again");
                                break;
                            }
                        }
                    }
                    result
                }
            };
            // Flush when the queue is drained: one syscall for a burst.
            let flushed = if sent.is_ok() && rx.is_empty() {
                sink.flush().await
            } else {
                sent
            };
            if flushed.is_err() {
                return;
            }
        }
    };
    tokio::select! {
        () = work => {}
        () = closer.closed() => {}
    }
    let (code, reason) = closer.why();
    let close = Message::Close(Some(CloseFrame {
        code,
        reason: reason.into(),
    }));
    let _ = tokio::time::timeout(CLOSE_TIMEOUT, async {
        let _ = sink.send(close).await;
        let _ = sink.close().await;
    })
    .await;
}
