//! The REST API: agents, chats, a chat's log as JSON pages, its model.

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Json, Response};
use axum::routing::{get, post};
use uuid::Uuid;

use super::api::{
    Accepted, AgentInfo, AgentList, ChatModels, CreateChat, ErrorBody, MemberInfo, ModelInfo,
    ModelSet, SendMessage, SetModel,
};
use super::auth::AuthUser;
use super::error::ApiError;
use super::state::AppState;
use super::views::ChatView;
use crate::protocol::limits;
use crate::session::{Caller, SessionError};

/// The routes of this module.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/agents", get(list_agents))
        .route("/v1/chats", post(create_chat))
        .route("/v1/chats/{id}", get(get_chat).delete(archive_chat))
        .route("/v1/chats/{id}/messages", post(send_message))
        .route("/v1/chats/{id}/model", get(list_models).post(set_model))
}

/// Parses a chat id from the path.
pub(super) fn chat_id(id: &str) -> Result<Uuid, ApiError> {
    Uuid::parse_str(id)
        .map_err(|_| ApiError::BadRequest(format!("`{id}` is not a chat id (a UUID)")))
}

/// Parses a JSON body with the API's error shape for bad ones.
pub(super) fn parse_body<T: serde::de::DeserializeOwned>(body: &Bytes) -> Result<T, ApiError> {
    let bad = |e: serde_json::Error| ApiError::BadRequest(format!("invalid request body: {e}"));
    // A value first, to refuse one nested past the limit as the WebSocket
    // does, whatever field it hides in.
    let value: serde_json::Value = serde_json::from_slice(body).map_err(|e| {
        if e.to_string().contains("recursion limit") {
            too_deep()
        } else {
            bad(e)
        }
    })?;
    if limits::json_depth(&value) > limits::MAX_JSON_DEPTH {
        return Err(too_deep());
    }
    serde_json::from_value(value).map_err(bad)
}

fn too_deep() -> ApiError {
    let max = limits::MAX_JSON_DEPTH;
    SessionError::TooLarge(format!("the body nests deeper than {max} levels")).into()
}

pub(super) use super::views::chat_view;

/// The agents, as tiles (seed 004).
#[utoipa::path(get, path = "/v1/agents", tag = "rest",
    responses((status = 200, body = AgentList), (status = 401, body = ErrorBody)))]
pub(super) async fn list_agents(State(state): State<AppState>, _: AuthUser) -> Json<AgentList> {
    let agents = state
        .registry
        .agents()
        .all()
        .iter()
        .map(|a| AgentInfo {
            id: a.id.clone(),
            name: a.name.clone(),
            description: a.description.clone(),
            agent_starts_first: a.starts_first,
            members: a.group.as_ref().map(|g| {
                g.members
                    .iter()
                    .map(|m| MemberInfo {
                        name: m.name.clone(),
                        description: m.description.clone(),
                    })
                    .collect()
            }),
            mcp_servers: (!a.mcp.is_empty())
                .then(|| a.mcp.iter().map(|m| m.server.status()).collect()),
        })
        .collect();
    Json(AgentList { agents })
}

/// Creates a chat (and starts its first turn if `message` is given).
#[utoipa::path(post, path = "/v1/chats", tag = "rest", request_body = CreateChat,
    responses((status = 201, body = ChatView), (status = 400, body = ErrorBody), (status = 409, body = ErrorBody),
              (status = 422, body = ErrorBody)))]
pub(super) async fn create_chat(
    State(state): State<AppState>,
    auth: AuthUser,
    body: Bytes,
) -> Result<Response, ApiError> {
    let body: CreateChat = parse_body(&body)?;
    if body.attachments.is_empty() && body.message.as_deref().is_some_and(|m| m.trim().is_empty()) {
        return Err(ApiError::BadRequest("`message` must not be empty".into()));
    }
    let id = body.chat_id.unwrap_or_else(Uuid::new_v4);
    if state.registry.chat(id, &auth.user).await.is_ok() {
        return Err(ApiError::Conflict(format!("chat {id} exists already")));
    }
    let files = super::api::file_refs(&body.attachments);
    let caller = Caller {
        context: body.context.as_ref(),
        attachments: Some(&files),
        ..Caller::bearing(&auth.user, auth.token.as_deref())
    };
    state
        .registry
        .start(id, caller, &body.agent, body.message, None)
        .await?;
    let (chat, last_seq) = state.registry.chat(id, &auth.user).await?;
    Ok((StatusCode::CREATED, Json(chat_view(&chat, Some(last_seq)))).into_response())
}

/// One chat, with its last seq.
#[utoipa::path(get, path = "/v1/chats/{id}", tag = "rest", params(("id" = Uuid, Path)),
    responses((status = 200, body = ChatView), (status = 404, body = ErrorBody)))]
