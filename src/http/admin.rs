//! The operator's API (issue 39), behind an operator's credential (a token
//! with `"admin": true`, a service key with `admin`): what runs where and
//! for how long, who waits for a person, the MCP servers' and upstream
//! agents' state, recent errors, a run's log; cancelling a run and ending a
//! wait, each act recorded with who did it. The page at `/admin` reads it.

use std::collections::{HashMap, HashSet};

use axum::Router;
use axum::extract::{Path, Query, State};
use axum::response::Json;
use axum::routing::{get, post};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;
use uuid::Uuid;

use super::api::ErrorBody;
use super::auth::Operator;
use super::error::ApiError;
use super::state::AppState;
use crate::store::{ChatState, OperatorAct, StoredEnvelope};

/// Runs the overview lists at most.
const MAX_RUNS: usize = 100;
/// Errors and acts it lists.
const RECENT: u32 = 50;
/// What one read of a chat's log holds at most.
const PAGE: u32 = 1000;
const PAGE_BYTES: usize = 2 << 20;
/// The envelopes of a run the overview reads: its first few (when it
/// began), and its last ones (what it waits for: a run that waits streams
/// nothing more, so its open waits are at its end).
const HEAD: u32 = 8;
const TAIL: u32 = 200;
const READ_BYTES: usize = 256 << 10;

/// The routes of this module.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/admin/overview", get(overview))
        .route("/v1/admin/chats/{chat_id}/log", get(log))
        .route("/v1/admin/chats/{chat_id}/cancel", post(cancel))
        .route(
            "/v1/admin/chats/{chat_id}/waits/{wait_id}/end",
            post(end_wait),
        )
}

