//! SQLite's chat list and search: the chats' rows, a page of one's chats,
//! the FTS5 index (`chat_search`, written by the log's appends) and its
//! queries.

use std::time::{Duration, Instant};

use futures_util::TryStreamExt;
use rusqlite::{Transaction, params};
use sqlx::Row;
use sqlx::sqlite::{SqlitePool, SqliteRow};
use uuid::Uuid;

use crate::store::search::{BatchMeta, Terms, searchable};
use crate::store::{
    AppendBatch, ChatFlags, ChatRecord, ChatState, ListCursor, Listing, SearchHit, StoreError,
    now_ms,
};

/// The most matching texts one search reads before it ranks them.
const CANDIDATES: usize = 2000;

pub(super) fn chat_from_row(row: &SqliteRow) -> Result<ChatRecord, StoreError> {
    let id: String = row.try_get("id")?;
    let state: String = row.try_get("state")?;
    Ok(ChatRecord {
        id: Uuid::parse_str(&id).map_err(|e| sqlx::Error::Decode(e.into()))?,
        owner: row.try_get("owner")?,
        agent: row.try_get("agent")?,
        state: ChatState::parse(&state),
        context: row.try_get("context")?,
        model: row.try_get("model")?,
        archived: row.try_get::<i64, _>("archived")? != 0,
        conversation_state: row.try_get("conversation_state")?,
        created_at: row.try_get("created_at")?,
        updated_at: row.try_get("updated_at")?,
        listing: Listing {
            title: row.try_get("title")?,
            pinned: row.try_get::<i64, _>("pinned")? != 0,
            preview: row.try_get("preview")?,
            active_at: row.try_get("active_at")?,
            unread: row.try_get::<i64, _>("unread")?.max(0) as u64,
            read_seq: row.try_get::<i64, _>("read_seq")?.max(0) as u64,
        },
    })
}

/// Indexes what `batch` (of chat `chat`) logs, and sets its chat's title
/// and last words: in the transaction that appends it.
pub(super) fn index(tx: &Transaction<'_>, chat: &str, batch: &AppendBatch) -> rusqlite::Result<()> {
    for e in &batch.envelopes {
        if let Some((kind, body)) = searchable(e.kind, &e.json) {
            tx.prepare_cached(
                "INSERT INTO chat_search (body, owner, chat_id, seq, kind)
                 SELECT ?1, 'o' || hex(owner), ?2, ?3, ?4 FROM chats WHERE id = ?2",
            )?
            .execute(params![body, chat, e.seq as i64, kind])?;
        }
    }
    let rows = batch
        .envelopes
        .iter()
        .map(|e| (e.kind, &*e.json, e.ts_ms, e.seq));
    let Some(meta) = BatchMeta::of(rows) else {
        return Ok(());
    };
    if let Some((title, seq)) = meta.title {
        tx.prepare_cached("UPDATE chats SET title = ?1, title_seq = ?2 WHERE id = ?3")?
            .execute(params![title, seq as i64, chat])?;
    }
    if let Some((preview, at)) = meta.preview {
        tx.prepare_cached("UPDATE chats SET preview = ?1, active_at = ?2 WHERE id = ?3")?
            .execute(params![preview, at, chat])?;
        tx.prepare_cached(
            "UPDATE chats SET
                 unread = CASE WHEN ?1 IS NULL THEN unread + ?2 ELSE ?2 END,
                 read_seq = CASE WHEN ?1 IS NULL THEN read_seq ELSE max(read_seq, ?1) END
             WHERE id = ?3",
        )?
        .execute(params![
            meta.read_at.map(|s| s as i64),
            meta.unread as i64,
            chat
        ])?;
    }
    Ok(())
}

/// One chat's row.
pub(super) async fn chat(pool: &SqlitePool, id: Uuid) -> Result<Option<ChatRecord>, StoreError> {
    sqlx::query("SELECT * FROM chats WHERE id = ?")
        .bind(id.to_string())
        .fetch_optional(pool)
        .await?
        .as_ref()
        .map(chat_from_row)
        .transpose()
}

/// Switches a chat's model (`None`: the agent's own).
pub(super) async fn set_model(
    pool: &SqlitePool,
    id: Uuid,
    model: Option<&str>,
) -> Result<(), StoreError> {
    sqlx::query("UPDATE chats SET model = ?, updated_at = ? WHERE id = ?")
        .bind(model)
        .bind(now_ms())
        .bind(id.to_string())
        .execute(pool)
        .await?;
    Ok(())
}

