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
use tokio_util::sync::CancellationToken;
use tracing::Instrument;
use uuid::Uuid;

use super::auth::AuthUser;
use super::error::ApiError;
use super::rate::FrameLimiter;
use super::state::AppState;
pub(super) use super::ws_read::{BINARY_REFUSED, Read, limited, read};
use crate::protocol::{ClientFrame, ErrorCode, connection_error, parse_client_frame, pong};
use crate::session::{
    Caller, Closer, Outbound, OutboundRx, Registry, SessionError, Slot, Subscriber,
};

/// Most chats one connection may follow at once.
const MAX_CHATS_PER_CONNECTION: usize = 1024;
/// How long a closing connection may take to send its close frame.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(30);

/// The upgrade handler: authentication happens before the upgrade (401).
pub async fn upgrade(
    State(state): State<AppState>,
    AuthUser {
        user,
        token,
        claims,
    }: AuthUser,
    ws: WebSocketUpgrade,
) -> Result<Response, ApiError> {
    // Held for the connection's life: 429 past `max_sockets_per_user`.
    let slot = state.sockets.take(&user)?;
    let traceparent = crate::telemetry::propagate::current_traceparent().map(Box::from);
    Ok(
        limited(ws, state.config.max_message_bytes).on_upgrade(move |socket| {
            // Everything is set up here, before the connection's future
            // exists, and that future is awaited as it is: a future keeps
            // room for what it was given and for each copy it moves that
            // into (an `async fn`'s arguments, an awaited capture), for the
            // connection's life (`bench/notes.md`).
            let conn_id = state.next_conn_id.fetch_add(1, Ordering::Relaxed);
            let (sub, rx) = Subscriber::channel(
                conn_id,
                state.config.outbound_queue,
                state.config.outbound_queue_bytes,
            );
            let (sink, stream) = socket.split();
            let writer = tokio::spawn(write_loop(sink, rx, sub.closer.clone()));
            let conn = Connection {
                registry: state.registry.clone(),
                user,
                bearer: token,
                claims,
                sub,
                chats: HashSet::new(),
                feed: None,
                max_message_bytes: state.config.max_message_bytes,
                frames: FrameLimiter::new(state.config.limits.frames_per_second),
                traceparent,
            };
            let span = tracing::info_span!("serve", conn_id, user = %conn.user);
            let serving = serve(conn, stream, writer, state.shutdown.clone(), slot);
            state.tracker.track_future(serving.instrument(span))
        }),
    )
}

/// The connection's life, after the upgrade. A plain `fn` returning an
/// `async move` block, not an `async fn`: the block uses what it captured in
/// place, where an `async fn` keeps its arguments twice (~1.3 KB of the
/// ~3 KB an idle connection's task was).
#[expect(
    clippy::manual_async_fn,
    reason = "an async fn keeps its arguments twice"
)]
fn serve(
    mut conn: Connection,
    stream: SplitStream<WebSocket>,
    writer: tokio::task::JoinHandle<()>,
    shutdown: CancellationToken,
    slot: Slot,
) -> impl Future<Output = ()> + Send {
    async move {
        let _open = crate::metrics::ConnectionGauge::open("ws");
        let closer = conn.sub.closer.clone();
        tokio::select! {
            _ = shutdown.cancelled() => closer.close(1001, "server shutting down"),
            _ = closer.closed() => {}
            () = conn.read_loop(stream) => {}
        }
        // The reader is done; let the writer say goodbye.
        closer.close(1000, "");
        let conn_id = conn.sub.conn_id;
        for chat_id in conn.chats.drain() {
            Box::pin(conn.registry.unsubscribe(chat_id, conn_id)).await;
        }
        let _ = writer.await;
        drop(slot);
    }
}

/// The reading side of one connection.
struct Connection {
    registry: Registry,
    user: String,
    /// The token the connection presented, forwarded to HTTP tools of the
    /// runs it starts.
    bearer: Option<String>,
    /// The token's other claims (a workflow's `allow`).
    claims: serde_json::Map<String, serde_json::Value>,
    sub: Subscriber,
    /// Chats this connection is subscribed to.
    chats: HashSet<Uuid>,
    /// The task that hands it the user's feed, once subscribed.
    feed: Option<tokio::task::JoinHandle<()>>,
    /// The configured message size limit.
    max_message_bytes: usize,
    /// Inbound messages per second (`rate_frames_per_second`).
    frames: FrameLimiter,
    /// The `traceparent` the upgrade request carried (traces on): the runs
    /// this connection starts continue that trace.
    traceparent: Option<Box<str>>,
}

impl Connection {
    async fn read_loop(&mut self, mut stream: SplitStream<WebSocket>) {
        loop {
            let read = read(stream.next().await, self.max_message_bytes);
            if matches!(read, Read::Text(_) | Read::Binary)
                && let Err(e) = self.frames.check()
            {
                // Refused unread: the client slows down and sends it again.
                self.send_session_error(None, &e).await;
                continue;
            }
            match read {
                Read::Text(text) => {
                    // Boxed: only a message being handled needs its state.
                    Box::pin(self.on_text(&text)).await;
                    if self.sub.closer.is_closed() {
                        return;
                    }
                }
                Read::Binary => {
                    let code = ErrorCode::SchemaValidationFailed;
                    self.send_error(None, code, BINARY_REFUSED, None).await;
                }
                Read::Control => {}
                Read::Close(code, reason) => return self.sub.closer.close(code, reason),
                Read::Gone => return,
            }
        }
    }

