//! The rows of users' database connections (seed 003).

use uuid::Uuid;

/// The database a chat talks to (seed 003's `connection`, `db_schema`,
/// `sql_result`).
#[derive(Debug, Clone, PartialEq)]
pub struct ChatDatabaseRecord {
    pub connection_id: Uuid,
    pub db_schema: String,
    /// JSON `{columns, rows}`.
    pub sql_result: Option<String>,
}

/// A user's database connection as stored (seed 003): its spec as JSON, its
/// password sealed by the caller (`databases::Vault`), never in clear.
#[derive(Debug, Clone, PartialEq)]
pub struct ConnectionRecord {
    pub id: Uuid,
    pub owner: String,
    pub spec: String,
    pub secret: Option<Vec<u8>>,
    /// Unix milliseconds.
    pub created_at: i64,
    pub updated_at: i64,
}
