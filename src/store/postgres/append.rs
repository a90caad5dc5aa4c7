//! One group commit of appends on PostgreSQL.
//!
//! Most commits (words streaming, no chat changing state) are one statement
//! sent alone: the fence check, the rows and the commit's notices, committed
//! by PostgreSQL as it runs — one round trip, where a transaction took five
//! (`BEGIN`, the fence check, the insert, the notify, `COMMIT`) and the
//! writer, busy with them all the time, bounded the paced latency
//! (`bench/notes.md`). A commit that also changes a chat's state, logs a
//! text or a title (indexed for search, and shown in the list: `listing`),
//! or holds more rows than one insert takes, runs as a transaction.

use sqlx::Row;
use sqlx::postgres::{PgArguments, PgPool, Postgres};

type PgQuery<'q> = sqlx::query::Query<'q, Postgres, PgArguments>;
use uuid::Uuid;

use super::super::outbox::{Effects, effects_of};
use super::super::usage::{ADD_MANY, RunUsage, runs_of};
use super::super::{AppendBatch, Fence, NewEnvelope, StoreError};
use super::notice;

/// Most rows in one `UNNEST` insert.
const ROWS_PER_INSERT: usize = 5000;

/// The fence check, the rows and the notices as one statement. `lost`: the
/// fenced chats whose lease is no longer the batch's (nothing is written
/// then). `FOR SHARE` holds the lease rows until the statement commits, so a
/// takeover (an `UPDATE` of the row) waits for the rows to land and then
/// reads the log with them.
const ALONE: &str = "
WITH lease AS (
    SELECT chat_id, node_id, epoch FROM chat_leases WHERE chat_id = ANY($8::uuid[]) FOR SHARE
), lost AS (
    SELECT f.chat_id
    FROM UNNEST($8::uuid[], $9::int8[], $10::int8[]) AS f(chat_id, node_id, epoch)
    LEFT JOIN lease l ON l.chat_id = f.chat_id
    WHERE l.node_id IS DISTINCT FROM f.node_id OR l.epoch IS DISTINCT FROM f.epoch
), inserted AS (
    INSERT INTO envelopes (chat_id, seq, type, ts, corr, client_msg_id, payload)
    SELECT * FROM UNNEST($1::uuid[], $2::int8[], $3::text[], $4::int8[], $5::text[], $6::text[], $7::text[])
    WHERE NOT EXISTS (SELECT 1 FROM lost)
    RETURNING 1
), notified AS (
    SELECT pg_notify($11, n) FROM UNNEST($12::text[]) AS t(n)
    WHERE NOT EXISTS (SELECT 1 FROM lost)
)
SELECT ARRAY(SELECT chat_id FROM lost) AS lost,
       (SELECT count(*) FROM inserted) AS inserted,
       (SELECT count(*) FROM notified) AS notified";

/// Commits `batches`, all or nothing, with the commit's `NOTIFY` unless
/// `notify` is off (NATS announces it: `store::nats`).
pub(super) async fn append(
    pool: &PgPool,
    batches: &[AppendBatch],
    outbox: bool,
    notify: bool,
) -> Result<(), StoreError> {
    let notices = match notify {
        true => notice::announcements(batches),
        false => Vec::new(),
    };
    let rows = rows(batches);
    let effects = match outbox {
        true => effects_of(batches),
        false => Effects::default(),
    };
    let changes_state = batches
        .iter()
        .any(|b| b.state.is_some() || b.conversation_state.is_some())
        || super::listing::touches(batches)
        || !effects.is_empty();
    let runs = runs_of(batches);
    if changes_state || !runs.is_empty() || rows.len() > ROWS_PER_INSERT {
        return in_transaction(pool, batches, &effects, &runs, &notices).await;
    }
    let fenced: Vec<(Uuid, Fence)> = batches
        .iter()
        .filter_map(|b| Some((b.chat_id, b.fence?)))
        .collect();
    let columns = Columns::of(&rows);
    let row = columns
        .bind(sqlx::query(ALONE))
        .bind(fenced.iter().map(|(c, _)| *c).collect::<Vec<Uuid>>())
        .bind(fenced.iter().map(|(_, f)| f.node).collect::<Vec<i64>>())
        .bind(fenced.iter().map(|(_, f)| f.epoch).collect::<Vec<i64>>())
        .bind(notice::LOG_CHANNEL)
        .bind(notices)
        .fetch_one(pool)
        .await?;
    let lost: Vec<Uuid> = row.try_get("lost")?;
    if lost.is_empty() {
        Ok(())
    } else {
        Err(StoreError::Fenced(lost.into()))
    }
}

