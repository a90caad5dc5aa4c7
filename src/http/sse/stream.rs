//! The streaming core every SSE route shares: a stream's subscriber and
//! quota slot, starting a turn, and the event stream itself (replay, live
//! events through a dialect's encoder, keep-alives, the end after a run).

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::atomic::Ordering;
use std::time::Duration;

use axum::http::HeaderValue;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::Stream;
use serde_json::{Map, Value};
use uuid::Uuid;

use crate::http::error::ApiError;
use crate::http::state::AppState;
use crate::protocol::{Envelope, ErrorCode, EventKind};
use crate::session::{Caller, Outbound, OutboundRx, Replay, SessionError, Subscriber};
use crate::wire::{EventId, Framer};

/// Comment lines keep idle streams (and proxies) alive this often.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// A new stream of `user`'s: a subscriber with its own bounded queue, and
/// the stream's slot in the user's quota (`max_streams_per_user`).
pub(in crate::http) fn subscriber(
    state: &AppState,
    user: &str,
) -> Result<(Subscriber, Feed), ApiError> {
    let slot = state.streams.take(user)?;
    let (sub, rx) = Subscriber::channel(
        state.next_conn_id.fetch_add(1, Ordering::Relaxed),
        state.config.outbound_queue,
        state.config.outbound_queue_bytes,
    );
    Ok((sub, Feed { rx, _slot: slot }))
}

/// A new stream of `user`'s following `chat_id`: everything after seq
/// `after` replayed, then live (an unknown chat, or another user's, is
/// refused and frees the stream's slot).
pub(in crate::http) async fn follow(
    state: &AppState,
    user: &str,
    chat_id: Uuid,
    after: u64,
) -> Result<(Subscriber, Feed), ApiError> {
    let (sub, feed) = subscriber(state, user)?;
    state
        .registry
        .resume(chat_id, user, after, sub.clone())
        .await?;
    Ok((sub, feed))
}

/// What a stream reads, and its slot in the user's quota while it lives.
pub(in crate::http) struct Feed {
    rx: OutboundRx,
    _slot: crate::session::Slot,
}

/// What a POST that starts a turn carries.
pub(in crate::http) struct Turn<'a> {
    pub(in crate::http) user: &'a str,
    pub(in crate::http) bearer: Option<&'a str>,
    pub(in crate::http) chat_id: Uuid,
    /// `chat_id` was derived from the caller's conversation id.
    pub(in crate::http) derived: bool,
    pub(in crate::http) agent: &'a str,
    pub(in crate::http) message: String,
    pub(in crate::http) context_type: Option<&'a str>,
    pub(in crate::http) context: Option<&'a Map<String, Value>>,
    pub(in crate::http) model: Option<&'a str>,
    /// Tools the client brings with this run (checked already).
    pub(in crate::http) client_tools: &'a [crate::tools::ClientTool],
    /// The files the message attaches.
    pub(in crate::http) attachments: Option<&'a [crate::protocol::FileRef]>,
}

impl<'a> Turn<'a> {
    /// A turn of `message` with no context, context type or model.
    pub(in crate::http) fn say(
        user: &'a str,
        bearer: Option<&'a str>,
        (chat_id, derived): (Uuid, bool),
        agent: &'a str,
        message: String,
    ) -> Self {
        Self {
            user,
            bearer,
            chat_id,
            derived,
            agent,
            message,
            context_type: None,
            context: None,
            model: None,
            client_tools: &[],
            attachments: None,
        }
    }
}

