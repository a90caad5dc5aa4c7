//! The production store: PostgreSQL.
//!
//! Same trait, same group commit as SQLite: one transaction per batch of
//! appends, each chunk of rows one `INSERT … SELECT * FROM UNNEST(…)` (a single
//! statement whatever the row count, so no bind-parameter limit). Payloads are
//! `TEXT`, not `JSONB`, so a replay sends the bytes that were sent live.

mod append;
mod databases;
mod files;
mod listing;
mod maintain;
pub(super) mod notice;
mod spread;

use std::time::Duration;

use async_trait::async_trait;
use sqlx::Row;
use sqlx::postgres::{PgPool, PgPoolOptions, PgRow};
use uuid::Uuid;

use super::search::Terms;
use super::{
    AppendBatch, ChatDatabaseRecord, ChatFlags, ChatRecord, ChatState, ConnectionRecord,
    ListCursor, Reindexed, SearchHit, Store, StoreError, StoredEnvelope, now_ms, rank,
};

/// The PostgreSQL store. Cheap to clone (a pool handle).
#[derive(Debug, Clone)]
pub struct PgStore {
    pool: PgPool,
    blobs: files::PgBlobs,
    url: String,
    pool_size: u32,
    /// Webhooks' outbox is written with the log (`Store::enable_outbox`).
    outbox: std::sync::Arc<std::sync::atomic::AtomicBool>,
    /// Commits are announced on NATS while it is up (`announce_on`).
    bus: std::sync::Arc<std::sync::OnceLock<std::sync::Arc<super::nats::NatsBus>>>,
}

impl PgStore {
    /// Connects (a pool of `pool_size`) and migrates.
    ///
    /// # Errors
    /// The server cannot be reached, or a migration fails.
    pub async fn open(url: &str, pool_size: u32) -> Result<Self, StoreError> {
        let pool = PgPoolOptions::new()
            .max_connections(pool_size)
            .acquire_timeout(Duration::from_secs(10))
            .connect(url)
            .await?;
        super::migrations::postgres()
            .run(&pool)
            .await
            .map_err(|e| StoreError::Migration(e.into()))?;
        Ok(Self {
            blobs: files::PgBlobs { pool: pool.clone() },
            pool,
            url: url.to_owned(),
            pool_size,
            outbox: Default::default(),
            bus: Default::default(),
        })
    }

    /// Announces commits on `bus` instead of `NOTIFY` while it is up.
    pub fn announce_on(&self, bus: std::sync::Arc<super::nats::NatsBus>) {
        let _ = self.bus.set(bus);
    }

    pub(super) fn pool(&self) -> &PgPool {
        &self.pool
    }

    pub(super) fn url(&self) -> &str {
        &self.url
    }
}

use listing::chat_from_row;

fn envelope_from_row(row: &PgRow) -> Result<StoredEnvelope, StoreError> {
    let seq: i64 = row.try_get("seq")?;
    Ok(StoredEnvelope {
        seq: seq as u64,
        kind: row.try_get("type")?,
        json: row.try_get("payload")?,
    })
}

#[async_trait]
impl Store for PgStore {
    async fn ping(&self) -> Result<(), StoreError> {
        sqlx::query("SELECT 1").execute(&self.pool).await?;
        Ok(())
    }

    fn service_keys(&self) -> crate::store::ServiceKeys {
        crate::store::ServiceKeys::Postgres(self.pool.clone())
    }

    fn schedules(&self) -> crate::store::Schedules {
        crate::store::Schedules::Postgres(self.pool.clone())
    }

    fn outbox(&self) -> crate::store::Outbox {
        crate::store::Outbox::Postgres(self.pool.clone())
    }

    fn usage(&self) -> crate::store::Usage {
        crate::store::Usage::Postgres(self.pool.clone())
    }

    fn operations(&self) -> crate::store::Operations {
        crate::store::Operations::Postgres(self.pool.clone())
    }

    fn enable_outbox(&self) {
        self.outbox
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }

