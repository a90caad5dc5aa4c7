//! `/openapi.json`: the OpenAPI 3.1 description of the HTTP API, generated
//! from the handlers' `#[utoipa::path]` annotations and the types of `api`.
//! The WebSocket protocol is described by `protocol/` instead.

use axum::response::Json;
use utoipa::openapi::{Content, OpenApi as Document, Ref, RefOr, ResponseBuilder};
use utoipa::{Modify, OpenApi};

use super::{
    admin, ag_ui, ai_sdk, answers, api, branches, chats, connections, download, feed, files,
    history, listing, openai, ops, schedules, server_api, sse, usage, workflows,
};

/// The API description.
#[derive(OpenApi)]
#[openapi(
    info(title = "agentwire", description = "A durable, resumable backend between AI agents and chat UIs. The WebSocket protocol (/v1/ws) is documented in protocol/README.md."),
    paths(
        ops::healthz,
        ops::metrics,
        chats::list_agents,
        chats::create_chat,
        listing::list_chats,
        chats::get_chat,
        listing::update_chat,
        listing::export_chat,
        chats::archive_chat,
        chats::send_message,
        chats::list_models,
        chats::set_model,
        branches::branches,
        branches::edit,
        branches::regenerate,
        branches::switch,
        branches::fork,
        branches::path,
        answers::answer_input,
        answers::answer_component,
        answers::approve,
        answers::approve_batch,
        connections::list,
        connections::create,
        connections::one,
        connections::update,
        connections::remove,
        connections::bind,
        connections::chat_state,
        sse::agent_chat,
        sse::agent_host,
        sse::rejoin,
        sse::cancel,
        sse::threads::thread_create,
        sse::threads::thread_message,
        sse::threads::thread_model,
        sse::threads::thread_set_model,
        ai_sdk::chat,
        ai_sdk::resume,
        history::ai_sdk,
        history::ag_ui,
        ag_ui::run,
        ag_ui::rejoin,
        openai::models,
        openai::chat_completions,
        openai::enhanced,
        workflows::list,
        workflows::categories,
        workflows::one,
        workflows::invoke,
        files::upload,
        download::download,
        feed::read,
        feed::feed,
        schedules::create,
        schedules::list,
        schedules::one,
        schedules::remove,
        schedules::pause,
        schedules::resume,
        server_api::start_chat,
        server_api::post_into,
        server_api::upload,
        server_api::user_chats,
        usage::usage,
        admin::overview,
        admin::log,
        admin::cancel,
        admin::end_wait,
    ),
    components(schemas(api::ErrorBody, api::ErrorDetail)),
    modifiers(&Limits, &Security),
    tags(
        (name = "rest", description = "Chats and agents"),
        (name = "workflows", description = "User-invoked workflows (seed 002); categories also under /workflows/categories"),
        (name = "connections", description = "Users' database connections (seed 003); also under /connections"),
        (name = "answers", description = "Human-in-the-loop answers: input requests, UI tool calls, approvals"),
        (name = "sse", description = "SSE dialects of the log, resumable with Last-Event-ID"),
        (name = "threads", description = "Seed 003's thread API"),
        (name = "ag-ui", description = "AG-UI 1.0 runs (HttpAgent), with a durable rejoin"),
        (name = "ai-sdk", description = "The Vercel AI SDK's chat transport (UI message stream), resumable from the log"),
        (name = "openai", description = "OpenAI-compatible passthrough"),
        (name = "files", description = "Files users upload and tools hand back"),
        (name = "schedules", description = "Agents that start on their own: cron schedules in a time zone, a user's own or any user's with a service key"),
        (name = "server", description = "The server API: what a backend does with a service key (`agentwire keys create`), never as a user"),
        (name = "usage", description = "Tokens and cost per user, agent, model and day"),
        (name = "admin", description = "The operator's API (a token with \"admin\": true, or a service key with `admin`): runs, waits, errors; cancel a run, end a wait"),
        (name = "ops", description = "Operations"),
    )
)]
pub struct ApiDoc;

/// `GET /openapi.json`.
pub async fn document() -> Json<utoipa::openapi::OpenApi> {
    Json(ApiDoc::openapi())
}

/// The credentials: a user's bearer JWT on every route but the server
/// API's, a service key (with scopes) on those.
struct Security;

impl Modify for Security {
    fn modify(&self, doc: &mut Document) {
        use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
        let components = doc.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .bearer_format("JWT")
                    .description(Some(
                        "A user's token (auth mode jwt); also the access_token query parameter",
                    ))
                    .build(),
            ),
        );
        components.add_security_scheme(
            "service_key",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some("A service key, `awk_…` (agentwire keys create --scopes publish,read,admin); the operation names the scope it needs"))
                    .build(),
            ),
        );
    }
}

/// The answers every route may give besides its own (`guard`, the rate
/// limits): documented once here rather than on each handler.
struct Limits;

impl Modify for Limits {
    fn modify(&self, doc: &mut Document) {
        let error = |description: &str| -> RefOr<utoipa::openapi::Response> {
            let body = Content::new(Some(Ref::from_schema_name("ErrorBody")));
            ResponseBuilder::new()
                .description(description)
                .content("application/json", body)
                .build()
                .into()
        };
        for (path, item) in doc.paths.paths.iter_mut() {
            if path == "/healthz" || path == "/metrics" {
                continue;
            }
            let every = [
                (
                    "403",
                    "auth mode none: a foreign Origin or Host (UNAUTHORIZED)",
                ),
                (
                    "429",
                    "a rate limit or quota (RATE_LIMIT_EXCEEDED), with Retry-After",
                ),
            ];
            let with_body = [
                (
                    "408",
                    "the body was not sent in time (SCHEMA_VALIDATION_FAILED)",
                ),
                (
                    "413",
                    "a body over max_message_bytes, a text over 256 KiB or a value nested over 64 levels (SCHEMA_VALIDATION_FAILED)",
                ),
                (
                    "415",
                    "a body that is not application/json (SCHEMA_VALIDATION_FAILED)",
                ),
            ];
            let ops = [&mut item.get, &mut item.post, &mut item.delete];
            for (i, op) in ops.into_iter().enumerate() {
                let Some(op) = op else { continue };
                let posts = i == 1;
                for (status, text) in every.iter().chain(with_body.iter().filter(|_| posts)) {
                    op.responses
                        .responses
                        .entry((*status).to_owned())
                        .or_insert_with(|| error(text));
                }
            }
        }
    }
}
