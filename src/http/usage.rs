//! `GET /v1/usage`: tokens and cost per user, agent, model and day (issue 39),
//! from the store's ledger (`store::usage`). A user sees their own; an
//! operator (a token with `"admin": true`) and a service key with `read`
//! see everyone's, or one user's (`?user=`).

use axum::Router;
use axum::extract::{Query, State};
use axum::response::Json;
use axum::routing::get;
use chrono::NaiveDate;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::api::ErrorBody;
use super::auth::Acting;
use super::error::ApiError;
use super::state::AppState;
use crate::auth::Scope;
use crate::store::UsageDay;

/// The most rows one answer holds (`truncated` past it).
const MAX_ROWS: u32 = 10_000;
/// The longest span one request reads.
const MAX_DAYS: i64 = 366;

/// The routes of this module.
pub fn router() -> Router<AppState> {
    Router::new().route("/v1/usage", get(usage))
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
pub(super) struct UsageQuery {
    /// The first day, `YYYY-MM-DD` (UTC) [default: 29 days before `to`].
    from: Option<String>,
    /// The last day, included [default: today, UTC]. At most 366 days.
    to: Option<String>,
    /// With a service key or an operator's token: one user's only
    /// [default: everyone's]. A user may name only themselves.
    user: Option<String>,
}

/// What was used: runs, tokens and cost.
#[derive(Debug, Default, Serialize, ToSchema, PartialEq)]
pub struct Used {
    pub runs: u64,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub total_tokens: u64,
    /// The priced runs' cost, in the price table's currency
    /// (`price: {prompt_per_million, completion_per_million}`).
    pub cost: f64,
    /// Runs that used tokens at no known price: not in `cost`.
    pub unpriced_runs: u64,
}

/// One user's use of one agent's model on one day.
#[derive(Debug, Serialize, ToSchema)]
pub struct UsageRow {
    /// `YYYY-MM-DD`, UTC (the day the run ended).
    pub day: String,
    pub user: String,
    pub agent: String,
    /// The runs' own model: the chat's switched one, else the agent's
    /// (empty when a run named none).
    pub model: String,
    #[serde(flatten)]
    pub used: Used,
}

/// `GET /v1/usage`.
#[derive(Debug, Serialize, ToSchema)]
pub struct UsageReport {
    pub from: String,
    pub to: String,
    /// By day, then user, agent and model.
    pub days: Vec<UsageRow>,
    /// The sum of `days`.
    pub total: Used,
    /// More rows matched than one answer holds (10,000): ask for fewer days.
    pub truncated: bool,
}

fn used(d: &UsageDay) -> Used {
    Used {
        runs: d.runs,
        prompt_tokens: d.prompt_tokens,
        completion_tokens: d.completion_tokens,
        total_tokens: d.prompt_tokens.saturating_add(d.completion_tokens),
        cost: d.cost_nanos as f64 / 1e9,
        unpriced_runs: d.unpriced_runs,
    }
}

/// The user an operator or a key names, checked (`None`: everyone).
fn named(user: Option<&str>) -> Result<Option<String>, ApiError> {
    let user = user.map(super::server_api::user_id).transpose()?;
    Ok(user.map(str::to_owned))
}

fn date(field: &str, text: &str) -> Result<NaiveDate, ApiError> {
    NaiveDate::parse_from_str(text, "%Y-%m-%d")
        .map_err(|_| ApiError::BadRequest(format!("`{field}`: a date, YYYY-MM-DD")))
}

/// Tokens and cost per user, agent, model and day.
#[utoipa::path(get, path = "/v1/usage", tag = "usage", params(UsageQuery),
    security(("bearer" = []), ("service_key" = ["read"])),
    responses((status = 200, body = UsageReport), (status = 400, body = ErrorBody),
              (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
              (status = 429, body = ErrorBody)))]
pub(super) async fn usage(
    State(state): State<AppState>,
    acting: Acting,
    Query(q): Query<UsageQuery>,
) -> Result<Json<UsageReport>, ApiError> {
    let owner = match &acting {
        // An operator (a token with `"admin": true`, a key with `admin`)
        // sees everyone's.
        a if a.is_operator() => named(q.user.as_deref())?,
        Acting::User(u) => match q.user.as_deref() {
            Some(other) if other != u.user => {
                return Err(ApiError::Forbidden(
                    "a user sees their own usage only".into(),
                ));
            }
            _ => Some(u.user.clone()),
        },
        Acting::Service(key) => {
            if !key.may(Scope::Read) {
                return Err(ApiError::Forbidden(format!(
                    "service key `{}` lacks the scope `read`",
                    key.name
                )));
            }
            named(q.user.as_deref())?
        }
    };
    let to = match q.to.as_deref() {
        Some(t) => date("to", t)?,
        None => chrono::Utc::now().date_naive(),
    };
    let from = match q.from.as_deref() {
        Some(f) => date("from", f)?,
        None => to - chrono::Days::new(29),
    };
    let span = (to - from).num_days();
    if !(0..MAX_DAYS).contains(&span) {
        return Err(ApiError::BadRequest(format!(
            "`from` must not be after `to`, and at most {MAX_DAYS} days before it"
        )));
    }
    let (from, to) = (from.to_string(), to.to_string());
    let rows = state
        .store
        .usage()
        .days(owner.as_deref(), &from, &to, MAX_ROWS + 1)
        .await?;
    let truncated = rows.len() > MAX_ROWS as usize;
    let kept = &rows[..rows.len().min(MAX_ROWS as usize)];
    let mut sum = UsageDay::default();
    for d in kept {
        sum.runs += d.runs;
        sum.prompt_tokens += d.prompt_tokens;
        sum.completion_tokens += d.completion_tokens;
        sum.cost_nanos += d.cost_nanos;
        sum.unpriced_runs += d.unpriced_runs;
    }
    let days = kept
        .iter()
        .map(|d| UsageRow {
            day: d.day.clone(),
            user: d.owner.clone(),
            agent: d.agent.clone(),
            model: d.model.clone(),
            used: used(d),
        })
        .collect();
    let total = used(&sum);
    Ok(Json(UsageReport {
        from,
        to,
        days,
        total,
        truncated,
    }))
}
