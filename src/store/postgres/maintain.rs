//! What changes the database besides the appends: a chat purged, and the
//! search index rebuilt from the log.

use sqlx::Row;
use sqlx::postgres::PgPool;
use uuid::Uuid;

use super::listing;
use super::notice::{LOG_CHANNEL, purged};
use crate::store::rebuild::{INDEXED_KINDS, Logged, as_logged};
use crate::store::{Reindexed, StoreError};

/// Envelopes read per step of a rebuild.
const PAGE: i64 = 5_000;

/// Deletes every row of `chat` in one transaction — its envelopes, search
/// rows, files (and the contents no other file of the owner holds),
/// answers, database link and row — and announces it on the log
/// channel, so the nodes following the chat close it. `false`: no such
/// chat. The lease is left to its holder, which releases it as it stops.
pub(super) async fn purge(pool: &PgPool, chat: Uuid) -> Result<bool, StoreError> {
    let mut tx = pool.begin().await?;
    let found = sqlx::query("SELECT owner FROM chats WHERE id = $1 FOR UPDATE")
        .bind(chat)
        .fetch_optional(&mut *tx)
        .await?;
    let Some(found) = found else {
        return Ok(false);
    };
    let owner: String = found.try_get("owner")?;
    drop_files(&mut tx, &owner, chat).await?;
    for sql in [
        "DELETE FROM chat_search WHERE chat_id = $1",
        "DELETE FROM envelopes WHERE chat_id = $1",
        "DELETE FROM template_answers WHERE chat_id = $1",
        "DELETE FROM chat_databases WHERE chat_id = $1",
        "DELETE FROM webhook_waits WHERE chat_id = $1::text",
        "DELETE FROM chats WHERE id = $1",
    ] {
        sqlx::query(sql).bind(chat).execute(&mut *tx).await?;
    }
    sqlx::query("SELECT pg_notify($1, $2)")
        .bind(LOG_CHANNEL)
        .bind(purged(chat))
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(true)
}

/// Deletes `owner`'s files of `chat` (and the contents no other file of
/// the owner holds) in a transaction of their own: for a chat whose owner's
/// files live in another database than its log (`store::sharded`).
pub(super) async fn purge_files(pool: &PgPool, owner: &str, chat: Uuid) -> Result<(), StoreError> {
    let mut tx = pool.begin().await?;
    drop_files(&mut tx, owner, chat).await?;
    tx.commit().await?;
    Ok(())
}

/// The chat's files, and the contents no other file of the owner holds:
/// their rows locked first, so an upload recording one of them meanwhile
/// commits before the statements below look (and is seen).
async fn drop_files(
    tx: &mut sqlx::PgConnection,
    owner: &str,
    chat: Uuid,
) -> Result<(), StoreError> {
    sqlx::query(
        "SELECT 1 FROM blobs WHERE owner = $1 AND sha256 IN (
             SELECT sha256 FROM files WHERE owner = $1 AND chat_id = $2) FOR UPDATE",
    )
    .bind(owner)
    .bind(chat)
    .execute(&mut *tx)
    .await?;
    for sql in [
        "DELETE FROM blob_chunks WHERE owner = $1 AND blob IN (
             SELECT chunks FROM blobs WHERE owner = $1 AND sha256 IN (
                 SELECT sha256 FROM files WHERE owner = $1 AND chat_id = $2 EXCEPT
                 SELECT sha256 FROM files WHERE owner = $1 AND chat_id <> $2))",
        "DELETE FROM blobs WHERE owner = $1 AND sha256 IN (
             SELECT sha256 FROM files WHERE owner = $1 AND chat_id = $2 EXCEPT
             SELECT sha256 FROM files WHERE owner = $1 AND chat_id <> $2)",
        "DELETE FROM files WHERE chat_id = $2 AND owner = $1",
    ] {
        sqlx::query(sql)
            .bind(owner)
            .bind(chat)
            .execute(&mut *tx)
            .await?;
    }
    Ok(())
}

/// Empties the index and the chats' list columns, then indexes every
/// `chat.text` and `chat.title` of the log with the code an append runs, in
/// pages, in one transaction: a rebuild cut short changes nothing, and
/// searches read the old index until it commits. Every commit that logs a
/// text or changes a chat's row waits for it (both tables are locked), so
/// nothing written meanwhile is lost — and the nodes' streams stall while
/// it runs: a maintenance step, for a quiet time or stopped nodes.
pub(super) async fn reindex(pool: &PgPool) -> Result<Reindexed, StoreError> {
    let mut tx = pool.begin().await?;
    // Both tables before anything else, in one statement: a purge or an
    // append that holds a chat's row finishes first (nothing waits on the
    // other's half). Reads go on; the writes to either wait.
    sqlx::query("LOCK TABLE chats, chat_search IN EXCLUSIVE MODE")
        .execute(&mut *tx)
        .await?;
    sqlx::query("DELETE FROM chat_search")
        .execute(&mut *tx)
        .await?;
    // What users read is not in the log: kept as it is (indexing again
    // would count the agents' texts a second time).
    sqlx::query(
        "CREATE TEMP TABLE kept_reads ON COMMIT DROP AS SELECT id, unread, read_seq FROM chats",
    )
    .execute(&mut *tx)
    .await?;
    let chats = sqlx::query(
        "UPDATE chats SET title = NULL, title_seq = NULL, preview = NULL, active_at = created_at",
    )
    .execute(&mut *tx)
    .await?
    .rows_affected();
    let kinds: Vec<&str> = INDEXED_KINDS.to_vec();
    let (mut after, mut rows) = ((Uuid::nil(), -1_i64), 0_u64);
    loop {
        let page = sqlx::query(
            "SELECT chat_id, seq, type, ts, payload FROM envelopes
             WHERE (chat_id, seq) > ($1, $2) AND type = ANY($3)
             ORDER BY chat_id, seq LIMIT $4",
        )
        .bind(after.0)
        .bind(after.1)
        .bind(&kinds)
        .bind(PAGE)
        .fetch_all(&mut *tx)
        .await?;
        let Some(last) = page.last() else { break };
        after = (last.try_get("chat_id")?, last.try_get("seq")?);
        let full = page.len() as i64 == PAGE;
        // Grouped by chat, in seq order: a chat cut by the page's end is
        // finished by the next page, as a later append would.
        let mut batches: Vec<(Uuid, Vec<Logged>)> = Vec::new();
        for row in &page {
            let chat: Uuid = row.try_get("chat_id")?;
            let seq: i64 = row.try_get("seq")?;
            let logged = (
                seq as u64,
                row.try_get("type")?,
                row.try_get("ts")?,
                row.try_get("payload")?,
            );
            match batches.last_mut() {
                Some((c, rows)) if *c == chat => rows.push(logged),
                _ => batches.push((chat, vec![logged])),
            }
        }
        let batches: Vec<_> = batches
            .into_iter()
            .map(|(chat, logged)| as_logged(chat, logged))
            .collect();
        rows += batches
            .iter()
            .map(|b| b.envelopes.len() as u64)
            .sum::<u64>();
        listing::index(&mut tx, &batches).await?;
        if !full {
            break;
        }
    }
    sqlx::query(
        "UPDATE chats SET unread = k.unread, read_seq = k.read_seq
         FROM kept_reads AS k WHERE k.id = chats.id",
    )
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(Reindexed { chats, rows })
}
