//! Users' database connections (seed 003's `/connections`, mirrored under
//! `/v1/connections`): each user sees and changes only their own; a password
//! goes in and never comes out (`has_password`).

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Json, Response};
use axum::routing::{get, post};
use uuid::Uuid;

use super::api::{
    BindConnection, ChatStateView, ConnectionBody, ConnectionList, ConnectionRef, ConnectionView,
    ErrorBody,
};
use super::auth::AuthUser;
use super::chats::{chat_id, parse_body};
use super::error::ApiError;
use super::state::AppState;
use crate::databases::{Connection, ConnectionSpec, DbError, Driver, Password};

/// The routes of this module, under both prefixes.
pub fn router() -> Router<AppState> {
    let mut r = Router::new()
        .route("/v1/chats/{id}/connection", post(bind))
        .route("/chat/{id}/connection", post(bind))
        .route("/v1/chats/{id}/state", get(chat_state))
        .route("/chat/{id}/state", get(chat_state));
    for base in ["/v1/connections", "/connections"] {
        r = r.route(base, get(list).post(create)).route(
            &format!("{base}/{{id}}"),
            get(one).put(update).delete(remove),
        );
    }
    r
}

fn rfc3339(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

fn view(c: Connection) -> ConnectionView {
    let driver = match c.spec.driver {
        Driver::Postgres => "postgres",
        Driver::Sqlite => "sqlite",
    };
    ConnectionView {
        id: c.id,
        name: c.spec.name,
        driver: driver.to_owned(),
        host: c.spec.host,
        port: c.spec.port,
        database: c.spec.database,
        username: c.spec.username,
        path: c.spec.path,
        allow_privileged_role: c.spec.allow_privileged_role,
        has_password: c.has_password,
        created_at: rfc3339(c.created_at),
        updated_at: rfc3339(c.updated_at),
    }
}

fn connection_id(id: &str) -> Result<Uuid, ApiError> {
    Uuid::parse_str(id)
        .map_err(|_| ApiError::BadRequest(format!("`{id}` is not a connection id (a UUID)")))
}

/// The body as a spec, and what it says of the password.
fn spec_of(body: &Bytes) -> Result<(ConnectionSpec, Option<Option<String>>), ApiError> {
    let b: ConnectionBody = parse_body(body)?;
    let driver = match b.driver.as_str() {
        "postgres" | "postgresql" => Driver::Postgres,
        "sqlite" => Driver::Sqlite,
        other => {
            return Err(ApiError::BadRequest(format!(
                "`driver`: `{other}` is not postgres or sqlite"
            )));
        }
    };
    let spec = ConnectionSpec {
        name: b.name,
        driver,
        host: b.host,
        port: b.port,
        database: b.database,
        username: b.username,
        path: b.path,
        allow_privileged_role: b.allow_privileged_role,
    };
    Ok((spec, b.password))
}

/// The caller's connections, oldest first.
#[utoipa::path(get, path = "/v1/connections", tag = "connections",
    responses((status = 200, body = ConnectionList), (status = 401, body = ErrorBody)))]
pub(super) async fn list(
    State(state): State<AppState>,
    AuthUser { user, .. }: AuthUser,
) -> Result<Json<ConnectionList>, ApiError> {
    let connections = state.connections.list(&user).await?;
    Ok(Json(ConnectionList {
        connections: connections.into_iter().map(view).collect(),
    }))
}

/// A new connection; its password is kept encrypted (AES-256-GCM under the
/// master key) and never shown again.
#[utoipa::path(post, path = "/v1/connections", tag = "connections", request_body = ConnectionBody,
    responses((status = 201, body = ConnectionView), (status = 400, body = ErrorBody)))]
pub(super) async fn create(
    State(state): State<AppState>,
    AuthUser { user, .. }: AuthUser,
    body: Bytes,
) -> Result<Response, ApiError> {
    let (spec, password) = spec_of(&body)?;
    let made = state
        .connections
        .create(&user, spec, password.flatten())
        .await?;
    Ok((StatusCode::CREATED, Json(view(made))).into_response())
}

/// One of the caller's connections.
#[utoipa::path(get, path = "/v1/connections/{id}", tag = "connections", params(("id" = Uuid, Path)),
    responses((status = 200, body = ConnectionView), (status = 404, body = ErrorBody, description = "CONNECTION_NOT_FOUND")))]
pub(super) async fn one(
    State(state): State<AppState>,
    AuthUser { user, .. }: AuthUser,
    Path(id): Path<String>,
) -> Result<Json<ConnectionView>, ApiError> {
    let c = state.connections.get(&user, connection_id(&id)?).await?;
    Ok(Json(view(c)))
}

