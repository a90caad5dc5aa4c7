//! HTTP: the router, authentication at the edge, `/healthz`, the WebSocket
//! endpoint `/v1/ws` and the REST routes of a chat (`chats`).
//!
//! The only module that knows axum. Transports translate frames to and from
//! [`Registry`] calls and never touch the store.

mod api;
mod auth;
mod chats;
mod error;
mod guard;
mod openai;
mod openapi;
mod rate;
mod serve;
mod sse;
mod template_ws;
mod web;
mod ws;

use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use axum::Router;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Json, Response};
use axum::routing::get;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tower_http::cors::{AllowOrigin, CorsLayer};

pub use serve::serve;

use crate::auth::Authenticator;
use crate::config::Config;
use crate::session::Registry;
use crate::store::Store;

/// What every handler shares. Cheap to clone.
#[derive(Clone)]
pub struct AppState {
    pub config: Arc<Config>,
    pub registry: Registry,
    pub store: Arc<dyn Store>,
    pub auth: Arc<Authenticator>,
    /// Cancelled when the server shuts down: sockets close with 1001.
    pub shutdown: CancellationToken,
    /// WebSocket tasks are tracked here (axum's graceful shutdown does not wait for them).
    pub tracker: TaskTracker,
    pub(crate) next_conn_id: Arc<AtomicU64>,
    /// Open SSE streams per user (`max_streams_per_user`).
    pub streams: crate::session::UserSlots,
    /// Open WebSocket connections per user (`max_sockets_per_user`).
    pub sockets: crate::session::UserSlots,
}

/// Gives the errors axum answers by itself (a body over the limit, an unknown
/// route or method) the one JSON error shape.
async fn json_errors(response: Response) -> Response {
    let status = response.status();
    let is_json = response
        .headers()
        .get(axum::http::header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/json"));
    if !status.is_client_error() || is_json || status == StatusCode::UNAUTHORIZED {
        return response;
    }
    let message = match status {
        StatusCode::PAYLOAD_TOO_LARGE => "the request body is too large",
        StatusCode::NOT_FOUND => "no such route",
        StatusCode::METHOD_NOT_ALLOWED => "method not allowed on this route",
        _ => "bad request",
    };
    let code = crate::protocol::ErrorCode::SchemaValidationFailed;
    (status, Json(error::error_body(code, message))).into_response()
}

/// CORS for the configured origins (seed 000 §8): preflight on every route.
fn cors(origins: &[String]) -> CorsLayer {
    use axum::http::{HeaderName, Method, header};
    let allow = if origins.iter().any(|o| o == "*") {
        AllowOrigin::any()
    } else {
        AllowOrigin::list(origins.iter().filter_map(|o| o.parse().ok()))
    };
    CorsLayer::new()
        .allow_origin(allow)
        .allow_methods([Method::GET, Method::POST, Method::DELETE, Method::OPTIONS])
        .allow_headers([
            header::AUTHORIZATION,
            header::CONTENT_TYPE,
            header::ACCEPT,
            HeaderName::from_static("last-event-id"),
        ])
        .expose_headers([HeaderName::from_static("x-conversation-id")])
        .max_age(std::time::Duration::from_secs(600))
}

/// The application's routes.
pub fn router(state: AppState) -> Router {
    let origins = state.config.cors_origins.clone();
    let body_limit = state.config.max_message_bytes;
    let guard = axum::middleware::from_fn_with_state(state.clone(), guard::check);
    let app = Router::new()
        .route("/healthz", get(healthz))
        .route("/metrics", get(metrics))
        .route("/v1/ws", get(ws::upgrade))
        .route("/api/chat/ws", get(template_ws::upgrade))
        .route("/openapi.json", get(openapi::document))
        .merge(chats::router())
        .merge(sse::router())
        .merge(openai::router())
        .merge(web::router())
        .layer(DefaultBodyLimit::max(body_limit))
        .layer(guard)
        .layer(axum::middleware::map_response(json_errors))
        .with_state(state);
    if origins.is_empty() {
        app
    } else {
        app.layer(cors(&origins))
    }
}

/// The Prometheus metrics of this node (see `crate::metrics` for the names).
#[utoipa::path(get, path = "/metrics", tag = "ops",
    responses((status = 200, description = "Prometheus text format", content_type = "text/plain")))]
async fn metrics(State(state): State<AppState>) -> Response {
    ::metrics::gauge!(crate::metrics::CHAT_ACTORS).set(state.registry.active_chats() as f64);
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
async fn healthz(State(state): State<AppState>) -> Response {
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
