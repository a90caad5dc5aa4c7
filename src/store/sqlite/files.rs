//! SQLite's files and blobs (`migrations/sqlite/0011_files.sql`): each
//! chunk its own short transaction on the pool, and the file's record a
//! few rows, so an upload never holds the write lock the log's commits need
//! for longer than one chunk.

use async_trait::async_trait;
use sqlx::Row;
use sqlx::sqlite::{SqlitePool, SqliteRow};
use uuid::Uuid;

use crate::store::StoreError;
use crate::store::files::{Blobs, FileRecord, Kept, Put, staged};

/// The contents of files, in the log's own database.
#[derive(Debug, Clone)]
pub(super) struct SqliteBlobs {
    pub(super) pool: SqlitePool,
}

#[async_trait]
impl Blobs for SqliteBlobs {
    async fn stage_chunk(
        &self,
        owner: &str,
        upload: Uuid,
        idx: u32,
        data: &[u8],
    ) -> Result<(), StoreError> {
        sqlx::query("INSERT INTO blob_chunks (owner, blob, idx, data) VALUES (?, ?, ?, ?)")
            .bind(owner)
            .bind(staged(upload))
            .bind(i64::from(idx))
            .bind(data)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn discard(&self, owner: &str, upload: Uuid) -> Result<(), StoreError> {
        sqlx::query("DELETE FROM blob_chunks WHERE owner = ? AND blob = ?")
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
             WHERE b.owner = ? AND b.sha256 = ? AND c.idx = ?")
                .bind(owner)
                .bind(sha256)
                .bind(i64::from(idx))
                .fetch_optional(&self.pool)
                .await?;
        Ok(row.map(|r| r.try_get("data")).transpose()?)
    }

    async fn has(&self, owner: &str, sha256: &str) -> Result<bool, StoreError> {
        let row = sqlx::query("SELECT 1 FROM blobs WHERE owner = ? AND sha256 = ?")
            .bind(owner)
            .bind(sha256)
            .fetch_optional(&self.pool)
            .await?;
        Ok(row.is_some())
    }

    async fn owner_bytes(&self, owner: &str) -> Result<u64, StoreError> {
        let total: Option<i64> = sqlx::query("SELECT SUM(size) FROM blobs WHERE owner = ?")
            .bind(owner)
            .fetch_one(&self.pool)
            .await?
            .try_get(0)?;
        Ok(total.unwrap_or(0).max(0) as u64)
    }
}

/// Records `file` if its chat exists and is its owner's, with `upload`'s
/// chunks as its blob (never renamed, so a large file is not rewritten; the
/// same content again: dropped). One transaction, on SQLite's one writer.
pub(super) async fn put_file(
    pool: &SqlitePool,
    file: &FileRecord,
    put: Put,
) -> Result<Kept, StoreError> {
    let mut tx = pool.begin().await?;
    // The first statement writes: the transaction holds SQLite's one write
    // lock from here, so the quota read below sees every other upload.
    let recorded = sqlx::query(
        "INSERT INTO files (id, owner, chat_id, name, media_type, size, sha256, created_at)
         SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8
         WHERE NOT EXISTS (SELECT 1 FROM chats WHERE id = ?3 AND owner <> ?2)",
    )
    .bind(file.id.to_string())
    .bind(&file.owner)
    .bind(file.chat_id.to_string())
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
    let new = sqlx::query(
        "INSERT INTO blobs (owner, sha256, size, chunks) VALUES (?, ?, ?, ?)
         ON CONFLICT DO NOTHING",
    )
    .bind(&file.owner)
    .bind(&file.sha256)
    .bind(file.size as i64)
    .bind(staged(put.upload))
    .execute(&mut *tx)
    .await?
    .rows_affected()
        == 1;
    if new {
        let total: i64 =
            sqlx::query_scalar("SELECT COALESCE(SUM(size), 0) FROM blobs WHERE owner = ?")
                .bind(&file.owner)
                .fetch_one(&mut *tx)
                .await?;
        if total.max(0) as u64 > put.max_owner_bytes {
            tx.rollback().await?;
            return Ok(Kept::OverQuota(total.max(0) as u64));
        }
    } else {
        sqlx::query("DELETE FROM blob_chunks WHERE owner = ? AND blob = ?")
            .bind(&file.owner)
            .bind(staged(put.upload))
            .execute(&mut *tx)
            .await?;
    }
    tx.commit().await?;
    Ok(Kept::Recorded)
}

pub(super) async fn file(pool: &SqlitePool, id: Uuid) -> Result<Option<FileRecord>, StoreError> {
    sqlx::query("SELECT * FROM files WHERE id = ?")
        .bind(id.to_string())
        .fetch_optional(pool)
        .await?
        .map(|r| file_from_row(&r))
        .transpose()
}

fn file_from_row(row: &SqliteRow) -> Result<FileRecord, StoreError> {
    let uuid = |col: &str| -> Result<Uuid, StoreError> {
        let text: String = row.try_get(col)?;
        Ok(Uuid::parse_str(&text).map_err(|e| sqlx::Error::Decode(e.into()))?)
    };
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
