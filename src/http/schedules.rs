//! Schedules over HTTP: a user's own (their token), or any user's with a
//! service key (`publish` to change them, `read` or `publish` to read
//! them; the key names the user with `user`).

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Json, Response};
use axum::routing::{get, post};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::ToSchema;
use uuid::Uuid;

use super::api::ErrorBody;
use super::auth::Acting;
use super::chats::parse_body;
use super::error::ApiError;
use super::state::AppState;
use crate::auth::Scope;
use crate::protocol::limits;
use crate::schedules::{Missed, Spec};
use crate::store::ScheduleRecord;

/// The routes of this module.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/schedules", post(create).get(list))
        .route("/v1/schedules/{id}", get(one).delete(remove))
        .route("/v1/schedules/{id}/pause", post(pause))
        .route("/v1/schedules/{id}/resume", post(resume))
}

/// `POST /v1/schedules`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewSchedule {
    /// With a service key: the user the chats are for. A user's own token
    /// may leave it out (or name themselves).
    #[serde(default)]
    pub user: Option<String>,
    /// An agent or a template.
    pub agent: String,
    /// Five fields (`0 8 * * 1-5`), or six with seconds first.
    pub cron: String,
    /// An IANA time zone [default: `UTC`].
    #[serde(default)]
    pub time_zone: Option<String>,
    /// Each chat's first turn, as the user's words; none, and an agent that
    /// speaks first begins on its own.
    #[serde(default)]
    pub message: Option<String>,
    /// Each chat's UI state (its `schedule` key is set to `{id, due_at}`).
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub context: Option<Map<String, Value>>,
    /// A time missed while every node was down [default: `skip`].
    #[serde(default)]
    pub missed: Option<Missed>,
    #[serde(default)]
    pub paused: bool,
}

/// A schedule.
#[derive(Debug, Serialize, ToSchema)]
pub struct ScheduleView {
    pub id: Uuid,
    pub user: String,
    pub agent: String,
    pub cron: String,
    pub time_zone: String,
    pub missed: Missed,
    pub paused: bool,
    pub message: Option<String>,
    #[schema(value_type = Option<Object>)]
    pub context: Option<Value>,
    /// RFC 3339: the next due time (`null` if it is never due again).
    pub next_run_at: Option<String>,
    /// RFC 3339: the last due time it fired.
    pub last_run_at: Option<String>,
    /// The chat of that firing.
    pub last_chat_id: Option<Uuid>,
    /// `user`, or `key:<name>`.
    pub created_by: String,
    pub created_at: String,
}

/// `GET /v1/schedules`.
#[derive(Debug, Serialize, ToSchema)]
pub struct ScheduleList {
    pub schedules: Vec<ScheduleView>,
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
pub(super) struct ForUser {
    /// With a service key: the user.
    user: Option<String>,
}

fn time(ms: i64) -> Option<String> {
    (ms != i64::MAX)
        .then(|| chrono::DateTime::from_timestamp_millis(ms))
        .flatten()
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
}

fn view(s: ScheduleRecord) -> ScheduleView {
    ScheduleView {
        id: s.id,
        user: s.owner,
        agent: s.agent,
        cron: s.cron,
        time_zone: s.time_zone,
        missed: Missed::parse(&s.missed),
        paused: s.paused,
        message: s.message,
        context: s.context.and_then(|c| serde_json::from_str(&c).ok()),
        next_run_at: time(s.next_at),
        last_run_at: s.last_at.and_then(time),
        last_chat_id: s.last_chat,
        created_by: s.created_by,
        created_at: time(s.created_at).unwrap_or_default(),
    }
}

/// The user a call acts for: a user themselves, or the one a key names
/// (the key holding `scope`, or `read` also taking `publish`).
fn owner(acting: &Acting, named: Option<&str>, scope: Scope) -> Result<String, ApiError> {
    match acting {
        Acting::User(u) => match named {
            Some(other) if other != u.user => Err(ApiError::Forbidden(
                "a user manages their own schedules only".into(),
            )),
            _ => Ok(u.user.clone()),
        },
        Acting::Service(key) => {
            let allowed = key.may(scope) || (scope == Scope::Read && key.may(Scope::Publish));
            if !allowed {
                return Err(ApiError::Forbidden(format!(
                    "service key `{}` lacks the scope `{}`",
                    key.name,
                    scope.as_str()
                )));
            }
            let user = named.ok_or_else(|| {
                ApiError::BadRequest("a service key names the user: `user`".into())
            })?;
            Ok(super::server_api::user_id(user)?.to_owned())
        }
    }
}

fn schedule_id(id: &str) -> Result<Uuid, ApiError> {
    Uuid::parse_str(id)
        .map_err(|_| ApiError::BadRequest(format!("`{id}` is not a schedule id (a UUID)")))
}

fn not_found() -> ApiError {
    ApiError::NotFound("no schedule with that id belongs to that user".into())
}

/// Makes a schedule.
#[utoipa::path(post, path = "/v1/schedules", tag = "schedules", request_body = NewSchedule,
    security(("bearer" = []), ("service_key" = ["publish"])),
    responses((status = 201, body = ScheduleView), (status = 400, body = ErrorBody),
              (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
              (status = 409, body = ErrorBody), (status = 422, body = ErrorBody),
              (status = 429, body = ErrorBody)))]