/// Follows (or creates) the chat, sets its model if asked, and sends the
/// user's message: the stream then carries exactly that run.
///
/// # Returns
/// The subscription's queue and the chat's last seq before the turn.
pub(in crate::http) async fn begin_turn(
    state: &AppState,
    turn: Turn<'_>,
) -> Result<(Feed, u64), ApiError> {
    let registry = &state.registry;
    let (sub, rx) = subscriber(state, turn.user)?;
    let caller = Caller {
        user: turn.user,
        bearer: turn.bearer,
        context_type: turn.context_type,
        context: turn.context,
        client_tools: turn.client_tools,
        attachments: turn.attachments,
        traceparent: None,
    };
    let before = registry.last_seq(turn.chat_id).await?;
    // The chat is created without a message (the files go with the turn).
    let creating = Caller {
        attachments: None,
        ..caller
    };
    match registry.follow(turn.chat_id, turn.user, sub.clone()).await {
        Ok(()) => {}
        Err(SessionError::NotFound) if turn.derived => {
            registry
                .start_conversation(turn.chat_id, creating, turn.agent, None, Some(sub.clone()))
                .await?;
        }
        Err(SessionError::NotFound) => {
            registry
                .start(turn.chat_id, creating, turn.agent, None, Some(sub.clone()))
                .await?;
        }
        Err(e) => return Err(e.into()),
    }
    let sent = async {
        if let Some(model) = turn.model {
            registry.set_model(turn.chat_id, turn.user, model).await?;
        }
        registry
            .user_message(
                turn.chat_id,
                caller,
                turn.message,
                None,
                // These wires stream the run their message starts: during a
                // run they refuse it, whatever the agent's strategy.
                Some(crate::protocol::MultitaskStrategy::Reject),
            )
            .await
    }
    .await;
    if let Err(e) = sent {
        registry.unsubscribe(turn.chat_id, sub.conn_id).await;
        return Err(e.into());
    }
    Ok((rx, before))
}

/// Follows `user`'s chat and edits its `nth` user's message of the active
/// path to `text` (a branch): the stream then carries that new run.
///
/// # Returns
/// The subscription's queue and the chat's last seq before the edit.
pub(in crate::http) async fn begin_edit(
    state: &AppState,
    caller: Caller<'_>,
    chat_id: Uuid,
    nth: usize,
    text: String,
) -> Result<(Feed, u64), ApiError> {
    let registry = &state.registry;
    let (sub, rx) = subscriber(state, caller.user)?;
    let before = registry.last_seq(chat_id).await?;
    let user = caller.user;
    let edited = async {
        registry.follow(chat_id, user, sub.clone()).await?;
        let at = crate::session::MessageRef::Nth(nth);
        registry.edit(chat_id, caller, at, text, None).await
    }
    .await;
    if let Err(e) = edited {
        registry.unsubscribe(chat_id, sub.conn_id).await;
        return Err(e.into());
    }
    Ok((rx, before))
}

/// One event of a stream: what the dialect encoded, and its SSE `id`
/// (none for what no log made).
pub(in crate::http) type Item = crate::wire::Event;

/// An event as axum's SSE event.
fn sse_event(item: Item) -> Event {
    // Fields go out in call order, and line-by-line clients (seed 004's
    // stream-handler.js) read `event:` before `data:`.
    let mut event = Event::default();
    if let Some(name) = item.out.event {
        event = event.event(name);
    }
    if let Some(id) = item.id {
        event = event.id(id.to_string());
    }
    event.data(&item.out.data)
}

/// The id a rejoin names (`Last-Event-ID`), if any.
///
/// # Errors
/// `BadRequest` for a value that is no event id.
pub(in crate::http) fn last_event_id(
    headers: &axum::http::HeaderMap,
) -> Result<Option<EventId>, ApiError> {
    match headers.get("last-event-id").map(|v| v.to_str()) {
        None => Ok(None),
        Some(Ok(v)) if v.trim().is_empty() => Ok(None),
        Some(Ok(v)) => EventId::parse(v).map(Some).ok_or_else(|| {
            ApiError::BadRequest(format!(
                "`{v}` is not an event id (`<seq>`, `<seq>.<k>` or `<seq>-<r>`, as sent)"
            ))
        }),
        Some(Err(_)) => Err(ApiError::BadRequest("`Last-Event-ID` is not text".into())),
    }
}

/// The SSE response: contract §4's headers and keep-alive comments.
pub(in crate::http) fn respond(
    chat_id: Uuid,
    prelude: Vec<Item>,
    rx: Feed,
    framer: Framer,
) -> Response {
    respond_items(chat_id, event_stream(chat_id, prelude, rx, framer))
}