    async fn create_chat(&self, chat: &ChatRecord) -> Result<ChatRecord, StoreError> {
        sqlx::query(
            "INSERT INTO chats (id, owner, agent, state, context, created_at, updated_at, active_at)
             VALUES ($1, $2, $3, $4, $5, $6, $6, $6) ON CONFLICT (id) DO NOTHING",
        )
        .bind(chat.id)
        .bind(&chat.owner)
        .bind(&chat.agent)
        .bind(chat.state.as_str())
        .bind(&chat.context)
        .bind(chat.created_at)
        .execute(&self.pool)
        .await?;
        self.chat(chat.id)
            .await?
            .ok_or_else(|| sqlx::Error::RowNotFound.into())
    }

    async fn set_chat_flags(&self, id: Uuid, flags: ChatFlags) -> Result<(), StoreError> {
        listing::set_flags(&self.pool, id, flags).await
    }

    async fn list_chats(
        &self,
        owner: &str,
        archived: bool,
        after: Option<ListCursor>,
        limit: u32,
    ) -> Result<Vec<ChatRecord>, StoreError> {
        listing::list(&self.pool, owner, archived, after, limit).await
    }

    async fn search_chats(
        &self,
        owner: &str,
        terms: &Terms,
        archived: bool,
        limit: u32,
        budget: Duration,
    ) -> Result<Vec<SearchHit>, StoreError> {
        let hits = listing::search(&self.pool, owner, terms, archived, budget).await?;
        let mut hits = rank(hits, limit as usize);
        listing::bodies(&self.pool, &mut hits).await?;
        Ok(hits)
    }

    async fn purge_chat(&self, id: Uuid) -> Result<bool, StoreError> {
        maintain::purge(&self.pool, id).await
    }

    async fn reindex(&self) -> Result<Reindexed, StoreError> {
        maintain::reindex(&self.pool).await
    }

    fn blobs(&self) -> &dyn super::files::Blobs {
        &self.blobs
    }

    async fn put_file(
        &self,
        file: &super::files::FileRecord,
        put: super::files::Put,
    ) -> Result<super::files::Kept, StoreError> {
        files::put_file(&self.pool, file, put).await
    }

    async fn file(&self, id: Uuid) -> Result<Option<super::files::FileRecord>, StoreError> {
        files::file(&self.pool, id).await
    }

    async fn sweep_staged(&self, older_than: std::time::Duration) -> Result<u64, StoreError> {
        files::sweep_staged(&self.pool, older_than).await
    }

