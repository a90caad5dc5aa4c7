//! Usage and cost per user, agent, model and day (issue 39): each run's
//! `chat.usage_summary` adds to its chat's owner's, agent's and model's row
//! of the day, in the transaction that logs it, so the ledger holds exactly what
//! the log does — across nodes, restarts and continued runs (a run logs one
//! summary). A deleted chat's usage stays: it was spent.

use std::collections::BTreeMap;

use futures_util::future::try_join_all;
use serde::Deserialize;
use sqlx::Row;
use sqlx::postgres::PgPool;
use sqlx::sqlite::SqlitePool;

use super::pools::on_pool;
use super::{AppendBatch, StoreError};

/// What one run's summary adds: `(chat, model, day, prompt, completion,
/// cost, unpriced)`, its cost in 1e-9 (of the speakers that have a price),
/// `unpriced` 1 when some of its tokens had none.
pub(super) type RunUsage = (uuid::Uuid, String, String, i64, i64, i64, i64);

/// The runs `batches` end, with what they used.
pub(super) fn runs_of(batches: &[AppendBatch]) -> Vec<RunUsage> {
    #[derive(Deserialize)]
    struct Member {
        #[serde(default)]
        cost: Option<f64>,
    }
    #[derive(Deserialize)]
    struct Summary {
        #[serde(default)]
        prompt_tokens: u64,
        #[serde(default)]
        completion_tokens: u64,
        #[serde(default)]
        cost: Option<f64>,
        /// A group's members: the priced ones' cost counts when the run's
        /// has none (a member without a price).
        #[serde(default)]
        by_agent: BTreeMap<String, Member>,
        #[serde(default)]
        model: Option<String>,
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
            let used = s.prompt_tokens.saturating_add(s.completion_tokens) > 0;
            let (cost, unpriced) = match s.cost {
                Some(cost) => (cost, false),
                None => (s.by_agent.values().filter_map(|m| m.cost).sum(), used),
            };
            out.push((
                b.chat_id,
                s.model.unwrap_or_default(),
                day,
                tokens(s.prompt_tokens),
                tokens(s.completion_tokens),
                (cost.max(0.0) * 1e9).round() as i64,
                i64::from(unpriced),
            ));
        }
    }
    out
}

/// What an upsert adds to a row that exists.
macro_rules! add_to_row {
    () => {
        " ON CONFLICT (owner, agent, model, day) DO UPDATE SET
            runs = usage_daily.runs + excluded.runs,
            prompt_tokens = usage_daily.prompt_tokens + excluded.prompt_tokens,
            completion_tokens = usage_daily.completion_tokens + excluded.completion_tokens,
            cost_nanos = usage_daily.cost_nanos + excluded.cost_nanos,
            unpriced_runs = usage_daily.unpriced_runs + excluded.unpriced_runs"
    };
}

/// Adds one run to its chat's owner's, agent's and model's day (SQLite,
/// where one writer commits): `?1` the chat, `?2` the model, `?3` the day,
/// `?4`/`?5` the tokens, `?6` the cost, `?7` unpriced.
pub(super) const ADD: &str = concat!(
    "INSERT INTO usage_daily
        (owner, agent, model, day, runs, prompt_tokens, completion_tokens, cost_nanos, unpriced_runs)
    SELECT owner, agent, ?2, ?3, 1, ?4, ?5, ?6, ?7 FROM chats WHERE id = ?1",
    add_to_row!()
);

/// Adds a commit's runs (PostgreSQL), one row per owner, agent, model and
/// day, in that order: commits running at once lock the rows they share in
/// the same order (none waits for another that waits for it). `$1`–`$7` the
/// columns of [`RunUsage`].
pub(super) const ADD_MANY: &str = concat!(
    "INSERT INTO usage_daily
        (owner, agent, model, day, runs, prompt_tokens, completion_tokens, cost_nanos, unpriced_runs)
    SELECT c.owner, c.agent, t.m, t.d, COUNT(*), SUM(t.p), SUM(t.c), SUM(t.n), SUM(t.u)
    FROM UNNEST($1::uuid[], $2::text[], $3::text[], $4::int8[], $5::int8[], $6::int8[], $7::int8[])
        AS t(chat, m, d, p, c, n, u)
    JOIN chats c ON c.id = t.chat
    GROUP BY c.owner, c.agent, t.m, t.d
    ORDER BY c.owner, c.agent, t.m, t.d",
    add_to_row!()
);

