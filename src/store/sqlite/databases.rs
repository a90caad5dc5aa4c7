//! SQLite's SQL for users' databases (seed 003): their
//! connections and the database each chat talks to.

use sqlx::Row;
use sqlx::sqlite::{SqlitePool, SqliteRow};
use uuid::Uuid;

use crate::store::{ChatDatabaseRecord, ConnectionRecord, StoreError};

pub(super) async fn put_connection(
    pool: &SqlitePool,
    c: &ConnectionRecord,
) -> Result<bool, StoreError> {
    let done = sqlx::query(
        "INSERT INTO connections (id, owner, spec, secret, created_at, updated_at)
         VALUES (?, ?, ?, ?, ?, ?)
         ON CONFLICT (id) DO UPDATE SET spec = excluded.spec, secret = excluded.secret,
             updated_at = excluded.updated_at
         WHERE connections.owner = excluded.owner",
    )
    .bind(c.id.to_string())
    .bind(&c.owner)
    .bind(&c.spec)
    .bind(c.secret.as_deref())
    .bind(c.created_at)
    .bind(c.updated_at)
    .execute(pool)
    .await?;
    Ok(done.rows_affected() == 1)
}

pub(super) async fn update_connection(
    pool: &SqlitePool,
    c: &ConnectionRecord,
) -> Result<bool, StoreError> {
    let done = sqlx::query(
        "UPDATE connections SET spec = ?, secret = ?, updated_at = ?
         WHERE id = ? AND owner = ?",
    )
    .bind(&c.spec)
    .bind(c.secret.as_deref())
    .bind(c.updated_at)
    .bind(c.id.to_string())
    .bind(&c.owner)
    .execute(pool)
    .await?;
    Ok(done.rows_affected() == 1)
}

pub(super) async fn connections(
    pool: &SqlitePool,
    owner: &str,
) -> Result<Vec<ConnectionRecord>, StoreError> {
    let rows = sqlx::query(
        "SELECT id, owner, spec, secret, created_at, updated_at FROM connections
         WHERE owner = ? ORDER BY created_at, id",
    )
    .bind(owner)
    .fetch_all(pool)
    .await?;
    rows.iter().map(connection_from_row).collect()
}

pub(super) async fn connection(
    pool: &SqlitePool,
    owner: &str,
    id: Uuid,
) -> Result<Option<ConnectionRecord>, StoreError> {
    sqlx::query(
        "SELECT id, owner, spec, secret, created_at, updated_at FROM connections
         WHERE owner = ? AND id = ?",
    )
    .bind(owner)
    .bind(id.to_string())
    .fetch_optional(pool)
    .await?
    .as_ref()
    .map(connection_from_row)
    .transpose()
}

pub(super) async fn delete_connection(
    pool: &SqlitePool,
    owner: &str,
    id: Uuid,
) -> Result<bool, StoreError> {
    let done = sqlx::query("DELETE FROM connections WHERE owner = ? AND id = ?")
        .bind(owner)
        .bind(id.to_string())
        .execute(pool)
        .await?;
    Ok(done.rows_affected() == 1)
}

pub(super) async fn put_chat_database(
    pool: &SqlitePool,
    chat_id: Uuid,
    connection_id: Uuid,
    db_schema: &str,
) -> Result<(), StoreError> {
    sqlx::query(
        // Only while the chat exists: a binding whose schema read outlasted
        // the chat's purge is dropped, not left for a chat reusing the id.
        "INSERT INTO chat_databases (chat_id, connection_id, db_schema, sql_result)
         SELECT ?1, ?2, ?3, NULL WHERE EXISTS (SELECT 1 FROM chats WHERE id = ?1)
         ON CONFLICT (chat_id) DO UPDATE SET connection_id = excluded.connection_id,
             db_schema = excluded.db_schema, sql_result = NULL",
    )
    .bind(chat_id.to_string())
    .bind(connection_id.to_string())
    .bind(db_schema)
    .execute(pool)
    .await?;
    Ok(())
}

pub(super) async fn put_sql_result(
    pool: &SqlitePool,
    chat_id: Uuid,
    connection_id: Uuid,
    sql_result: &str,
) -> Result<bool, StoreError> {
    let done = sqlx::query(
        "UPDATE chat_databases SET sql_result = ? WHERE chat_id = ? AND connection_id = ?",
    )
    .bind(sql_result)
    .bind(chat_id.to_string())
    .bind(connection_id.to_string())
    .execute(pool)
    .await?;
    Ok(done.rows_affected() == 1)
}

pub(super) async fn chat_database(
    pool: &SqlitePool,
    chat_id: Uuid,
) -> Result<Option<ChatDatabaseRecord>, StoreError> {
    let Some(r) = sqlx::query(
        "SELECT connection_id, db_schema, sql_result FROM chat_databases WHERE chat_id = ?",
    )
    .bind(chat_id.to_string())
    .fetch_optional(pool)
    .await?
    else {
        return Ok(None);
    };
    let id: String = r.try_get("connection_id")?;
    Ok(Some(ChatDatabaseRecord {
        connection_id: Uuid::parse_str(&id).map_err(|e| sqlx::Error::Decode(e.into()))?,
        db_schema: r.try_get("db_schema")?,
        sql_result: r.try_get("sql_result")?,
    }))
}

fn connection_from_row(r: &SqliteRow) -> Result<ConnectionRecord, StoreError> {
    let id: String = r.try_get("id")?;
    Ok(ConnectionRecord {
        id: Uuid::parse_str(&id).map_err(|e| sqlx::Error::Decode(e.into()))?,
        owner: r.try_get("owner")?,
        spec: r.try_get("spec")?,
        secret: r.try_get("secret")?,
        created_at: r.try_get("created_at")?,
        updated_at: r.try_get("updated_at")?,
    })
}
