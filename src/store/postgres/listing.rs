//! PostgreSQL's chat list and search: the chats' rows, a page of one's
//! chats, the full-text index (`chat_search`, a tsvector per text and
//! title, written by the log's appends) and its queries.

use std::time::{Duration, Instant};

use futures_util::TryStreamExt;
use sqlx::postgres::{PgPool, PgRow};
use sqlx::{PgConnection, Row};
use uuid::Uuid;

use crate::store::search::{BatchMeta, Terms, index_words, searchable};
use crate::store::{
    AppendBatch, ChatFlags, ChatRecord, ChatState, ListCursor, Listing, SearchHit, StoreError,
    now_ms,
};

/// The most matching texts one search reads before it ranks them.
const CANDIDATES: usize = 2000;

pub(super) fn chat_from_row(row: &PgRow) -> Result<ChatRecord, StoreError> {
    let state: String = row.try_get("state")?;
    Ok(ChatRecord {
        id: row.try_get("id")?,
        owner: row.try_get("owner")?,
        agent: row.try_get("agent")?,
        state: ChatState::parse(&state),
        context: row.try_get("context")?,
        model: row.try_get("model")?,
        archived: row.try_get("archived")?,
        conversation_state: row.try_get("conversation_state")?,
        created_at: row.try_get("created_at")?,
        updated_at: row.try_get("updated_at")?,
        listing: Listing {
            title: row.try_get("title")?,
            pinned: row.try_get("pinned")?,
            preview: row.try_get("preview")?,
            active_at: row.try_get("active_at")?,
            unread: row.try_get::<i64, _>("unread")?.max(0) as u64,
            read_seq: row.try_get::<i64, _>("read_seq")?.max(0) as u64,
        },
    })
}

/// Whether `batches` log anything the list or the index reads (their
/// commit then runs as a transaction, which [`index`] is part of).
pub(super) fn touches(batches: &[AppendBatch]) -> bool {
    batches
        .iter()
        .flat_map(|b| &b.envelopes)
        .any(|e| matches!(e.kind, "chat.text" | "chat.title"))
}

/// Indexes what `batches` log, and sets their chats' titles and last words:
/// in the transaction that appends them.
pub(super) async fn index(
    tx: &mut PgConnection,
    batches: &[AppendBatch],
) -> Result<(), StoreError> {
    let (mut chats, mut seqs, mut kinds, mut bodies) = (vec![], vec![], vec![], vec![]);
    for b in batches {
        for e in &b.envelopes {
            if let Some((kind, body)) = searchable(e.kind, &e.json) {
                chats.push(b.chat_id);
                seqs.push(e.seq as i64);
                kinds.push(kind);
                bodies.push(index_words(&body));
            }
        }
    }
    if chats.is_empty() {
        return Ok(());
    }
    sqlx::query(
        "INSERT INTO chat_search (chat_id, seq, kind, tsv)
         SELECT c, s, k, to_tsvector('simple', b)
         FROM UNNEST($1::uuid[], $2::int8[], $3::text[], $4::text[]) AS t(c, s, k, b)",
    )
    .bind(&chats)
    .bind(&seqs)
    .bind(&kinds)
    .bind(&bodies)
    .execute(&mut *tx)
    .await?;
    for b in batches {
        let rows = b
            .envelopes
            .iter()
            .map(|e| (e.kind, &*e.json, e.ts_ms, e.seq));
        let Some(meta) = BatchMeta::of(rows) else {
            continue;
        };
        let (preview, at) = meta.preview.unzip();
        let (title, title_seq) = meta.title.unzip();
        sqlx::query(
            "UPDATE chats SET title = COALESCE($1, title), title_seq = COALESCE($5, title_seq),
                              preview = COALESCE($2, preview), active_at = COALESCE($3, active_at),
                              unread = CASE WHEN $6::int8 IS NULL THEN unread + $7 ELSE $7 END,
                              read_seq = CASE WHEN $6::int8 IS NULL THEN read_seq
                                              ELSE GREATEST(read_seq, $6) END
             WHERE id = $4",
        )
        .bind(title)
        .bind(preview)
        .bind(at)
        .bind(b.chat_id)
        .bind(title_seq.map(|s| s as i64))
        .bind(meta.read_at.map(|s| s as i64))
        .bind(meta.unread as i64)
        .execute(&mut *tx)
        .await?;
    }
    Ok(())
}

pub(super) async fn set_flags(pool: &PgPool, id: Uuid, flags: ChatFlags) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE chats SET pinned = COALESCE($1, pinned), archived = COALESCE($2, archived),
                          read_seq = COALESCE($5, read_seq), unread = COALESCE($6, unread),
                          updated_at = $3 WHERE id = $4",
    )
    .bind(flags.pinned)
    .bind(flags.archived)
    .bind(now_ms())
    .bind(id)
    .bind(flags.read.map(|(seq, _)| seq as i64))
    .bind(flags.read.map(|(_, unread)| unread as i64))
    .execute(pool)
    .await?;
    Ok(())
}

