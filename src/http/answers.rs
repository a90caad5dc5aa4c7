//! Human-in-the-loop answers over HTTP: what `user.input.submit` and
//! `inline_component.result` do on the WebSocket, for clients of any SSE
//! dialect (or none). Each route goes through the same registry call as its
//! WebSocket message, so the checks, the log and the error codes are the
//! same: an unknown, answered or timed-out request is 404
//! `INPUT_REQUEST_NOT_FOUND` and changes nothing, one pending as another
//! kind (an input sent to the components route) 409
//! `REQUEST_KIND_MISMATCH` naming the route that answers it; only the
//! chat's owner may answer (another user's chat is 404, like a missing one).

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::response::Json;
use axum::routing::post;
use serde_json::json;
use uuid::Uuid;

use super::api::{
    Answered, ApprovalAnswer, ApprovalBatch, ApprovalResult, ApprovalResults, ComponentAnswer,
    ErrorBody, InputAnswer,
};
use super::auth::AuthUser;
use super::chats::{chat_id, parse_body};
use super::error::{ApiError, error_body};
use super::state::AppState;
use crate::session::SessionError;

/// Most decisions in one approval batch.
const MAX_BATCH: usize = 64;

/// The longest `corr` or `request_id` (as in `protocol/inbound/`).
const MAX_ID: usize = 128;

/// An id from the path or body, within the WebSocket schemas' bounds.
fn checked(name: &str, id: String) -> Result<String, ApiError> {
    if id.is_empty() || id.len() > MAX_ID {
        return Err(ApiError::BadRequest(format!(
            "`{name}` must be 1 to {MAX_ID} bytes"
        )));
    }
    Ok(id)
}

/// The routes of this module.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/chats/{id}/inputs/{request_id}", post(answer_input))
        .route("/v1/chats/{id}/components/{corr}", post(answer_component))
        .route("/v1/chats/{id}/approvals/{tool_call_id}", post(approve))
        .route("/v1/chats/{id}/approvals", post(approve_batch))
}

fn answered(chat_id: Uuid, corr: String) -> Json<Answered> {
    Json(Answered {
        chat_id,
        corr,
        accepted: true,
    })
}

/// An approval's `corr`: the call's id + `.approval` (either is accepted).
fn approval_corr(tool_call_id: &str) -> String {
    let id = tool_call_id
        .strip_suffix(".approval")
        .unwrap_or(tool_call_id);
    format!("{id}.approval")
}

/// Answers a `chat.input_request` (a password answer is redacted in the log,
/// as on the WebSocket).
#[utoipa::path(post, path = "/v1/chats/{id}/inputs/{request_id}", tag = "answers",
    params(("id" = Uuid, Path), ("request_id" = String, Path)), request_body = InputAnswer,
    responses((status = 200, body = Answered), (status = 400, body = ErrorBody),
              (status = 404, body = ErrorBody, description = "no such chat of yours, or INPUT_REQUEST_NOT_FOUND"),
              (status = 409, body = ErrorBody, description = "REQUEST_KIND_MISMATCH: the id is pending as another kind of request; the message names the route that answers it"),
              (status = 413, body = ErrorBody), (status = 429, body = ErrorBody)))]
pub(super) async fn answer_input(
    State(state): State<AppState>,
    AuthUser { user, .. }: AuthUser,
    Path((id, request_id)): Path<(String, String)>,
    body: Bytes,
) -> Result<Json<Answered>, ApiError> {
    let id = chat_id(&id)?;
    let request_id = checked("request_id", request_id)?;
    let InputAnswer { text } = parse_body(&body)?;
    state
        .registry
        .submit_input(id, &user, request_id.clone(), text)
        .await?;
    Ok(answered(id, request_id))
}

/// Answers a UI tool call waiting for the client (`awaiting_response: true`).
#[utoipa::path(post, path = "/v1/chats/{id}/components/{corr}", tag = "answers",
    params(("id" = Uuid, Path), ("corr" = String, Path)), request_body = ComponentAnswer,
    responses((status = 200, body = Answered), (status = 400, body = ErrorBody, description = "a body, or an answer the component refuses"),
              (status = 404, body = ErrorBody, description = "no such chat of yours, or INPUT_REQUEST_NOT_FOUND"),
              (status = 409, body = ErrorBody, description = "REQUEST_KIND_MISMATCH: the id is pending as another kind of request; the message names the route that answers it"),
              (status = 413, body = ErrorBody), (status = 429, body = ErrorBody)))]
