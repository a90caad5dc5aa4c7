//! The OpenAI-compatible passthrough (seed 002 Decision 4): `GET /v1/models`
//! and `POST /v1/chat/completions` forward to the configured models unchanged
//! (no agent prompt, no tools of ours), so tools such as Cline or Continue can
//! use agentwire as their endpoint. And `GET /v1/system-prompts/{agent}/enhanced`,
//! the prompt our own routes send.

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{Json, Response};
use axum::routing::{get, post};
use serde_json::Value;

use super::api::{EnhancedPrompt, ErrorBody, OpenAiModel, OpenAiModelList};
use super::auth::AuthUser;
use super::error::ApiError;
use super::state::AppState;
use crate::agent::runtime::enhanced_system_prompt;
use crate::session::SessionError;

/// The routes of this module.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/models", get(models))
        .route("/v1/chat/completions", post(chat_completions))
        .route("/v1/system-prompts/{agent}/enhanced", get(enhanced))
}

/// The configured models, in OpenAI's list shape.
#[utoipa::path(get, path = "/v1/models", tag = "openai", responses((status = 200, body = OpenAiModelList)))]
pub(super) async fn models(State(state): State<AppState>, _: AuthUser) -> Json<OpenAiModelList> {
    let data = state
        .registry
        .models()
        .all()
        .iter()
        .map(|m| OpenAiModel {
            id: m.name.clone(),
            object: "model".into(),
            created: 0,
            owned_by: m.provider_name.clone(),
        })
        .collect();
    Json(OpenAiModelList {
        object: "list".into(),
        data,
    })
}

/// The body goes to the model's server with only
/// `model` mapped to the vendor's name; the answer (status, content type,
/// streamed or not) comes back byte for byte.
#[utoipa::path(post, path = "/v1/chat/completions", tag = "openai",
    request_body(content = Object, description = "an OpenAI Chat Completions request"),
    responses((status = 200, description = "the model server's answer, byte for byte (JSON or text/event-stream)"),
              (status = 400, body = ErrorBody), (status = 422, body = ErrorBody), (status = 502, body = ErrorBody)))]
pub(super) async fn chat_completions(
    State(state): State<AppState>,
    _: AuthUser,
    body: Bytes,
) -> Result<Response, ApiError> {
    let body: Value = serde_json::from_slice(&body)
        .map_err(|e| ApiError::BadRequest(format!("invalid JSON body: {e}")))?;
    let name = body["model"]
        .as_str()
        .ok_or_else(|| ApiError::BadRequest("`model` is required".into()))?;
    let model = state
        .registry
        .models()
        .resolve(name)
        .ok_or_else(|| ApiError::Session(SessionError::UnknownModel(name.to_owned())))?;
    let upstream = model
        .forward_chat_completions(body)
        .await
        .map_err(ApiError::Upstream)?;
    let status =
        StatusCode::from_u16(upstream.status().as_u16()).unwrap_or(StatusCode::BAD_GATEWAY);
    let content_type = upstream
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| HeaderValue::from_bytes(v.as_bytes()).ok());
    let mut response = Response::new(Body::from_stream(upstream.bytes_stream()));
    *response.status_mut() = status;
    if let Some(ct) = content_type {
        response.headers_mut().insert(header::CONTENT_TYPE, ct);
    }
    response
        .headers_mut()
        .insert("x-accel-buffering", HeaderValue::from_static("no"));
    Ok(response)
}

/// The agent's system prompt with its tool block (tool definitions by
/// category and seed 002's JSON call format), and the workflows the caller
/// may run, by category.
#[utoipa::path(get, path = "/v1/system-prompts/{agent}/enhanced", tag = "openai", params(("agent" = String, Path)),
    responses((status = 200, body = EnhancedPrompt), (status = 422, body = ErrorBody)))]
pub(super) async fn enhanced(
    State(state): State<AppState>,
    auth: AuthUser,
    Path(agent): Path<String>,
) -> Result<Json<EnhancedPrompt>, ApiError> {
    let agents = state.registry.agents();
    let agent = agents
        .get(&agent)
        .ok_or_else(|| ApiError::Session(SessionError::UnknownAgent(agent.clone())))?;
    let workflows: Vec<&crate::workflows::Workflow> = agents
        .workflows()
        .all()
        .map(AsRef::as_ref)
        .filter(|w| w.allows(&auth.user, &auth.claims))
        .collect();
    Ok(Json(EnhancedPrompt {
        agent: agent.id.clone(),
        base: agent.system_prompt.clone(),
        enhanced: enhanced_system_prompt(&agent, &workflows),
        tools: agent.tools_now().iter().map(|t| t.name.clone()).collect(),
    }))
}
