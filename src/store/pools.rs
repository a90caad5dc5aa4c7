//! What the small stores beside the log (service keys, schedules) share:
//! one statement run on whichever backend's pool they hold.

/// Runs one statement on either backend: `$n` parameters (SQLite gets
/// `?n`), the arguments bound in order, `$on` the rows or result.
macro_rules! on_pool {
    ($pool:expr, $sql:expr, [$($arg:expr),*], $method:ident, $on:expr) => {
        match $pool {
            Self::Sqlite(pool) => {
                let sql = $sql.replace('$', "?");
                $on(sqlx::query(sqlx::AssertSqlSafe(sql))$(.bind($arg))*.$method(pool).await?)
            }
            Self::Postgres(pool) => {
                let sql = $sql.to_owned();
                $on(sqlx::query(sqlx::AssertSqlSafe(sql))$(.bind($arg))*.$method(pool).await?)
            }
            // A spread over several databases asks each part itself before.
            #[allow(unreachable_patterns)]
            _ => return Err($crate::store::StoreError::Spread),
        }
    };
}
pub(super) use on_pool;

/// Rows a statement changed, on either backend.
pub(super) trait Affected {
    fn affected(&self) -> u64;
}

impl Affected for sqlx::sqlite::SqliteQueryResult {
    fn affected(&self) -> u64 {
        self.rows_affected()
    }
}

impl Affected for sqlx::postgres::PgQueryResult {
    fn affected(&self) -> u64 {
        self.rows_affected()
    }
}

/// Rows a statement changed, on either backend (for [`on_pool`]'s `$on`).
pub(super) fn changed(result: impl Affected) -> u64 {
    result.affected()
}