/// Every row of `batches`, with its chat.
fn rows(batches: &[AppendBatch]) -> Vec<(Uuid, &NewEnvelope)> {
    batches
        .iter()
        .flat_map(|b| b.envelopes.iter().map(move |e| (b.chat_id, e)))
        .collect()
}

/// Rows as the columns an `UNNEST` insert binds.
struct Columns<'a> {
    chat_ids: Vec<Uuid>,
    seqs: Vec<i64>,
    kinds: Vec<&'a str>,
    ts: Vec<i64>,
    corrs: Vec<Option<&'a str>>,
    client_ids: Vec<Option<&'a str>>,
    payloads: Vec<&'a str>,
}

impl<'a> Columns<'a> {
    fn of(rows: &[(Uuid, &'a NewEnvelope)]) -> Self {
        Self {
            chat_ids: rows.iter().map(|(c, _)| *c).collect(),
            seqs: rows.iter().map(|(_, e)| e.seq as i64).collect(),
            kinds: rows.iter().map(|(_, e)| e.kind).collect(),
            ts: rows.iter().map(|(_, e)| e.ts_ms).collect(),
            corrs: rows.iter().map(|(_, e)| e.corr.as_deref()).collect(),
            client_ids: rows
                .iter()
                .map(|(_, e)| e.client_msg_id.as_deref())
                .collect(),
            payloads: rows.iter().map(|(_, e)| &*e.json).collect(),
        }
    }

    /// Binds the columns as `$1`–`$7` of `query`.
    fn bind(self, query: PgQuery<'a>) -> PgQuery<'a> {
        query
            .bind(self.chat_ids)
            .bind(self.seqs)
            .bind(self.kinds)
            .bind(self.ts)
            .bind(self.corrs)
            .bind(self.client_ids)
            .bind(self.payloads)
    }
}

/// The transaction for a commit that changes a chat's state or holds many
/// rows: the fence check, the rows a chunk at a time, the notices, the states.
async fn in_transaction(
    pool: &PgPool,
    batches: &[AppendBatch],
    effects: &Effects,
    runs: &[RunUsage],
    notices: &[String],
) -> Result<(), StoreError> {
    let mut tx = pool.begin().await?;
    check_fences(&mut tx, batches).await?;
    let rows = rows(batches);
    for chunk in rows.chunks(ROWS_PER_INSERT) {
        Columns::of(chunk)
            .bind(sqlx::query(
                "INSERT INTO envelopes (chat_id, seq, type, ts, corr, client_msg_id, payload)
                 SELECT * FROM UNNEST($1::uuid[], $2::int8[], $3::text[], $4::int8[], $5::text[], $6::text[], $7::text[])",
            ))
            .execute(&mut *tx)
            .await?;
    }
    // The commit's announcement, delivered by PostgreSQL only if the
    // transaction commits: a line "<chat id> <highest seq> <node>" per
    // chat (node 0: an unfenced append), as few notifications as fit.
    if !notices.is_empty() {
        notify(&mut *tx, notices).await?;
    }
    super::listing::index(&mut tx, batches).await?;
    let now = super::super::now_ms();
    if !effects.is_empty() {
        outbox(&mut tx, effects, now).await?;
    }
    if !runs.is_empty() {
        let column = |f: fn(&RunUsage) -> i64| runs.iter().map(f).collect::<Vec<i64>>();
        sqlx::query(ADD_MANY)
            .bind(runs.iter().map(|r| r.0).collect::<Vec<Uuid>>())
            .bind(runs.iter().map(|r| r.1.clone()).collect::<Vec<String>>())
            .bind(runs.iter().map(|r| r.2.clone()).collect::<Vec<String>>())
            .bind(column(|r| r.3))
            .bind(column(|r| r.4))
            .bind(column(|r| r.5))
            .bind(column(|r| r.6))
            .execute(&mut *tx)
            .await?;
    }
    for b in batches {
        if let Some(state) = b.state {
            sqlx::query("UPDATE chats SET state = $1, updated_at = $2 WHERE id = $3")
                .bind(state.as_str())
                .bind(now)
                .bind(b.chat_id)
                .execute(&mut *tx)
                .await?;
        }
        if let Some(cs) = b.conversation_state {
            sqlx::query("UPDATE chats SET conversation_state = $1, updated_at = $2 WHERE id = $3")
                .bind(cs)
                .bind(now)
                .bind(b.chat_id)
                .execute(&mut *tx)
                .await?;
        }
    }
    tx.commit().await?;
    Ok(())
}

/// Refuses the transaction unless every fenced batch's chat is still leased
/// to that node with that epoch. `FOR SHARE` holds the lease rows until the
/// commit, so a takeover (an `UPDATE` of the row) waits for this append to
/// land and then reads the log with it.
async fn check_fences(
    tx: &mut sqlx::PgConnection,
    batches: &[AppendBatch],
) -> Result<(), StoreError> {
    let fenced: Vec<Uuid> = batches
        .iter()
        .filter(|b| b.fence.is_some())
        .map(|b| b.chat_id)
        .collect();
    if fenced.is_empty() {
        return Ok(());
    }
    let rows = sqlx::query(
        "SELECT chat_id, node_id, epoch FROM chat_leases WHERE chat_id = ANY($1) FOR SHARE",
    )
    .bind(&fenced)
    .fetch_all(&mut *tx)
    .await?;
    let mut held = std::collections::HashMap::with_capacity(rows.len());
    for row in &rows {
        let id: Uuid = row.try_get("chat_id")?;
        held.insert(
            id,
            Fence {
                node: row.try_get("node_id")?,
                epoch: row.try_get("epoch")?,
            },
        );
    }
    let lost: Vec<Uuid> = batches
        .iter()
        .filter(|b| b.fence.is_some_and(|f| held.get(&b.chat_id) != Some(&f)))
        .map(|b| b.chat_id)
        .collect();
    if lost.is_empty() {
        Ok(())
    } else {
        Err(StoreError::Fenced(lost.into()))
    }
}

/// Webhooks' events and waits, with what makes them.
async fn outbox(
    tx: &mut sqlx::PgConnection,
    effects: &Effects,
    now: i64,
) -> Result<(), StoreError> {
    let events = &effects.events;
    if !events.is_empty() {
        sqlx::query(
            "INSERT INTO webhook_outbox (id, chat_id, seq, event, created_at, next_at)
             SELECT i, c, s, e, $5, $5
             FROM UNNEST($1::text[], $2::text[], $3::int8[], $4::text[]) AS t(i, c, s, e)
             ON CONFLICT (id) DO NOTHING",
        )
        .bind(events.iter().map(|e| e.0.clone()).collect::<Vec<_>>())
        .bind(events.iter().map(|e| e.1.clone()).collect::<Vec<_>>())
        .bind(events.iter().map(|e| e.2).collect::<Vec<_>>())
        .bind(events.iter().map(|e| e.3).collect::<Vec<_>>())
        .bind(now)
        .execute(&mut *tx)
        .await?;
    }
    let opens = &effects.opens;
    if !opens.is_empty() {
        sqlx::query(
            "INSERT INTO webhook_waits (chat_id, seq, event, wait_key, opened_at)
             SELECT c, s, e, k, $5
             FROM UNNEST($1::text[], $2::int8[], $3::text[], $4::text[]) AS t(c, s, e, k)
             ON CONFLICT DO NOTHING",
        )
        .bind(opens.iter().map(|o| o.0.clone()).collect::<Vec<_>>())
        .bind(opens.iter().map(|o| o.1).collect::<Vec<_>>())
        .bind(opens.iter().map(|o| o.2).collect::<Vec<_>>())
        .bind(opens.iter().map(|o| o.3.clone()).collect::<Vec<_>>())
        .bind(now)
        .execute(&mut *tx)
        .await?;
    }
    let closes = &effects.closes;
    if !closes.is_empty() {
        sqlx::query(
            "DELETE FROM webhook_waits w
             USING UNNEST($1::text[], $2::int8[], $3::text[]) AS t(c, s, k)
             WHERE w.chat_id = t.c AND w.seq < t.s AND (t.k IS NULL OR w.wait_key = t.k)",
        )
        .bind(closes.iter().map(|c| c.0.clone()).collect::<Vec<_>>())
        .bind(closes.iter().map(|c| c.1).collect::<Vec<_>>())
        .bind(closes.iter().map(|c| c.2.clone()).collect::<Vec<_>>())
        .execute(&mut *tx)
        .await?;
    }
    Ok(())
}

/// Sends `notices` on the log channel (in a transaction: when it commits).
pub(super) async fn notify<'e>(
    on: impl sqlx::PgExecutor<'e>,
    notices: &[String],
) -> Result<(), StoreError> {
    sqlx::query("SELECT pg_notify($1, n) FROM UNNEST($2::text[]) AS t(n)")
        .bind(notice::LOG_CHANNEL)
        .bind(notices)
        .execute(on)
        .await?;
    Ok(())
}
