//! A user's feed over HTTP, and marking a chat read: `GET /v1/feed` (SSE:
//! `feed.chat` events of every chat of the caller's, made for them or not;
//! `feed.lagged` and the end when it falls behind) and
//! `POST /v1/chats/{id}/read`. The WebSocket has the same as
//! `feed.subscribe` and `chat.read`.

use std::convert::Infallible;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderValue, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::Deserialize;
use utoipa::ToSchema;

use super::api::ErrorBody;
use super::auth::AuthUser;
use super::chats::{chat_id, parse_body};
use super::error::ApiError;
use super::state::AppState;
use crate::session::SessionError;

/// The routes of this module.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/feed", get(feed))
        .route("/v1/chats/{id}/read", post(read))
}

/// `POST /v1/chats/{id}/read`.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MarkRead {
    /// The last envelope read [default: the chat's last].
    #[serde(default)]
    pub seq: Option<u64>,
}

/// Marks the chat read up to `seq` (its end without a body): the agents'
/// texts after it are its unread count. The user's feeds hear of it.
#[utoipa::path(post, path = "/v1/chats/{id}/read", tag = "rest",
    params(("id" = Uuid, Path)), request_body(content = Option<MarkRead>),
    responses((status = 204), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
              (status = 404, body = ErrorBody)))]
pub(super) async fn read(
    State(state): State<AppState>,
    AuthUser { user, .. }: AuthUser,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<StatusCode, ApiError> {
    let id = chat_id(&id)?;
    let body: MarkRead = match body.is_empty() {
        true => MarkRead::default(),
        false => parse_body(&body)?,
    };
    state.registry.mark_read(id, &user, body.seq).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// The caller's feed: a `feed.chat` event (`data`: the JSON of
/// `protocol/outbound/feed.chat.json`) whenever one of their chats is made,
/// a run or a post ends in it, or it is read; `feed.lagged`, and the end,
/// if the client falls behind. Read `GET /v1/chats` first (or after a
/// lag): the feed says what changes, not what is.
#[utoipa::path(get, path = "/v1/feed", tag = "rest",
    responses((status = 200, content_type = "text/event-stream", body = String),
              (status = 401, body = ErrorBody)))]
pub(super) async fn feed(
    State(state): State<AppState>,
    AuthUser { user, .. }: AuthUser,
) -> Result<Response, ApiError> {
    // One of the user's streams (`max_streams_per_user`).
    let slot = state.streams.take(&user)?;
    let rx = state.registry.feed().subscribe(&user).ok_or_else(|| {
        ApiError::from(SessionError::RateLimited {
            what: "feed subscriptions of this user on this node".into(),
            retry_after_ms: 1000,
        })
    })?;
    let shutdown = state.shutdown.clone();
    let events = events(rx, shutdown, slot);
    let mut response = Sse::new(events)
        .keep_alive(KeepAlive::new().interval(std::time::Duration::from_secs(15)))
        .into_response();
    let headers = response.headers_mut();
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    headers.insert("cache-control", HeaderValue::from_static("no-cache"));
    Ok(response)
}

/// The feed's SSE events, until the subscription ends (lagged) or the
/// server shuts down.
fn events(
    rx: crate::session::FeedRx,
    shutdown: tokio_util::sync::CancellationToken,
    slot: crate::session::Slot,
) -> impl futures_util::Stream<Item = Result<Event, Infallible>> + Send + 'static {
    futures_util::stream::unfold(
        (Some(rx), shutdown, slot),
        |(rx, shutdown, slot)| async move {
            let rx = rx?;
            tokio::select! {
                () = shutdown.cancelled() => None,
                event = rx.events.recv_async() => match event {
                    Ok(event) => {
                        let e = Event::default().event("feed.chat").data(&*event);
                        Some((Ok(e), (Some(rx), shutdown, slot)))
                    }
                    Err(_) => {
                        let e = Event::default().event("feed.lagged").data("{\"type\":\"feed.lagged\"}");
                        Some((Ok(e), (None, shutdown, slot)))
                    }
                },
            }
        },
    )
}
