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

/// The event an envelope makes, if any: the chat's first envelope
/// (`chat.created`), a run's end (`run.completed`, or `run.failed` for an
/// error, a timeout or an interruption), an input request, an approval.
pub fn event_of(kind: &str, json: &str, seq: u64) -> Option<&'static str> {
    #[derive(Deserialize)]
    struct Fields {
        #[serde(default)]
        reason: Option<String>,
        #[serde(default)]
        component_type: Option<String>,
    }
    if seq == 1 {
        return Some("chat.created");
    }
    let read = || serde_json::from_str::<Fields>(json).ok();
    match kind {
        "chat.run_complete" => Some(match read()?.reason.as_deref() {
            Some("completed" | "cancelled" | "max_turns") => "run.completed",
            _ => "run.failed",
        }),
        "chat.input_request" => Some("input.requested"),
        "chat.tool_call" => {
            (read()?.component_type.as_deref() == Some("approval")).then_some("approval.requested")
        }
        _ => None,
    }
}

/// The rows `batches` add: `(id, chat, seq, event)`.
pub(super) fn rows_of(batches: &[AppendBatch]) -> Vec<(String, String, i64, &'static str)> {
    let mut rows = Vec::new();
    for b in batches {
        for e in &b.envelopes {
            if let Some(event) = event_of(e.kind, &e.json, e.seq) {
                let id = format!("msg_{}_{}", b.chat_id.simple(), e.seq);
                rows.push((id, b.chat_id.to_string(), e.seq as i64, event));
            }
        }
    }
    rows
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
}

impl Outbox {
    /// Up to `limit` events due at `now`, oldest first: each the first one
    /// not delivered of its chat (in order per chat), none leased.
    ///
    /// # Errors
    /// The store fails.
    pub async fn due(&self, now: i64, limit: u32) -> Result<Vec<OutboxRow>, StoreError> {
        let sql = "SELECT id, chat_id, seq, event, attempts, created_at FROM webhook_outbox o
             WHERE delivered_at IS NULL AND next_at <= $1
               AND (lease_until IS NULL OR lease_until < $1)
               AND NOT EXISTS (SELECT 1 FROM webhook_outbox p
                   WHERE p.chat_id = o.chat_id AND p.seq < o.seq AND p.delivered_at IS NULL)
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
        let sql = "UPDATE webhook_outbox SET attempts = attempts + 1, next_at = $1,
                   lease_until = NULL, last_error = $2 WHERE id = $3";
        on_pool!(self, sql, [next_at, error, id], execute, changed);
        Ok(())
    }

    /// Events not delivered yet (for `/metrics`).
    ///
    /// # Errors
    /// The store fails.
    pub async fn waiting(&self) -> Result<u64, StoreError> {
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

#[cfg(test)]
mod tests {
    use super::*;

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
            event_of("chat.input_request", "{}", 4),
            Some("input.requested")
        );
        let approval = r#"{"component_type":"approval"}"#;
        assert_eq!(
            event_of("chat.tool_call", approval, 5),
            Some("approval.requested")
        );
        assert_eq!(
            event_of("chat.tool_call", r#"{"component_type":"chart"}"#, 5),
            None
        );
    }
}
