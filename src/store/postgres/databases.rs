//! PostgreSQL's SQL for users' databases (seed 003): their
//! connections and the database each chat talks to.

use sqlx::Row;
use sqlx::postgres::{PgPool, PgRow};
use uuid::Uuid;

use crate::store::{ChatDatabaseRecord, ConnectionRecord, StoreError};

pub(super) async fn put_connection(
    pool: &PgPool,
    c: &ConnectionRecord,
) -> Result<bool, StoreError> {
    let done = sqlx::query(
        "INSERT INTO connections (id, owner, spec, secret, created_at, updated_at)
         VALUES ($1, $2, $3, $4, $5, $6)
         ON CONFLICT (id) DO UPDATE SET spec = excluded.spec, secret = excluded.secret,
             updated_at = excluded.updated_at
         WHERE connections.owner = excluded.owner",
    )
    .bind(c.id)
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
    pool: &PgPool,
    c: &ConnectionRecord,
) -> Result<bool, StoreError> {
    let done = sqlx::query(
        "UPDATE connections SET spec = $1, secret = $2, updated_at = $3
         WHERE id = $4 AND owner = $5",
    )
    .bind(&c.spec)
    .bind(c.secret.as_deref())
    .bind(c.updated_at)
    .bind(c.id)
    .bind(&c.owner)
    .execute(pool)
    .await?;
    Ok(done.rows_affected() == 1)
}

pub(super) async fn connections(
    pool: &PgPool,
    owner: &str,
) -> Result<Vec<ConnectionRecord>, StoreError> {
    let rows = sqlx::query(
        "SELECT id, owner, spec, secret, created_at, updated_at FROM connections
         WHERE owner = $1 ORDER BY created_at, id",
    )
    .bind(owner)
    .fetch_all(pool)
    .await?;
    rows.iter().map(connection_from_row).collect()
}

pub(super) async fn connection(
    pool: &PgPool,
    owner: &str,
    id: Uuid,
) -> Result<Option<ConnectionRecord>, StoreError> {
    sqlx::query(
        "SELECT id, owner, spec, secret, created_at, updated_at FROM connections
         WHERE owner = $1 AND id = $2",
    )
    .bind(owner)
    .bind(id)
    .fetch_optional(pool)
    .await?
    .as_ref()
    .map(connection_from_row)
    .transpose()
}

pub(super) async fn delete_connection(
    pool: &PgPool,
    owner: &str,
    id: Uuid,
) -> Result<bool, StoreError> {
    let done = sqlx::query("DELETE FROM connections WHERE owner = $1 AND id = $2")
        .bind(owner)
        .bind(id)
        .execute(pool)
        .await?;
    Ok(done.rows_affected() == 1)
}

pub(super) async fn put_chat_database(
    pool: &PgPool,
    chat_id: Uuid,
    connection_id: Uuid,
    db_schema: &str,
) -> Result<(), StoreError> {
    sqlx::query(
        // Only while the chat exists (its row share-locked, so a purge
        // waits for this or this sees the purge): a binding whose schema
        // read outlasted the chat's purge is dropped, not left for a chat
        // reusing the id.
        "INSERT INTO chat_databases (chat_id, connection_id, db_schema, sql_result)
         SELECT $1, $2, $3, NULL FROM chats WHERE id = $1 FOR SHARE
         ON CONFLICT (chat_id) DO UPDATE SET connection_id = excluded.connection_id,
             db_schema = excluded.db_schema, sql_result = NULL",
    )
    .bind(chat_id)
    .bind(connection_id)
    .bind(db_schema)
    .execute(pool)
    .await?;
    Ok(())
}

pub(super) async fn put_sql_result(
    pool: &PgPool,
    chat_id: Uuid,
    connection_id: Uuid,
    sql_result: &str,
) -> Result<bool, StoreError> {
    let done = sqlx::query(
        "UPDATE chat_databases SET sql_result = $1 WHERE chat_id = $2 AND connection_id = $3",
    )
    .bind(sql_result)
    .bind(chat_id)
    .bind(connection_id)
    .execute(pool)
    .await?;
    Ok(done.rows_affected() == 1)
}

pub(super) async fn chat_database(
    pool: &PgPool,
    chat_id: Uuid,
) -> Result<Option<ChatDatabaseRecord>, StoreError> {
    let Some(r) = sqlx::query(
        "SELECT connection_id, db_schema, sql_result FROM chat_databases WHERE chat_id = $1",
    )
    .bind(chat_id)
    .fetch_optional(pool)
    .await?
    else {
        return Ok(None);
    };
    Ok(Some(ChatDatabaseRecord {
        connection_id: r.try_get("connection_id")?,
        db_schema: r.try_get("db_schema")?,
        sql_result: r.try_get("sql_result")?,
    }))
}

fn connection_from_row(r: &PgRow) -> Result<ConnectionRecord, StoreError> {
    Ok(ConnectionRecord {
        id: r.try_get("id")?,
        owner: r.try_get("owner")?,
        spec: r.try_get("spec")?,
        secret: r.try_get("secret")?,
        created_at: r.try_get("created_at")?,
        updated_at: r.try_get("updated_at")?,
    })
}
