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
use serde_json::{Value, json};

use super::AppState;
use super::auth::AuthUser;
use super::error::ApiError;
use crate::agent::runtime::enhanced_system_prompt;
use crate::session::SessionError;

/// The routes of this module.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/models", get(models))
        .route("/v1/chat/completions", post(chat_completions))
        .route("/v1/system-prompts/{agent}/enhanced", get(enhanced))
}

/// `GET /v1/models` in OpenAI's list shape.
async fn models(State(state): State<AppState>, _: AuthUser) -> Json<Value> {
    let data: Vec<Value> = state
        .registry
        .models()
        .all()
        .iter()
        .map(
            |m| json!({"id": m.name, "object": "model", "created": 0, "owned_by": m.provider_name}),
        )
        .collect();
    Json(json!({"object": "list", "data": data}))
}

/// `POST /v1/chat/completions`: the body goes to the model's server with only
/// `model` mapped to the vendor's name; the answer (status, content type,
/// streamed or not) comes back byte for byte.
async fn chat_completions(
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

/// `GET /v1/system-prompts/{agent}/enhanced`: the agent's system prompt with
/// its tool block (tool definitions and seed 002's JSON call format).
async fn enhanced(
    State(state): State<AppState>,
    _: AuthUser,
    Path(agent): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let agent = state
        .registry
        .agents()
        .get(&agent)
        .ok_or_else(|| ApiError::Session(SessionError::UnknownAgent(agent.clone())))?;
    Ok(Json(json!({
        "agent": agent.id,
        "base": agent.system_prompt,
        "enhanced": enhanced_system_prompt(&agent),
        "tools": agent.tools.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(),
    })))
}