pub(super) async fn set_flags(
    pool: &SqlitePool,
    id: Uuid,
    flags: ChatFlags,
) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE chats SET pinned = COALESCE(?1, pinned), archived = COALESCE(?2, archived),
                          read_seq = COALESCE(?5, read_seq), unread = COALESCE(?6, unread),
                          updated_at = ?3 WHERE id = ?4",
    )
    .bind(flags.pinned.map(i64::from))
    .bind(flags.archived.map(i64::from))
    .bind(now_ms())
    .bind(id.to_string())
    .bind(flags.read.map(|(seq, _)| seq as i64))
    .bind(flags.read.map(|(_, unread)| unread as i64))
    .execute(pool)
    .await?;
    Ok(())
}

pub(super) async fn list(
    pool: &SqlitePool,
    owner: &str,
    archived: bool,
    after: Option<ListCursor>,
    limit: u32,
) -> Result<Vec<ChatRecord>, StoreError> {
    // Keyset pagination on (pinned, active_at, id), all descending.
    let (pinned, at, id) = after.map_or((2, i64::MAX, String::new()), |c| {
        (i64::from(c.pinned), c.active_at, c.id.to_string())
    });
    sqlx::query(
        "SELECT * FROM chats WHERE owner = ? AND archived = ?
           AND (pinned, active_at, id) < (?, ?, ?)
         ORDER BY pinned DESC, active_at DESC, id DESC LIMIT ?",
    )
    .bind(owner)
    .bind(i64::from(archived))
    .bind(pinned)
    .bind(at)
    .bind(if after.is_some() { id } else { "~".into() })
    .bind(i64::from(limit))
    .fetch_all(pool)
    .await?
    .iter()
    .map(chat_from_row)
    .collect()
}

pub(super) async fn search(
    pool: &SqlitePool,
    owner: &str,
    terms: &Terms,
    archived: bool,
    budget: Duration,
) -> Result<Vec<SearchHit>, StoreError> {
    let deadline = Instant::now() + budget;
    let mut conn = pool.acquire().await?;
    // Past the budget SQLite stops the statement: what was found is ranked.
    // The handler stays with the connection, so the connection is not given
    // back to the pool (a search dropped midway could not remove it).
    conn.close_on_drop();
    conn.lock_handle()
        .await?
        .set_progress_handler(1000, move || Instant::now() < deadline);
    // The chats' current titles first (few), then their texts, newest
    // first, so a large history cannot crowd out either.
    let queries = [
        "SELECT c.*, s.seq AS hit_seq, s.kind AS hit_kind, s.body AS hit_body,
                bm25(chat_search) AS hit_score
         FROM chat_search s JOIN chats c ON c.id = s.chat_id
         WHERE chat_search MATCH ? AND c.owner = ? AND c.archived = ?
           AND s.kind = 'title' AND s.seq = c.title_seq",
        "SELECT c.*, s.seq AS hit_seq, s.kind AS hit_kind, s.body AS hit_body,
                bm25(chat_search) AS hit_score
         FROM chat_search s JOIN chats c ON c.id = s.chat_id
         WHERE chat_search MATCH ? AND c.owner = ? AND c.archived = ? AND s.kind = 'text'
         ORDER BY s.rowid DESC",
    ];
    // The owner's token and every word, each in its column: the index
    // intersects them (the owner is checked again on the chat's row).
    let token: String = owner.bytes().map(|b| format!("{b:02X}")).collect();
    let matching = format!("owner : \"o{token}\" AND {}", terms.fts5_in("body"));
    let mut hits = Vec::new();
    for sql in queries {
        let mut rows = sqlx::query(sql)
            .bind(&matching)
            .bind(owner)
            .bind(i64::from(archived))
            .fetch(&mut *conn);
        let mut taken = 0;
        loop {
            match rows.try_next().await {
                Ok(Some(row)) => {
                    hits.push(hit_from_row(&row)?);
                    taken += 1;
                    if taken == CANDIDATES || Instant::now() >= deadline {
                        break;
                    }
                }
                Ok(None) => break,
                // Interrupted at the budget: rank what was found.
                Err(_) if Instant::now() >= deadline => return Ok(hits),
                Err(e) => return Err(e.into()),
            }
        }
        if Instant::now() >= deadline {
            break;
        }
    }
    Ok(hits)
}

fn hit_from_row(row: &SqliteRow) -> Result<SearchHit, StoreError> {
    let seq: i64 = row.try_get("hit_seq")?;
    let kind: String = row.try_get("hit_kind")?;
    let score: f64 = row.try_get("hit_score")?;
    Ok(SearchHit {
        chat: chat_from_row(row)?,
        seq: seq as u64,
        title: kind == "title",
        // bm25: lower is better.
        score: -score,
        body: row.try_get("hit_body")?,
    })
}
