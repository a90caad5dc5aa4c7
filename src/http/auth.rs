//! The authenticated user of a request, from `Authorization: Bearer` or the
//! `access_token` query parameter (browsers cannot set headers on WebSockets).

use axum::extract::{FromRequestParts, Query};
use axum::http::request::Parts;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Json, Response};

use super::state::AppState;
use crate::protocol::ErrorCode;

/// The caller, and the bearer token they presented (forwarded to HTTP tools).
/// Rejects with 401 and a JSON error in `jwt` mode.
pub struct AuthUser {
    pub user: String,
    pub token: Option<String>,
    /// The token's other claims (a workflow's `allow` may name them).
    pub claims: serde_json::Map<String, serde_json::Value>,
}

pub(super) fn bearer(parts: &Parts) -> Option<String> {
    if let Some(value) = parts.headers.get(header::AUTHORIZATION) {
        let value = value.to_str().ok()?;
        let (scheme, token) = value.split_once(' ')?;
        return scheme
            .eq_ignore_ascii_case("bearer")
            .then(|| token.trim().to_owned());
    }
    Query::<TokenQuery>::try_from_uri(&parts.uri)
        .ok()?
        .0
        .access_token
}

#[derive(serde::Deserialize)]
struct TokenQuery {
    access_token: Option<String>,
}

impl FromRequestParts<AppState> for AuthUser {
    type Rejection = Response;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        let token = bearer(parts);
        match state.auth.principal(token.as_deref()) {
            Ok((user, claims)) => Ok(Self {
                user,
                token,
                claims,
            }),
            Err(e) => {
                // Debug: a token's text (an unknown `alg`…) may hold newlines.
                tracing::info!(error = ?e.to_string(), "refused unauthenticated request");
                Err((
                    StatusCode::UNAUTHORIZED,
                    Json(super::error::error_body(
                        ErrorCode::Unauthorized,
                        &e.to_string(),
                    )),
                )
                    .into_response())
            }
        }
    }
}
