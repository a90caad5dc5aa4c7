//! Webhooks' outbox: the events a backend is told of (`webhooks` sends
//! them). A row is written in the transaction that logs the envelope that
//! makes it — when the store's outbox is on ([`Store::enable_outbox`]) — so
//! an event exists exactly when its envelope does; its id is made from the
//! chat and the seq, the same on every attempt. Any node sends them: a row
//! is claimed with a lease, then marked delivered, or put off.
//!
//! [`Store::enable_outbox`]: super::Store::enable_outbox

use serde::Deserialize;
use sqlx::Row;
use sqlx::postgres::PgPool;
use sqlx::sqlite::SqlitePool;
use uuid::Uuid;

use super::pools::{changed, on_pool};
use super::{AppendBatch, StoreError};

/// What an envelope does to the outbox: the event it makes, a wait for a
/// person it opens or closes.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Effect {
    Event(&'static str),
    /// An event that also waits for a person until `key` is answered.
    Wait(&'static str, String),
    /// Closes the chat's waits of `key`, or all of them (a run's end).
    Close(Option<String>),
}

/// What an envelope does: the chat's first envelope makes `chat.created`,
/// a run's end `run.completed` (or `run.failed` for an error, a timeout or
/// an interruption) and closes the chat's waits; an input request or an
/// approval makes its event and opens a wait, which its answer closes.
fn effect_of(kind: &str, json: &str, seq: u64) -> Option<Effect> {
    #[derive(Deserialize)]
    struct Fields {
        #[serde(default)]
        reason: Option<String>,
        #[serde(default)]
        component_type: Option<String>,
        #[serde(default)]
        awaiting_response: bool,
        #[serde(default)]
        request_id: Option<String>,
        #[serde(default)]
        corr: Option<String>,
    }
    if seq == 1 {
        return Some(Effect::Event("chat.created"));
    }
    let read = || serde_json::from_str::<Fields>(json).ok();
    match kind {
        "chat.run_complete" => Some(Effect::Event(match read()?.reason.as_deref() {
            Some("completed" | "cancelled" | "max_turns" | "max_rounds") => "run.completed",
            _ => "run.failed",
        })),
        "chat.input_request" => Some(Effect::Wait("input.requested", read()?.request_id?)),
        "chat.tool_call" => {
            let f = read()?;
            (f.component_type.as_deref() == Some("approval") && f.awaiting_response)
                .then(|| Effect::Wait("approval.requested", f.corr.unwrap_or_default()))
        }
        "chat.input_ack" | "chat.input_timeout" => Some(Effect::Close(Some(read()?.request_id?))),
        // Only an approval's answer closes a wait (a UI call's or a tool's
        // response opens none): others are not parsed, nor delete anything.
        "chat.tool_response" if json.contains(".approval\"") => {
            let corr = read()?.corr.filter(|c| c.ends_with(".approval"))?;
            Some(Effect::Close(Some(corr)))
        }
        _ => None,
    }
}

/// What an append writes beside the log when the outbox is on.
#[derive(Debug, Default)]
pub(super) struct Effects {
    /// `(id, chat, seq, event)`.
    pub events: Vec<(String, String, i64, &'static str)>,
    /// Waits opened: `(chat, seq, event, key)`.
    pub opens: Vec<(String, i64, &'static str, String)>,
    /// Waits closed: `(chat, seq, key)`, the waits before `seq` of `key`,
    /// or all of them.
    pub closes: Vec<(String, i64, Option<String>)>,
}

impl Effects {
    pub(super) fn is_empty(&self) -> bool {
        self.events.is_empty() && self.opens.is_empty() && self.closes.is_empty()
    }
}

/// What `batches` write beside the log.
pub(super) fn effects_of(batches: &[AppendBatch]) -> Effects {
    let mut out = Effects::default();
    for b in batches {
        let chat = b.chat_id.to_string();
        for e in &b.envelopes {
            let Some(effect) = effect_of(e.kind, &e.json, e.seq) else {
                continue;
            };
            let seq = e.seq as i64;
            let event = match effect {
                Effect::Event(event) => event,
                Effect::Wait(event, key) => {
                    out.opens.push((chat.clone(), seq, event, key));
                    event
                }
                Effect::Close(key) => {
                    out.closes.push((chat.clone(), seq, key));
                    continue;
                }
            };
            if event == "run.completed" || event == "run.failed" {
                out.closes.push((chat.clone(), seq, None));
            }
            let id = format!("msg_{}_{}", b.chat_id.simple(), e.seq);
            out.events.push((id, chat.clone(), seq, event));
        }
    }
    out
}

/// The SQL that closes waits (SQLite's writer; PostgreSQL's closes a
/// commit's at once): `?1` chat, `?2` seq, `?3` key or null.
pub(super) const CLOSE_WAITS: &str = "DELETE FROM webhook_waits
    WHERE chat_id = ?1 AND seq < ?2 AND (?3 IS NULL OR wait_key = ?3)";

/// A wait for a person still open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wait {
    pub chat_id: Uuid,
    pub seq: u64,
    pub event: String,
    pub opened_at: i64,
    pub reminders: u32,
}

/// One event waiting to be sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutboxRow {
    /// The `webhook-id`.
    pub id: String,
    pub chat_id: Uuid,
    pub seq: u64,
    pub event: String,
    pub attempts: u32,
    pub created_at: i64,
}

/// The outbox of one store.
#[derive(Debug, Clone)]
pub enum Outbox {
    Sqlite(SqlitePool),
    Postgres(PgPool),
    /// Each database's of a spread (`store::sharded`): a chat's events and
    /// waits are in its database.
    Sharded(std::sync::Arc<super::sharded::SpreadOutbox>),
}

impl Outbox {
    /// Up to `limit` events due at `now`, oldest first: each the first one
    /// not delivered of its chat (in order per chat), none leased.
    ///
    /// # Errors
    /// The store fails.
    pub async fn due(&self, now: i64, limit: u32) -> Result<Vec<OutboxRow>, StoreError> {
        if let Self::Sharded(spread) = self {
            return Box::pin(spread.due(now, limit)).await;
        }
        let sql = "SELECT id, chat_id, seq, event, attempts, created_at FROM webhook_outbox o
             WHERE delivered_at IS NULL AND next_at <= $1
               AND (lease_until IS NULL OR lease_until < $1)
               AND NOT EXISTS (SELECT 1 FROM webhook_outbox p
                   WHERE p.chat_id = o.chat_id AND p.delivered_at IS NULL
                     AND (p.seq < o.seq OR (p.seq = o.seq AND p.created_at < o.created_at)))
             ORDER BY created_at, seq LIMIT $2";
        on_pool!(
            self,
            sql,
            [now, i64::from(limit)],
            fetch_all,
            |rows: Vec<_>| rows.iter().map(row).collect()
        )
    }

    /// Takes an event to send until `until`, unless another node has it.
    ///
    /// # Errors
    /// The store fails.
    pub async fn claim(&self, id: &str, now: i64, until: i64) -> Result<bool, StoreError> {
        if let Self::Sharded(spread) = self {
            return Box::pin(spread.claim(id, now, until)).await;
        }
        let sql = "UPDATE webhook_outbox SET lease_until = $1
                   WHERE id = $2 AND delivered_at IS NULL
                     AND (lease_until IS NULL OR lease_until < $3)";
        Ok(on_pool!(self, sql, [until, id, now], execute, changed) > 0)
    }

    /// Marks an event delivered.
    ///
    /// # Errors
    /// The store fails.
    pub async fn delivered(&self, id: &str, now: i64) -> Result<(), StoreError> {
        if let Self::Sharded(spread) = self {
            return Box::pin(spread.delivered(id, now)).await;
        }
        let sql = "UPDATE webhook_outbox SET delivered_at = $1, lease_until = NULL,
                   attempts = attempts + 1 WHERE id = $2";
        on_pool!(self, sql, [now, id], execute, changed);
        Ok(())
    }

    /// Puts an event off until `next_at`, after a failed attempt.
    ///
    /// # Errors
    /// The store fails.
    pub async fn retry(&self, id: &str, next_at: i64, error: &str) -> Result<(), StoreError> {
        if let Self::Sharded(spread) = self {
            return Box::pin(spread.retry(id, next_at, error)).await;
        }
        let sql = "UPDATE webhook_outbox SET attempts = attempts + 1, next_at = $1,
                   lease_until = NULL, last_error = $2 WHERE id = $3";
        on_pool!(self, sql, [next_at, error, id], execute, changed);
        Ok(())
    }

    /// Up to `limit` waits for a person open longer than their next
    /// reminder (one every `every` ms) and told last already, oldest first.
    ///
    /// # Errors
    /// The store fails.
    pub async fn waits_due(
        &self,
        now: i64,
        every: i64,
        limit: u32,
    ) -> Result<Vec<Wait>, StoreError> {
        if let Self::Sharded(spread) = self {
            return Box::pin(spread.waits_due(now, every, limit)).await;
        }
        // Not while the last telling waits to be delivered (an endpoint
        // down for an hour gets one reminder, not sixty).
        let sql = "SELECT chat_id, seq, event, opened_at, reminders FROM webhook_waits w
             WHERE opened_at + (reminders + 1) * $1 <= $2
               AND NOT EXISTS (SELECT 1 FROM webhook_outbox o
                   WHERE o.chat_id = w.chat_id AND o.seq = w.seq AND o.delivered_at IS NULL)
             ORDER BY opened_at LIMIT $3";
        on_pool!(
            self,
            sql,
            [every, now, i64::from(limit)],
            fetch_all,
            |rows: Vec<_>| rows.iter().map(wait).collect()
        )
    }

    /// Makes reminder `n` of `wait`: an event of its kind, made at
    /// `created_at`, in the outbox — unless another node made it (or a later
    /// one) first. The wait's count and the event change together.
    ///
    /// # Errors
    /// The store fails.
    pub async fn remind(&self, wait: &Wait, n: u32, created_at: i64) -> Result<bool, StoreError> {
        if let Self::Sharded(spread) = self {
            return Box::pin(spread.remind(wait, n, created_at)).await;
        }
        let claim = "UPDATE webhook_waits SET reminders = $1
                     WHERE chat_id = $2 AND seq = $3 AND reminders = $4";
        let add = "INSERT INTO webhook_outbox (id, chat_id, seq, event, created_at, next_at)
                   VALUES ($1, $2, $3, $4, $5, $5) ON CONFLICT (id) DO NOTHING";
        let id = format!("msg_{}_{}_r{n}", wait.chat_id.simple(), wait.seq);
        let (chat, seq) = (wait.chat_id.to_string(), wait.seq as i64);
        macro_rules! run {
            ($pool:expr, $fix:expr) => {{
                let mut tx = $pool.begin().await?;
                let claimed = sqlx::query(sqlx::AssertSqlSafe($fix(claim)))
                    .bind(i64::from(n))
                    .bind(&chat)
                    .bind(seq)
                    .bind(i64::from(wait.reminders))
                    .execute(&mut *tx)
                    .await?
                    .rows_affected();
                if claimed == 0 {
                    return Ok(false);
                }
                sqlx::query(sqlx::AssertSqlSafe($fix(add)))
                    .bind(&id)
                    .bind(&chat)
                    .bind(seq)
                    .bind(&wait.event)
                    .bind(created_at)
                    .execute(&mut *tx)
                    .await?;
                tx.commit().await?;
                Ok(true)
            }};
        }
        match self {
            Self::Sqlite(pool) => run!(pool, |q: &str| q.replace('$', "?")),
            Self::Postgres(pool) => run!(pool, str::to_owned),
            Self::Sharded(_) => Err(StoreError::Spread),
        }
    }

    /// Forgets a wait (its chat is gone).
    ///
    /// # Errors
    /// The store fails.
    pub async fn forget_wait(&self, wait: &Wait) -> Result<(), StoreError> {
        if let Self::Sharded(spread) = self {
            return Box::pin(spread.forget_wait(wait)).await;
        }
        let sql = "DELETE FROM webhook_waits WHERE chat_id = $1 AND seq = $2";
        let (chat, seq) = (wait.chat_id.to_string(), wait.seq as i64);
        on_pool!(self, sql, [chat, seq], execute, changed);
        Ok(())
    }

    /// Events not delivered yet (for `/metrics`).
    ///
    /// # Errors
    /// The store fails.
    pub async fn waiting(&self) -> Result<u64, StoreError> {
        if let Self::Sharded(spread) = self {
            return Box::pin(spread.waiting()).await;
        }
        let sql = "SELECT COUNT(*) AS n FROM webhook_outbox WHERE delivered_at IS NULL";
        let n: i64 = on_pool!(self, sql, [], fetch_one, |r| Row::try_get(&r, "n"))?;
        Ok(n.max(0) as u64)
    }
}

fn row<R: Row>(row: &R) -> Result<OutboxRow, StoreError>
where
    for<'r> &'r str: sqlx::ColumnIndex<R>,
    for<'r> String: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    for<'r> i64: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
{
    let chat: String = row.try_get("chat_id")?;
    Ok(OutboxRow {
        id: row.try_get("id")?,
        chat_id: Uuid::parse_str(&chat).map_err(|e| sqlx::Error::Decode(e.into()))?,
        seq: row.try_get::<i64, _>("seq")?.max(0) as u64,
        event: row.try_get("event")?,
        attempts: row
            .try_get::<i64, _>("attempts")?
            .clamp(0, i64::from(u32::MAX)) as u32,
        created_at: row.try_get("created_at")?,
    })
}

fn wait<R: Row>(row: &R) -> Result<Wait, StoreError>
where
    for<'r> &'r str: sqlx::ColumnIndex<R>,
    for<'r> String: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    for<'r> i64: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
{
    let chat: String = row.try_get("chat_id")?;
    Ok(Wait {
        chat_id: Uuid::parse_str(&chat).map_err(|e| sqlx::Error::Decode(e.into()))?,
        seq: row.try_get::<i64, _>("seq")?.max(0) as u64,
        event: row.try_get("event")?,
        opened_at: row.try_get("opened_at")?,
        reminders: row
            .try_get::<i64, _>("reminders")?
            .clamp(0, i64::from(u32::MAX)) as u32,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event_of(kind: &str, json: &str, seq: u64) -> Option<&'static str> {
        match effect_of(kind, json, seq)? {
            Effect::Event(event) | Effect::Wait(event, _) => Some(event),
            Effect::Close(_) => None,
        }
    }

    #[test]
    fn answers_and_ends_close_waits() {
        let asked = r#"{"request_id":"q1"}"#;
        assert_eq!(
            effect_of("chat.input_request", asked, 4),
            Some(Effect::Wait("input.requested", "q1".into()))
        );
        assert_eq!(
            effect_of("chat.input_ack", asked, 5),
            Some(Effect::Close(Some("q1".into())))
        );
        assert_eq!(
            effect_of("chat.tool_response", r#"{"corr":"c.approval"}"#, 6),
            Some(Effect::Close(Some("c.approval".into())))
        );
        assert_eq!(effect_of("chat.print", "{}", 7), None);
        let plain = r#"{"corr":"call_1","content":"x.approval\""}"#;
        assert_eq!(effect_of("chat.tool_response", plain, 8), None);
    }

    #[test]
    fn envelopes_make_their_events() {
        assert_eq!(event_of("chat.text", "{}", 1), Some("chat.created"));
        assert_eq!(event_of("chat.text", "{}", 2), None);
        let done = r#"{"type":"chat.run_complete","reason":"completed"}"#;
        assert_eq!(
            event_of("chat.run_complete", done, 9),
            Some("run.completed")
        );
        let failed = r#"{"type":"chat.run_complete","reason":"error"}"#;
        assert_eq!(event_of("chat.run_complete", failed, 9), Some("run.failed"));
        assert_eq!(
            event_of("chat.input_request", r#"{"request_id":"q"}"#, 4),
            Some("input.requested")
        );
        let approval = r#"{"component_type":"approval","awaiting_response":true}"#;
        assert_eq!(
            event_of("chat.tool_call", approval, 5),
            Some("approval.requested")
        );
        assert_eq!(
            event_of("chat.tool_call", r#"{"component_type":"chart"}"#, 5),
            None
        );
        // (A backend's post shows one, waiting on nothing.)
        assert_eq!(
            event_of("chat.tool_call", r#"{"component_type":"approval"}"#, 5),
            None
        );
    }
}