pub(super) async fn create(
    State(state): State<AppState>,
    acting: Acting,
    body: Bytes,
) -> Result<Response, ApiError> {
    let body: NewSchedule = parse_body(&body)?;
    let user = owner(&acting, body.user.as_deref(), Scope::Publish)?;
    // Counted as one of the user's turns: reading a cron expression may
    // search far (a date that never comes), so each costs some CPU.
    state.registry.quotas().message(&user)?;
    if let Some(m) = &body.message {
        if m.trim().is_empty() {
            return Err(ApiError::BadRequest("`message` must not be empty".into()));
        }
        if m.len() > limits::MAX_TEXT_BYTES {
            let max = limits::MAX_TEXT_BYTES;
            return Err(crate::session::SessionError::TooLarge(format!(
                "`message` is over {max} bytes"
            ))
            .into());
        }
    }
    let tz = body.time_zone.unwrap_or_else(|| "UTC".into());
    let now = chrono::Utc::now().timestamp_millis();
    let (cron, zone) = (body.cron.clone(), tz.clone());
    // Off the async threads: the search is plain CPU.
    let (next_at, gap) = tokio::task::spawn_blocking(move || {
        let spec = Spec::parse(&cron, &zone)?;
        let next = spec
            .next_after(now)
            .ok_or_else(|| "`cron`: never due".to_owned())?;
        Ok::<_, String>((next, spec.shortest_gap(now)))
    })
    .await
    .map_err(|e| ApiError::Internal(e.to_string()))?
    .map_err(ApiError::BadRequest)?;
    let limits = state.config.schedules;
    if gap.is_some_and(|gap| gap < limits.min_interval.as_millis() as i64) {
        return Err(ApiError::BadRequest(format!(
            "`cron`: due times closer than {} s (schedule_min_interval_seconds)",
            limits.min_interval.as_secs()
        )));
    }
    if state.registry.agents().get(&body.agent).is_none() {
        return Err(crate::session::SessionError::UnknownAgent(body.agent).into());
    }
    let schedules = state.store.schedules();
    if schedules.count(&user).await? >= limits.per_user {
        return Err(ApiError::Conflict(format!(
            "{user} has {} schedules, the most a user may have (max_schedules_per_user)",
            limits.per_user
        )));
    }
    let record = ScheduleRecord {
        id: Uuid::new_v4(),
        owner: user,
        agent: body.agent,
        message: body.message,
        context: body.context.map(|c| Value::Object(c).to_string()),
        cron: body.cron.trim().to_owned(),
        time_zone: tz.trim().to_owned(),
        missed: body.missed.unwrap_or(Missed::Skip).as_str().to_owned(),
        paused: body.paused,
        next_at,
        last_at: None,
        last_chat: None,
        created_by: match &acting {
            Acting::User(_) => "user".into(),
            Acting::Service(key) => format!("key:{}", key.name),
        },
        created_at: now,
    };
    schedules.create(&record).await?;
    Ok((StatusCode::CREATED, Json(view(record))).into_response())
}

/// A user's schedules, oldest first.
#[utoipa::path(get, path = "/v1/schedules", tag = "schedules", params(ForUser),
    security(("bearer" = []), ("service_key" = ["read"])),
    responses((status = 200, body = ScheduleList), (status = 400, body = ErrorBody),
              (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
              (status = 429, body = ErrorBody)))]
pub(super) async fn list(
    State(state): State<AppState>,
    acting: Acting,
    Query(q): Query<ForUser>,
) -> Result<Json<ScheduleList>, ApiError> {
    let user = owner(&acting, q.user.as_deref(), Scope::Read)?;
    let schedules = state.store.schedules().list(&user).await?;
    Ok(Json(ScheduleList {
        schedules: schedules.into_iter().map(view).collect(),
    }))
}

