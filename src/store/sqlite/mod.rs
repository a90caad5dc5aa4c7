//! The embedded store: one SQLite file in WAL mode.
//!
//! Writes come from one [`LogWriter`](super::LogWriter) task, so SQLite's single
//! writer is never contended by ourselves; readers run beside it (WAL).
//! `synchronous=FULL`: a commit survives power loss, not only a process crash,
//! because a client may already have seen what it committed. Group commit is
//! what keeps that affordable, and the [journal](journal) what keeps a commit
//! of words from many chats small.

mod checkpoint;
mod databases;
mod files;
mod journal;
mod listing;
mod maintain;
mod reads;
mod write;

use std::path::Path;
use std::str::FromStr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use sqlx::Row;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};
use uuid::Uuid;

use super::search::Terms;
use super::{
    AppendBatch, ChatDatabaseRecord, ChatFlags, ChatRecord, ChatState, ConnectionRecord,
    ListCursor, Reindexed, SearchHit, Store, StoreError, StoredEnvelope, Tidy, now_ms, rank,
};
use reads::{clamp, envelope_from_row};
use write::blocking;

/// The SQLite store. Cheap to clone (a pool handle and the journal's tail);
/// one process owns the file.
#[derive(Debug, Clone)]
pub struct SqliteStore {
    pool: SqlitePool,
    blobs: files::SqliteBlobs,
    tail: Arc<Mutex<journal::Tail>>,
    /// The connection appends commit on (one at a time: each plans against
    /// the tail the last one left).
    writer: Arc<Mutex<rusqlite::Connection>>,
    /// Chats waiting for the writer's next transaction.
    creates: Arc<write::Creates>,
    /// Webhooks' outbox is written with the log (`Store::enable_outbox`).
    outbox: Arc<std::sync::atomic::AtomicBool>,
    /// This process's lock on the file (see `write::lock`).
    _owner: Arc<std::fs::File>,
    _checkpointer: Arc<checkpoint::Checkpointer>,
}

impl SqliteStore {
    /// Opens (creating the file and its folder if needed) and migrates.
    ///
    /// # Errors
    /// The folder cannot be created, the file cannot be opened, or a migration fails.
    pub async fn open(path: &Path) -> Result<Self, StoreError> {
        write::create_private(path).map_err(|e| StoreError::Io(e.into()))?;
        let owner = write::lock(path)?;
        let options = SqliteConnectOptions::from_str("sqlite://")?
            .filename(path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Full)
            .busy_timeout(Duration::from_secs(10))
            .pragma("wal_autocheckpoint", checkpoint::BACKSTOP_PAGES.to_string())
            .foreign_keys(true);
        let pool = SqlitePoolOptions::new()
            .max_connections(4)
            .connect_with(options)
            .await?;
        super::migrations::sqlite()
            .run(&pool)
            .await
            .map_err(|e| StoreError::Migration(e.into()))?;
        let writer = write::open(path)?;
        let checkpointer = checkpoint::Checkpointer::spawn(path)?;
        Ok(Self {
            blobs: files::SqliteBlobs { pool: pool.clone() },
            pool,
            tail: Arc::new(Mutex::new(journal::Tail::new(1))),
            writer: Arc::new(Mutex::new(writer)),
            creates: Arc::default(),
            outbox: Arc::default(),
            _owner: Arc::new(owner),
            _checkpointer: Arc::new(checkpointer),
        })
    }

    fn tail(&self) -> MutexGuard<'_, journal::Tail> {
        // The tail is only changed after a commit, in one call that cannot
        // panic halfway; a poisoned lock still holds a whole tail.
        self.tail.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn writer(&self) -> MutexGuard<'_, rusqlite::Connection> {
        // A transaction that panicked is rolled back when dropped.
        self.writer.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Commits `batches` with the chats queued for creation and the folds
    /// that are due, on the calling (blocking) thread. With no batches (the
    /// writer is idle), commits only if a fold is due.
    fn commit(&self, batches: &[AppendBatch]) -> Result<Tidy, StoreError> {
        let mut conn = self.writer();
        let creates = self.creates.take();
        let (plan, folded, journaled) = {
            let tail = self.tail();
            let plan = tail.plan(batches, std::time::Instant::now());
            let folded = tail.folded_rows(&plan);
            (plan, folded, !tail.is_empty())
        };
        if batches.is_empty() && plan.folds.is_empty() && plan.delete_below.is_none() {
            write::create(&mut conn, creates);
            return Ok(if journaled { Tidy::Later } else { Tidy::Done });
        }
        let chats = creates.iter().map(|(c, _)| c);
        let outbox = self.outbox.load(std::sync::atomic::Ordering::Relaxed);
        let probed =
            match write::append(&mut conn, chats, &plan, &folded, batches, now_ms(), outbox) {
                Ok(probed) => probed,
                Err(e) => {
                    // The chats are not the batches' fault.
                    write::create(&mut conn, creates);
                    return Err(e.into());
                }
            };
        write::created(creates, &Ok(()));
        let mut tail = self.tail();
        tail.commit(&plan, batches, &probed, std::time::Instant::now());
        Ok(if tail.is_empty() {
            Tidy::Done
        } else {
            Tidy::Again
        })
    }
}