pub(super) async fn list(
    pool: &PgPool,
    owner: &str,
    archived: bool,
    after: Option<ListCursor>,
    limit: u32,
) -> Result<Vec<ChatRecord>, StoreError> {
    // Keyset pagination on (pinned, active_at, id), all descending.
    let rows = match after {
        None => {
            sqlx::query(
                "SELECT * FROM chats WHERE owner = $1 AND archived = $2
                 ORDER BY pinned DESC, active_at DESC, id DESC LIMIT $3",
            )
            .bind(owner)
            .bind(archived)
            .bind(i64::from(limit))
            .fetch_all(pool)
            .await?
        }
        Some(c) => {
            sqlx::query(
                "SELECT * FROM chats WHERE owner = $1 AND archived = $2
                   AND (pinned, active_at, id) < ($3, $4, $5)
                 ORDER BY pinned DESC, active_at DESC, id DESC LIMIT $6",
            )
            .bind(owner)
            .bind(archived)
            .bind(c.pinned)
            .bind(c.active_at)
            .bind(c.id)
            .bind(i64::from(limit))
            .fetch_all(pool)
            .await?
        }
    };
    rows.iter().map(chat_from_row).collect()
}

/// The matching texts and current titles of `owner`'s chats, as found in
/// about `budget` (at most [`CANDIDATES`]); `body` is filled by [`bodies`].
pub(super) async fn search(
    pool: &PgPool,
    owner: &str,
    terms: &Terms,
    archived: bool,
    budget: Duration,
) -> Result<Vec<SearchHit>, StoreError> {
    let deadline = Instant::now() + budget;
    let mut tx = pool.begin().await?;
    // A safety net: the loop below stops reading at the budget.
    let timeout = budget.as_millis().max(1) * 2;
    sqlx::query("SELECT set_config('statement_timeout', $1, true)")
        .bind(timeout.to_string())
        .execute(&mut *tx)
        .await?;
    // The chats' current titles first (few), then their texts (as the
    // index finds them), so a large history cannot crowd out a title.
    let queries = [
        "SELECT c.*, s.seq AS hit_seq, s.kind AS hit_kind, ts_rank(s.tsv, q) AS hit_score
         FROM to_tsquery('simple', $1) AS q, chat_search s JOIN chats c ON c.id = s.chat_id
         WHERE s.tsv @@ q AND c.owner = $2 AND c.archived = $3
           AND s.kind = 'title' AND s.seq = c.title_seq",
        "SELECT c.*, s.seq AS hit_seq, s.kind AS hit_kind, ts_rank(s.tsv, q) AS hit_score
         FROM to_tsquery('simple', $1) AS q, chat_search s JOIN chats c ON c.id = s.chat_id
         WHERE s.tsv @@ q AND c.owner = $2 AND c.archived = $3 AND s.kind = 'text'",
    ];
    let mut hits = Vec::new();
    let mut found = Ok(());
    'all: for sql in queries {
        let mut rows = sqlx::query(sql)
            .bind(terms.tsquery())
            .bind(owner)
            .bind(archived)
            .fetch(&mut *tx);
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
                Err(e) => {
                    found = Err(e);
                    break 'all;
                }
            }
        }
        if Instant::now() >= deadline {
            break;
        }
    }
    drop(tx);
    match found {
        Ok(()) => Ok(hits),
        // Stopped at the timeout: rank what was found.
        Err(_) if Instant::now() >= deadline => Ok(hits),
        Err(e) => Err(e.into()),
    }
}

fn hit_from_row(row: &PgRow) -> Result<SearchHit, StoreError> {
    let seq: i64 = row.try_get("hit_seq")?;
    let kind: String = row.try_get("hit_kind")?;
    let score: f32 = row.try_get("hit_score")?;
    Ok(SearchHit {
        chat: chat_from_row(row)?,
        seq: seq as u64,
        title: kind == "title",
        score: f64::from(score),
        body: String::new(),
    })
}

/// Fills each hit's `body` from the log (the text or title that matched).
pub(super) async fn bodies(pool: &PgPool, hits: &mut [SearchHit]) -> Result<(), StoreError> {
    let chats: Vec<Uuid> = hits.iter().map(|h| h.chat.id).collect();
    let seqs: Vec<i64> = hits.iter().map(|h| h.seq as i64).collect();
    let rows = sqlx::query(
        "SELECT e.chat_id, e.seq, e.type, e.payload
         FROM UNNEST($1::uuid[], $2::int8[]) AS k(chat_id, seq)
         JOIN envelopes e ON e.chat_id = k.chat_id AND e.seq = k.seq",
    )
    .bind(&chats)
    .bind(&seqs)
    .fetch_all(pool)
    .await?;
    for row in rows {
        let (chat, seq): (Uuid, i64) = (row.try_get("chat_id")?, row.try_get("seq")?);
        let (kind, json): (String, String) = (row.try_get("type")?, row.try_get("payload")?);
        let body = searchable(&kind, &json).map(|(_, b)| b).unwrap_or_default();
        for h in hits
            .iter_mut()
            .filter(|h| h.chat.id == chat && h.seq == seq as u64)
        {
            h.body.clone_from(&body);
        }
    }
    Ok(())
}
