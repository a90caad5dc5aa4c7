//! Users' own databases (seed 003's "Connections and schema"): each user's
//! connections, kept in the store with the password sealed by the [`Vault`]
//! (AES-256-GCM under the master key) and never returned; SQLite files only
//! inside the configured `connection_files_dir`.
//!
//! Uses `store` (where connections are kept) only.

pub mod introspect;
pub mod query;
mod spec;
pub mod vault;

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use uuid::Uuid;

use crate::store::{ChatDatabaseRecord, ConnectionRecord, Store, StoreError};
pub use introspect::grounding;
use query::{QueryLimits, SqlResult, Target};
use spec::inside;
pub use spec::{ConnectionSpec, Driver};
pub use vault::{Vault, VaultError};

/// The environment variable holding the master key.
pub const MASTER_KEY_VAR: &str = "AGENTWIRE_MASTER_KEY";

/// What went wrong with a connection.
#[derive(Debug, thiserror::Error)]
pub enum DbError {
    /// No such connection, or not the caller's: the two are indistinguishable.
    #[error("no connection with that id belongs to you")]
    NotFound,
    /// A field is missing or wrong.
    #[error("{0}")]
    Invalid(String),
    #[error(
        "a password can only be kept encrypted: set {MASTER_KEY_VAR} (or MASTER_ENCRYPTION_KEY) to 32 bytes, hex or base64"
    )]
    NoMasterKey,
    #[error(transparent)]
    Vault(#[from] VaultError),
    #[error("the store failed: {0}")]
    Store(#[from] StoreError),
    /// A stored connection that cannot be read back.
    #[error("a stored connection cannot be read: {0}")]
    Corrupt(String),
    /// A PostgreSQL role that can do more than read, without
    /// `allow_privileged_role`.
    #[error(
        "the role `{user}` can do more than read ({}): connect as a read-only role (README: \"A read-only PostgreSQL role\"), or set `allow_privileged_role: true` on the connection",
        powers.join(", ")
    )]
    Privileged { user: String, powers: Vec<String> },
    /// The user's database cannot be reached or read.
    #[error("the database cannot be used: {0}")]
    Unreachable(String),
}

/// A connection as any route shows it: never its password.
#[derive(Debug, Clone, PartialEq)]
pub struct Connection {
    pub id: Uuid,
    pub spec: ConnectionSpec,
    pub has_password: bool,
    /// Unix milliseconds.
    pub created_at: i64,
    pub updated_at: i64,
}

/// What a caller asks to change of a connection's password.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Password {
    Keep,
    Clear,
    Set(String),
}

/// The connections of every user.
pub struct Connections {
    store: Arc<dyn Store>,
    vault: Option<Vault>,
    files_dir: Option<PathBuf>,
    /// Loopback or private hosts PostgreSQL connections may name anyway.
    allowed_hosts: Vec<String>,
}

impl std::fmt::Debug for Connections {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connections")
            .field("has_master_key", &self.vault.is_some())
            .field("files_dir", &self.files_dir)
            .finish_non_exhaustive()
    }
}

impl Connections {
    pub fn new(
        store: Arc<dyn Store>,
        master_key: Option<[u8; 32]>,
        files_dir: Option<PathBuf>,
        allowed_hosts: Vec<String>,
    ) -> Self {
        Self {
            store,
            vault: master_key.as_ref().map(Vault::new),
            files_dir,
            allowed_hosts,
        }
    }

    /// Checks a spec: the fields its driver needs, a SQLite file inside the
    /// allowed folder.
    fn check(&self, spec: &ConnectionSpec) -> Result<(), DbError> {
        let bad = |m: &str| Err(DbError::Invalid(m.to_owned()));
        if spec.name.trim().is_empty() || spec.name.len() > 200 {
            return bad("`name` must be 1 to 200 characters");
        }
        match spec.driver {
            Driver::Postgres => {
                if spec.host.as_deref().is_none_or(str::is_empty) {
                    return bad("a postgres connection needs `host`");
                }
                if spec.database.as_deref().is_none_or(str::is_empty) {
                    return bad("a postgres connection needs `database`");
                }
                if spec.username.as_deref().is_none_or(str::is_empty) {
                    return bad("a postgres connection needs `username`");
                }
                if spec.path.is_some() {
                    return bad("`path` is for sqlite connections");
                }
            }
            Driver::Sqlite => {
                if spec.host.is_some() || spec.port.is_some() || spec.username.is_some() {
                    return bad("a sqlite connection names a `path`, not a host, port or user");
                }
                self.file(spec)?;
            }
        }
        Ok(())
    }

