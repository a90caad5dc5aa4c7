//! What a database of a spread (`store::sharded`) does besides a single
//! one: it knows the list it is part of, and deletes the files of a chat
//! whose log lives in another.

use uuid::Uuid;

use super::{PgStore, maintain};
use crate::store::StoreError;

impl PgStore {
    /// Deletes `owner`'s files of `chat` and the contents only they hold
    /// (the chat's log is in another database: `store::sharded`).
    ///
    /// # Errors
    /// The database fails.
    pub(crate) async fn purge_files(&self, owner: &str, chat: Uuid) -> Result<(), StoreError> {
        maintain::purge_files(&self.pool, owner, chat).await
    }

    /// Checks that this database (`name`) is one of `names`, the databases
    /// chats are spread over, or is new to the spread and holds no chat;
    /// with `record`, records the list in a database new to it. A list that
    /// changed, or a database with chats new to the spread, is refused (its
    /// chats would be looked for in the wrong database). Every database is
    /// checked before any records, so a refused list is recorded nowhere.
    ///
    /// # Returns
    /// Whether the list was recorded here before, and whether this
    /// database holds chats.
    ///
    /// # Errors
    /// The database fails, or [`StoreError::Respread`].
    pub(crate) async fn join_spread(
        &self,
        name: &str,
        names: &[String],
        record: bool,
    ) -> Result<(bool, bool), StoreError> {
        let mut tx = self.pool.begin().await?;
        sqlx::query("LOCK TABLE spread IN EXCLUSIVE MODE")
            .execute(&mut *tx)
            .await?;
        let known = recorded(&mut *tx).await?;
        let chats: bool = sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM chats)")
            .fetch_one(&mut *tx)
            .await?;
        if known.is_empty() {
            if chats {
                return Err(StoreError::Respread(
                    format!(
                        "database `{name}` holds chats of its own and is new to [[databases]]: \
                         a database that holds chats cannot join a spread (docs/scaling.md, *Changing the list of databases*)"
                    )
                    .into(),
                ));
            }
            for (i, n) in names.iter().enumerate().filter(|_| record) {
                sqlx::query("INSERT INTO spread (position, name) VALUES ($1, $2)")
                    .bind(i as i32)
                    .bind(n)
                    .execute(&mut *tx)
                    .await?;
            }
        } else if known != names {
            return Err(StoreError::Respread(
                format!(
                    "database `{name}` was spread over [{}], and [[databases]] now names [{}]: \
                     chats would be looked for in the wrong database (docs/scaling.md, *Changing the list of databases*)",
                    known.join(", "),
                    names.join(", ")
                )
                .into(),
            ));
        }
        tx.commit().await?;
        Ok((!known.is_empty(), chats))
    }

    /// Checks that this database, used alone (`database_url`), is not one
    /// of a spread: the others would hold chats it cannot find.
    ///
    /// # Errors
    /// The database fails, or [`StoreError::Respread`].
    pub(crate) async fn check_alone(&self) -> Result<(), StoreError> {
        let known = recorded(&self.pool).await?;
        if known.is_empty() {
            return Ok(());
        }
        Err(StoreError::Respread(
            format!(
                "this database is one of [{}] (`[[databases]]`): used alone, the others' chats \
                 would not be found; configure [[databases]] again",
                known.join(", ")
            )
            .into(),
        ))
    }
}

/// The names this database recorded as its spread, in order (none: used
/// alone, or new to a spread).
async fn recorded<'e>(db: impl sqlx::PgExecutor<'e>) -> Result<Vec<String>, StoreError> {
    Ok(
        sqlx::query_scalar("SELECT name FROM spread ORDER BY position")
            .fetch_all(db)
            .await?,
    )
}
