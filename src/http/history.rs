//! A chat's whole conversation in the shape each client library loads it:
//! `GET /v1/ai-sdk/chat/{id}/messages` as the AI SDK's `UIMessage`s (for
//! `useChat({ messages })`), `GET /v1/ag-ui/{threadId}/messages` as AG-UI
//! messages (for `HttpAgent`'s `initialMessages`). Both read the active path
//! of the chat's tree; an id that names no chat of the caller's (a
//! conversation not started yet) has none.

use axum::Router;
use axum::extract::{Path, State};
use axum::response::Json;
use axum::routing::get;
use serde_json::Value;
use uuid::Uuid;

use super::api::ErrorBody;
use super::auth::AuthUser;
use super::error::ApiError;
use super::sse::conversation_chat;
use super::state::AppState;
use crate::protocol::Envelope;
use crate::session::SessionError;
use crate::wire::{RunOnPath, runs, ui_messages};

/// The most bytes of log one answer reads (about 64 MiB).
const MAX_BYTES: usize = 64 << 20;

/// The routes of this module.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/ai-sdk/chat/{id}/messages", get(ai_sdk))
        .route("/v1/ag-ui/{id}/messages", get(ag_ui))
}

/// The active path of `user`'s chat, every envelope (`None`: no such chat).
async fn path(
    state: &AppState,
    user: &str,
    chat_id: Uuid,
) -> Result<Option<Vec<Envelope>>, ApiError> {
    let registry = &state.registry;
    let (mut out, mut bytes, mut after, mut leaf) = (Vec::new(), 0, 0, None);
    loop {
        let (end, page, next) = match registry.path_page(chat_id, user, leaf, after, 1000).await {
            Ok(read) => read,
            Err(SessionError::NotFound) => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        // The path as it ended at the first page (a run may grow it).
        leaf = Some(end);
        for json in page {
            bytes += json.len();
            if bytes > MAX_BYTES {
                return Err(SessionError::TooLarge(format!(
                    "the conversation holds over {MAX_BYTES} bytes of log; read it with GET /v1/chats/{{id}}/path"
                ))
                .into());
            }
            if let Ok(env) = serde_json::from_str::<Envelope>(&json) {
                out.push(env);
            }
        }
        match next {
            Some(n) => after = n,
            None => return Ok(Some(out)),
        }
    }
}

/// The chat's conversation as the AI SDK's `UIMessage`s: a user message
/// (`<chat>:u<seq>`) and the run's answer (`<chat>:<seq>`, the id its
/// stream gave, with the same parts and metadata) for each run of the
/// active path, the one in flight included.
#[utoipa::path(get, path = "/v1/ai-sdk/chat/{id}/messages", tag = "ai-sdk",
    params(("id" = String, Path, description = "the chat: a UUID, or the client's own id")),
    responses((status = 200, description = "an array of UIMessages (`[]`: no such chat yet)", body = Vec<Object>),
              (status = 413, body = ErrorBody)))]
pub(super) async fn ai_sdk(
    State(state): State<AppState>,
    AuthUser { user, .. }: AuthUser,
    Path(id): Path<String>,
) -> Result<Json<Vec<Value>>, ApiError> {
    let (chat_id, _) = conversation_chat(&user, Some(&id));
    let Some(path) = path(&state, &user, chat_id).await? else {
        return Ok(Json(Vec::new()));
    };
    let mut on_path = Vec::new();
    for envelopes in runs(path) {
        let first = envelopes.first().map_or(1, |e| e.seq);
        let start = state.registry.run_start(chat_id, &user, first).await?;
        on_path.push(RunOnPath { start, envelopes });
    }
    let (chat, _) = state.registry.chat(chat_id, &user).await?;
    let declared = state
        .registry
        .agents()
        .get(&chat.agent)
        .map(|a| a.declared_tools())
        .unwrap_or_default();
    Ok(Json(ui_messages(&chat_id.to_string(), &on_path, &declared)))
}

/// The chat's conversation as AG-UI messages: its texts, tool calls and
/// tool results on the active path (as a rejoin's `MESSAGES_SNAPSHOT`).
#[utoipa::path(get, path = "/v1/ag-ui/{id}/messages", tag = "ag-ui",
    params(("id" = String, Path, description = "the thread: a UUID, or the client's own id")),
    responses((status = 200, description = "an array of AG-UI messages (`[]`: no such thread yet)", body = Vec<Object>)))]
pub(super) async fn ag_ui(
    State(state): State<AppState>,
    AuthUser { user, .. }: AuthUser,
    Path(id): Path<String>,
) -> Result<Json<Vec<Value>>, ApiError> {
    let (chat_id, _) = conversation_chat(&user, Some(&id));
    let history = match state.registry.history(chat_id, &user, u64::MAX).await {
        Ok(h) => h,
        Err(SessionError::NotFound) => return Ok(Json(Vec::new())),
        Err(e) => return Err(e.into()),
    };
    Ok(Json(
        history.iter().filter_map(super::ag_ui::message).collect(),
    ))
}
