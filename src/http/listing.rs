//! The list of one's chats: a page of it, or a search (`GET /v1/chats`);
//! a chat's title and place in it (`PATCH /v1/chats/{id}`); and its
//! conversation as a person reads it or as data (`GET /v1/chats/{id}/export`).

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::header;
use axum::response::{IntoResponse, Json, Response};
use serde::Deserialize;
use serde_json::{Value, json};
use utoipa::ToSchema;
use uuid::Uuid;

use axum::Router;
use axum::routing::get;

use super::api::ErrorBody;
use super::auth::AuthUser;
use super::chats::{chat_id, parse_body};
use super::error::ApiError;
use super::state::AppState;
use super::views::{ChatList, ChatView, Found, chat_view, rfc3339};
use crate::protocol::{Envelope, EventKind};
use crate::store::search::{Terms, snippet};
use crate::store::{ChatFlags, ChatRecord, ListCursor, SearchHit};

/// The routes of this module.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/chats", get(list_chats))
        .route("/v1/chats/{id}", axum::routing::patch(update_chat))
        .route("/v1/chats/{id}/export", get(export_chat))
}

/// Most chats in one page.
const MAX_PAGE: u32 = 100;

/// The most characters of a title.
const MAX_TITLE_CHARS: usize = 200;

#[derive(Deserialize, utoipa::IntoParams)]
pub(super) struct ListQuery {
    /// The `next_cursor` of the previous page.
    #[serde(default)]
    cursor: Option<String>,
    /// Chats per page (or search answers), 1 to 100 [default: 20].
    #[serde(default)]
    limit: Option<u32>,
    /// The archived chats instead of the others [default: false].
    #[serde(default)]
    archived: Option<bool>,
    /// Search: the chats whose title or messages hold every word of `q`
    /// (each as a word's start), best first; at most 256 bytes.
    #[serde(default)]
    q: Option<String>,
}

/// `PATCH /v1/chats/{id}`: the fields to change.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateChat {
    /// A new title (1 to 200 characters, one line): logged as `chat.title`.
    #[serde(default)]
    pub title: Option<String>,
    #[serde(default)]
    pub pinned: Option<bool>,
    /// `true` archives the chat (as `DELETE`: new turns refused), `false`
    /// restores it.
    #[serde(default)]
    pub archived: Option<bool>,
}

#[derive(Deserialize, utoipa::IntoParams)]
pub(super) struct ExportQuery {
    /// `markdown` (the conversation as a person reads it) or `json`
    /// [default: markdown].
    #[serde(default)]
    format: Option<String>,
}

fn found_view(hit: &SearchHit, terms: &Terms) -> ChatView {
    ChatView {
        found: Some(Found {
            field: if hit.title { "title" } else { "text" },
            seq: hit.seq,
            snippet: snippet(&hit.body, terms),
        }),
        ..chat_view(&hit.chat, None)
    }
}

fn cursor_text(c: &ListCursor) -> String {
    format!("{}.{}.{}", u8::from(c.pinned), c.active_at, c.id)
}

fn parse_cursor(cursor: &str) -> Option<ListCursor> {
    let mut parts = cursor.splitn(3, '.');
    let pinned = match parts.next()? {
        "0" => false,
        "1" => true,
        _ => return None,
    };
    Some(ListCursor {
        pinned,
        active_at: parts.next()?.parse().ok()?,
        id: Uuid::parse_str(parts.next()?).ok()?,
    })
}

/// The caller's chats: pinned first, then the latest activity first; the
/// archived ones apart (`archived=true`); or a search (`q`).
#[utoipa::path(get, path = "/v1/chats", tag = "rest", params(ListQuery),
    responses((status = 200, body = ChatList), (status = 400, body = ErrorBody)))]
pub(super) async fn list_chats(
    State(state): State<AppState>,
    AuthUser { user, .. }: AuthUser,
    Query(q): Query<ListQuery>,
) -> Result<Json<ChatList>, ApiError> {
    let limit = q.limit.unwrap_or(20).clamp(1, MAX_PAGE);
    let archived = q.archived.unwrap_or(false);
    if let Some(query) = q.q.as_deref().filter(|s| !s.trim().is_empty()) {
        let Some(terms) = Terms::parse(query).map_err(ApiError::BadRequest)? else {
            // Nothing to look for (no letters or digits).
            return Ok(Json(ChatList {
                chats: Vec::new(),
                next_cursor: None,
            }));
        };
        let hits = state
            .registry
            .search(&user, &terms, archived, limit)
            .await?;
        return Ok(Json(ChatList {
            chats: hits.iter().map(|h| found_view(h, &terms)).collect(),
            next_cursor: None,
        }));
    }
    let after = match q.cursor.as_deref() {
        None | Some("") => None,
        Some(c) => {
            Some(parse_cursor(c).ok_or_else(|| ApiError::BadRequest(format!("bad cursor `{c}`")))?)
        }
    };
    let chats = state.registry.list(&user, archived, after, limit).await?;
    let next_cursor = (chats.len() as u32 == limit)
        .then(|| chats.last().map(|c| cursor_text(&ListCursor::after(c))))
        .flatten();
    Ok(Json(ChatList {
        chats: chats.iter().map(|c| chat_view(c, None)).collect(),
        next_cursor,
    }))
}

/// Renames, pins, archives or restores a chat; answers it as it is now.
#[utoipa::path(patch, path = "/v1/chats/{id}", tag = "rest", params(("id" = Uuid, Path)),
    request_body = UpdateChat,
    responses((status = 200, body = ChatView), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody),
              (status = 409, body = ErrorBody)))]