/// [`respond`] for a stream of items built already.
pub(in crate::http) fn respond_items(
    chat_id: Uuid,
    items: impl Stream<Item = Item> + Send + 'static,
) -> Response {
    use futures_util::StreamExt;
    let stream = items.map(|item| Ok::<_, Infallible>(sse_event(item)));
    let mut response = Sse::new(stream)
        .keep_alive(KeepAlive::new().interval(KEEP_ALIVE).text("keep-alive"))
        .into_response();
    let headers = response.headers_mut();
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    headers.insert("cache-control", HeaderValue::from_static("no-cache"));
    if let Ok(v) = HeaderValue::from_str(&chat_id.to_string()) {
        headers.insert("x-conversation-id", v);
    }
    response
}

struct StreamState {
    chat_id: Uuid,
    pending: VecDeque<Item>,
    rx: OutboundRx,
    _slot: crate::session::Slot,
    framer: Framer,
    replay: Option<Replay>,
    _open: crate::metrics::ConnectionGauge,
}

impl StreamState {
    fn handle(&mut self, raw: &str) {
        let env = match serde_json::from_str::<Envelope>(raw) {
            Ok(env) => env,
            Err(e) => return self.fail(raw, &e),
        };
        let mut events = Vec::new();
        self.framer.envelope(&env, raw, &mut events);
        self.pending.extend(events);
    }

    /// An envelope that cannot be read ends the stream loudly: the dialect's
    /// error event, with no `id` (a rejoin asks for the same seq again), and
    /// nothing after it. Skipping it would leave a gap the client cannot see.
    fn fail(&mut self, raw: &str, e: &serde_json::Error) {
        let seq = serde_json::from_str::<Value>(raw)
            .ok()
            .and_then(|v| v["seq"].as_u64());
        tracing::error!(error = %e, ?seq, "unreadable envelope in the log; ending the stream");
        crate::metrics::error_sent(ErrorCode::PersistenceError.as_str());
        let kind = EventKind::Error {
            message: "an envelope of this chat cannot be read; the stream ends here".into(),
            error_code: ErrorCode::PersistenceError,
            details: seq.map(|seq| serde_json::json!({ "seq": seq })),
            recoverable: false,
        };
        let env = Envelope::new(kind, self.chat_id, 0, crate::protocol::now_ts());
        let mut outs = Vec::new();
        self.framer
            .encoder()
            .encode(&env, &env.to_json(), &mut outs);
        self.pending
            .extend(outs.into_iter().map(|out| Item { out, id: None }));
        self.framer.stop();
        self.replay = None;
    }

    /// Everything read: a response that waits for a person ends here.
    fn caught_up(&mut self) {
        let mut events = Vec::new();
        self.framer.caught_up(&mut events);
        self.pending.extend(events);
    }
}

/// Replay (if any), then live events, each framed by the stream's framer.
pub(in crate::http) fn event_stream(
    chat_id: Uuid,
    prelude: Vec<Item>,
    feed: Feed,
    framer: Framer,
) -> impl Stream<Item = Item> + Send {
    let state = StreamState {
        chat_id,
        pending: prelude.into(),
        rx: feed.rx,
        _slot: feed._slot,
        framer,
        replay: None,
        _open: crate::metrics::ConnectionGauge::open("sse"),
    };
    futures_util::stream::unfold(state, |mut st| async move {
        loop {
            if let Some(item) = st.pending.pop_front() {
                return Some((item, st));
            }
            if st.framer.done() {
                return None;
            }
            if let Some(replay) = &mut st.replay {
                match replay.next_page().await {
                    Ok(Some(page)) => {
                        // Nothing after an envelope that could not be read.
                        for raw in &page {
                            if st.framer.done() {
                                break;
                            }
                            st.handle(raw);
                        }
                    }
                    Ok(None) => {
                        st.replay = None;
                        if st.rx.is_empty() {
                            st.caught_up();
                        }
                    }
                    Err(e) => {
                        tracing::error!(error = %e, "replay failed");
                        st.framer.stop();
                    }
                }
                continue;
            }
            match st.rx.recv().await {
                Some(Outbound::Event(raw)) => {
                    st.handle(&raw);
                    if st.replay.is_none() && st.rx.is_empty() {
                        st.caught_up();
                    }
                }
                Some(Outbound::Replay(replay)) => st.replay = Some(*replay),
                // A per-connection error, or no more events (the chat closed
                // this subscriber as too slow): end; the client rejoins.
                Some(Outbound::Frame(_)) | None => st.framer.stop(),
            }
        }
    })
}