    /// The address a checked PostgreSQL spec connects to: the first of its
    /// host's addresses, all checked now ([`spec::reach`]), so the
    /// connection goes where the check looked, not where a second lookup
    /// leads; `None` for a host listed in `connection_hosts` (used as
    /// written) and for SQLite.
    ///
    /// # Errors
    /// The host is refused (`Invalid`), naming why.
    async fn address(&self, spec: &ConnectionSpec) -> Result<Option<IpAddr>, DbError> {
        let host = spec.host.as_deref().unwrap_or_default();
        let listed = |h: &String| h.eq_ignore_ascii_case(host);
        if spec.driver == Driver::Sqlite || self.allowed_hosts.iter().any(listed) {
            return Ok(None);
        }
        let ips = spec::reach(host, spec.port.unwrap_or(5432))
            .await
            .map_err(DbError::Invalid)?;
        Ok(ips.first().copied())
    }

    /// The SQLite file a spec names, inside `connection_files_dir`.
    ///
    /// # Errors
    /// SQLite connections are off, the path leaves the folder, or the file
    /// does not exist.
    pub fn file(&self, spec: &ConnectionSpec) -> Result<PathBuf, DbError> {
        let Some(dir) = &self.files_dir else {
            return Err(DbError::Invalid(
                "sqlite connections are off: set connection_files_dir (AGENTWIRE_CONNECTION_FILES_DIR) to the folder their files live in".into(),
            ));
        };
        let Some(path) = spec.path.as_deref().filter(|p| !p.is_empty()) else {
            return Err(DbError::Invalid("a sqlite connection needs `path`".into()));
        };
        inside(dir, Path::new(path)).ok_or_else(|| {
            DbError::Invalid(format!(
                "`path`: no file `{path}` in the connection files folder"
            ))
        })
    }

    fn seal(
        &self,
        id: Uuid,
        password: Password,
        old: Option<Vec<u8>>,
    ) -> Result<Option<Vec<u8>>, DbError> {
        Ok(match password {
            Password::Keep => old,
            Password::Clear => None,
            Password::Set(p) => {
                let vault = self.vault.as_ref().ok_or(DbError::NoMasterKey)?;
                Some(vault.seal(id, &p))
            }
        })
    }

    /// Creates a connection of `owner`'s.
    ///
    /// # Errors
    /// A bad spec, a password without a master key, the store.
    pub async fn create(
        &self,
        owner: &str,
        spec: ConnectionSpec,
        password: Option<String>,
    ) -> Result<Connection, DbError> {
        self.check(&spec)?;
        self.address(&spec).await?;
        let id = Uuid::new_v4();
        let password = password.map_or(Password::Keep, Password::Set);
        let now = chrono::Utc::now().timestamp_millis();
        let record = ConnectionRecord {
            id,
            owner: owner.to_owned(),
            spec: serde_json::to_string(&spec).expect("a spec serializes"),
            secret: self.seal(id, password, None)?,
            created_at: now,
            updated_at: now,
        };
        self.store.put_connection(&record).await?;
        view(&record)
    }