    async fn send(&self, frame: String) {
        // Waits when the queue is full: a client that does not read stops
        // being read (and its chats close it with 1013 meanwhile).
        self.sub.send(Outbound::Frame(frame)).await;
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
            self.send_session_error(chat_id, &e).await;
        }
    }

    async fn send_session_error(&self, chat_id: Option<Uuid>, e: &SessionError) {
        crate::metrics::error_sent(e.code().as_str());
        let frame = connection_error(
            chat_id,
            e.code(),
            &e.to_string(),
            e.details(),
            e.recoverable(),
        );
        self.send(frame).await;
    }

    /// Makes sure the connection may follow one more chat.
    /// This connection's user, with the files a message attaches.
    fn attaching<'a>(&'a self, files: Option<&'a [crate::protocol::FileRef]>) -> Caller<'a> {
        Caller {
            attachments: files,
            ..Caller::bearing(&self.user, self.bearer.as_deref())
                .traced(self.traceparent.as_deref())
        }
    }

    /// `feed.subscribe`: the user's feed events, on this connection until
    /// it closes (or falls behind: then `feed.lagged`).
    async fn follow_feed(&mut self) -> Result<(), SessionError> {
        if self.feed.as_ref().is_none_or(|task| task.is_finished()) {
            let rx = self.registry.feed().subscribe(&self.user).ok_or_else(|| {
                SessionError::RateLimited {
                    what: "feed subscriptions of this user on this node".into(),
                    retry_after_ms: 1000,
                }
            })?;
            // Said before any event: what the queue holds waits for it.
            self.send(subscribed()).await;
            let sub = self.sub.clone();
            self.feed = Some(tokio::spawn(async move {
                loop {
                    tokio::select! {
                        () = sub.closer.closed() => return,
                        event = rx.events.recv_async() => match event {
                            Ok(event) => {
                                sub.send(Outbound::Frame(event.to_string())).await;
                            }
                            Err(_) => break,
                        },
                    }
                }
                let lagged = serde_json::json!({"type": "feed.lagged"}).to_string();
                sub.send(Outbound::Frame(lagged)).await;
            }));
            return Ok(());
        }
        self.send(subscribed()).await;
        Ok(())
    }

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
                attachments,
            } => {
                self.admit(chat_id)?;
                let caller = Caller {
                    context: context.as_ref(),
                    ..self.attaching(Some(&attachments))
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
                multitask_strategy,
                attachments,
            } => {
                let caller = self.attaching(Some(&attachments));
                reg.user_message(chat_id, caller, text, client_msg_id, multitask_strategy)
                    .await
            }
            ClientFrame::UserInputSubmit {
                chat_id,
                request_id,
                text,
                ..
            } => reg.submit_input(chat_id, user, request_id, text).await,
            ClientFrame::WorkflowInvoke {
                chat_id,
                workflow,
                parameters,
            } => {
                let caller = Caller::bearing(user, self.bearer.as_deref())
                    .traced(self.traceparent.as_deref());
                let parameters = parameters.unwrap_or_else(|| serde_json::json!({}));
                reg.invoke_workflow(chat_id, caller, &workflow, parameters, &self.claims)
                    .await
                    .map(|_| ())
            }
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
            ClientFrame::ChatEdit {
                chat_id,
                seq,
                text,
                client_msg_id,
                attachments,
            } => {
                let caller = self.attaching(attachments.as_deref());
                let seq = crate::session::MessageRef::Seq(seq);
                reg.edit(chat_id, caller, seq, text, client_msg_id).await
            }
            ClientFrame::ChatRegenerate {
                chat_id,
                seq,
                model,
            } => {
                let caller = Caller::bearing(user, self.bearer.as_deref())
                    .traced(self.traceparent.as_deref());
                reg.regenerate(chat_id, caller, seq, model.as_deref()).await
            }
            ClientFrame::ChatSwitch { chat_id, to } => reg.switch(chat_id, user, to).await,
            ClientFrame::ChatCancel { chat_id } => reg.cancel(chat_id, user).await,
            ClientFrame::ChatPause { chat_id } => reg.pause(chat_id, user).await,
            ClientFrame::ChatResumeRun { chat_id } => reg.resume_run(chat_id, user).await,
            ClientFrame::ChatRead { chat_id, seq } => reg.mark_read(chat_id, user, seq).await,
            ClientFrame::FeedSubscribe => self.follow_feed().await,
            ClientFrame::ClientUnsubscribe { chat_id } => {
                if self.chats.remove(&chat_id) {
                    reg.unsubscribe(chat_id, self.sub.conn_id).await;
                }
                Ok(())
            }
        }
    }
}

fn subscribed() -> String {
    serde_json::json!({"type": "feed.subscribed"}).to_string()
}

/// Drains the outbound queue into the socket until a close is requested.
///
/// A plain `fn` returning an `async move` block, for the reason `serve` is.
#[expect(
    clippy::manual_async_fn,
    reason = "an async fn keeps its arguments twice"
)]
fn write_loop(
    mut sink: SplitSink<WebSocket, Message>,
    mut rx: OutboundRx,
    closer: Closer,
) -> impl Future<Output = ()> + Send {
    async move {
        let work = async {
            while let Some(item) = rx.recv().await {
                let sent = match item {
                    Outbound::Event(json) => {
                        sink.feed(Message::Text(Utf8Bytes::from(&*json))).await
                    }
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
                                    result =
                                        sink.feed(Message::Text(replay.boundary().into())).await;
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
}