pub(super) async fn update_chat(
    State(state): State<AppState>,
    AuthUser { user, .. }: AuthUser,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Json<ChatView>, ApiError> {
    let id = chat_id(&id)?;
    let body: UpdateChat = parse_body(&body)?;
    let title = match body.title {
        Some(t) => {
            let t = crate::protocol::limits::one_line(&t);
            let chars = t.chars().count();
            if chars == 0 || chars > MAX_TITLE_CHARS {
                return Err(ApiError::BadRequest(format!(
                    "`title` must be 1 to {MAX_TITLE_CHARS} characters"
                )));
            }
            Some(t)
        }
        None => None,
    };
    if title.is_none() && body.pinned.is_none() && body.archived.is_none() {
        return Err(ApiError::BadRequest(
            "give at least one of `title`, `pinned`, `archived`".into(),
        ));
    }
    let flags = ChatFlags {
        pinned: body.pinned,
        archived: body.archived,
        read: None,
    };
    state.registry.update(id, &user, title, flags).await?;
    let (chat, last_seq) = state.registry.chat(id, &user).await?;
    Ok(Json(chat_view(&chat, Some(last_seq))))
}

/// The chat's active path: its messages and tool calls, as Markdown or as
/// JSON, to download.
#[utoipa::path(get, path = "/v1/chats/{id}/export", tag = "rest",
    params(("id" = Uuid, Path), ExportQuery),
    responses((status = 200, content_type = "text/markdown", description = "the conversation as Markdown (`format=markdown`) or JSON (`format=json`: `{chat, messages: [{seq, ts, role, agent, content | tool_call | tool_result}]}`)"),
              (status = 400, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub(super) async fn export_chat(
    State(state): State<AppState>,
    AuthUser { user, .. }: AuthUser,
    Path(id): Path<String>,
    Query(q): Query<ExportQuery>,
) -> Result<Response, ApiError> {
    let id = chat_id(&id)?;
    let markdown = match q.format.as_deref() {
        None | Some("markdown" | "md") => true,
        Some("json") => false,
        Some(other) => {
            return Err(ApiError::BadRequest(format!(
                "`format` must be `markdown` or `json`, not `{other}`"
            )));
        }
    };
    let (chat, last_seq) = state.registry.chat(id, &user).await?;
    let path = state.registry.history(id, &user, u64::MAX).await?;
    let messages: Vec<Value> = path.iter().filter_map(message).collect();
    let (body, kind, ext) = if markdown {
        let text = as_markdown(&chat, &messages);
        (text, "text/markdown; charset=utf-8", "md")
    } else {
        let doc = json!({"chat": chat_view(&chat, Some(last_seq)), "messages": messages});
        (doc.to_string(), "application/json", "json")
    };
    let disposition = format!("attachment; filename=\"chat-{id}.{ext}\"");
    Ok((
        [
            (header::CONTENT_TYPE, kind.to_owned()),
            (header::CONTENT_DISPOSITION, disposition),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff".to_owned()),
        ],
        body,
    )
        .into_response())
}

/// An envelope of the active path as an exported message.
fn message(env: &Envelope) -> Option<Value> {
    let (seq, ts) = (env.seq, &env.ts);
    Some(match &env.kind {
        EventKind::Text { agent, content } => {
            let role = if agent == "user" { "user" } else { "assistant" };
            let mut m =
                json!({"seq": seq, "ts": ts, "role": role, "agent": agent, "content": content});
            if env.partial {
                m["partial"] = Value::Bool(true);
            }
            m
        }
        EventKind::ToolCall {
            tool_name,
            payload,
            corr,
            agent,
            ..
        } => json!({"seq": seq, "ts": ts, "role": "assistant", "agent": agent,
                    "tool_call": {"id": corr, "name": tool_name, "input": payload}}),
        EventKind::ToolResponse {
            tool_name,
            content,
            success,
            corr,
            ..
        } => json!({"seq": seq, "ts": ts, "role": "tool",
                    "tool_result": {"id": corr, "name": tool_name, "output": content, "success": success}}),
        _ => return None,
    })
}

/// The exported messages as a person reads them.
fn as_markdown(chat: &ChatRecord, messages: &[Value]) -> String {
    let title = chat.listing.title.as_deref().unwrap_or("Chat");
    let mut out = format!(
        "# {title}\n\n_{} · {} · {}_\n",
        chat.agent,
        chat.id,
        rfc3339(chat.created_at)
    );
    for m in messages {
        let who = m["agent"].as_str().unwrap_or("tool");
        if let Some(text) = m["content"].as_str() {
            let name = if who == "user" { "You" } else { who };
            let cut = if m["partial"] == true {
                " (stopped)"
            } else {
                ""
            };
            out.push_str(&format!("\n**{name}**{cut}:\n\n{text}\n"));
        } else if let Some(call) = m.get("tool_call") {
            let input = serde_json::to_string_pretty(&call["input"]).unwrap_or_default();
            let name = call["name"].as_str().unwrap_or_default();
            out.push_str(&format!(
                "\n_{who} calls `{name}`:_\n\n```json\n{input}\n```\n"
            ));
        } else if let Some(result) = m.get("tool_result") {
            let output = serde_json::to_string_pretty(&result["output"]).unwrap_or_default();
            let failed = if result["success"] == false {
                " (failed)"
            } else {
                ""
            };
            out.push_str(&format!("\n_Result{failed}:_\n\n```json\n{output}\n```\n"));
        }
    }
    out
}