pub(super) async fn answer_component(
    State(state): State<AppState>,
    AuthUser { user, .. }: AuthUser,
    Path((id, corr)): Path<(String, String)>,
    body: Bytes,
) -> Result<Json<Answered>, ApiError> {
    let id = chat_id(&id)?;
    let corr = checked("corr", corr)?;
    let ComponentAnswer { data } = parse_body(&body)?;
    state
        .registry
        .component_result(id, &user, corr.clone(), data)
        .await?;
    Ok(answered(id, corr))
}

/// Grants or refuses one call waiting for approval (`tool_call_id` is the
/// call's id, or the approval's `corr`).
#[utoipa::path(post, path = "/v1/chats/{id}/approvals/{tool_call_id}", tag = "answers",
    params(("id" = Uuid, Path), ("tool_call_id" = String, Path)), request_body = ApprovalAnswer,
    responses((status = 200, body = Answered), (status = 400, body = ErrorBody),
              (status = 404, body = ErrorBody, description = "no such chat of yours, or INPUT_REQUEST_NOT_FOUND"),
              (status = 409, body = ErrorBody, description = "REQUEST_KIND_MISMATCH: the id is pending as another kind of request; the message names the route that answers it"),
              (status = 429, body = ErrorBody)))]
pub(super) async fn approve(
    State(state): State<AppState>,
    AuthUser { user, .. }: AuthUser,
    Path((id, tool_call_id)): Path<(String, String)>,
    body: Bytes,
) -> Result<Json<Answered>, ApiError> {
    let id = chat_id(&id)?;
    let answer: ApprovalAnswer = parse_body(&body)?;
    let corr = checked("tool_call_id", approval_corr(&tool_call_id))?;
    state
        .registry
        .component_result(
            id,
            &user,
            corr.clone(),
            decision(answer.approved, answer.reason),
        )
        .await?;
    Ok(answered(id, corr))
}

fn decision(approved: bool, reason: Option<String>) -> serde_json::Value {
    match reason {
        Some(reason) => json!({"approved": approved, "reason": reason}),
        None => json!({"approved": approved}),
    }
}

/// Decides several approvals at once, in order; each decision succeeds or
/// fails on its own (200 with one result each, when the chat is the caller's).
#[utoipa::path(post, path = "/v1/chats/{id}/approvals", tag = "answers",
    params(("id" = Uuid, Path)), request_body = ApprovalBatch,
    responses((status = 200, body = ApprovalResults), (status = 400, body = ErrorBody),
              (status = 404, body = ErrorBody), (status = 429, body = ErrorBody)))]
pub(super) async fn approve_batch(
    State(state): State<AppState>,
    AuthUser { user, .. }: AuthUser,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Json<ApprovalResults>, ApiError> {
    let id = chat_id(&id)?;
    let ApprovalBatch { decisions } = parse_body(&body)?;
    if decisions.is_empty() || decisions.len() > MAX_BATCH {
        return Err(ApiError::BadRequest(format!(
            "`decisions` must hold 1 to {MAX_BATCH} decisions"
        )));
    }
    // The chat must be the caller's before any decision is tried.
    state.registry.chat(id, &user).await?;
    let mut results = Vec::with_capacity(decisions.len());
    for d in &decisions {
        checked("tool_call_id", approval_corr(&d.tool_call_id))?;
    }
    for d in decisions {
        let corr = approval_corr(&d.tool_call_id);
        let outcome = state
            .registry
            .component_result(id, &user, corr, decision(d.approved, d.reason))
            .await;
        let error = match outcome {
            Ok(()) => None,
            // The whole request cannot go on: said as the request's error.
            Err(e @ SessionError::RateLimited { .. }) => return Err(e.into()),
            Err(e) => Some(error_body(e.code(), &e.to_string()).error),
        };
        results.push(ApprovalResult {
            tool_call_id: d.tool_call_id,
            accepted: error.is_none(),
            error,
        });
    }
    Ok(Json(ApprovalResults {
        chat_id: id,
        results,
    }))
}
