//! HTTP: the router, authentication at the edge, `/healthz`, the WebSocket
//! endpoint `/v1/ws` and the REST routes of a chat (`chats`).
//!
//! The only module that knows axum. Transports translate frames to and from
//! [`Registry`] calls and never touch the store.

mod admin;
mod ag_ui;
mod ai_sdk;
mod ai_sdk_ws;
mod answers;
mod api;
mod auth;
mod branches;
mod chats;
mod connections;
mod download;
mod error;
mod feed;
mod files;
mod guard;
mod history;
mod inline_files;
mod listing;
mod openai;
mod openapi;
mod ops;
mod rate;
mod schedules;
mod serve;
mod server_api;
mod sse;
mod state;
mod template_ws;
mod usage;
pub mod version;
mod views;
mod web;
mod workflows;
mod ws;
mod ws_read;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Json, Response};
use axum::routing::get;
use tower_http::cors::{AllowOrigin, CorsLayer};

pub use serve::serve;
pub use state::AppState;

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

/// Every response says `X-Content-Type-Options: nosniff`: a browser takes
/// the JSON API's answers (which echo what users and models wrote) as JSON,
/// never as a page or a script whatever they hold.
async fn nosniff(mut response: Response) -> Response {
    response.headers_mut().insert(
        axum::http::header::X_CONTENT_TYPE_OPTIONS,
        axum::http::HeaderValue::from_static("nosniff"),
    );
    response
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
        .allow_methods([
            Method::GET,
            Method::POST,
            Method::PATCH,
            Method::DELETE,
            Method::OPTIONS,
        ])
        .allow_headers([
            header::AUTHORIZATION,
            header::CONTENT_TYPE,
            header::ACCEPT,
            HeaderName::from_static("last-event-id"),
            HeaderName::from_static("traceparent"),
            HeaderName::from_static("tracestate"),
            version::HEADER,
        ])
        .expose_headers([
            HeaderName::from_static("x-conversation-id"),
            version::HEADER,
            header::CONTENT_DISPOSITION,
            header::CONTENT_RANGE,
        ])
        .max_age(std::time::Duration::from_secs(600))
}

/// A request that carries a `traceparent` is handled in its trace (traces
/// on): a run it starts continues it.
async fn continue_trace(
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use opentelemetry::trace::FutureExt as _;
    match crate::telemetry::propagate::extract(request.headers()) {
        Some(cx) => next.run(request).with_context(cx).await,
        None => next.run(request).await,
    }
}

/// The application's routes.
pub fn router(state: AppState) -> Router {
    let origins = state.config.cors_origins.clone();
    // The guard holds each route to its own limit first (a message that
    // may carry files inline, more); this only bounds the extractors.
    let body_limit = state.config.max_message_bytes + state.config.files.max_inline_bytes;
    let guard = axum::middleware::from_fn_with_state(state.clone(), guard::check);
    let app = Router::new()
        .route("/healthz", get(ops::healthz))
        .route("/metrics", get(ops::metrics))
        .route("/v1/ws", get(ws::upgrade))
        .route("/api/chat/ws", get(template_ws::upgrade))
        .route("/v1/ai-sdk/ws", get(ai_sdk_ws::upgrade))
        .route("/openapi.json", get(openapi::document))
        .merge(chats::router())
        .merge(listing::router())
        .merge(answers::router())
        .merge(branches::router())
        .merge(connections::router())
        .merge(sse::router())
        .merge(ai_sdk::router())
        .merge(ag_ui::router())
        .merge(history::router())
        .merge(openai::router())
        .merge(workflows::router())
        .merge(files::router())
        .merge(server_api::router())
        .merge(feed::router())
        .merge(schedules::router())
        .merge(usage::router())
        .merge(admin::router())
        .merge(web::router())
        .layer(DefaultBodyLimit::max(body_limit))
        .layer(guard)
        .layer(axum::middleware::map_response(json_errors))
        .layer(axum::middleware::map_response(nosniff))
        .layer(axum::middleware::from_fn(continue_trace))
        .layer(axum::middleware::from_fn(version::check))
        .with_state(state);
    if origins.is_empty() {
        app
    } else {
        app.layer(cors(&origins))
    }
}