/// Replaces a connection; `password` absent keeps the one kept, `null`
/// removes it.
#[utoipa::path(put, path = "/v1/connections/{id}", tag = "connections", params(("id" = Uuid, Path)),
    request_body = ConnectionBody,
    responses((status = 200, body = ConnectionView), (status = 400, body = ErrorBody),
              (status = 404, body = ErrorBody, description = "CONNECTION_NOT_FOUND")))]
pub(super) async fn update(
    State(state): State<AppState>,
    AuthUser { user, .. }: AuthUser,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Json<ConnectionView>, ApiError> {
    let id = connection_id(&id)?;
    let (spec, password) = spec_of(&body)?;
    let password = match password {
        None => Password::Keep,
        Some(None) => Password::Clear,
        Some(Some(p)) => Password::Set(p),
    };
    let c = state.connections.update(&user, id, spec, password).await?;
    Ok(Json(view(c)))
}

/// Deletes a connection.
#[utoipa::path(delete, path = "/v1/connections/{id}", tag = "connections", params(("id" = Uuid, Path)),
    responses((status = 204), (status = 404, body = ErrorBody, description = "CONNECTION_NOT_FOUND")))]
pub(super) async fn remove(
    State(state): State<AppState>,
    AuthUser { user, .. }: AuthUser,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    state.connections.delete(&user, connection_id(&id)?).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Connects a chat to one of the caller's connections (seed 003's
/// `POST /chat/{thread_id}/connection`): the server connects, snapshots the
/// schema (tables, typed columns, three sample rows) and keeps it with the
/// chat for the model's prompt.
#[utoipa::path(post, path = "/v1/chats/{id}/connection", tag = "connections", params(("id" = Uuid, Path)),
    request_body = BindConnection,
    responses((status = 200, body = ChatStateView),
              (status = 400, body = ErrorBody, description = "a bad body; a host refused now; a role that can do more than read (SCHEMA_VALIDATION_FAILED)"),
              (status = 404, body = ErrorBody, description = "no such chat of yours (RESUME_FAILED), or connection (CONNECTION_NOT_FOUND)"),
              (status = 409, body = ErrorBody, description = "MASTER_KEY_MISMATCH: the password cannot be decrypted with this master key"),
              (status = 502, body = ErrorBody, description = "the database cannot be reached")))]
pub(super) async fn bind(
    State(state): State<AppState>,
    AuthUser { user, .. }: AuthUser,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Json<ChatStateView>, ApiError> {
    let id = chat_id(&id)?;
    let BindConnection { connection_id } = parse_body(&body)?;
    state.registry.chat(id, &user).await?;
    // Each binding connects to a database and reads its schema: it counts
    // as a turn against the user's rate.
    state.registry.charge(&user)?;
    state.connections.bind(&user, id, connection_id).await?;
    chat_state_of(&state, id, &user).await.map(Json)
}

/// Seed 003's state view of a chat: its model, its database's schema, the
/// connection, and the last SQL result.
#[utoipa::path(get, path = "/v1/chats/{id}/state", tag = "connections", params(("id" = Uuid, Path)),
    responses((status = 200, body = ChatStateView), (status = 404, body = ErrorBody)))]
pub(super) async fn chat_state(
    State(state): State<AppState>,
    AuthUser { user, .. }: AuthUser,
    Path(id): Path<String>,
) -> Result<Json<ChatStateView>, ApiError> {
    let id = chat_id(&id)?;
    chat_state_of(&state, id, &user).await.map(Json)
}

async fn chat_state_of(state: &AppState, id: Uuid, user: &str) -> Result<ChatStateView, ApiError> {
    let model_name = state.registry.chat_model(id, user).await?;
    let db = state.connections.chat_database(id).await?;
    Ok(ChatStateView {
        thread_id: id,
        model_name,
        db_schema: db.as_ref().map(|d| d.db_schema.clone()),
        connection: db.as_ref().map(|d| ConnectionRef {
            user_id: user.to_owned(),
            connection_id: d.connection_id,
        }),
        sql_result: db.and_then(|d| d.sql_result),
    })
}

impl From<DbError> for ApiError {
    fn from(e: DbError) -> Self {
        match e {
            DbError::NotFound => ApiError::ConnectionNotFound(e.to_string()),
            DbError::Invalid(_) | DbError::NoMasterKey | DbError::Privileged { .. } => {
                ApiError::BadRequest(e.to_string())
            }
            DbError::Unreachable(_) => ApiError::Upstream(e.to_string()),
            DbError::Vault(_) => ApiError::MasterKey(format!(
                "{e}: save the connection's password again under this key"
            )),
            DbError::Store(_) | DbError::Corrupt(_) => ApiError::Internal(e.to_string()),
        }
    }
}
