//! Seed 002's workflows over HTTP: the registry (`GET /v1/workflows`, by
//! category, one with its parameter schema; seed 002's `/workflows/categories`
//! mirrored) and an invocation in a chat (`POST
//! /v1/chats/{id}/workflows/{workflow_id}`), through the same registry call
//! as the WebSocket's `workflow.invoke`. A caller sees only the workflows
//! their `allow` lets them run; any other is 404 `WORKFLOW_NOT_FOUND`.

use std::collections::BTreeMap;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::Json;
use axum::routing::{get, post};
use serde::Deserialize;

use super::api::{
    ErrorBody, WorkflowCategories, WorkflowCategory, WorkflowInfo, WorkflowInvocation,
    WorkflowInvoked, WorkflowList,
};
use super::auth::AuthUser;
use super::chats::{chat_id, parse_body};
use super::error::ApiError;
use super::state::AppState;
use crate::session::{Caller, SessionError};
use crate::workflows::Workflow;

/// The routes of this module.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/workflows", get(list))
        .route("/v1/workflows/categories", get(categories))
        .route("/workflows/categories", get(categories))
        .route("/v1/workflows/{id}", get(one))
        .route("/v1/chats/{id}/workflows/{workflow_id}", post(invoke))
}

/// `?category=`.
#[derive(Deserialize, utoipa::IntoParams)]
pub(super) struct ByCategory {
    /// Only this category's workflows.
    category: Option<String>,
}

fn info(w: &Workflow) -> WorkflowInfo {
    WorkflowInfo {
        id: w.id.clone(),
        title: w.title.clone(),
        description: w.description.clone(),
        category: w.category.clone(),
        kind: w.action.kind().to_owned(),
        requires_approval: w.requires_approval,
        parameters: w.parameters.clone(),
    }
}

/// The workflows `auth` may run.
fn visible<'a>(state: &'a AppState, auth: &'a AuthUser) -> impl Iterator<Item = &'a Workflow> {
    state
        .registry
        .agents()
        .workflows()
        .all()
        .map(AsRef::as_ref)
        .filter(|w| w.allows(&auth.user, &auth.claims))
}

/// The workflows the caller may run (seed 002's `WorkflowService`), by id.
#[utoipa::path(get, path = "/v1/workflows", tag = "workflows", params(ByCategory),
    responses((status = 200, body = WorkflowList), (status = 401, body = ErrorBody)))]
pub(super) async fn list(
    State(state): State<AppState>,
    auth: AuthUser,
    Query(q): Query<ByCategory>,
) -> Json<WorkflowList> {
    let workflows = visible(&state, &auth)
        .filter(|w| q.category.as_ref().is_none_or(|c| *c == w.category))
        .map(info)
        .collect();
    Json(WorkflowList { workflows })
}

/// The categories of the workflows the caller may run, with how many each
/// holds (seed 002's `/workflows/categories`, also served there).
#[utoipa::path(get, path = "/v1/workflows/categories", tag = "workflows",
    responses((status = 200, body = WorkflowCategories), (status = 401, body = ErrorBody)))]
pub(super) async fn categories(
    State(state): State<AppState>,
    auth: AuthUser,
) -> Json<WorkflowCategories> {
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for w in visible(&state, &auth) {
        *counts.entry(w.category.clone()).or_default() += 1;
    }
    let categories = counts
        .into_iter()
        .map(|(name, count)| WorkflowCategory { name, count })
        .collect();
    Json(WorkflowCategories { categories })
}

/// One workflow, with the JSON Schema of its parameters (what a UI renders
/// as its form).
#[utoipa::path(get, path = "/v1/workflows/{id}", tag = "workflows", params(("id" = String, Path)),
    responses((status = 200, body = WorkflowInfo), (status = 401, body = ErrorBody),
              (status = 404, body = ErrorBody, description = "WORKFLOW_NOT_FOUND")))]
pub(super) async fn one(
    State(state): State<AppState>,
    auth: AuthUser,
    Path(id): Path<String>,
) -> Result<Json<WorkflowInfo>, ApiError> {
    visible(&state, &auth)
        .find(|w| w.id == id)
        .map(|w| Json(info(w)))
        .ok_or_else(|| SessionError::UnknownWorkflow(id).into())
}

/// Runs a workflow in the chat: its parameters checked against its schema
/// (400 `SCHEMA_VALIDATION_FAILED` naming each field), not while a run is
/// active (409 `RUN_IN_PROGRESS`). The invocation, its approval, progress and
/// result are in the chat's log; follow it on the WebSocket or an SSE rejoin.
#[utoipa::path(post, path = "/v1/chats/{id}/workflows/{workflow_id}", tag = "workflows",
    params(("id" = Uuid, Path), ("workflow_id" = String, Path)), request_body = WorkflowInvocation,
    responses((status = 202, body = WorkflowInvoked), (status = 400, body = ErrorBody),
              (status = 401, body = ErrorBody),
              (status = 404, body = ErrorBody, description = "no such chat of yours, or WORKFLOW_NOT_FOUND"),
              (status = 409, body = ErrorBody, description = "RUN_IN_PROGRESS"),
              (status = 413, body = ErrorBody), (status = 429, body = ErrorBody)))]
pub(super) async fn invoke(
    State(state): State<AppState>,
    auth: AuthUser,
    Path((id, workflow_id)): Path<(String, String)>,
    body: Bytes,
) -> Result<(StatusCode, Json<WorkflowInvoked>), ApiError> {
    let chat = chat_id(&id)?;
    let WorkflowInvocation { parameters } = if body.is_empty() {
        WorkflowInvocation::default()
    } else {
        parse_body(&body)?
    };
    let caller = Caller::bearing(&auth.user, auth.token.as_deref());
    let parameters = serde_json::Value::Object(parameters.unwrap_or_default());
    let corr = state
        .registry
        .invoke_workflow(chat, caller, &workflow_id, parameters, &auth.claims)
        .await?;
    Ok((
        StatusCode::ACCEPTED,
        Json(WorkflowInvoked {
            chat_id: chat,
            workflow_id,
            corr,
        }),
    ))
}
