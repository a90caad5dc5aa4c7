//! The REST API: agents, chats, a chat's log as JSON pages, its model.

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Json, Response};
use axum::routing::{get, post};
use serde::Deserialize;
use serde_json::{Map, Value, json};
use uuid::Uuid;

use super::AppState;
use super::auth::AuthUser;
use super::error::ApiError;
use crate::session::{Caller, Closer, Subscriber};
use crate::store::{ChatRecord, ChatState};

/// Most chats or envelopes in one page.
const MAX_PAGE: u32 = 100;

/// The routes of this module.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/agents", get(list_agents))
        .route("/v1/chats", get(list_chats).post(create_chat))
        .route("/v1/chats/{id}", get(get_chat).delete(archive_chat))
        .route("/v1/chats/{id}/messages", post(send_message))
        .route("/v1/chats/{id}/model", get(list_models).post(set_model))
}

/// Parses a chat id from the path.
pub(super) fn chat_id(id: &str) -> Result<Uuid, ApiError> {
    Uuid::parse_str(id)
        .map_err(|_| ApiError::BadRequest(format!("`{id}` is not a chat id (a UUID)")))
}

pub(super) fn parse_body<T: serde::de::DeserializeOwned>(body: &Bytes) -> Result<T, ApiError> {
    serde_json::from_slice(body)
        .map_err(|e| ApiError::BadRequest(format!("invalid request body: {e}")))
}

