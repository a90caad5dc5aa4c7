//! REST routes about one chat: `GET`/`POST /v1/chats/{id}/model` (seed 003's
//! per-chat model choice).

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::response::Json;
use axum::routing::get;
use serde::Deserialize;
use serde_json::{Value, json};
use uuid::Uuid;

use super::AppState;
use super::auth::AuthUser;
use super::error::ApiError;

/// The routes of this module.
pub fn router() -> Router<AppState> {
    Router::new().route("/v1/chats/{id}/model", get(list_models).post(set_model))
}

fn chat_id(id: &str) -> Result<Uuid, ApiError> {
    Uuid::parse_str(id)
        .map_err(|_| ApiError::BadRequest(format!("`{id}` is not a chat id (a UUID)")))
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
struct SetModel {
    name: String,
}

/// Switches the chat's model (a name or an alias); every later turn uses it.
async fn set_model(
    State(state): State<AppState>,
    AuthUser { user, .. }: AuthUser,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Json<Value>, ApiError> {
    let id = chat_id(&id)?;
    let SetModel { name } = serde_json::from_slice(&body).map_err(|e| {
        ApiError::BadRequest(format!("the body must be {{\"name\": \"<model>\"}}: {e}"))
    })?;
    let model = state.registry.set_model(id, &user, &name).await?;
    Ok(Json(json!({"chat_id": id, "model": model})))
}
