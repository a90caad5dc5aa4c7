//! Usage and cost per user, agent and day (issue 39): each run's
//! `chat.usage_summary` adds to its chat's owner's and agent's row of the
//! day, in the transaction that logs it, so the ledger holds exactly what
//! the log does — across nodes, restarts and continued runs (a run logs one
//! summary). A deleted chat's usage stays: it was spent.

use serde::Deserialize;
use sqlx::Row;
use sqlx::postgres::PgPool;
use sqlx::sqlite::SqlitePool;

use super::pools::on_pool;
use super::{AppendBatch, StoreError};

/// What one run's summary adds: `(chat, day, prompt, completion, cost)`,
/// its cost in 1e-9 (`None`: tokens used at no known price).
pub(super) type RunUsage = (uuid::Uuid, String, i64, i64, Option<i64>);

/// The runs `batches` end, with what they used.
pub(super) fn runs_of(batches: &[AppendBatch]) -> Vec<RunUsage> {
    #[derive(Deserialize)]
    struct Summary {
        #[serde(default)]
        prompt_tokens: u64,
        #[serde(default)]
        completion_tokens: u64,
        #[serde(default)]
        cost: Option<f64>,
    }
    let mut out = Vec::new();
    for b in batches {
        for e in b
            .envelopes
            .iter()
            .filter(|e| e.kind == "chat.usage_summary")
        {
            let Ok(s) = serde_json::from_str::<Summary>(&e.json) else {
                continue;
            };
            let day = chrono::DateTime::from_timestamp_millis(e.ts_ms)
                .unwrap_or_default()
                .format("%Y-%m-%d")
                .to_string();
            let tokens = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
            let cost = s.cost.map(|c| (c.max(0.0) * 1e9).round() as i64);
            out.push((
                b.chat_id,
                day,
                tokens(s.prompt_tokens),
                tokens(s.completion_tokens),
                cost,
            ));
        }
    }
    out
}

/// Adds one run to its chat's owner's and agent's day: `$1` the chat, `$2`
/// the day, `$3`/`$4` the tokens, `$5` the cost or null.
pub(super) const ADD: &str = "INSERT INTO usage_daily
        (owner, agent, day, runs, prompt_tokens, completion_tokens, cost_nanos, unpriced_runs)
    SELECT owner, agent, $2, 1, $3, $4, COALESCE($5, 0),
           CASE WHEN $5 IS NULL AND $3 + $4 > 0 THEN 1 ELSE 0 END
    FROM chats WHERE id = $1
    ON CONFLICT (owner, agent, day) DO UPDATE SET
        runs = usage_daily.runs + 1,
        prompt_tokens = usage_daily.prompt_tokens + excluded.prompt_tokens,
        completion_tokens = usage_daily.completion_tokens + excluded.completion_tokens,
        cost_nanos = usage_daily.cost_nanos + excluded.cost_nanos,
        unpriced_runs = usage_daily.unpriced_runs + excluded.unpriced_runs";

/// One user's use of one agent on one day.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageDay {
    pub owner: String,
    pub agent: String,
    /// `YYYY-MM-DD`, UTC.
    pub day: String,
    pub runs: u64,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    /// The priced runs' cost, in 1e-9 of the price table's currency.
    pub cost_nanos: u64,
    /// Runs that used tokens at no known price (their cost is not counted).
    pub unpriced_runs: u64,
}

/// The usage ledger of one store.
#[derive(Debug, Clone)]
pub enum Usage {
    Sqlite(SqlitePool),
    Postgres(PgPool),
}

impl Usage {
    /// The days from `from` to `to` (inclusive, `YYYY-MM-DD`) of `owner`
    /// (or of everyone), by day, then user, then agent; at most `limit`.
    ///
    /// # Errors
    /// The store fails.
    pub async fn days(
        &self,
        owner: Option<&str>,
        from: &str,
        to: &str,
        limit: u32,
    ) -> Result<Vec<UsageDay>, StoreError> {
        let sql = "SELECT owner, agent, day, runs, prompt_tokens, completion_tokens,
                          cost_nanos, unpriced_runs FROM usage_daily
                   WHERE ($1 IS NULL OR owner = $1) AND day >= $2 AND day <= $3
                   ORDER BY day, owner, agent LIMIT $4";
        let (from, to) = (from.to_owned(), to.to_owned());
        let owner = owner.map(str::to_owned);
        on_pool!(
            self,
            sql,
            [owner, from, to, i64::from(limit)],
            fetch_all,
            |rows: Vec<_>| rows.iter().map(day).collect()
        )
    }
}

/// What `owner` used from `from` to `to` (days, inclusive): tokens and cost.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Spent {
    pub tokens: u64,
    pub cost_nanos: u64,
}

impl Usage {
    /// What `owner`'s runs used from `from` to `to` (inclusive).
    ///
    /// # Errors
    /// The store fails.
    pub async fn spent(&self, owner: &str, from: &str, to: &str) -> Result<Spent, StoreError> {
        // (PostgreSQL sums BIGINTs as NUMERIC: cast back.)
        let sql =
            "SELECT CAST(COALESCE(SUM(prompt_tokens + completion_tokens), 0) AS BIGINT) AS tokens,
                          CAST(COALESCE(SUM(cost_nanos), 0) AS BIGINT) AS cost FROM usage_daily
                   WHERE owner = $1 AND day >= $2 AND day <= $3";
        let (owner, from, to) = (owner.to_owned(), from.to_owned(), to.to_owned());
        on_pool!(self, sql, [owner, from, to], fetch_one, |r| -> Result<
            Spent,
            StoreError,
        > {
            let n = |name: &str| -> Result<u64, StoreError> {
                Ok(Row::try_get::<i64, _>(&r, name)?.max(0) as u64)
            };
            Ok(Spent {
                tokens: n("tokens")?,
                cost_nanos: n("cost")?,
            })
        })
    }
}

fn day<R: Row>(row: &R) -> Result<UsageDay, StoreError>
where
    for<'r> &'r str: sqlx::ColumnIndex<R>,
    for<'r> String: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    for<'r> i64: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
{
    let n =
        |name: &str| -> Result<u64, StoreError> { Ok(row.try_get::<i64, _>(name)?.max(0) as u64) };
    Ok(UsageDay {
        owner: row.try_get("owner")?,
        agent: row.try_get("agent")?,
        day: row.try_get("day")?,
        runs: n("runs")?,
        prompt_tokens: n("prompt_tokens")?,
        completion_tokens: n("completion_tokens")?,
        cost_nanos: n("cost_nanos")?,
        unpriced_runs: n("unpriced_runs")?,
    })
}