#[async_trait]
impl Store for SqliteStore {
    async fn ping(&self) -> Result<(), StoreError> {
        sqlx::query("SELECT 1").execute(&self.pool).await?;
        Ok(())
    }

    fn service_keys(&self) -> crate::store::ServiceKeys {
        crate::store::ServiceKeys::Sqlite(self.pool.clone())
    }

    fn schedules(&self) -> crate::store::Schedules {
        crate::store::Schedules::Sqlite(self.pool.clone())
    }

    fn outbox(&self) -> crate::store::Outbox {
        crate::store::Outbox::Sqlite(self.pool.clone())
    }

    fn usage(&self) -> crate::store::Usage {
        crate::store::Usage::Sqlite(self.pool.clone())
    }

    fn operations(&self) -> crate::store::Operations {
        crate::store::Operations::Sqlite(self.pool.clone())
    }

    fn enable_outbox(&self) {
        self.outbox
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }

    async fn create_chat(&self, chat: &ChatRecord) -> Result<ChatRecord, StoreError> {
        // Committed by the writer's next transaction (see `write::Creates`).
        let (created, start) = self.creates.push(chat.clone());
        if start {
            let store = self.clone();
            tokio::task::spawn_blocking(move || {
                let mut conn = store.writer();
                write::create(&mut conn, store.creates.take_committing());
            });
        }
        created.await.map_err(|_| StoreError::WriterGone)??;
        // Read back: the row may be someone else's (or an earlier start's).
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
        Ok(rank(hits, limit as usize))
    }

    async fn purge_chat(&self, id: Uuid) -> Result<bool, StoreError> {
        let store = self.clone();
        blocking(move || {
            let mut conn = store.writer(); // Held, as a commit: none plans on a stale tail.
            let purged = maintain::purge(&mut conn, &id)?;
            store.tail().forget(&id);
            Ok(purged)
        })
        .await
    }

