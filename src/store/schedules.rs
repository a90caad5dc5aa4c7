//! Schedules as stored: who they start what for, and when next. Both
//! backends keep them in `schedules`; firing a due time is claimed by a
//! conditional update of `next_at`, so any number of nodes move each
//! schedule on once (`schedules` runs them).

use sqlx::Row;
use sqlx::postgres::PgPool;
use sqlx::sqlite::SqlitePool;
use uuid::Uuid;

use super::StoreError;
use super::pools::{changed, on_pool};

/// One schedule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScheduleRecord {
    pub id: Uuid,
    /// The user its chats are for.
    pub owner: String,
    pub agent: String,
    /// The first turn of each chat, as the user's words.
    pub message: Option<String>,
    /// A JSON object: the UI state of each chat.
    pub context: Option<String>,
    pub cron: String,
    pub time_zone: String,
    /// `skip` or `run_once`: what a due time missed while every node was
    /// down does.
    pub missed: String,
    pub paused: bool,
    /// The next due time, unix ms.
    pub next_at: i64,
    /// The last due time fired, unix ms.
    pub last_at: Option<i64>,
    pub last_chat: Option<Uuid>,
    /// `user`, or `key:<name>`.
    pub created_by: String,
    pub created_at: i64,
}

/// The schedules of one store.
#[derive(Debug, Clone)]
pub enum Schedules {
    Sqlite(SqlitePool),
    Postgres(PgPool),
}

const COLUMNS: &str = "id, owner, agent, message, context, cron, time_zone, missed, paused,
    next_at, last_at, last_chat, created_by, created_at";

impl Schedules {
    /// Stores a new schedule.
    ///
    /// # Errors
    /// The store fails.
    pub async fn create(&self, s: &ScheduleRecord) -> Result<(), StoreError> {
        let sql = format!(
            "INSERT INTO schedules ({COLUMNS})
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)"
        );
        let last_chat = s.last_chat.map(|c| c.to_string());
        on_pool!(
            self,
            sql,
            [
                s.id.to_string(),
                &s.owner,
                &s.agent,
                &s.message,
                &s.context,
                &s.cron,
                &s.time_zone,
                &s.missed,
                s.paused,
                s.next_at,
                s.last_at,
                &last_chat,
                &s.created_by,
                s.created_at
            ],
            execute,
            |_| ()
        );
        Ok(())
    }

    /// A user's schedules, oldest first.
    ///
    /// # Errors
    /// The store fails.
    pub async fn list(&self, owner: &str) -> Result<Vec<ScheduleRecord>, StoreError> {
        let sql =
            format!("SELECT {COLUMNS} FROM schedules WHERE owner = $1 ORDER BY created_at, id");
        on_pool!(self, sql, [owner], fetch_all, |rows: Vec<_>| rows
            .iter()
            .map(record)
            .collect())
    }

    /// How many schedules a user has.
    ///
    /// # Errors
    /// The store fails.
    pub async fn count(&self, owner: &str) -> Result<u64, StoreError> {
        let sql = "SELECT COUNT(*) AS n FROM schedules WHERE owner = $1";
        let n: i64 = on_pool!(self, sql, [owner], fetch_one, |row| Row::try_get(&row, "n"))?;
        Ok(n.max(0) as u64)
    }

    /// One schedule of `owner`'s.
    ///
    /// # Errors
    /// The store fails.
    pub async fn get(&self, id: Uuid, owner: &str) -> Result<Option<ScheduleRecord>, StoreError> {
        let sql = format!("SELECT {COLUMNS} FROM schedules WHERE id = $1 AND owner = $2");
        on_pool!(
            self,
            sql,
            [id.to_string(), owner],
            fetch_optional,
            |row: Option<_>| row.as_ref().map(record).transpose()
        )
    }

    /// Pauses or resumes a schedule of `owner`'s; a resumed one is next due
    /// at `next_at`.
    ///
    /// # Returns
    /// Whether it exists.
    ///
    /// # Errors
    /// The store fails.
    pub async fn set_paused(
        &self,
        id: Uuid,
        owner: &str,
        paused: bool,
        next_at: i64,
    ) -> Result<bool, StoreError> {
        let sql = "UPDATE schedules SET paused = $1, next_at = $2 WHERE id = $3 AND owner = $4";
        let n = on_pool!(
            self,
            sql,
            [paused, next_at, id.to_string(), owner],
            execute,
            changed
        );
        Ok(n > 0)
    }

    /// Deletes a schedule of `owner`'s (the chats it started stay).
    ///
    /// # Errors
    /// The store fails.
    pub async fn delete(&self, id: Uuid, owner: &str) -> Result<bool, StoreError> {
        let sql = "DELETE FROM schedules WHERE id = $1 AND owner = $2";
        let n = on_pool!(self, sql, [id.to_string(), owner], execute, changed);
        Ok(n > 0)
    }

    /// Up to `limit` schedules due at `now` (unix ms), the most overdue
    /// first.
    ///
    /// # Errors
    /// The store fails.
    pub async fn due(&self, now: i64, limit: u32) -> Result<Vec<ScheduleRecord>, StoreError> {
        let paused = match self {
            Self::Sqlite(_) => "paused = 0",
            Self::Postgres(_) => "NOT paused",
        };
        let sql = format!(
            "SELECT {COLUMNS} FROM schedules WHERE {paused} AND next_at <= $1
             ORDER BY next_at LIMIT $2"
        );
        on_pool!(
            self,
            sql,
            [now, i64::from(limit)],
            fetch_all,
            |rows: Vec<_>| rows.iter().map(record).collect()
        )
    }

    /// Moves a schedule on from the due time `from` to `to`, noting the
    /// time it fired and its chat, unless another node did first.
    ///
    /// # Returns
    /// Whether this call moved it.
    ///
    /// # Errors
    /// The store fails.
    pub async fn advance(
        &self,
        id: Uuid,
        from: i64,
        to: i64,
        fired: Option<(i64, Uuid)>,
    ) -> Result<bool, StoreError> {
        let sql = "UPDATE schedules SET next_at = $1, last_at = COALESCE($2, last_at),
                   last_chat = COALESCE($3, last_chat) WHERE id = $4 AND next_at = $5";
        let (at, chat) = fired.unzip();
        let chat = chat.map(|c| c.to_string());
        let n = on_pool!(
            self,
            sql,
            [to, at, chat, id.to_string(), from],
            execute,
            changed
        );
        Ok(n > 0)
    }
}

fn record<R: Row>(row: &R) -> Result<ScheduleRecord, StoreError>
where
    for<'r> &'r str: sqlx::ColumnIndex<R>,
    for<'r> String: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    for<'r> Option<String>: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    for<'r> i64: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    for<'r> Option<i64>: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    for<'r> bool: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
{
    let uuid = |s: String| Uuid::parse_str(&s).map_err(|e| sqlx::Error::Decode(e.into()));
    let last_chat: Option<String> = row.try_get("last_chat")?;
    Ok(ScheduleRecord {
        id: uuid(row.try_get("id")?)?,
        owner: row.try_get("owner")?,
        agent: row.try_get("agent")?,
        message: row.try_get("message")?,
        context: row.try_get("context")?,
        cron: row.try_get("cron")?,
        time_zone: row.try_get("time_zone")?,
        missed: row.try_get("missed")?,
        paused: row.try_get("paused")?,
        next_at: row.try_get("next_at")?,
        last_at: row.try_get("last_at")?,
        last_chat: last_chat.map(uuid).transpose()?,
        created_by: row.try_get("created_by")?,
        created_at: row.try_get("created_at")?,
    })
}
