//! `/openapi.json`: the OpenAPI 3.1 description of the HTTP API, generated
//! from the handlers' `#[utoipa::path]` annotations and the types of `api`.
//! The WebSocket protocol is described by `protocol/` instead.

use axum::response::Json;
use utoipa::OpenApi;

use super::{api, chats, openai, sse};

/// The API description.
#[derive(OpenApi)]
#[openapi(
    info(title = "agentwire", description = "A durable, resumable backend between AI agents and chat UIs. The WebSocket protocol (/v1/ws) is documented in protocol/README.md."),
    paths(
        super::healthz,
        super::metrics,
        chats::list_agents,
        chats::create_chat,
        chats::list_chats,
        chats::get_chat,
        chats::archive_chat,
        chats::send_message,
        chats::list_models,
        chats::set_model,
        sse::agent_chat,
        sse::agent_host,
        sse::rejoin,
        sse::cancel,
        sse::thread_create,
        sse::thread_message,
        sse::thread_model,
        sse::thread_set_model,
        openai::models,
        openai::chat_completions,
        openai::enhanced,
    ),
    components(schemas(api::ErrorBody, api::ErrorDetail)),
    tags(
        (name = "rest", description = "Chats and agents"),
        (name = "sse", description = "SSE dialects of the log, resumable with Last-Event-ID"),
        (name = "threads", description = "Seed 003's thread API"),
        (name = "openai", description = "OpenAI-compatible passthrough"),
        (name = "ops", description = "Operations"),
    )
)]
pub struct ApiDoc;

/// `GET /openapi.json`.
pub async fn document() -> Json<utoipa::openapi::OpenApi> {
    Json(ApiDoc::openapi())
}