pub(super) async fn get_chat(
    State(state): State<AppState>,
    AuthUser { user, .. }: AuthUser,
    Path(id): Path<String>,
) -> Result<Json<ChatView>, ApiError> {
    let (chat, last_seq) = state.registry.chat(chat_id(&id)?, &user).await?;
    Ok(Json(chat_view(&chat, Some(last_seq))))
}

#[derive(serde::Deserialize, utoipa::IntoParams)]
pub(super) struct DeleteQuery {
    /// `true` deletes the chat for good instead of archiving it: its log,
    /// its place in the list and in search, its run if one is going (ended
    /// unlogged); connections following it get a `chat.error`
    /// `RESUME_FAILED`, and the id finds no chat after [default: false].
    #[serde(default)]
    purge: Option<bool>,
}

/// Archives a chat (history kept, new turns refused), or with `purge=true`
/// deletes it for good.
#[utoipa::path(delete, path = "/v1/chats/{id}", tag = "rest", params(("id" = Uuid, Path), DeleteQuery),
    responses((status = 204), (status = 404, body = ErrorBody)))]
pub(super) async fn archive_chat(
    State(state): State<AppState>,
    AuthUser { user, .. }: AuthUser,
    Path(id): Path<String>,
    Query(q): Query<DeleteQuery>,
) -> Result<StatusCode, ApiError> {
    let id = chat_id(&id)?;
    if q.purge == Some(true) {
        state.registry.purge(id, &user).await?;
    } else {
        state.registry.archive(id, &user).await?;
    }
    Ok(StatusCode::NO_CONTENT)
}

/// A new user turn; the run goes on in the background (follow it on the
/// WebSocket or `GET /v1/chats/{id}/events`).
#[utoipa::path(post, path = "/v1/chats/{id}/messages", tag = "rest", params(("id" = Uuid, Path)),
    request_body = SendMessage,
    responses((status = 202, body = Accepted), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody)))]
pub(super) async fn send_message(
    State(state): State<AppState>,
    auth: AuthUser,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let id = chat_id(&id)?;
    let body: SendMessage = parse_body(&body)?;
    if body.text.trim().is_empty() && body.attachments.is_empty() {
        return Err(ApiError::BadRequest(
            "`text` must not be empty unless the message attaches files".into(),
        ));
    }
    let files = super::api::file_refs(&body.attachments);
    let caller = Caller {
        attachments: Some(&files),
        ..Caller::bearing(&auth.user, auth.token.as_deref())
    };
    state
        .registry
        .user_message(
            id,
            caller,
            body.text,
            body.client_msg_id,
            body.multitask_strategy,
        )
        .await?;
    let accepted = Accepted {
        chat_id: id,
        accepted: true,
    };
    Ok((StatusCode::ACCEPTED, Json(accepted)).into_response())
}

/// The configured models (availability checked now) as `ModelInfo`s.
pub(super) async fn model_infos(state: &AppState) -> Vec<ModelInfo> {
    let checks = state.registry.models().all().iter().map(|m| async move {
        ModelInfo {
            name: m.name.clone(),
            provider: m.provider_name.clone(),
            aliases: m.aliases.clone(),
            available: m.available().await,
        }
    });
    futures_util::future::join_all(checks).await
}

/// The configured models and the chat's current one (`null`: the agent's own).
#[utoipa::path(get, path = "/v1/chats/{id}/model", tag = "rest", params(("id" = Uuid, Path)),
    responses((status = 200, body = ChatModels), (status = 404, body = ErrorBody)))]
pub(super) async fn list_models(
    State(state): State<AppState>,
    AuthUser { user, .. }: AuthUser,
    Path(id): Path<String>,
) -> Result<Json<ChatModels>, ApiError> {
    let id = chat_id(&id)?;
    let model = state.registry.chat_model(id, &user).await?;
    Ok(Json(ChatModels {
        chat_id: id,
        model,
        models: model_infos(&state).await,
    }))
}

/// Switches the chat's model (a name or an alias); every later turn uses it.
#[utoipa::path(post, path = "/v1/chats/{id}/model", tag = "rest", params(("id" = Uuid, Path)),
    request_body = SetModel,
    responses((status = 200, body = ModelSet), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody),
              (status = 422, body = ErrorBody)))]
pub(super) async fn set_model(
    State(state): State<AppState>,
    AuthUser { user, .. }: AuthUser,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Json<ModelSet>, ApiError> {
    let id = chat_id(&id)?;
    let SetModel { name } = parse_body(&body)?;
    let model = state.registry.set_model(id, &user, &name).await?;
    Ok(Json(ModelSet { chat_id: id, model }))
}