    /// Replaces the spec of `owner`'s connection `id`, and its password as asked.
    ///
    /// # Errors
    /// Not found, a bad spec, a password without a master key, the store.
    pub async fn update(
        &self,
        owner: &str,
        id: Uuid,
        spec: ConnectionSpec,
        password: Password,
    ) -> Result<Connection, DbError> {
        self.check(&spec)?;
        self.address(&spec).await?;
        let old = self
            .store
            .connection(owner, id)
            .await?
            .ok_or(DbError::NotFound)?;
        // A kept password goes only where it was given for.
        let before = spec_of(&old)?;
        let moved = (before.driver, &before.host, before.port, &before.username)
            != (spec.driver, &spec.host, spec.port, &spec.username);
        if moved && old.secret.is_some() && password == Password::Keep {
            return Err(DbError::Invalid(
                "`password`: give it again (or null) when the driver, host, port or username change".into(),
            ));
        }
        let record = ConnectionRecord {
            spec: serde_json::to_string(&spec).expect("a spec serializes"),
            secret: self.seal(id, password, old.secret)?,
            updated_at: chrono::Utc::now().timestamp_millis().max(old.created_at),
            ..old
        };
        // An update never recreates a connection deleted meanwhile.
        if !self.store.update_connection(&record).await? {
            return Err(DbError::NotFound);
        }
        view(&record)
    }

    /// `owner`'s connections, oldest first.
    ///
    /// # Errors
    /// The store.
    pub async fn list(&self, owner: &str) -> Result<Vec<Connection>, DbError> {
        self.store
            .connections(owner)
            .await?
            .iter()
            .map(view)
            .collect()
    }

    /// `owner`'s connection `id`.
    ///
    /// # Errors
    /// Not found, the store.
    pub async fn get(&self, owner: &str, id: Uuid) -> Result<Connection, DbError> {
        view(
            &self
                .store
                .connection(owner, id)
                .await?
                .ok_or(DbError::NotFound)?,
        )
    }

    /// Deletes `owner`'s connection `id`.
    ///
    /// # Errors
    /// Not found, the store.
    pub async fn delete(&self, owner: &str, id: Uuid) -> Result<(), DbError> {
        if self.store.delete_connection(owner, id).await? {
            Ok(())
        } else {
            Err(DbError::NotFound)
        }
    }

    /// `owner`'s connection `id` with its password opened, to connect with.
    ///
    /// # Errors
    /// Not found; a sealed password without the master key, or under another
    /// key; the store.
    pub async fn open(
        &self,
        owner: &str,
        id: Uuid,
    ) -> Result<(ConnectionSpec, Option<String>), DbError> {
        let record = self
            .store
            .connection(owner, id)
            .await?
            .ok_or(DbError::NotFound)?;
        let spec = spec_of(&record)?;
        let password = match &record.secret {
            None => None,
            Some(sealed) => {
                let vault = self.vault.as_ref().ok_or(DbError::NoMasterKey)?;
                Some(vault.open(id, sealed)?)
            }
        };
        Ok((spec, password))
    }
}

/// The database a chat talks to (seed 003's state: `connection`,
/// `db_schema`, `sql_result`).
#[derive(Debug, Clone, PartialEq)]
pub struct ChatDatabase {
    pub connection_id: Uuid,
    /// The markdown snapshot the model is grounded on.
    pub db_schema: String,
    /// The last result, `{columns, rows}`.
    pub sql_result: Option<serde_json::Value>,
}

impl From<ChatDatabaseRecord> for ChatDatabase {
    fn from(r: ChatDatabaseRecord) -> Self {
        Self {
            connection_id: r.connection_id,
            db_schema: r.db_schema,
            sql_result: r.sql_result.and_then(|s| serde_json::from_str(&s).ok()),
        }
    }
}

impl Connections {
    /// Where `owner`'s connection `id` leads, its password opened.
    async fn target(&self, owner: &str, id: Uuid) -> Result<(ConnectionSpec, Target), DbError> {
        let (spec, password) = self.open(owner, id).await?;
        let (file, address) = match spec.driver {
            Driver::Sqlite => (Some(self.file(&spec)?), None),
            Driver::Postgres => (None, self.address(&spec).await?),
        };
        let target = Target::new(&spec, password.as_deref(), file, address);
        Ok((spec, target))
    }

