//! The authenticated user of a request, from `Authorization: Bearer` or the
//! `access_token` query parameter (browsers cannot set headers on WebSockets).

use axum::extract::{FromRequestParts, Query};
use axum::http::request::Parts;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Json, Response};

use super::state::AppState;
use crate::auth::{AuthError, Principal, Scope, ServiceKey};
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
        match checked(parts, state, token.as_deref()).await {
            Ok(Principal::User { id, claims }) => Ok(Self {
                user: id,
                token,
                claims,
            }),
            Ok(Principal::Service(key)) => Err(refusal(
                StatusCode::FORBIDDEN,
                &format!(
                    "service key `{}` acts on the server API (/v1/server/…) and schedules only, never as a user",
                    key.name
                ),
            )),
            Err(e) => Err(unauthorized(&e)),
        }
    }
}

/// A backend calling the server API with a service key.
pub struct ServiceCaller(pub ServiceKey);

impl ServiceCaller {
    /// Refuses (403) unless the key has `scope`.
    pub fn must(&self, scope: Scope) -> Result<(), super::error::ApiError> {
        match self.0.may(scope) {
            true => Ok(()),
            false => Err(super::error::ApiError::Forbidden(format!(
                "service key `{}` lacks the scope `{}`",
                self.0.name,
                scope.as_str()
            ))),
        }
    }
}

impl FromRequestParts<AppState> for ServiceCaller {
    type Rejection = Response;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        match bearer(parts) {
            Some(token) if token.starts_with(crate::auth::keys::PREFIX) => {
                match checked(parts, state, Some(&token)).await {
                    Ok(Principal::Service(key)) => {
                        key_rate(state, &key).map_err(IntoResponse::into_response)?;
                        Ok(Self(key))
                    }
                    Ok(Principal::User { .. }) => Err(needs_key()),
                    Err(e) => Err(unauthorized(&e)),
                }
            }
            _ => Err(needs_key()),
        }
    }
}

/// Whoever calls: a user (their own things) or a service key (with its
/// scopes, naming the user it acts for).
pub enum Acting {
    User(AuthUser),
    Service(ServiceKey),
}

impl FromRequestParts<AppState> for Acting {
    type Rejection = Response;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        let token = bearer(parts);
        match checked(parts, state, token.as_deref()).await {
            Ok(Principal::User { id, claims }) => Ok(Self::User(AuthUser {
                user: id,
                token,
                claims,
            })),
            Ok(Principal::Service(key)) => {
                key_rate(state, &key).map_err(IntoResponse::into_response)?;
                Ok(Self::Service(key))
            }
            Err(e) => Err(unauthorized(&e)),
        }
    }
}

impl Acting {
    /// Whether the caller is an operator: a user whose token says
    /// `"admin": true` (JSON true), or a service key with `admin`.
    pub fn is_operator(&self) -> bool {
        match self {
            Self::User(u) => u.claims.get("admin") == Some(&serde_json::Value::Bool(true)),
            Self::Service(key) => key.may(crate::auth::Scope::Admin),
        }
    }
}

/// An operator (see [`Acting::is_operator`]), named for the record
/// (`by`: `user:<id>` or `key:<name>`), and the user it is, if a user (whose
/// turn rate its acts count against; a key's own rate holds already).
/// Anyone else gets 403.
pub struct Operator {
    pub by: String,
    pub user: Option<String>,
}

impl FromRequestParts<AppState> for Operator {
    type Rejection = Response;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        let acting = Acting::from_request_parts(parts, state).await?;
        if !acting.is_operator() {
            return Err(super::error::ApiError::Forbidden(
                "the operator's API needs a token with `\"admin\": true` or a service key with the scope `admin`".into(),
            )
            .into_response());
        }
        Ok(match acting {
            Acting::User(u) => Self {
                by: format!("user:{}", u.user),
                user: Some(u.user),
            },
            Acting::Service(key) => Self {
                by: format!("key:{}", key.name),
                user: None,
            },
        })
    }
}

/// A key's own rate (`rate_key_requests_per_minute`), besides the limits of
/// the users it acts for: 429 past it.
fn key_rate(state: &AppState, key: &ServiceKey) -> Result<(), super::error::ApiError> {
    Ok(state.registry.quotas().key_request(&key.id.to_string())?)
}

/// Who `token` is: as the guard found (it checks each request's
/// credential once, in auth mode `jwt`), else checked here.
async fn checked(
    parts: &Parts,
    state: &AppState,
    token: Option<&str>,
) -> Result<Principal, AuthError> {
    match parts.extensions.get::<Principal>() {
        Some(principal) => Ok(principal.clone()),
        None => state.auth.principal(token).await,
    }
}

fn needs_key() -> Response {
    refusal(
        StatusCode::UNAUTHORIZED,
        "the server API needs a service key (Authorization: Bearer awk_…; see `agentwire keys create`)",
    )
}

fn unauthorized(e: &AuthError) -> Response {
    // Not the caller's fault (the store, or an identity provider never
    // reached): 503, the detail kept in the log, not told to the caller.
    if matches!(e, AuthError::Store(_) | AuthError::Keys(_)) {
        tracing::warn!(error = %e, "cannot check credentials");
        let body = super::error::error_body(
            ErrorCode::PersistenceError,
            "credentials cannot be checked right now; try again shortly",
        );
        return (StatusCode::SERVICE_UNAVAILABLE, Json(body)).into_response();
    }
    // Debug: a token's text (an unknown `alg`…) may hold newlines.
    tracing::info!(error = ?e.to_string(), "refused unauthenticated request");
    refusal(StatusCode::UNAUTHORIZED, &e.to_string())
}

fn refusal(status: StatusCode, message: &str) -> Response {
    (
        status,
        Json(super::error::error_body(ErrorCode::Unauthorized, message)),
    )
        .into_response()
}
