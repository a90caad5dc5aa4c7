//! The embedded store: one SQLite file in WAL mode.
//!
//! Writes come from one [`LogWriter`](super::LogWriter) task, so SQLite's single
//! writer is never contended by ourselves; readers run beside it (WAL).
//! `synchronous=FULL`: a commit survives power loss, not only a process crash,
//! because a client may already have seen what it committed. Group commit is
//! what keeps that affordable.

mod databases;

use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use async_trait::async_trait;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteRow,
    SqliteSynchronous,
};
use sqlx::{QueryBuilder, Row, Sqlite};
use uuid::Uuid;

use super::{
    AppendBatch, ChatDatabaseRecord, ChatRecord, ChatState, ConnectionRecord, NewEnvelope, Store,
    StoreError, StoredEnvelope,
};

/// Most rows in one multi-row INSERT (7 variables a row; SQLite allows 32766).
const ROWS_PER_INSERT: usize = 1000;

/// The SQLite store. Cheap to clone (a pool handle).
#[derive(Debug, Clone)]
pub struct SqliteStore {
    pool: SqlitePool,
}

impl SqliteStore {
    /// Opens (creating the file and its folder if needed) and migrates.
    ///
    /// # Errors
    /// The folder cannot be created, the file cannot be opened, or a migration fails.
    pub async fn open(path: &Path) -> Result<Self, StoreError> {
        create_private(path).map_err(|e| StoreError::Io(e.into()))?;
        let options = SqliteConnectOptions::from_str("sqlite://")?
            .filename(path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Full)
            .busy_timeout(Duration::from_secs(10))
            .foreign_keys(true);
        let pool = SqlitePoolOptions::new()
            .max_connections(4)
            .connect_with(options)
            .await?;
        super::migrations::sqlite()
            .run(&pool)
            .await
            .map_err(|e| StoreError::Migration(e.into()))?;
        Ok(Self { pool })
    }
}

/// Creates the database's folder (0700) and file (0600) when they do not
/// exist yet: the log holds every conversation, so only the server's user may
/// read it. SQLite gives its `-wal` and `-shm` files the database file's mode.
fn create_private(path: &Path) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)?;
        }
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(path)
        {
            Ok(_) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
            Err(e) => Err(e),
        }
    }
    #[cfg(not(unix))]
    {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)?;
        }
        Ok(())
    }
}

fn chat_from_row(row: &SqliteRow) -> Result<ChatRecord, StoreError> {
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
    })
}

fn envelope_from_row(row: &SqliteRow) -> Result<StoredEnvelope, StoreError> {
    let seq: i64 = row.try_get("seq")?;
    Ok(StoredEnvelope {
        seq: seq as u64,
        kind: row.try_get("type")?,
        json: row.try_get("payload")?,
    })
}

fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

#[async_trait]
impl Store for SqliteStore {
    async fn ping(&self) -> Result<(), StoreError> {
        sqlx::query("SELECT 1").execute(&self.pool).await?;
        Ok(())
    }

    async fn create_chat(&self, chat: &ChatRecord) -> Result<ChatRecord, StoreError> {
        sqlx::query(
            "INSERT INTO chats (id, owner, agent, state, context, created_at, updated_at)
             VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING",
        )
        .bind(chat.id.to_string())
        .bind(&chat.owner)
        .bind(&chat.agent)
        .bind(chat.state.as_str())
        .bind(&chat.context)
        .bind(chat.created_at)
        .bind(chat.created_at)
        .execute(&self.pool)
        .await?;
        // Read back: the row may be someone else's (or an earlier start's).
        self.chat(chat.id)
            .await?
            .ok_or_else(|| sqlx::Error::RowNotFound.into())
    }

