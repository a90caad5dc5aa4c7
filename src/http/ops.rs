//! The operator's routes: `/healthz` and `/metrics`.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Json, Response};

use super::api;
use super::state::AppState;

/// The Prometheus metrics of this node (see `crate::metrics` for the names).
#[utoipa::path(get, path = "/metrics", tag = "ops",
    responses((status = 200, description = "Prometheus text format", content_type = "text/plain")))]
pub(super) async fn metrics(State(state): State<AppState>) -> Response {
    let registry = &state.registry;
    ::metrics::gauge!(crate::metrics::CHAT_ACTORS).set(registry.active_chats() as f64);
    ::metrics::gauge!(crate::metrics::CHATS_SLEEPING).set(registry.sleeping_chats() as f64);
    (
        [("content-type", "text/plain; version=0.0.4; charset=utf-8")],
        crate::metrics::render(),
    )
        .into_response()
}

/// 200 `{"status":"ok"}` once the store answers, 503 otherwise. On
/// PostgreSQL the `X-Agentwire-Node` header names the node that answered.
#[utoipa::path(get, path = "/healthz", tag = "ops",
    responses((status = 200, body = api::Health), (status = 503, body = api::Health)))]
pub(super) async fn healthz(State(state): State<AppState>) -> Response {
    let node = state
        .registry
        .node_id()
        .map(|id| [("x-agentwire-node", id.to_string())]);
    match state.store.ping().await {
        Ok(()) => {
            let up = api::Health {
                status: "ok".into(),
            };
            (StatusCode::OK, node, Json(up)).into_response()
        }
        Err(e) => {
            tracing::warn!(error = %e, "health check: store unreachable");
            let down = api::Health {
                status: "unavailable".into(),
            };
            (StatusCode::SERVICE_UNAVAILABLE, node, Json(down)).into_response()
        }
    }
}
