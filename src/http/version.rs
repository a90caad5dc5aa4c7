//! The wire protocol's version (protocol/README.md, *Versions*). Every
//! response names the version this server speaks (`Agentwire-Protocol:
//! 1`); a client may say which it speaks — the `Agentwire-Protocol` header,
//! or the `protocol` query parameter where it cannot set one (a browser's
//! WebSocket) — and a version the server does not speak is refused before
//! the route runs (400 `SCHEMA_VALIDATION_FAILED`, naming both), so a
//! client learns it when it connects, not from a frame it misreads later.

use axum::extract::{Query, Request};
use axum::http::{HeaderName, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Json, Response};

use super::error::error_body;
use crate::protocol::ErrorCode;

/// The protocol version this server speaks. Additions (a new envelope
/// type, field, reason or route) keep it; a change that breaks a client
/// that ignores what it does not know raises it.
pub const PROTOCOL: u32 = 1;

/// The header that carries it, both ways.
pub const HEADER: HeaderName = HeaderName::from_static("agentwire-protocol");

#[derive(serde::Deserialize)]
struct Asked {
    protocol: Option<String>,
}

/// The middleware: refuses a client of another version; names ours on
/// every response.
pub(super) async fn check(request: Request, next: Next) -> Response {
    let header = request
        .headers()
        .get(&HEADER)
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
    let query = Query::<Asked>::try_from_uri(request.uri())
        .ok()
        .and_then(|q| q.0.protocol);
    let mut response = match header.or(query) {
        Some(asked) if asked.trim().parse::<u32>() != Ok(PROTOCOL) => {
            let asked: String = asked.chars().take(32).collect();
            let message = format!(
                "this server speaks agentwire protocol {PROTOCOL}; the client speaks `{asked}`"
            );
            let body = error_body(ErrorCode::SchemaValidationFailed, &message);
            (StatusCode::BAD_REQUEST, Json(body)).into_response()
        }
        _ => next.run(request).await,
    };
    response
        .headers_mut()
        .insert(HEADER, HeaderValue::from(PROTOCOL));
    response
}