    async fn archive_chat(&self, id: Uuid) -> Result<(), StoreError> {
        sqlx::query("UPDATE chats SET archived = 1, updated_at = ? WHERE id = ?")
            .bind(now_ms())
            .bind(id.to_string())
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn list_chats(
        &self,
        owner: &str,
        before: Option<(i64, Uuid)>,
        limit: u32,
    ) -> Result<Vec<ChatRecord>, StoreError> {
        // Keyset pagination on (created_at, id), newest first.
        let (at, id) = before.map_or((i64::MAX, String::new()), |(at, id)| (at, id.to_string()));
        sqlx::query(
            "SELECT * FROM chats WHERE owner = ?
               AND (created_at < ? OR (created_at = ? AND (? = '' OR id < ?)))
             ORDER BY created_at DESC, id DESC LIMIT ?",
        )
        .bind(owner)
        .bind(at)
        .bind(at)
        .bind(&id)
        .bind(&id)
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?
        .iter()
        .map(chat_from_row)
        .collect()
    }

    async fn set_chat_model(&self, id: Uuid, model: Option<&str>) -> Result<(), StoreError> {
        sqlx::query("UPDATE chats SET model = ?, updated_at = ? WHERE id = ?")
            .bind(model)
            .bind(now_ms())
            .bind(id.to_string())
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn chat(&self, id: Uuid) -> Result<Option<ChatRecord>, StoreError> {
        sqlx::query("SELECT * FROM chats WHERE id = ?")
            .bind(id.to_string())
            .fetch_optional(&self.pool)
            .await?
            .as_ref()
            .map(chat_from_row)
            .transpose()
    }

    async fn append(&self, batches: &[AppendBatch]) -> Result<(), StoreError> {
        let mut tx = self.pool.begin().await?;
        // Every value is bound by reference: no copy per row.
        let ids: Vec<String> = batches.iter().map(|b| b.chat_id.to_string()).collect();
        let rows: Vec<(&str, &NewEnvelope)> = batches
            .iter()
            .zip(&ids)
            .flat_map(|(b, id)| b.envelopes.iter().map(move |e| (id.as_str(), e)))
            .collect();
        for chunk in rows.chunks(ROWS_PER_INSERT) {
            let mut q = QueryBuilder::<Sqlite>::new(
                "INSERT INTO envelopes (chat_id, seq, type, ts, corr, client_msg_id, payload) ",
            );
            q.push_values(chunk, |mut b, (chat_id, e)| {
                b.push_bind(*chat_id)
                    .push_bind(e.seq as i64)
                    .push_bind(e.kind)
                    .push_bind(e.ts_ms)
                    .push_bind(e.corr.as_deref())
                    .push_bind(e.client_msg_id.as_deref())
                    .push_bind(&*e.json);
            });
            q.build().execute(&mut *tx).await?;
        }
        let now = now_ms();
        for b in batches {
            if let Some(state) = b.state {
                sqlx::query("UPDATE chats SET state = ?, updated_at = ? WHERE id = ?")
                    .bind(state.as_str())
                    .bind(now)
                    .bind(b.chat_id.to_string())
                    .execute(&mut *tx)
                    .await?;
            }
            if let Some(cs) = b.conversation_state {
                sqlx::query("UPDATE chats SET conversation_state = ?, updated_at = ? WHERE id = ?")
                    .bind(cs)
                    .bind(now)
                    .bind(b.chat_id.to_string())
                    .execute(&mut *tx)
                    .await?;
            }
        }
        tx.commit().await?;
        Ok(())
    }

    async fn load_after(
        &self,
        chat_id: Uuid,
        after: u64,
        limit: u32,
    ) -> Result<Vec<StoredEnvelope>, StoreError> {
        sqlx::query(
            "SELECT seq, type, payload FROM envelopes
             WHERE chat_id = ? AND seq > ? ORDER BY seq LIMIT ?",
        )
        .bind(chat_id.to_string())
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
             WHERE chat_id = ? AND seq > ? ORDER BY seq LIMIT ?",
        )
        .bind(chat_id.to_string())
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
            "SELECT seq, type FROM envelopes WHERE chat_id = ? ORDER BY seq DESC LIMIT 1",
        )
        .bind(chat_id.to_string())
        .fetch_optional(&self.pool)
        .await?;
        row.map(|r| Ok((r.try_get::<i64, _>("seq")? as u64, r.try_get("type")?)))
            .transpose()
    }

    async fn transcript(&self, chat_id: Uuid) -> Result<Vec<StoredEnvelope>, StoreError> {
        sqlx::query(
            "SELECT seq, type, payload FROM envelopes
             WHERE chat_id = ? AND type IN ('chat.text', 'chat.tool_call', 'chat.tool_response') ORDER BY seq",
        )
        .bind(chat_id.to_string())
        .fetch_all(&self.pool)
        .await?
        .iter()
        .map(envelope_from_row)
        .collect()
    }

    async fn has_client_msg_id(&self, chat_id: Uuid, id: &str) -> Result<bool, StoreError> {
        let row =
            sqlx::query("SELECT 1 FROM envelopes WHERE chat_id = ? AND client_msg_id = ? LIMIT 1")
                .bind(chat_id.to_string())
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
        sqlx::query(
            "INSERT INTO template_answers (chat_id, corr, answer) VALUES (?, ?, ?)
             ON CONFLICT (chat_id, corr) DO UPDATE SET answer = excluded.answer",
        )
        .bind(chat_id.to_string())
        .bind(corr)
        .bind(answer)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn answer(&self, chat_id: Uuid, corr: &str) -> Result<Option<String>, StoreError> {
        Ok(
            sqlx::query_scalar(
                "SELECT answer FROM template_answers WHERE chat_id = ? AND corr = ?",
            )
            .bind(chat_id.to_string())
            .bind(corr)
            .fetch_optional(&self.pool)
            .await?,
        )
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
