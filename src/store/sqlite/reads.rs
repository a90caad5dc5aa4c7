//! SQLite's reads of a chat's log by kind or by place: its transcript, its
//! branches, the ranges of a path. Each takes what the journal's tail holds
//! of the chat (`journal::Tail::read`: the rows, and the lowest seq it has)
//! and reads the rest from the table below that seq.

use std::ops::RangeInclusive;

use sqlx::Row;
use sqlx::sqlite::{SqlitePool, SqliteRow};
use uuid::Uuid;

use crate::store::{StoreError, StoredEnvelope};

/// Ranges one query filters by at most (each is a term of its `WHERE`).
const RANGES_PER_QUERY: usize = 64;

pub(super) fn envelope_from_row(row: &SqliteRow) -> Result<StoredEnvelope, StoreError> {
    let seq: i64 = row.try_get("seq")?;
    Ok(StoredEnvelope {
        seq: seq as u64,
        kind: row.try_get("type")?,
        json: row.try_get("payload")?,
    })
}

/// A seq as SQLite's signed integer.
pub(super) fn clamp(seq: u64) -> i64 {
    seq.min(i64::MAX as u64) as i64
}

/// The kinds a transcript holds.
pub(super) fn in_transcript(kind: &str) -> bool {
    matches!(
        kind,
        "chat.text" | "chat.tool_call" | "chat.tool_response" | "chat.branch" | "chat.agent_state"
    )
}

pub(super) async fn transcript(
    pool: &SqlitePool,
    chat_id: Uuid,
    tail: (Vec<StoredEnvelope>, Option<u64>),
) -> Result<Vec<StoredEnvelope>, StoreError> {
    below_tail(
        pool,
        "SELECT seq, type, payload FROM envelopes
         WHERE chat_id = ? AND seq < ?
           AND type IN ('chat.text', 'chat.tool_call', 'chat.tool_response', 'chat.branch', 'chat.agent_state') ORDER BY seq",
        chat_id,
        tail,
    )
    .await
}

pub(super) async fn branches(
    pool: &SqlitePool,
    chat_id: Uuid,
    tail: (Vec<StoredEnvelope>, Option<u64>),
) -> Result<Vec<StoredEnvelope>, StoreError> {
    below_tail(
        pool,
        // Without the hint the planner walks the chat's whole log by its
        // primary key (no statistics say the branches are few).
        "SELECT seq, type, payload FROM envelopes INDEXED BY envelopes_branch
         WHERE chat_id = ? AND seq < ? AND type = 'chat.branch' ORDER BY seq",
        chat_id,
        tail,
    )
    .await
}

/// The rows `sql` (binding the chat and the seq below which the table
/// holds everything) finds, then the tail's.
async fn below_tail(
    pool: &SqlitePool,
    sql: &'static str,
    chat_id: Uuid,
    (tail, below): (Vec<StoredEnvelope>, Option<u64>),
) -> Result<Vec<StoredEnvelope>, StoreError> {
    let mut rows: Vec<StoredEnvelope> = sqlx::query(sql)
        .bind(chat_id.to_string())
        .bind(below.map_or(i64::MAX, clamp))
        .fetch_all(pool)
        .await?
        .iter()
        .map(envelope_from_row)
        .collect::<Result<_, _>>()?;
    rows.extend(tail);
    Ok(rows)
}

/// The rows in `ranges` (ascending, disjoint): one query per
/// [`RANGES_PER_QUERY`], each a walk of the primary key from its first
/// range's start to its last one's end that hands on only the rows in
/// its ranges (skipping a row in SQLite costs far less than reading it
/// out). Stops once the rows read hold `max_bytes` (the one that crosses
/// the budget included).
pub(super) async fn ranges(
    pool: &SqlitePool,
    chat_id: Uuid,
    ranges: &[RangeInclusive<u64>],
    (tail, below): (Vec<StoredEnvelope>, Option<u64>),
    max_bytes: usize,
) -> Result<Vec<StoredEnvelope>, StoreError> {
    use futures_util::TryStreamExt;
    let (mut out, mut bytes) = (Vec::new(), 0usize);
    let below = below.map_or(i64::MAX, clamp);
    for chunk in ranges.chunks(RANGES_PER_QUERY) {
        let terms = vec!["seq BETWEEN ? AND ?"; chunk.len()].join(" OR ");
        let sql = format!(
            "SELECT seq, type, payload FROM envelopes
             WHERE chat_id = ? AND seq BETWEEN ? AND ? AND seq < ? AND ({terms}) ORDER BY seq"
        );
        let mut query = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(chat_id.to_string())
            .bind(clamp(*chunk[0].start()))
            .bind(clamp(*chunk[chunk.len() - 1].end()))
            .bind(below);
        for r in chunk {
            query = query.bind(clamp(*r.start())).bind(clamp(*r.end()));
        }
        let mut rows = query.fetch(pool);
        while let Some(row) = rows.try_next().await? {
            let env = envelope_from_row(&row)?;
            bytes += env.json.len();
            out.push(env);
            if bytes >= max_bytes {
                return Ok(out);
            }
        }
    }
    for env in tail {
        bytes += env.json.len();
        out.push(env);
        if bytes >= max_bytes {
            break;
        }
    }
    Ok(out)
}

/// Keeps a template conversation's answer to `corr`.
pub(super) async fn put_answer(
    pool: &SqlitePool,
    chat_id: Uuid,
    corr: &str,
    answer: &str,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO template_answers (chat_id, corr, answer) VALUES (?, ?, ?)
             ON CONFLICT (chat_id, corr) DO UPDATE SET answer = excluded.answer",
    )
    .bind(chat_id.to_string())
    .bind(corr)
    .bind(answer)
    .execute(pool)
    .await?;
    Ok(())
}

/// A template conversation's answer to `corr`.
pub(super) async fn answer(
    pool: &SqlitePool,
    chat_id: Uuid,
    corr: &str,
) -> Result<Option<String>, StoreError> {
    Ok(
        sqlx::query_scalar("SELECT answer FROM template_answers WHERE chat_id = ? AND corr = ?")
            .bind(chat_id.to_string())
            .bind(corr)
            .fetch_optional(pool)
            .await?,
    )
}
