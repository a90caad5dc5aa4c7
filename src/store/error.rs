//! What the store fails with.

use std::sync::Arc;

use uuid::Uuid;

use super::seal::SealError;

/// Failures of the store. Cheap to clone, so one commit's failure can be
/// reported to every writer whose envelopes were in it.
#[derive(Debug, Clone, thiserror::Error)]
pub enum StoreError {
    #[error("database error: {0}")]
    Database(Arc<sqlx::Error>),
    /// From the embedded store's writing connection.
    #[error("database error: {0}")]
    Sqlite(Arc<rusqlite::Error>),
    #[error("migration failed: {0}")]
    Migration(Arc<sqlx::migrate::MigrateError>),
    #[error("cannot prepare the database file: {0}")]
    Io(Arc<std::io::Error>),
    #[error("the log writer has stopped")]
    WriterGone,
    /// These chats' leases moved to another node: this node may no longer
    /// append to them. Nothing of the transaction was committed.
    #[error("this node no longer owns the chat")]
    Fenced(Arc<[Uuid]>),
    #[error("a command from another node could not be read: {0}")]
    Seal(#[from] SealError),
    /// The answer of a request handled on another node, as that node reported it.
    #[error("{0}")]
    Remote(Arc<str>),
    /// The NATS address cannot be used.
    #[error("NATS: {0}")]
    Nats(Arc<str>),
    /// A statement of one database asked of a spread of several (a bug:
    /// the spread asks each database itself).
    #[error("a statement of one database was asked of several")]
    Spread,
    /// The databases chats are spread over are not the ones a database
    /// was spread over before.
    #[error("{0}")]
    Respread(Arc<str>),
}

impl From<rusqlite::Error> for StoreError {
    fn from(e: rusqlite::Error) -> Self {
        Self::Sqlite(Arc::new(e))
    }
}

impl From<sqlx::Error> for StoreError {
    fn from(e: sqlx::Error) -> Self {
        Self::Database(Arc::new(e))
    }
}