    async fn reindex(&self) -> Result<Reindexed, StoreError> {
        let store = self.clone();
        blocking(move || Ok(maintain::reindex(&mut store.writer())?)).await
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

    async fn set_chat_model(&self, id: Uuid, model: Option<&str>) -> Result<(), StoreError> {
        listing::set_model(&self.pool, id, model).await
    }

    async fn chat(&self, id: Uuid) -> Result<Option<ChatRecord>, StoreError> {
        listing::chat(&self.pool, id).await
    }

    async fn append(&self, batches: &[AppendBatch]) -> Result<(), StoreError> {
        let (store, batches) = (self.clone(), batches.to_vec());
        blocking(move || store.commit(&batches).map(drop)).await
    }

    async fn tidy(&self) -> Result<Tidy, StoreError> {
        let store = self.clone();
        blocking(move || store.commit(&[])).await
    }

    async fn load_after(
        &self,
        chat_id: Uuid,
        after: u64,
        limit: u32,
    ) -> Result<Vec<StoredEnvelope>, StoreError> {
        // The tail first: a row folded after this look is in the table by the
        // time the query below reads it (see `journal`).
        let (tail, below) = self.tail().read(&chat_id, after, |_| true);
        let mut rows: Vec<StoredEnvelope> = sqlx::query(
            "SELECT seq, type, payload FROM envelopes
             WHERE chat_id = ? AND seq > ? AND seq < ? ORDER BY seq LIMIT ?",
        )
        .bind(chat_id.to_string())
        .bind(clamp(after))
        .bind(below.map_or(i64::MAX, clamp))
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?
        .iter()
        .map(envelope_from_row)
        .collect::<Result<_, _>>()?;
        rows.extend(tail);
        rows.truncate(limit as usize);
        Ok(rows)
    }

    async fn load_bounded(
        &self,
        chat_id: Uuid,
        after: u64,
        limit: u32,
        max_bytes: usize,
    ) -> Result<(Vec<StoredEnvelope>, bool), StoreError> {
        use futures_util::{StreamExt, TryStreamExt};
        let (tail, below) = self.tail().read(&chat_id, after, |_| true);
        let rows = sqlx::query(
            "SELECT seq, type, payload FROM envelopes
             WHERE chat_id = ? AND seq > ? AND seq < ? ORDER BY seq LIMIT ?",
        )
        .bind(chat_id.to_string())
        .bind(clamp(after))
        .bind(below.map_or(i64::MAX, clamp))
        .bind(i64::from(limit))
        .fetch(&self.pool);
        let envelopes = rows
            .map_err(StoreError::from)
            .and_then(|row| async move { envelope_from_row(&row) })
            .chain(futures_util::stream::iter(tail.into_iter().map(Ok)))
            .take(limit as usize);
        super::take_bounded(envelopes, limit, max_bytes).await
    }

    async fn last(&self, chat_id: Uuid) -> Result<Option<(u64, String)>, StoreError> {
        if let Some(last) = self.tail().read(&chat_id, 0, |_| true).0.pop() {
            return Ok(Some((last.seq, last.kind)));
        }
        let row = sqlx::query(
            "SELECT seq, type FROM envelopes WHERE chat_id = ? ORDER BY seq DESC LIMIT 1",
        )
        .bind(chat_id.to_string())
        .fetch_optional(&self.pool)
        .await?;
        row.map(|r| Ok((r.try_get::<i64, _>("seq")? as u64, r.try_get("type")?)))
            .transpose()
    }

    async fn transcript(&self, chat_id: Uuid) -> Result<Vec<StoredEnvelope>, StoreError> {
        let tail = self
            .tail()
            .read(&chat_id, 0, |e| reads::in_transcript(e.kind));
        reads::transcript(&self.pool, chat_id, tail).await
    }

    async fn branches(&self, chat_id: Uuid) -> Result<Vec<StoredEnvelope>, StoreError> {
        let tail = self.tail().read(&chat_id, 0, |e| e.kind == "chat.branch");
        reads::branches(&self.pool, chat_id, tail).await
    }

    async fn load_ranges(
        &self,
        chat_id: Uuid,
        ranges: &[std::ops::RangeInclusive<u64>],
        max_bytes: usize,
    ) -> Result<Vec<StoredEnvelope>, StoreError> {
        let Some(first) = ranges.first() else {
            return Ok(Vec::new());
        };
        let tail = self
            .tail()
            .read(&chat_id, first.start().saturating_sub(1), |e| {
                ranges.iter().any(|r| r.contains(&e.seq))
            });
        reads::ranges(&self.pool, chat_id, ranges, tail, max_bytes).await
    }

    async fn has_client_msg_id(&self, chat_id: Uuid, id: &str) -> Result<bool, StoreError> {
        let in_tail = !self
            .tail()
            .read(&chat_id, 0, |e| e.client_msg_id.as_deref() == Some(id))
            .0
            .is_empty();
        if in_tail {
            return Ok(true);
        }
        let row =
            sqlx::query("SELECT 1 FROM envelopes WHERE chat_id = ? AND client_msg_id = ? LIMIT 1")
                .bind(chat_id.to_string())
                .bind(id)
                .fetch_optional(&self.pool)
                .await?;
        Ok(row.is_some())
    }

    async fn run_start(&self, chat_id: Uuid, at: u64) -> Result<u64, StoreError> {
        let in_tail = self
            .tail()
            .read(&chat_id, 0, |e| e.kind == "chat.run_complete" && e.seq < at)
            .0
            .pop();
        if let Some(end) = in_tail {
            return Ok(end.seq + 1);
        }
        let last: Option<i64> = sqlx::query_scalar(
            "SELECT MAX(seq) FROM envelopes
             WHERE chat_id = ? AND type = 'chat.run_complete' AND seq < ?",
        )
        .bind(chat_id.to_string())
        .bind(i64::try_from(at).unwrap_or(i64::MAX))
        .fetch_one(&self.pool)
        .await?;
        Ok(last.map_or(1, |s| s as u64 + 1))
    }

    async fn last_tool_call(
        &self,
        chat_id: Uuid,
        corr: &str,
    ) -> Result<Option<StoredEnvelope>, StoreError> {
        let in_tail = self
            .tail()
            .read(&chat_id, 0, |e| {
                e.kind == "chat.tool_call" && e.corr.as_deref() == Some(corr)
            })
            .0
            .pop();
        if in_tail.is_some() {
            return Ok(in_tail);
        }
        sqlx::query(
            "SELECT seq, type, payload FROM envelopes
             WHERE chat_id = ? AND corr = ? AND type = 'chat.tool_call'
             ORDER BY seq DESC LIMIT 1",
        )
        .bind(chat_id.to_string())
        .bind(corr)
        .fetch_optional(&self.pool)
        .await?
        .as_ref()
        .map(envelope_from_row)
        .transpose()
    }

    async fn put_answer(&self, chat_id: Uuid, corr: &str, answer: &str) -> Result<(), StoreError> {
        reads::put_answer(&self.pool, chat_id, corr, answer).await
    }

    async fn answer(&self, chat_id: Uuid, corr: &str) -> Result<Option<String>, StoreError> {
        reads::answer(&self.pool, chat_id, corr).await
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

    async fn chats_in_state(&self, state: ChatState) -> Result<Vec<Uuid>, StoreError> {
        let rows = sqlx::query("SELECT id FROM chats WHERE state = ?")
            .bind(state.as_str())
            .fetch_all(&self.pool)
            .await?;
        rows.iter()
            .map(|r| {
                let id: String = r.try_get("id")?;
                Uuid::parse_str(&id).map_err(|e| sqlx::Error::Decode(e.into()).into())
            })
            .collect()
    }
}
