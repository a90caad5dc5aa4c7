//! PostgreSQL's files and blobs (`migrations/postgres/0009_files.sql`).

use async_trait::async_trait;
use sqlx::Row;
use sqlx::postgres::{PgPool, PgRow};
use uuid::Uuid;

use crate::store::StoreError;
use crate::store::files::{Blobs, FileRecord, Kept, Put, staged};

/// The contents of files, in the log's own database.
#[derive(Debug, Clone)]
pub(super) struct PgBlobs {
    pub(super) pool: PgPool,
}

#[async_trait]
impl Blobs for PgBlobs {
    async fn stage_chunk(
        &self,
        owner: &str,
        upload: Uuid,
        idx: u32,
        data: &[u8],
    ) -> Result<(), StoreError> {
        sqlx::query("INSERT INTO blob_chunks (owner, blob, idx, data) VALUES ($1, $2, $3, $4)")
            .bind(owner)
            .bind(staged(upload))
            .bind(i32::try_from(idx).unwrap_or(i32::MAX))
            .bind(data)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn discard(&self, owner: &str, upload: Uuid) -> Result<(), StoreError> {
        sqlx::query("DELETE FROM blob_chunks WHERE owner = $1 AND blob = $2")
            .bind(owner)
            .bind(staged(upload))
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn chunk(
        &self,
        owner: &str,
        sha256: &str,
        idx: u32,
    ) -> Result<Option<Vec<u8>>, StoreError> {
        let row =
            sqlx::query("SELECT c.data FROM blobs b JOIN blob_chunks c ON c.owner = b.owner AND c.blob = b.chunks
             WHERE b.owner = $1 AND b.sha256 = $2 AND c.idx = $3")
                .bind(owner)
                .bind(sha256)
                .bind(i32::try_from(idx).unwrap_or(i32::MAX))
                .fetch_optional(&self.pool)
                .await?;
        Ok(row.map(|r| r.try_get("data")).transpose()?)
    }

    async fn has(&self, owner: &str, sha256: &str) -> Result<bool, StoreError> {
        let row = sqlx::query("SELECT 1 FROM blobs WHERE owner = $1 AND sha256 = $2")
            .bind(owner)
            .bind(sha256)
            .fetch_optional(&self.pool)
            .await?;
        Ok(row.is_some())
    }

    async fn owner_bytes(&self, owner: &str) -> Result<u64, StoreError> {
        let total: Option<i64> =
            sqlx::query("SELECT SUM(size)::BIGINT FROM blobs WHERE owner = $1")
                .bind(owner)
                .fetch_one(&self.pool)
                .await?
                .try_get(0)?;
        Ok(total.unwrap_or(0).max(0) as u64)
    }
}

/// Records `file` unless its chat is another user's (the chat's row, if
/// there is one, share-locked, so a purge waits or is seen), with `upload`'s chunks as its blob, or the
/// blob the owner has (its row locked: a purge that would drop it waits for
/// this, and then sees the file; one that dropped it first leaves this to
/// insert it again, with its own chunks).
pub(super) async fn put_file(
    pool: &PgPool,
    file: &FileRecord,
    put: Put,
) -> Result<Kept, StoreError> {
    let mut tx = pool.begin().await?;
    // One upload of the owner's at a time records (the quota below counts
    // what the others recorded), whatever node takes it.
    sqlx::query("SELECT pg_advisory_xact_lock(hashtextextended('agentwire.files:' || $1, 0))")
        .bind(&file.owner)
        .execute(&mut *tx)
        .await?;
    // A purge of the chat going on is waited for (then the chat is gone,
    // and the file waits for a chat of that id as an early upload does).
    sqlx::query("SELECT 1 FROM chats WHERE id = $1 FOR SHARE")
        .bind(file.chat_id)
        .fetch_optional(&mut *tx)
        .await?;
    let recorded = sqlx::query(
        "INSERT INTO files (id, owner, chat_id, name, media_type, size, sha256, created_at)
         SELECT $1, $2, $3, $4, $5, $6, $7, $8
         WHERE NOT EXISTS (SELECT 1 FROM chats WHERE id = $3 AND owner <> $2)",
    )
    .bind(file.id)
    .bind(&file.owner)
    .bind(file.chat_id)
    .bind(&file.name)
    .bind(&file.media_type)
    .bind(file.size as i64)
    .bind(&file.sha256)
    .bind(file.created_at)
    .execute(&mut *tx)
    .await?
    .rows_affected()
        == 1;
    if !recorded {
        return Ok(Kept::ChatTaken);
    }
    let new: bool = sqlx::query_scalar(
        "INSERT INTO blobs (owner, sha256, size, chunks) VALUES ($1, $2, $3, $4)
         ON CONFLICT (owner, sha256) DO UPDATE SET size = blobs.size
         RETURNING (xmax = 0)",
    )
    .bind(&file.owner)
    .bind(&file.sha256)
    .bind(file.size as i64)
    .bind(staged(put.upload))
    .fetch_one(&mut *tx)
    .await?;
    if new {
        let total: i64 =
            sqlx::query_scalar("SELECT COALESCE(SUM(size), 0)::BIGINT FROM blobs WHERE owner = $1")
                .bind(&file.owner)
                .fetch_one(&mut *tx)
                .await?;
        if total.max(0) as u64 > put.max_owner_bytes {
            tx.rollback().await?;
            return Ok(Kept::OverQuota(total.max(0) as u64));
        }
    } else {
        sqlx::query("DELETE FROM blob_chunks WHERE owner = $1 AND blob = $2")
            .bind(&file.owner)
            .bind(staged(put.upload))
            .execute(&mut *tx)
            .await?;
    }
    tx.commit().await?;
    Ok(Kept::Recorded)
}

/// Deletes the chunks staged more than `older_than` ago that no blob names.
pub(super) async fn sweep_staged(
    pool: &PgPool,
    older_than: std::time::Duration,
) -> Result<u64, StoreError> {
    let seconds = older_than.as_secs_f64();
    Ok(sqlx::query(
        "DELETE FROM blob_chunks c
         WHERE c.staged_at < now() - make_interval(secs => $1)
           AND NOT EXISTS (SELECT 1 FROM blobs b WHERE b.owner = c.owner AND b.chunks = c.blob)",
    )
    .bind(seconds)
    .execute(pool)
    .await?
    .rows_affected())
}

pub(super) async fn file(pool: &PgPool, id: Uuid) -> Result<Option<FileRecord>, StoreError> {
    sqlx::query("SELECT * FROM files WHERE id = $1")
        .bind(id)
        .fetch_optional(pool)
        .await?
        .map(|r| file_from_row(&r))
        .transpose()
}

fn file_from_row(row: &PgRow) -> Result<FileRecord, StoreError> {
    let uuid = |col: &str| -> Result<Uuid, StoreError> { Ok(row.try_get(col)?) };
    let size: i64 = row.try_get("size")?;
    Ok(FileRecord {
        id: uuid("id")?,
        owner: row.try_get("owner")?,
        chat_id: uuid("chat_id")?,
        name: row.try_get("name")?,
        media_type: row.try_get("media_type")?,
        size: size.max(0) as u64,
        sha256: row.try_get("sha256")?,
        created_at: row.try_get("created_at")?,
    })
}
