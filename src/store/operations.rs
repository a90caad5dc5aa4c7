//! What the operator's page reads and records (issue 39): the latest
//! `chat.error`s across every chat (by time, on a partial index only those
//! rows pay for), and the acts of operators (a run cancelled, a wait
//! ended), each with who did it.

use futures_util::future::try_join_all;
use sqlx::Row;
use sqlx::postgres::PgPool;
use sqlx::sqlite::SqlitePool;
use uuid::Uuid;

use super::StoreError;
use super::pools::on_pool;

/// The operator's store of one backend.
#[derive(Debug, Clone)]
pub enum Operations {
    Sqlite(SqlitePool),
    Postgres(PgPool),
    /// Each database's of a spread (`store::sharded`): errors are asked of
    /// each, acts kept in the first.
    Sharded(Vec<Operations>),
}

/// A `chat.error` as logged.
#[derive(Debug, Clone, PartialEq)]
pub struct LoggedError {
    pub chat_id: Uuid,
    pub seq: u64,
    /// Unix milliseconds.
    pub ts: i64,
    /// The whole envelope, JSON.
    pub json: String,
}

/// One operator's act.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OperatorAct {
    /// Unix milliseconds.
    pub at: i64,
    /// `user:<id>` or `key:<name>`.
    pub actor: String,
    /// `cancel` or `end_wait`.
    pub action: String,
    pub chat_id: Uuid,
    /// The wait ended, if any.
    pub target: Option<String>,
}

fn uuid_of(text: &str) -> Result<Uuid, StoreError> {
    Uuid::parse_str(text).map_err(|e| StoreError::from(sqlx::Error::Decode(e.into())))
}

impl Operations {
    /// The latest `limit` `chat.error`s of every chat, newest first.
    ///
    /// # Errors
    /// The store fails.
    pub async fn recent_errors(&self, limit: u32) -> Result<Vec<LoggedError>, StoreError> {
        if let Self::Sharded(parts) = self {
            let mut all: Vec<LoggedError> =
                try_join_all(parts.iter().map(|p| Box::pin(p.recent_errors(limit))))
                    .await?
                    .into_iter()
                    .flatten()
                    .collect();
            all.sort_by_key(|e| std::cmp::Reverse(e.ts));
            all.truncate(limit as usize);
            return Ok(all);
        }
        let limit = i64::from(limit);
        match self {
            // SQLite: the journal's rows (not folded yet: the newest) too;
            // a folded row may linger there until the journal's head
            // passes it, so the same row twice is one (`UNION`). Each side
            // takes its newest first (the table's on its partial index; the
            // journal is short).
            Self::Sqlite(pool) => sqlx::query(
                "SELECT * FROM (SELECT chat_id, seq, ts, payload FROM envelopes
                                WHERE type = 'chat.error' ORDER BY ts DESC LIMIT ?1)
                 UNION
                 SELECT * FROM (SELECT chat_id, seq, ts, payload FROM journal
                                WHERE type = 'chat.error' ORDER BY ts DESC LIMIT ?1)
                 ORDER BY ts DESC LIMIT ?1",
            )
            .bind(limit)
            .fetch_all(pool)
            .await?
            .iter()
            .map(logged)
            .collect(),
            Self::Postgres(pool) => sqlx::query(
                "SELECT chat_id::text AS chat_id, seq, ts, payload FROM envelopes
                 WHERE type = 'chat.error' ORDER BY ts DESC LIMIT $1",
            )
            .bind(limit)
            .fetch_all(pool)
            .await?
            .iter()
            .map(logged)
            .collect(),
            Self::Sharded(_) => Err(StoreError::Spread),
        }
    }

    /// Records an operator's act.
    ///
    /// # Errors
    /// The store fails.
    pub async fn record(&self, act: &OperatorAct) -> Result<(), StoreError> {
        if let Self::Sharded(parts) = self {
            return Box::pin(parts[0].record(act)).await;
        }
        let sql = "INSERT INTO operator_acts (at, actor, action, chat_id, target)
                   VALUES ($1, $2, $3, $4, $5)";
        let (actor, action) = (act.actor.clone(), act.action.clone());
        let (chat, target) = (act.chat_id.to_string(), act.target.clone());
        on_pool!(
            self,
            sql,
            [act.at, actor, action, chat, target],
            execute,
            |_| Ok(())
        )
    }

    /// The latest `limit` acts, newest first.
    ///
    /// # Errors
    /// The store fails.
    pub async fn acts(&self, limit: u32) -> Result<Vec<OperatorAct>, StoreError> {
        if let Self::Sharded(parts) = self {
            return Box::pin(parts[0].acts(limit)).await;
        }
        let sql = "SELECT at, actor, action, chat_id, target FROM operator_acts
                   ORDER BY id DESC LIMIT $1";
        on_pool!(self, sql, [i64::from(limit)], fetch_all, |rows: Vec<_>| {
            rows.iter().map(act).collect()
        })
    }
}

fn logged<R: Row>(row: &R) -> Result<LoggedError, StoreError>
where
    for<'r> &'r str: sqlx::ColumnIndex<R>,
    for<'r> String: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    for<'r> i64: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
{
    let chat: String = row.try_get("chat_id")?;
    Ok(LoggedError {
        chat_id: uuid_of(&chat)?,
        seq: row.try_get::<i64, _>("seq")?.max(0) as u64,
        ts: row.try_get("ts")?,
        json: row.try_get("payload")?,
    })
}

fn act<R: Row>(row: &R) -> Result<OperatorAct, StoreError>
where
    for<'r> &'r str: sqlx::ColumnIndex<R>,
    for<'r> String: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    for<'r> Option<String>: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    for<'r> i64: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
{
    let chat: String = row.try_get("chat_id")?;
    Ok(OperatorAct {
        at: row.try_get("at")?,
        actor: row.try_get("actor")?,
        action: row.try_get("action")?,
        chat_id: uuid_of(&chat)?,
        target: row.try_get("target")?,
    })
}
