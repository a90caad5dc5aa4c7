//! The JSON a chat is answered as, on every route that answers one.

use serde::Serialize;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::store::search::Segment;
use crate::store::{ChatRecord, ChatState};

/// A chat.
#[derive(Debug, Serialize, ToSchema)]
pub struct ChatView {
    pub id: Uuid,
    pub agent: String,
    /// `idle` or `running`.
    pub state: String,
    pub archived: bool,
    /// A template conversation's state (seed 004 §4: `pending`, `active`,
    /// `awaiting_widget`, `awaiting_user`, `paused`, `completed`,
    /// `terminated`, `archived`); absent for other chats.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub conversation_state: Option<String>,
    /// The model the chat switched to; `null`: the agent's own.
    pub model: Option<String>,
    /// The chat's title (its last `chat.title`); `null` until it has one.
    pub title: Option<String>,
    /// Pinned chats come first in the list.
    pub pinned: bool,
    /// The first words of the chat's last message; `null` before any.
    pub preview: Option<String>,
    /// RFC 3339, UTC: when the last message was said (the chat's creation
    /// before any). The list's order, after `pinned`.
    pub last_activity_at: String,
    /// RFC 3339, UTC.
    pub created_at: String,
    /// RFC 3339, UTC.
    pub updated_at: String,
    /// The agents' texts since the user last read the chat (said something
    /// in it, or marked it read: `chat.read`, `POST /v1/chats/{id}/read`).
    pub unread: u64,
    /// Where the user last read it.
    pub read_seq: u64,
    /// The chat's last seq (single-chat answers only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_seq: Option<u64>,
    /// A search's answers only: what matched.
    #[serde(rename = "match", skip_serializing_if = "Option::is_none")]
    pub found: Option<Found>,
}

/// What a search matched in a chat: its best hit.
#[derive(Debug, Serialize, ToSchema)]
pub struct Found {
    /// `title` (the chat's title) or `text` (a message).
    pub field: &'static str,
    /// The envelope that matched: the message, or the `chat.title`.
    pub seq: u64,
    /// About sixteen words around the first hit, as plain-text pieces; those
    /// with `hit: true` hold a query word.
    pub snippet: Vec<Segment>,
}

/// `GET /v1/chats`.
#[derive(Debug, Serialize, ToSchema)]
pub struct ChatList {
    pub chats: Vec<ChatView>,
    /// Pass as `cursor` for the next page; `null` on the last one (and for
    /// a search, which answers one ranked page).
    pub next_cursor: Option<String>,
}

pub(super) fn rfc3339(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

pub(super) fn chat_view(chat: &ChatRecord, last_seq: Option<u64>) -> ChatView {
    ChatView {
        id: chat.id,
        agent: chat.agent.clone(),
        state: match chat.state {
            ChatState::Idle => "idle",
            ChatState::Running => "running",
        }
        .to_owned(),
        archived: chat.archived,
        conversation_state: chat.conversation_state.clone(),
        model: chat.model.clone(),
        title: chat.listing.title.clone(),
        pinned: chat.listing.pinned,
        preview: chat.listing.preview.clone(),
        last_activity_at: rfc3339(chat.listing.active_at),
        created_at: rfc3339(chat.created_at),
        updated_at: rfc3339(chat.updated_at),
        unread: chat.listing.unread,
        read_seq: chat.listing.read_seq,
        last_seq,
        found: None,
    }
}