    async fn set_chat_model(&self, id: Uuid, model: Option<&str>) -> Result<(), StoreError> {
        sqlx::query("UPDATE chats SET model = $1, updated_at = $2 WHERE id = $3")
            .bind(model)
            .bind(now_ms())
            .bind(id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn chat(&self, id: Uuid) -> Result<Option<ChatRecord>, StoreError> {
        sqlx::query("SELECT * FROM chats WHERE id = $1")
            .bind(id)
            .fetch_optional(&self.pool)
            .await?
            .as_ref()
            .map(chat_from_row)
            .transpose()
    }

    async fn append(&self, batches: &[AppendBatch]) -> Result<(), StoreError> {
        let outbox = self.outbox.load(std::sync::atomic::Ordering::Relaxed);
        let Some(bus) = self.bus.get().filter(|b| !b.skipped()) else {
            return append::append(&self.pool, batches, outbox, true).await;
        };
        append::append(&self.pool, batches, outbox, false).await?;
        if !bus.publish(&notice::commits(batches)).await {
            // Committed, not announced: by NOTIFY then (a follower that
            // misses it waits for the chat's next commit).
            if let Err(e) = append::notify(&self.pool, &notice::announcements(batches)).await {
                tracing::warn!(error = %e, "cannot announce a commit");
            }
        }
        Ok(())
    }

    /// While one commit waits for its WAL flush, the next starts on another
    /// connection (PostgreSQL flushes concurrent commits together): one
    /// writer in flight made a word that arrived mid-commit wait for that
    /// commit and then its own (`bench/notes.md`). Half the pool, at most 4,
    /// leaves connections for reads.
    fn commits_in_flight(&self) -> usize {
        (self.pool_size as usize / 2).clamp(1, 4)
    }

    async fn load_after(
        &self,
        chat_id: Uuid,
        after: u64,
        limit: u32,
    ) -> Result<Vec<StoredEnvelope>, StoreError> {
        sqlx::query(
            "SELECT seq, type, payload FROM envelopes
             WHERE chat_id = $1 AND seq > $2 ORDER BY seq LIMIT $3",
        )
        .bind(chat_id)
        .bind(after.min(i64::MAX as u64) as i64)
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?
        .iter()
        .map(envelope_from_row)
        .collect()
    }

    async fn load_bounded(
        &self,
        chat_id: Uuid,
        after: u64,
        limit: u32,
        max_bytes: usize,
    ) -> Result<(Vec<StoredEnvelope>, bool), StoreError> {
        use futures_util::TryStreamExt;
        let rows = sqlx::query(
            "SELECT seq, type, payload FROM envelopes
             WHERE chat_id = $1 AND seq > $2 ORDER BY seq LIMIT $3",
        )
        .bind(chat_id)
        .bind(after.min(i64::MAX as u64) as i64)
        .bind(i64::from(limit))
        .fetch(&self.pool);
        let envelopes = rows
            .map_err(StoreError::from)
            .and_then(|row| async move { envelope_from_row(&row) });
        super::take_bounded(envelopes, limit, max_bytes).await
    }

    async fn last(&self, chat_id: Uuid) -> Result<Option<(u64, String)>, StoreError> {
        let row = sqlx::query(
            "SELECT seq, type FROM envelopes WHERE chat_id = $1 ORDER BY seq DESC LIMIT 1",
        )
        .bind(chat_id)
        .fetch_optional(&self.pool)
        .await?;
        row.map(|r| Ok((r.try_get::<i64, _>("seq")? as u64, r.try_get("type")?)))
            .transpose()
    }

    async fn transcript(&self, chat_id: Uuid) -> Result<Vec<StoredEnvelope>, StoreError> {
        sqlx::query(
            "SELECT seq, type, payload FROM envelopes
             WHERE chat_id = $1 AND type IN ('chat.text', 'chat.tool_call', 'chat.tool_response', 'chat.branch', 'chat.agent_state') ORDER BY seq",
        )
        .bind(chat_id)
        .fetch_all(&self.pool)
        .await?
        .iter()
        .map(envelope_from_row)
        .collect()
    }

    async fn branches(&self, chat_id: Uuid) -> Result<Vec<StoredEnvelope>, StoreError> {
        sqlx::query(
            "SELECT seq, type, payload FROM envelopes
             WHERE chat_id = $1 AND type = 'chat.branch' ORDER BY seq",
        )
        .bind(chat_id)
        .fetch_all(&self.pool)
        .await?
        .iter()
        .map(envelope_from_row)
        .collect()
    }

    async fn load_ranges(
        &self,
        chat_id: Uuid,
        ranges: &[std::ops::RangeInclusive<u64>],
        max_bytes: usize,
    ) -> Result<Vec<StoredEnvelope>, StoreError> {
        use futures_util::TryStreamExt;
        /// Seqs one query asks for by key.
        const SEQS_PER_QUERY: usize = 1000;
        let seqs: Vec<i64> = ranges
            .iter()
            .flat_map(|r| r.clone())
            .map(|s| s.min(i64::MAX as u64) as i64)
            .collect();
        let (mut out, mut bytes) = (Vec::new(), 0usize);
        for chunk in seqs.chunks(SEQS_PER_QUERY) {
            // Each seq found by the primary key: nothing between is read.
            let mut rows = sqlx::query(
                "SELECT seq, type, payload FROM envelopes
                 WHERE chat_id = $1 AND seq = ANY($2::bigint[]) ORDER BY seq",
            )
            .bind(chat_id)
            .bind(chunk)
            .fetch(&self.pool);
            while let Some(row) = rows.try_next().await? {
                let env = envelope_from_row(&row)?;
                bytes += env.json.len();
                out.push(env);
                if bytes >= max_bytes {
                    return Ok(out);
                }
            }
        }
        Ok(out)
    }

    async fn has_client_msg_id(&self, chat_id: Uuid, id: &str) -> Result<bool, StoreError> {
        let row = sqlx::query(
            "SELECT 1 FROM envelopes WHERE chat_id = $1 AND client_msg_id = $2 LIMIT 1",
        )
        .bind(chat_id)
        .bind(id)
        .fetch_optional(&self.pool)
        .await?;
        Ok(row.is_some())
    }

    async fn last_tool_call(
        &self,
        chat_id: Uuid,
        corr: &str,
    ) -> Result<Option<StoredEnvelope>, StoreError> {
        sqlx::query(
            "SELECT seq, type, payload FROM envelopes
             WHERE chat_id = $1 AND corr = $2 AND type = 'chat.tool_call'
             ORDER BY seq DESC LIMIT 1",
        )
        .bind(chat_id)
        .bind(corr)
        .fetch_optional(&self.pool)
        .await?
        .as_ref()
        .map(envelope_from_row)
        .transpose()
    }

    async fn run_start(&self, chat_id: Uuid, at: u64) -> Result<u64, StoreError> {
        let last: Option<i64> = sqlx::query_scalar(
            "SELECT MAX(seq) FROM envelopes
             WHERE chat_id = $1 AND type = 'chat.run_complete' AND seq < $2",
        )
        .bind(chat_id)
        .bind(i64::try_from(at).unwrap_or(i64::MAX))
        .fetch_one(&self.pool)
        .await?;
        Ok(last.map_or(1, |s| s as u64 + 1))
    }

    async fn put_connection(&self, c: &ConnectionRecord) -> Result<bool, StoreError> {
        databases::put_connection(&self.pool, c).await
    }

    async fn update_connection(&self, c: &ConnectionRecord) -> Result<bool, StoreError> {
        databases::update_connection(&self.pool, c).await
    }

    async fn connections(&self, owner: &str) -> Result<Vec<ConnectionRecord>, StoreError> {
        databases::connections(&self.pool, owner).await
    }

    async fn connection(
        &self,
        owner: &str,
        id: Uuid,
    ) -> Result<Option<ConnectionRecord>, StoreError> {
        databases::connection(&self.pool, owner, id).await
    }

    async fn delete_connection(&self, owner: &str, id: Uuid) -> Result<bool, StoreError> {
        databases::delete_connection(&self.pool, owner, id).await
    }

    async fn put_chat_database(
        &self,
        chat_id: Uuid,
        connection_id: Uuid,
        db_schema: &str,
    ) -> Result<(), StoreError> {
        databases::put_chat_database(&self.pool, chat_id, connection_id, db_schema).await
    }

    async fn put_sql_result(
        &self,
        chat_id: Uuid,
        connection_id: Uuid,
        sql_result: &str,
    ) -> Result<bool, StoreError> {
        databases::put_sql_result(&self.pool, chat_id, connection_id, sql_result).await
    }

    async fn chat_database(&self, chat_id: Uuid) -> Result<Option<ChatDatabaseRecord>, StoreError> {
        databases::chat_database(&self.pool, chat_id).await
    }

    async fn put_answer(&self, chat_id: Uuid, corr: &str, answer: &str) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO template_answers (chat_id, corr, answer) VALUES ($1, $2, $3)
             ON CONFLICT (chat_id, corr) DO UPDATE SET answer = excluded.answer",
        )
        .bind(chat_id)
        .bind(corr)
        .bind(answer)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn answer(&self, chat_id: Uuid, corr: &str) -> Result<Option<String>, StoreError> {
        Ok(sqlx::query_scalar(
            "SELECT answer FROM template_answers WHERE chat_id = $1 AND corr = $2",
        )
        .bind(chat_id)
        .bind(corr)
        .fetch_optional(&self.pool)
        .await?)
    }

    async fn chats_in_state(&self, state: ChatState) -> Result<Vec<Uuid>, StoreError> {
        let rows = sqlx::query("SELECT id FROM chats WHERE state = $1")
            .bind(state.as_str())
            .fetch_all(&self.pool)
            .await?;
        rows.iter()
            .map(|r| r.try_get::<Uuid, _>("id").map_err(Into::into))
            .collect()
    }
}