/// One user's use of one agent's model on one day.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UsageDay {
    pub owner: String,
    pub agent: String,
    /// The runs' own model (empty: not named).
    pub model: String,
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

/// The order of a spread's parts' days: by bytes, as the merge sorts them
/// (each part's first `limit` keys then hold the merged first `limit`'s).
const BYTEWISE: &str =
    r#"day COLLATE "C", owner COLLATE "C", agent COLLATE "C", model COLLATE "C""#;

/// The usage ledger of one store.
#[derive(Debug, Clone)]
pub enum Usage {
    Sqlite(SqlitePool),
    Postgres(PgPool),
    /// Each database's of a spread (`store::sharded`), summed.
    Sharded(Vec<Usage>),
}

impl Usage {
    /// The days from `from` to `to` (inclusive, `YYYY-MM-DD`) of `owner`
    /// (or of everyone), by day, then user, agent and model; at most `limit`.
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
        if let Self::Sharded(parts) = self {
            // One key's rows may be in several databases (one per chat's):
            // each part's first `limit` keys, summed, cover the first `limit`.
            let pages = try_join_all(
                parts
                    .iter()
                    .map(|p| Box::pin(p.days_in(owner, from, to, limit, BYTEWISE))),
            )
            .await?;
            let mut summed: BTreeMap<_, UsageDay> = BTreeMap::new();
            for d in pages.into_iter().flatten() {
                let key = (
                    d.day.clone(),
                    d.owner.clone(),
                    d.agent.clone(),
                    d.model.clone(),
                );
                let sum = summed.entry(key).or_insert_with(|| UsageDay {
                    runs: 0,
                    prompt_tokens: 0,
                    completion_tokens: 0,
                    cost_nanos: 0,
                    unpriced_runs: 0,
                    ..d.clone()
                });
                sum.runs += d.runs;
                sum.prompt_tokens += d.prompt_tokens;
                sum.completion_tokens += d.completion_tokens;
                sum.cost_nanos += d.cost_nanos;
                sum.unpriced_runs += d.unpriced_runs;
            }
            return Ok(summed.into_values().take(limit as usize).collect());
        }
        self.days_in(owner, from, to, limit, "day, owner, agent, model")
            .await
    }

    /// [`days`](Self::days) of one database, in `order`.
    async fn days_in(
        &self,
        owner: Option<&str>,
        from: &str,
        to: &str,
        limit: u32,
        order: &str,
    ) -> Result<Vec<UsageDay>, StoreError> {
        let sql = format!(
            "SELECT owner, agent, model, day, runs, prompt_tokens, completion_tokens,
                    cost_nanos, unpriced_runs FROM usage_daily
             WHERE ($1 IS NULL OR owner = $1) AND day >= $2 AND day <= $3
             ORDER BY {order} LIMIT $4"
        );
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

/// What was used from one day to another: tokens and cost.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Spent {
    pub tokens: u64,
    pub cost_nanos: u64,
}

impl Usage {
    /// How many chats of `owner` (or anyone's) with `agent` (or any), but
    /// `except`, have a run in flight, on every node.
    ///
    /// # Errors
    /// The store fails.
    pub async fn running(
        &self,
        owner: Option<&str>,
        agent: Option<&str>,
        except: uuid::Uuid,
    ) -> Result<u64, StoreError> {
        if let Self::Sharded(parts) = self {
            let counts = try_join_all(
                parts
                    .iter()
                    .map(|p| Box::pin(p.running(owner, agent, except))),
            )
            .await?;
            return Ok(counts.into_iter().sum());
        }
        let sql = "SELECT COUNT(*) AS n FROM chats
                   WHERE state = 'running' AND CAST(id AS TEXT) <> $3
                     AND ($1 IS NULL OR owner = $1) AND ($2 IS NULL OR agent = $2)";
        let (owner, agent) = (owner.map(str::to_owned), agent.map(str::to_owned));
        let except = except.to_string();
        let n: i64 = on_pool!(self, sql, [owner, agent, except], fetch_one, |row| {
            Row::try_get(&row, "n")
        })?;
        Ok(n.max(0) as u64)
    }
}