fn rfc3339(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

fn chat_view(chat: &ChatRecord) -> Value {
    json!({
        "id": chat.id,
        "agent": chat.agent,
        "state": match chat.state { ChatState::Idle => "idle", ChatState::Running => "running" },
        "archived": chat.archived,
        "model": chat.model,
        "created_at": rfc3339(chat.created_at),
        "updated_at": rfc3339(chat.updated_at),
    })
}

/// `GET /v1/agents`: the tiles of seed 004.
async fn list_agents(State(state): State<AppState>, _: AuthUser) -> Json<Value> {
    let agents: Vec<Value> = state
        .registry
        .agents()
        .all()
        .iter()
        .map(|a| {
            json!({
                "id": a.id,
                "name": a.name,
                "description": a.description,
                "agent_starts_first": a.starts_first,
            })
        })
        .collect();
    Json(json!({ "agents": agents }))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CreateChat {
    agent: String,
    #[serde(default)]
    chat_id: Option<Uuid>,
    #[serde(default)]
    message: Option<String>,
    #[serde(default)]
    context: Option<Map<String, Value>>,
}

/// `POST /v1/chats` → 201 with the chat.
async fn create_chat(
    State(state): State<AppState>,
    auth: AuthUser,
    body: Bytes,
) -> Result<Response, ApiError> {
    let body: CreateChat = parse_body(&body)?;
    if body.message.as_deref().is_some_and(|m| m.trim().is_empty()) {
        return Err(ApiError::BadRequest("`message` must not be empty".into()));
    }
    let id = body.chat_id.unwrap_or_else(Uuid::new_v4);
    if state.registry.chat(id, &auth.user).await.is_ok() {
        return Err(ApiError::Conflict(format!("chat {id} exists already")));
    }
    // `start` subscribes someone: a throwaway queue, dropped at once.
    let (tx, _rx) = tokio::sync::mpsc::channel(1);
    let sub = Subscriber {
        conn_id: state
            .next_conn_id
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed),
        tx,
        closer: Closer::default(),
    };
    let caller = Caller {
        user: &auth.user,
        bearer: auth.token.as_deref(),
        context_type: None,
        context: body.context.as_ref(),
    };
    state
        .registry
        .start(id, caller, &body.agent, body.message, sub.clone())
        .await?;
    state.registry.unsubscribe(id, sub.conn_id).await;
    let (chat, last_seq) = state.registry.chat(id, &auth.user).await?;
    let mut view = chat_view(&chat);
    view["last_seq"] = json!(last_seq);
    Ok((StatusCode::CREATED, Json(view)).into_response())
}

#[derive(Deserialize)]
struct ListQuery {
    #[serde(default)]
    cursor: Option<String>,
    #[serde(default)]
    limit: Option<u32>,
}

fn parse_cursor(cursor: &str) -> Option<(i64, Uuid)> {
    let (at, id) = cursor.split_once('.')?;
    Some((at.parse().ok()?, Uuid::parse_str(id).ok()?))
}

/// `GET /v1/chats`: the caller's chats, newest first; `next_cursor` pages on.
async fn list_chats(
    State(state): State<AppState>,
    AuthUser { user, .. }: AuthUser,
    Query(q): Query<ListQuery>,
) -> Result<Json<Value>, ApiError> {
    let limit = q.limit.unwrap_or(20).clamp(1, MAX_PAGE);
    let before = match q.cursor.as_deref() {
        None | Some("") => None,
        Some(c) => {
            Some(parse_cursor(c).ok_or_else(|| ApiError::BadRequest(format!("bad cursor `{c}`")))?)
        }
    };
    let chats = state.registry.list(&user, before, limit).await?;
    let next = (chats.len() as u32 == limit)
        .then(|| chats.last().map(|c| format!("{}.{}", c.created_at, c.id)))
        .flatten();
    Ok(Json(json!({
        "chats": chats.iter().map(chat_view).collect::<Vec<_>>(),
        "next_cursor": next,
    })))
}

/// `GET /v1/chats/{id}`.
async fn get_chat(
    State(state): State<AppState>,
    AuthUser { user, .. }: AuthUser,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let (chat, last_seq) = state.registry.chat(chat_id(&id)?, &user).await?;
    let mut view = chat_view(&chat);
    view["last_seq"] = json!(last_seq);
    Ok(Json(view))
}

/// `DELETE /v1/chats/{id}`: archive (history kept, new turns refused).
async fn archive_chat(
    State(state): State<AppState>,
    AuthUser { user, .. }: AuthUser,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    state.registry.archive(chat_id(&id)?, &user).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SendMessage {
    text: String,
    #[serde(default)]
    client_msg_id: Option<String>,
}

/// `POST /v1/chats/{id}/messages` → 202: the run goes on in the background;
/// follow it on the WebSocket or `GET /v1/chats/{id}/events`.
async fn send_message(
    State(state): State<AppState>,
    auth: AuthUser,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let id = chat_id(&id)?;
    let body: SendMessage = parse_body(&body)?;
    if body.text.trim().is_empty() {
        return Err(ApiError::BadRequest("`text` must not be empty".into()));
    }
    let caller = Caller {
        user: &auth.user,
        bearer: auth.token.as_deref(),
        context_type: None,
        context: None,
    };
    state
        .registry
        .user_message(id, caller, body.text, body.client_msg_id)
        .await?;
    Ok((
        StatusCode::ACCEPTED,
        Json(json!({"chat_id": id, "accepted": true})),
    )
        .into_response())
}

/// The configured models with their availability, and the chat's current one
/// (`null`: the agent's own).
async fn list_models(
    State(state): State<AppState>,
    AuthUser { user, .. }: AuthUser,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let id = chat_id(&id)?;
    let current = state.registry.chat_model(id, &user).await?;
    let models = state.registry.models();
    let checks = models.all().iter().map(|m| async move {
        json!({
            "name": m.name,
            "provider": m.provider_name,
            "aliases": m.aliases,
            "available": m.available().await,
        })
    });
    let listed = futures_util::future::join_all(checks).await;
    Ok(Json(
        json!({"chat_id": id, "model": current, "models": listed}),
    ))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct SetModel {
    pub name: String,
}

/// Switches the chat's model (a name or an alias); every later turn uses it.
async fn set_model(
    State(state): State<AppState>,
    AuthUser { user, .. }: AuthUser,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Json<Value>, ApiError> {
    let id = chat_id(&id)?;
    let SetModel { name } = parse_body(&body)?;
    let model = state.registry.set_model(id, &user, &name).await?;
    Ok(Json(json!({"chat_id": id, "model": model})))
}