    /// Binds `owner`'s chat to their connection `connection_id`: connects,
    /// snapshots the schema, and keeps both with the chat (the last result
    /// is forgotten). The caller has checked that the chat is `owner`'s.
    ///
    /// # Errors
    /// Not found, the password cannot be opened, the host is refused, the
    /// role can do more than read, the database cannot be reached, the store.
    pub async fn bind(
        &self,
        owner: &str,
        chat_id: Uuid,
        connection_id: Uuid,
    ) -> Result<ChatDatabase, DbError> {
        let (spec, target) = self.target(owner, connection_id).await?;
        let powers = query::powers(&target).await.map_err(DbError::Unreachable)?;
        if !powers.is_empty() {
            let user = spec.username.unwrap_or_default();
            if !spec.allow_privileged_role {
                return Err(DbError::Privileged { user, powers });
            }
            tracing::warn!(%connection_id, %user, ?powers, "binding a role that can do more than read (allow_privileged_role)");
        }
        let db_schema = introspect::snapshot(&target, QueryLimits::default())
            .await
            .map_err(DbError::Unreachable)?;
        self.store
            .put_chat_database(chat_id, connection_id, &db_schema)
            .await?;
        Ok(ChatDatabase {
            connection_id,
            db_schema,
            sql_result: None,
        })
    }

    /// The database chat `chat_id` talks to, if any.
    ///
    /// # Errors
    /// The store.
    pub async fn chat_database(&self, chat_id: Uuid) -> Result<Option<ChatDatabase>, DbError> {
        Ok(self.store.chat_database(chat_id).await?.map(Into::into))
    }

    /// The database of `owner`'s chat, opened for queries: its schema, its
    /// dialect and where it leads (read once per tool call).
    ///
    /// # Errors
    /// No database connected (`Invalid`), not found, the password, the store.
    pub async fn chat_query(&self, owner: &str, chat_id: Uuid) -> Result<ChatQuery, DbError> {
        let db = self
            .store
            .chat_database(chat_id)
            .await?
            .ok_or_else(|| {
                DbError::Invalid(
                    "this chat has no database connected: connect one first (POST /chat/{thread_id}/connection)".into(),
                )
            })?;
        let (spec, target) = self.target(owner, db.connection_id).await?;
        Ok(ChatQuery {
            chat_id,
            connection_id: db.connection_id,
            db_schema: db.db_schema,
            dialect: match spec.driver {
                Driver::Postgres => "PostgreSQL",
                Driver::Sqlite => "SQLite",
            },
            target,
        })
    }

    /// Runs `sql` read-only on `q`'s database, and keeps a result as the
    /// chat's `sql_result` (unless the chat was bound elsewhere meanwhile).
    ///
    /// # Errors
    /// `Invalid` with the database's message when the query fails (for the
    /// model to fix); the store.
    pub async fn query(&self, q: &ChatQuery, sql: &str) -> Result<SqlResult, DbError> {
        let result = query::run(&q.target, sql, QueryLimits::default())
            .await
            .map_err(DbError::Invalid)?;
        let kept = serde_json::to_string(&result).expect("a result serializes");
        self.store
            .put_sql_result(q.chat_id, q.connection_id, &kept)
            .await?;
        Ok(result)
    }
}

/// A chat's database opened for queries ([`Connections::chat_query`]).
#[derive(Debug)]
pub struct ChatQuery {
    chat_id: Uuid,
    connection_id: Uuid,
    /// The schema snapshot the model writes its SQL from.
    pub db_schema: String,
    /// `PostgreSQL` or `SQLite`, for the model.
    pub dialect: &'static str,
    target: Target,
}

fn spec_of(record: &ConnectionRecord) -> Result<ConnectionSpec, DbError> {
    serde_json::from_str(&record.spec)
        .map_err(|e| DbError::Corrupt(format!("connection {}: {e}", record.id)))
}

fn view(record: &ConnectionRecord) -> Result<Connection, DbError> {
    Ok(Connection {
        id: record.id,
        spec: spec_of(record)?,
        has_password: record.secret.is_some(),
        created_at: record.created_at,
        updated_at: record.updated_at,
    })
}

#[cfg(test)]
mod tests;
