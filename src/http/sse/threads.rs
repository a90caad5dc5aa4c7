//! Seed 003's thread routes: `POST /chat`, `POST /chat/{id}/message` (the
//! `threads` dialect), `GET`/`POST /chat/{id}/model`.

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::response::{Json, Response};
use uuid::Uuid;

use super::stream::{Turn, begin_turn, respond};
use crate::http::api::{
    ErrorBody, SetModel, ThreadCreate, ThreadCreated, ThreadMessage, ThreadModelSet, ThreadModels,
};
use crate::http::auth::AuthUser;
use crate::http::chats::{chat_id as parse_chat_id, model_infos, parse_body};
use crate::http::error::ApiError;
use crate::http::state::AppState;
use crate::session::Caller;
use crate::wire::Dialect;

/// Seed 003: a new thread (a chat of the default agent, or `agent`).
#[utoipa::path(post, path = "/chat", tag = "threads", request_body(content = Option<ThreadCreate>),
    responses((status = 200, body = ThreadCreated), (status = 400, body = ErrorBody)))]
pub(crate) async fn thread_create(
    State(state): State<AppState>,
    auth: AuthUser,
    body: Bytes,
) -> Result<Json<ThreadCreated>, ApiError> {
    let body: ThreadCreate = if body.is_empty() {
        ThreadCreate::default()
    } else {
        parse_body(&body)?
    };
    let agent = body.agent.as_deref().unwrap_or(&state.config.default_agent);
    let chat_id = Uuid::new_v4();
    state
        .registry
        .start(chat_id, Caller::user(&auth.user), agent, None, None)
        .await?;
    Ok(Json(ThreadCreated { thread_id: chat_id }))
}

/// Seed 003: one turn as data-only SSE (`chunk`, `tool_result`, `end`, `error`).
#[utoipa::path(post, path = "/chat/{thread_id}/message", tag = "threads", params(("thread_id" = Uuid, Path)),
    request_body = ThreadMessage,
    responses((status = 200, content_type = "text/event-stream", description = "the threads dialect"),
              (status = 400, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub(crate) async fn thread_message(
    State(state): State<AppState>,
    auth: AuthUser,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let chat_id = parse_chat_id(&id)?;
    let body: ThreadMessage = parse_body(&body)?;
    if body.message.trim().is_empty() {
        return Err(ApiError::BadRequest("`message` must not be empty".into()));
    }
    let (rx, before) = begin_turn(
        &state,
        Turn::say(
            &auth.user,
            auth.token.as_deref(),
            (chat_id, false),
            &state.config.default_agent,
            body.message,
        ),
    )
    .await?;
    Ok(respond(
        chat_id,
        Vec::new(),
        rx,
        Dialect::Threads.framer(chat_id, before),
    ))
}

/// Seed 003: the thread's model and every configured model's availability.
#[utoipa::path(get, path = "/chat/{thread_id}/model", tag = "threads", params(("thread_id" = Uuid, Path)),
    responses((status = 200, body = ThreadModels), (status = 404, body = ErrorBody)))]
pub(crate) async fn thread_model(
    State(state): State<AppState>,
    AuthUser { user, .. }: AuthUser,
    Path(id): Path<String>,
) -> Result<Json<ThreadModels>, ApiError> {
    let thread_id = parse_chat_id(&id)?;
    let model = state.registry.chat_model(thread_id, &user).await?;
    let models = model_infos(&state)
        .await
        .into_iter()
        .map(|m| (m.name, m.available))
        .collect();
    Ok(Json(ThreadModels {
        thread_id,
        model,
        models,
    }))
}

/// Seed 003: switches the thread's model (a name or an alias).
#[utoipa::path(post, path = "/chat/{thread_id}/model", tag = "threads", params(("thread_id" = Uuid, Path)),
    request_body = SetModel,
    responses((status = 200, body = ThreadModelSet), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody),
              (status = 422, body = ErrorBody)))]
pub(crate) async fn thread_set_model(
    State(state): State<AppState>,
    AuthUser { user, .. }: AuthUser,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Json<ThreadModelSet>, ApiError> {
    let thread_id = parse_chat_id(&id)?;
    let SetModel { name } = parse_body(&body)?;
    let model = state.registry.set_model(thread_id, &user, &name).await?;
    Ok(Json(ThreadModelSet { thread_id, model }))
}