/// The whole picture.
#[derive(Debug, Serialize, ToSchema)]
pub struct Overview {
    /// The node that answered: its id in the cluster (PostgreSQL), and its
    /// chats with an actor in memory and asleep (followed, no actor).
    pub node: NodeView,
    /// The cluster's live nodes, each with the runs it holds (PostgreSQL);
    /// on one node, that node alone.
    pub nodes: Vec<NodeRuns>,
    /// Runs in flight, on every node (at most 100), the oldest first.
    pub runs: Vec<RunView>,
    /// Each agent's MCP servers as this node sees them.
    #[schema(value_type = Vec<Object>)]
    pub mcp_servers: Vec<Value>,
    /// Agents served over AG-UI.
    pub upstream_agents: Vec<UpstreamView>,
    /// The latest `chat.error`s of every chat, newest first.
    pub errors: Vec<ErrorView>,
    /// What operators did, newest first.
    pub acts: Vec<ActView>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct NodeView {
    pub id: Option<i64>,
    pub chats_awake: usize,
    pub chats_asleep: usize,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct NodeRuns {
    pub id: Option<i64>,
    pub runs: usize,
}

/// A run in flight.
#[derive(Debug, Serialize, ToSchema)]
pub struct RunView {
    pub chat_id: Uuid,
    pub owner: String,
    pub agent: String,
    pub title: Option<String>,
    /// The node holding the chat (PostgreSQL).
    pub node: Option<i64>,
    /// When the run began (its first envelope), RFC 3339.
    pub started_at: String,
    pub age_seconds: f64,
    /// The type of its last envelope (`chat.print`, `chat.tool_call`, …).
    pub step: String,
    pub last_seq: u64,
    /// What it waits for, if a person.
    pub waiting: Vec<WaitView>,
}

/// A wait for a person.
#[derive(Debug, Serialize, ToSchema)]
pub struct WaitView {
    /// `input`, `approval` or `ui`.
    pub kind: String,
    /// What ends it: the request id or the call's `corr`.
    pub id: String,
    pub tool_name: Option<String>,
    /// Since when, RFC 3339.
    pub since: String,
    pub seconds: f64,
}

/// An agent served over AG-UI, as this node saw its calls.
#[derive(Debug, Serialize, ToSchema)]
pub struct UpstreamView {
    pub agent: String,
    /// `host:port`.
    pub endpoint: String,
    /// Runs asked of it since this node started, and those that failed.
    pub runs: u64,
    pub errors: u64,
    pub last_error: Option<String>,
    pub last_error_at: Option<String>,
    /// When it last answered a run with an event stream.
    pub last_ok_at: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorView {
    pub chat_id: Uuid,
    pub seq: u64,
    pub ts: String,
    pub error_code: String,
    pub message: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ActView {
    pub at: String,
    /// `user:<id>` or `key:<name>`.
    pub actor: String,
    /// `cancel` or `end_wait`.
    pub action: String,
    pub chat_id: Uuid,
    pub target: Option<String>,
}

fn rfc3339(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// An envelope's time, in Unix milliseconds.
fn ts_ms(envelope: &Value) -> i64 {
    envelope["ts"]
        .as_str()
        .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
        .map_or(0, |t| t.timestamp_millis())
}

/// The waits for a person `envelopes` (a run's, in order) leave open.
fn open_waits(envelopes: &[Value], now_ms: i64) -> Vec<WaitView> {
    let mut opened: Vec<(String, &Value, &str)> = Vec::new();
    let mut closed = HashSet::new();
    for e in envelopes {
        match e["type"].as_str().unwrap_or_default() {
            "chat.input_request" => {
                if let Some(id) = e["request_id"].as_str() {
                    opened.push((id.to_owned(), e, "input"));
                }
            }
            "chat.tool_call" if e["awaiting_response"] == true => {
                let kind = if e["component_type"] == "approval" {
                    "approval"
                } else {
                    "ui"
                };
                if let Some(corr) = e["corr"].as_str() {
                    opened.push((corr.to_owned(), e, kind));
                }
            }
            _ => {
                for id in [&e["request_id"], &e["corr"], &e["details"]["corr"]] {
                    if let Some(id) = id.as_str() {
                        closed.insert(id.to_owned());
                    }
                }
            }
        }
    }
    opened
        .into_iter()
        .filter(|(id, ..)| !closed.contains(id))
        .map(|(id, e, kind)| {
            let since = ts_ms(e);
            WaitView {
                kind: kind.to_owned(),
                id,
                tool_name: e["tool_name"].as_str().map(str::to_owned),
                since: rfc3339(since),
                seconds: (now_ms - since).max(0) as f64 / 1000.0,
            }
        })
        .collect()
}

fn parsed(page: &[StoredEnvelope]) -> Vec<Value> {
    page.iter()
        .filter_map(|e| serde_json::from_str(&e.json).ok())
        .collect()
}

/// Every run in flight, every wait, the MCP servers, recent errors.
#[utoipa::path(get, path = "/v1/admin/overview", tag = "admin",
    security(("bearer" = []), ("service_key" = ["admin"])),
    responses((status = 200, body = Overview), (status = 401, body = ErrorBody),
              (status = 403, body = ErrorBody), (status = 429, body = ErrorBody)))]
pub(super) async fn overview(
    State(state): State<AppState>,
    _: Operator,
) -> Result<Json<Overview>, ApiError> {
    let store = &state.store;
    let now = chrono::Utc::now().timestamp_millis();
    let mut running = store.chats_in_state(ChatState::Running).await?;
    running.truncate(MAX_RUNS);
    let mut runs = Vec::new();
    for chat_id in running {
        let Some(chat) = store.chat(chat_id).await? else {
            continue;
        };
        let Some((last_seq, step)) = store.last(chat_id).await? else {
            continue;
        };
        // When it began: its first envelope but a title (a chat's title
        // is logged after the run before, so it may lead this run's).
        let start = store.run_start(chat_id, u64::MAX).await?;
        let (head, _) = store
            .load_bounded(chat_id, start.saturating_sub(1), HEAD, READ_BYTES)
            .await?;
        let Some(first) = parsed(&head)
            .into_iter()
            .find(|e| e["type"] != "chat.title")
        else {
            continue;
        };
        let from = last_seq
            .saturating_sub(u64::from(TAIL))
            .max(start.saturating_sub(1));
        let (tail, _) = store.load_bounded(chat_id, from, TAIL, READ_BYTES).await?;
        let started = ts_ms(&first);
        runs.push(RunView {
            chat_id,
            owner: chat.owner,
            agent: chat.agent,
            title: chat.listing.title,
            node: None,
            started_at: rfc3339(started),
            age_seconds: (now - started).max(0) as f64 / 1000.0,
            step,
            last_seq,
            waiting: open_waits(&parsed(&tail), now),
        });
    }
    runs.sort_by(|a, b| b.age_seconds.total_cmp(&a.age_seconds));
    let chats: Vec<Uuid> = runs.iter().map(|r| r.chat_id).collect();
    let nodes = match state.registry.placement(&chats).await? {
        Some((live, holders)) => {
            let mut per: HashMap<i64, usize> = live.iter().map(|&n| (n, 0)).collect();
            for run in &mut runs {
                run.node = holders.get(&run.chat_id).copied();
                if let Some(n) = run.node {
                    *per.entry(n).or_default() += 1;
                }
            }
            let mut nodes: Vec<NodeRuns> = per
                .into_iter()
                .map(|(id, runs)| NodeRuns { id: Some(id), runs })
                .collect();
            nodes.sort_by_key(|n| n.id);
            nodes
        }
        None => vec![NodeRuns {
            id: None,
            runs: runs.len(),
        }],
    };
    let agents = state.registry.agents().all();
    let mcp_servers = agents
        .iter()
        .flat_map(|a| {
            a.mcp.iter().map(|m| {
                let mut status = serde_json::to_value(m.server.status()).unwrap_or_default();
                status["agent"] = Value::String(a.id.clone());
                status
            })
        })
        .collect();
    let upstream_agents = agents
        .iter()
        .filter_map(|a| {
            a.upstream.as_ref().map(|u| {
                let health = u.health();
                UpstreamView {
                    agent: a.id.clone(),
                    endpoint: u.endpoint(),
                    runs: health.runs,
                    errors: health.errors,
                    last_error: health.last_error,
                    last_error_at: health.last_error_at,
                    last_ok_at: health.last_ok_at,
                }
            })
        })
        .collect();
    let ops = store.operations();
    let errors = ops
        .recent_errors(RECENT)
        .await?
        .into_iter()
        .map(|e| {
            let v: Value = serde_json::from_str(&e.json).unwrap_or_default();
            ErrorView {
                chat_id: e.chat_id,
                seq: e.seq,
                ts: rfc3339(e.ts),
                error_code: v["error_code"].as_str().unwrap_or_default().to_owned(),
                message: v["message"].as_str().unwrap_or_default().to_owned(),
            }
        })
        .collect();
    let acts = ops
        .acts(RECENT)
        .await?
        .into_iter()
        .map(|a| ActView {
            at: rfc3339(a.at),
            actor: a.actor,
            action: a.action,
            chat_id: a.chat_id,
            target: a.target,
        })
        .collect();
    Ok(Json(Overview {
        node: NodeView {
            id: state.registry.node_id(),
            chats_awake: state.registry.active_chats(),
            chats_asleep: state.registry.sleeping_chats(),
        },
        nodes,
        runs,
        mcp_servers,
        upstream_agents,
        errors,
        acts,
    }))
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
pub(super) struct LogQuery {
    /// Envelopes after this seq [default: 0, from the start].
    after: Option<u64>,
}

/// A chat's log, as the operator reads it.
#[derive(Debug, Serialize, ToSchema)]
pub struct ChatLog {
    pub chat_id: Uuid,
    pub owner: String,
    pub agent: String,
    /// The envelopes after `after`, as logged (at most 1,000 or 2 MiB).
    #[schema(value_type = Vec<Object>)]
    pub envelopes: Vec<Value>,
    /// More follow: read again after the last.
    pub more: bool,
}

/// Any chat's log (a run's timeline on the page).
#[utoipa::path(get, path = "/v1/admin/chats/{chat_id}/log", tag = "admin", params(LogQuery),
    security(("bearer" = []), ("service_key" = ["admin"])),
    responses((status = 200, body = ChatLog), (status = 401, body = ErrorBody),
              (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub(super) async fn log(
    State(state): State<AppState>,
    _: Operator,
    Path(chat_id): Path<Uuid>,
    Query(q): Query<LogQuery>,
) -> Result<Json<ChatLog>, ApiError> {
    let chat = chat_of(&state, chat_id).await?;
    let (page, more) = state
        .store
        .load_bounded(chat_id, q.after.unwrap_or(0), PAGE, PAGE_BYTES)
        .await?;
    Ok(Json(ChatLog {
        chat_id,
        owner: chat.owner,
        agent: chat.agent,
        envelopes: parsed(&page),
        more,
    }))
}

async fn chat_of(state: &AppState, chat_id: Uuid) -> Result<crate::store::ChatRecord, ApiError> {
    state
        .store
        .chat(chat_id)
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("no chat {chat_id}")))
}

/// What an operator did.
#[derive(Debug, Serialize, ToSchema)]
pub struct Done {
    pub chat_id: Uuid,
    pub action: String,
    pub by: String,
}

/// Who acts, once an operator that is a user is within its turn rate
/// (an act counts as one of its turns, as a schedule's change does).
fn acts(state: &AppState, operator: Operator) -> Result<String, ApiError> {
    if let Some(user) = &operator.user {
        state.registry.quotas().message(user)?;
    }
    Ok(operator.by)
}

/// Records an act, then logs it.
async fn record(
    state: &AppState,
    by: String,
    action: &str,
    chat_id: Uuid,
    target: Option<String>,
) -> Result<Json<Done>, ApiError> {
    let act = OperatorAct {
        at: chrono::Utc::now().timestamp_millis(),
        actor: by.clone(),
        action: action.to_owned(),
        chat_id,
        target,
    };
    state.store.operations().record(&act).await?;
    tracing::info!(by = %act.actor, action, %chat_id, target = ?act.target, "operator act");
    Ok(Json(Done {
        chat_id,
        action: action.to_owned(),
        by,
    }))
}

/// Cancels a chat's run (as its owner's `chat.cancel` does), recorded with
/// who did it.
#[utoipa::path(post, path = "/v1/admin/chats/{chat_id}/cancel", tag = "admin",
    security(("bearer" = []), ("service_key" = ["admin"])),
    responses((status = 200, body = Done), (status = 401, body = ErrorBody),
              (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub(super) async fn cancel(
    State(state): State<AppState>,
    operator: Operator,
    Path(chat_id): Path<Uuid>,
) -> Result<Json<Done>, ApiError> {
    let by = acts(&state, operator)?;
    let chat = chat_of(&state, chat_id).await?;
    if chat.state != ChatState::Running {
        return Err(ApiError::NotFound(format!(
            "no run is in flight in chat {chat_id}"
        )));
    }
    state.registry.cancel(chat_id, &chat.owner).await?;
    record(&state, by, "cancel", chat_id, None).await
}

/// Ends a wait for a person (an input request, a UI tool call, an
/// approval) as if its time ran out, recorded with who did it.
#[utoipa::path(post, path = "/v1/admin/chats/{chat_id}/waits/{wait_id}/end", tag = "admin",
    security(("bearer" = []), ("service_key" = ["admin"])),
    responses((status = 200, body = Done), (status = 401, body = ErrorBody),
              (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub(super) async fn end_wait(
    State(state): State<AppState>,
    operator: Operator,
    Path((chat_id, wait_id)): Path<(Uuid, String)>,
) -> Result<Json<Done>, ApiError> {
    let by = acts(&state, operator)?;
    let chat = chat_of(&state, chat_id).await?;
    state
        .registry
        .end_wait(chat_id, &chat.owner, &wait_id)
        .await?;
    record(&state, by, "end_wait", chat_id, Some(wait_id)).await
}
