//! Service keys: a backend's credentials, with scopes. The store keeps a
//! key's SHA-256, never the key (`auth::keys` makes and checks keys).
//!
//! Both backends keep them in `service_keys`; this handle holds a pool of
//! either, so `agentwire keys …` can manage them beside a running server
//! (the embedded store's file lock is not taken).

use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use sqlx::Row;
use sqlx::postgres::PgPool;
use sqlx::sqlite::{SqliteConnectOptions, SqlitePool, SqlitePoolOptions};
use uuid::Uuid;

use super::pools::{changed, on_pool};
use super::{StoreError, now_ms};

/// A service key as stored (without the key).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ServiceKeyRecord {
    pub id: Uuid,
    pub name: String,
    pub scopes: Vec<String>,
    /// Unix ms.
    pub created_at: i64,
    /// Unix ms, once revoked.
    pub revoked_at: Option<i64>,
}

/// The service keys of one store.
#[derive(Debug, Clone)]
pub enum ServiceKeys {
    Sqlite(SqlitePool),
    Postgres(PgPool),
}

const COLUMNS: &str = "id, name, scopes, created_at, revoked_at";

impl ServiceKeys {
    /// The keys of the SQLite file at `path`, beside the server that may
    /// hold it (whose start-up migrated it).
    ///
    /// # Errors
    /// The file cannot be opened.
    pub async fn open_sqlite(path: &Path) -> Result<Self, StoreError> {
        let options = SqliteConnectOptions::from_str("sqlite://")?
            .filename(path)
            .busy_timeout(Duration::from_secs(10));
        let pool = SqlitePoolOptions::new()
            .max_connections(1)
            .connect_with(options)
            .await?;
        Ok(Self::Sqlite(pool))
    }

    /// Stores a new key.
    ///
    /// # Errors
    /// A live key already has `name` (a database error naming the index),
    /// or the store fails.
    pub async fn create(
        &self,
        name: &str,
        hash: &str,
        scopes: &[String],
    ) -> Result<ServiceKeyRecord, StoreError> {
        let record = ServiceKeyRecord {
            id: Uuid::new_v4(),
            name: name.to_owned(),
            scopes: scopes.to_vec(),
            created_at: now_ms(),
            revoked_at: None,
        };
        let sql = "INSERT INTO service_keys (id, name, hash, scopes, created_at)
                   VALUES ($1, $2, $3, $4, $5)";
        let (id, joined) = (record.id.to_string(), scopes.join(","));
        on_pool!(
            self,
            sql,
            [&id, name, hash, &joined, record.created_at],
            execute,
            |_| ()
        );
        Ok(record)
    }

    /// Every key, revoked ones too, oldest first.
    ///
    /// # Errors
    /// The store fails.
    pub async fn list(&self) -> Result<Vec<ServiceKeyRecord>, StoreError> {
        let sql = format!("SELECT {COLUMNS} FROM service_keys ORDER BY created_at, id");
        on_pool!(self, sql, [], fetch_all, |rows: Vec<_>| rows
            .iter()
            .map(record)
            .collect())
    }

    /// Revokes the live key with this id or name.
    ///
    /// # Returns
    /// Whether a live key was revoked.
    ///
    /// # Errors
    /// The store fails.
    pub async fn revoke(&self, id_or_name: &str) -> Result<bool, StoreError> {
        let sql = "UPDATE service_keys SET revoked_at = $1
                   WHERE revoked_at IS NULL AND (id = $2 OR name = $2)";
        let n = on_pool!(self, sql, [now_ms(), id_or_name], execute, changed);
        Ok(n > 0)
    }

    /// The live key whose hash is `hash`.
    ///
    /// # Errors
    /// The store fails.
    pub async fn find(&self, hash: &str) -> Result<Option<ServiceKeyRecord>, StoreError> {
        let sql =
            format!("SELECT {COLUMNS} FROM service_keys WHERE hash = $1 AND revoked_at IS NULL");
        on_pool!(self, sql, [hash], fetch_optional, |row: Option<_>| row
            .as_ref()
            .map(record)
            .transpose())
    }
}

fn record<R: Row>(row: &R) -> Result<ServiceKeyRecord, StoreError>
where
    for<'r> &'r str: sqlx::ColumnIndex<R>,
    for<'r> String: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    for<'r> i64: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    for<'r> Option<i64>: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
{
    let id: String = row.try_get("id")?;
    let scopes: String = row.try_get("scopes")?;
    Ok(ServiceKeyRecord {
        id: Uuid::parse_str(&id).map_err(|e| sqlx::Error::Decode(e.into()))?,
        name: row.try_get("name")?,
        scopes: scopes
            .split(',')
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect(),
        created_at: row.try_get("created_at")?,
        revoked_at: row.try_get("revoked_at")?,
    })
}