impl Usage {
    /// What the runs of `owner` (or anyone's) of `agent` (or any) used
    /// from `from` to `to` (inclusive).
    ///
    /// # Errors
    /// The store fails.
    pub async fn spent(
        &self,
        owner: Option<&str>,
        agent: Option<&str>,
        from: &str,
        to: &str,
    ) -> Result<Spent, StoreError> {
        if let Self::Sharded(parts) = self {
            let all = try_join_all(
                parts
                    .iter()
                    .map(|p| Box::pin(p.spent(owner, agent, from, to))),
            )
            .await?;
            return Ok(all.into_iter().fold(Spent::default(), |a, s| Spent {
                tokens: a.tokens + s.tokens,
                cost_nanos: a.cost_nanos + s.cost_nanos,
            }));
        }
        // (PostgreSQL sums BIGINTs as NUMERIC: cast back.)
        let sql =
            "SELECT CAST(COALESCE(SUM(prompt_tokens + completion_tokens), 0) AS BIGINT) AS tokens,
                          CAST(COALESCE(SUM(cost_nanos), 0) AS BIGINT) AS cost FROM usage_daily
                   WHERE ($1 IS NULL OR owner = $1) AND ($2 IS NULL OR agent = $2)
                     AND day >= $3 AND day <= $4";
        let (owner, agent) = (owner.map(str::to_owned), agent.map(str::to_owned));
        let (from, to) = (from.to_owned(), to.to_owned());
        on_pool!(
            self,
            sql,
            [owner, agent, from, to],
            fetch_one,
            |r| -> Result<Spent, StoreError> {
                let n = |name: &str| -> Result<u64, StoreError> {
                    Ok(Row::try_get::<i64, _>(&r, name)?.max(0) as u64)
                };
                Ok(Spent {
                    tokens: n("tokens")?,
                    cost_nanos: n("cost")?,
                })
            }
        )
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
        model: row.try_get("model")?,
        day: row.try_get("day")?,
        runs: n("runs")?,
        prompt_tokens: n("prompt_tokens")?,
        completion_tokens: n("completion_tokens")?,
        cost_nanos: n("cost_nanos")?,
        unpriced_runs: n("unpriced_runs")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::NewEnvelope;

    fn summary(json: &str) -> AppendBatch {
        AppendBatch {
            chat_id: uuid::Uuid::nil(),
            envelopes: vec![NewEnvelope {
                seq: 9,
                kind: "chat.usage_summary",
                ts_ms: 1_795_737_600_000,
                corr: None,
                client_msg_id: None,
                json: json.to_owned().into(),
            }],
            state: None,
            conversation_state: None,
            fence: None,
        }
    }

    #[test]
    fn a_runs_cost_is_what_had_a_price() {
        let run = |json: &str| {
            let (_, _, day, p, c, cost, unpriced) = runs_of(&[summary(json)]).remove(0);
            (day, p, c, cost, unpriced)
        };
        let priced = r#"{"prompt_tokens":10,"completion_tokens":2,"cost":0.25}"#;
        assert_eq!(run(priced), ("2026-11-27".into(), 10, 2, 250_000_000, 0));
        // A group with a member at no price: the priced member's cost counts,
        // and the run is one with unpriced tokens.
        let mixed = r#"{"prompt_tokens":10,"completion_tokens":2,
            "by_agent":{"a":{"cost":0.5},"b":{}}}"#;
        assert_eq!(run(mixed).3, 500_000_000);
        assert_eq!(run(mixed).4, 1);
        let unused = r#"{"prompt_tokens":0,"completion_tokens":0}"#;
        assert_eq!((run(unused).3, run(unused).4), (0, 0));
    }
}