/// One schedule.
#[utoipa::path(get, path = "/v1/schedules/{id}", tag = "schedules",
    params(("id" = Uuid, Path), ForUser), security(("bearer" = []), ("service_key" = ["read"])),
    responses((status = 200, body = ScheduleView), (status = 400, body = ErrorBody),
              (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
              (status = 404, body = ErrorBody), (status = 429, body = ErrorBody)))]
pub(super) async fn one(
    State(state): State<AppState>,
    acting: Acting,
    Path(id): Path<String>,
    Query(q): Query<ForUser>,
) -> Result<Json<ScheduleView>, ApiError> {
    let user = owner(&acting, q.user.as_deref(), Scope::Read)?;
    let found = state
        .store
        .schedules()
        .get(schedule_id(&id)?, &user)
        .await?;
    Ok(Json(view(found.ok_or_else(not_found)?)))
}

/// Deletes a schedule (the chats it started stay).
#[utoipa::path(delete, path = "/v1/schedules/{id}", tag = "schedules",
    params(("id" = Uuid, Path), ForUser), security(("bearer" = []), ("service_key" = ["publish"])),
    responses((status = 204), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
              (status = 403, body = ErrorBody), (status = 404, body = ErrorBody),
              (status = 429, body = ErrorBody)))]
pub(super) async fn remove(
    State(state): State<AppState>,
    acting: Acting,
    Path(id): Path<String>,
    Query(q): Query<ForUser>,
) -> Result<StatusCode, ApiError> {
    let user = owner(&acting, q.user.as_deref(), Scope::Publish)?;
    state.registry.quotas().message(&user)?;
    match state
        .store
        .schedules()
        .delete(schedule_id(&id)?, &user)
        .await?
    {
        true => Ok(StatusCode::NO_CONTENT),
        false => Err(not_found()),
    }
}

/// Pauses a schedule: no due time fires until it is resumed.
#[utoipa::path(post, path = "/v1/schedules/{id}/pause", tag = "schedules",
    params(("id" = Uuid, Path), ForUser), security(("bearer" = []), ("service_key" = ["publish"])),
    responses((status = 200, body = ScheduleView), (status = 400, body = ErrorBody),
              (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
              (status = 404, body = ErrorBody), (status = 429, body = ErrorBody)))]
pub(super) async fn pause(
    state: State<AppState>,
    acting: Acting,
    id: Path<String>,
    q: Query<ForUser>,
) -> Result<Json<ScheduleView>, ApiError> {
    set_paused(state, acting, id, q, true).await
}

/// Resumes a schedule from its next due time after now (the times it was
/// paused over do not fire).
#[utoipa::path(post, path = "/v1/schedules/{id}/resume", tag = "schedules",
    params(("id" = Uuid, Path), ForUser), security(("bearer" = []), ("service_key" = ["publish"])),
    responses((status = 200, body = ScheduleView), (status = 400, body = ErrorBody),
              (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
              (status = 404, body = ErrorBody), (status = 429, body = ErrorBody)))]
pub(super) async fn resume(
    state: State<AppState>,
    acting: Acting,
    id: Path<String>,
    q: Query<ForUser>,
) -> Result<Json<ScheduleView>, ApiError> {
    set_paused(state, acting, id, q, false).await
}

async fn set_paused(
    State(state): State<AppState>,
    acting: Acting,
    Path(id): Path<String>,
    Query(q): Query<ForUser>,
    paused: bool,
) -> Result<Json<ScheduleView>, ApiError> {
    let user = owner(&acting, q.user.as_deref(), Scope::Publish)?;
    // A change, as making one: one of the user's turns.
    state.registry.quotas().message(&user)?;
    let id = schedule_id(&id)?;
    let schedules = state.store.schedules();
    let found = schedules.get(id, &user).await?.ok_or_else(not_found)?;
    let now = chrono::Utc::now().timestamp_millis();
    let next_at = match paused {
        true => found.next_at,
        false => Spec::parse(&found.cron, &found.time_zone)
            .ok()
            .and_then(|spec| spec.next_after(now))
            .unwrap_or(i64::MAX),
    };
    schedules.set_paused(id, &user, paused, next_at).await?;
    let found = schedules.get(id, &user).await?.ok_or_else(not_found)?;
    Ok(Json(view(found)))
}
