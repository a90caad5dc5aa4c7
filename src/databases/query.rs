//! Running a model's SQL on a user's database, read-only whatever the SQL
//! says, and bounded: PostgreSQL in a `READ ONLY` transaction of a session
//! that defaults to read-only, with a `statement_timeout`; SQLite opened
//! read-only with `query_only`. Either way the SQL is one statement, run as
//! a subquery of ours (so only a query fits), prepared (so a second
//! statement cannot ride along), with a row cap and a byte cap stated in the
//! result when hit.

use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use serde::Serialize;
use serde_json::{Map, Value};
use sqlx::postgres::{PgConnectOptions, PgConnection};
use sqlx::sqlite::{SqliteConnectOptions, SqliteConnection, SqliteError, SqliteRow};
use sqlx::{
    AssertSqlSafe, Column, Connection, Executor, Row, SqlSafeStr, Statement, TypeInfo, ValueRef,
};

use super::spec::{ConnectionSpec, Driver};

/// How much one query may take.
#[derive(Debug, Clone, Copy)]
pub struct QueryLimits {
    pub max_rows: usize,
    /// Bytes of the rows as JSON.
    pub max_bytes: usize,
    pub timeout: Duration,
}

impl Default for QueryLimits {
    fn default() -> Self {
        Self {
            max_rows: 200,
            max_bytes: 64 * 1024,
            timeout: Duration::from_secs(10),
        }
    }
}

/// A query's answer (seed 003's `sql_result`: `{columns, rows}`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SqlResult {
    pub columns: Vec<String>,
    pub rows: Vec<Vec<Value>>,
    /// Why rows are missing (a cap was hit), for the model and the user.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub truncated: Option<String>,
}

/// Where to connect, with the password opened.
pub enum Target {
    Postgres(Box<PgTarget>),
    Sqlite(PathBuf),
}

/// A PostgreSQL database to connect to.
pub struct PgTarget {
    pub options: PgConnectOptions,
    /// Whether a role that can do more than read may run queries
    /// (`allow_privileged_role`); otherwise every connection checks first.
    pub privileged_ok: bool,
}

impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Postgres(_) => f.write_str("Target::Postgres(…)"),
            Self::Sqlite(p) => f.debug_tuple("Target::Sqlite").field(p).finish(),
        }
    }
}

impl Target {
    /// The target of a checked spec (`file`: its SQLite file, resolved;
    /// `address`: the checked address its host resolved to, connected to
    /// instead of the name, which could resolve elsewhere the second time).
    pub fn new(
        spec: &ConnectionSpec,
        password: Option<&str>,
        file: Option<PathBuf>,
        address: Option<IpAddr>,
    ) -> Self {
        match spec.driver {
            Driver::Postgres => {
                let host = address.map_or_else(
                    || spec.host.clone().unwrap_or_default(),
                    |ip| ip.to_string(),
                );
                // Every field the server's own PG* environment could fill is
                // set: a user's connection never borrows the server's login.
                // TLS, when the server offers it, checks no certificate
                // (`Prefer`), so connecting by address loses no check.
                let o = PgConnectOptions::new_without_pgpass()
                    .host(&host)
                    .port(spec.port.unwrap_or(5432))
                    .database(spec.database.as_deref().unwrap_or_default())
                    .username(spec.username.as_deref().unwrap_or_default())
                    .password(password.unwrap_or_default())
                    .ssl_mode(sqlx::postgres::PgSslMode::Prefer);
                Self::postgres(o, spec.allow_privileged_role)
            }
            Driver::Sqlite => Self::Sqlite(file.unwrap_or_default()),
        }
    }

    /// A PostgreSQL target.
    pub fn postgres(options: PgConnectOptions, privileged_ok: bool) -> Self {
        Self::Postgres(Box::new(PgTarget {
            options,
            privileged_ok,
        }))
    }
}

/// What the connected role can do beyond reading: `superuser`, or the
/// predefined roles it is a member of that reach outside the database
/// (write or read the server's files, run programs there, signal other
/// sessions). Names missing from an older server are simply not found.
const POWERS: &str = "SELECT CASE WHEN r.rolsuper THEN ARRAY['superuser'] ELSE ARRAY(\
     SELECT g.rolname::text FROM pg_roles g WHERE g.rolname IN ('pg_write_server_files', \
     'pg_execute_server_program', 'pg_signal_backend', 'pg_read_server_files') \
     AND pg_has_role(current_user, g.oid, 'MEMBER') ORDER BY 1) END \
     FROM pg_roles r WHERE r.rolname = current_user";

async fn powers_of(conn: &mut PgConnection) -> Result<Vec<String>, sqlx::Error> {
    sqlx::query_scalar(POWERS).fetch_one(conn).await
}

/// What the role of `target` can do beyond reading (see [`POWERS`]);
/// nothing for SQLite.
///
/// # Errors
/// The database cannot be reached.
pub async fn powers(target: &Target) -> Result<Vec<String>, String> {
    let Target::Postgres(t) = target else {
        return Ok(Vec::new());
    };
    let work = async {
        let mut conn = PgConnection::connect_with(&t.options).await?;
        let found = powers_of(&mut conn).await?;
        conn.close().await?;
        Ok::<_, sqlx::Error>(found)
    };
    match tokio::time::timeout(CONNECT_TIMEOUT, work).await {
        Ok(r) => r.map_err(|e| e.to_string()),
        Err(_) => Err(format!("no answer within {} s", CONNECT_TIMEOUT.as_secs())),
    }
}

/// How long connecting may take, on top of a query's own timeout.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// What the model is told when its SQL is not one query that only reads.
pub const ONLY_READS: &str = "only one read-only SELECT may run here: this SQL writes or is not a \
     query (INSERT, UPDATE, DELETE, DDL, SELECT … INTO, a data-modifying WITH, a command). Send one \
     SELECT that reads what the question needs";

/// The message of a failed query. A statement that parsed on its own but
/// not as our subquery (a syntax error there: `UPDATE`, `SELECT … INTO`…),
/// or a write the read-only transaction or file refused, is said plainly:
/// the database's own words point at our wrapping, or at a line of its
/// source.
fn plain(e: &sqlx::Error, wrapped: bool) -> String {
    if let sqlx::Error::Database(d) = e {
        let code = d.code().unwrap_or_default();
        let message = d.message();
        let refused = if d.try_downcast_ref::<SqliteError>().is_some() {
            // SQLITE_READONLY (and its extended codes), or not a query.
            code.parse::<u32>().is_ok_and(|n| n & 0xff == 8)
                || (wrapped && message.contains("syntax error"))
        } else {
            // A read-only transaction; a data-modifying WITH, nested; not
            // a query.
            match code.as_ref() {
                "25006" => true,
                "0A000" => message.contains("data-modifying"),
                "42601" => wrapped,
                _ => false,
            }
        };
        if refused {
            return ONLY_READS.to_owned();
        }
    }
    e.to_string()
}

/// The one statement of `sql`, without trailing semicolons; `None` when
/// there is more than one (a `;` outside quotes and comments, then more).
pub fn one_statement(sql: &str) -> Option<&str> {
    if sql.contains('\0') {
        return None;
    }
    let bytes = sql.as_bytes();
    let (mut i, mut end) = (0, None);
    while i < bytes.len() {
        let c = bytes[i];
        let close = |open: u8, from: usize| {
            bytes[from + 1..]
                .iter()
                .position(|&b| b == open)
                .map_or(bytes.len(), |p| from + 1 + p + 1)
        };
        i = match c {
            b'\'' | b'"' | b'`' => close(c, i),
            b'[' => close(b']', i),
            b'-' if bytes.get(i + 1) == Some(&b'-') => close(b'\n', i),
            b'/' if bytes.get(i + 1) == Some(&b'*') => sql[i + 2..]
                .find("*/")
                .map_or(bytes.len(), |p| i + 2 + p + 2),
            b';' => {
                end.get_or_insert(i);
                i + 1
            }
            _ if c.is_ascii_whitespace() => i + 1,
            _ if end.is_some() => return None,
            _ => i + 1,
        };
    }
    let one = sql[..end.unwrap_or(sql.len())].trim();
    (!one.is_empty()).then_some(one)
}

/// Runs `sql` read-only on `target`.
///
/// # Errors
/// The database's own message (for the model to fix its SQL), or why the
/// query was refused or stopped.
pub async fn run(target: &Target, sql: &str, limits: QueryLimits) -> Result<SqlResult, String> {
    let sql = one_statement(sql).ok_or("send exactly one SQL statement")?;
    let work = async {
        match target {
            Target::Postgres(t) => postgres(t, sql, limits).await,
            Target::Sqlite(path) => sqlite(path, sql, limits).await,
        }
    };
    // The database stops a slow query itself; this bounds a slow connect too.
    match tokio::time::timeout(limits.timeout + CONNECT_TIMEOUT, work).await {
        Ok(r) => r.map_err(|e| match e {
            Fail::Sql(e) => plain(&e, false),
            Fail::Wrapped(e) => plain(&e, true),
            Fail::Refused(m) => m,
        }),
        Err(_) => Err(format!(
            "the query did not finish within {} s",
            limits.timeout.as_secs()
        )),
    }
}

/// Why a query failed.
enum Fail {
    /// The SQL itself, or the database.
    Sql(sqlx::Error),
    /// The SQL as our subquery.
    Wrapped(sqlx::Error),
    /// Refused before it ran.
    Refused(String),
}

impl From<sqlx::Error> for Fail {
    fn from(e: sqlx::Error) -> Self {
        Self::Sql(e)
    }
}

/// Keeps rows while they fit the caps.
struct Collector {
    limits: QueryLimits,
    rows: Vec<Vec<Value>>,
    bytes: usize,
    truncated: Option<String>,
}

impl Collector {
    fn new(limits: QueryLimits) -> Self {
        Self {
            limits,
            rows: Vec::new(),
            bytes: 0,
            truncated: None,
        }
    }

    /// Takes a row; `false` once a cap is hit (stop reading).
    fn push(&mut self, row: Vec<Value>) -> bool {
        if self.rows.len() == self.limits.max_rows {
            self.truncated = Some(format!(
                "only the first {} rows are shown",
                self.limits.max_rows
            ));
            return false;
        }
        let size = serde_json::to_string(&row).map_or(0, |s| s.len());
        if self.bytes + size > self.limits.max_bytes {
            self.truncated = Some(format!(
                "only the first {} rows are shown ({} bytes at most)",
                self.rows.len(),
                self.limits.max_bytes
            ));
            return false;
        }
        self.bytes += size;
        self.rows.push(row);
        true
    }
}

async fn postgres(t: &PgTarget, sql: &str, limits: QueryLimits) -> Result<SqlResult, Fail> {
    let ms = limits.timeout.as_millis().to_string();
    let o = t.options.clone().options([
        ("default_transaction_read_only", "on"),
        ("statement_timeout", ms.as_str()),
    ]);
    let mut conn = PgConnection::connect_with(&o).await?;
    // Checked on every connection, not only at the binding: the connection
    // may have been given another user since, or the role more rights.
    if !t.privileged_ok {
        let powers = powers_of(&mut conn).await?;
        if !powers.is_empty() {
            return Err(Fail::Refused(format!(
                "the connection's role can do more than read ({}): connect as a read-only role, or set allow_privileged_role: true",
                powers.join(", ")
            )));
        }
    }
    let mut tx = conn.begin().await?;
    sqlx::query("SET TRANSACTION READ ONLY")
        .execute(&mut *tx)
        .await?;
    let inner = AssertSqlSafe(sql.to_owned()).into_sql_str();
    let columns: Vec<String> = (&mut *tx)
        .prepare(inner)
        .await?
        .columns()
        .iter()
        .map(|c| c.name().to_owned())
        .collect();
    // Each row as JSON, by PostgreSQL (every type has a JSON form there),
    // its columns renamed by position so that equal names stay apart; a row
    // over the byte cap comes back as NULL instead of whole.
    let names: Vec<String> = (0..columns.len()).map(|i| format!("\"c{i}\"")).collect();
    let wrapped = format!(
        "SELECT CASE WHEN octet_length(row_to_json(q)::text) > {max} THEN NULL \
         ELSE row_to_json(q)::text END FROM ({sql}\n) AS q({names}) LIMIT {rows}",
        max = limits.max_bytes,
        names = names.join(", "),
        rows = limits.max_rows + 1
    );
    let mut rows = sqlx::query_scalar::<_, Option<String>>(AssertSqlSafe(wrapped)).fetch(&mut *tx);
    let mut out = Collector::new(limits);
    use futures_util::TryStreamExt;
    while let Some(text) = rows.try_next().await.map_err(Fail::Wrapped)? {
        let Some(text) = text else {
            out.truncated = Some(format!(
                "only the first {} rows are shown (a row is over {} bytes)",
                out.rows.len(),
                limits.max_bytes
            ));
            break;
        };
        let object: Map<String, Value> = serde_json::from_str(&text).unwrap_or_default();
        let row = (0..columns.len())
            .map(|i| object.get(&format!("c{i}")).cloned().unwrap_or(Value::Null))
            .collect();
        if !out.push(row) {
            break;
        }
    }
    drop(rows);
    tx.rollback().await?;
    Ok(SqlResult {
        columns,
        rows: out.rows,
        truncated: out.truncated,
    })
}

async fn sqlite(path: &std::path::Path, sql: &str, limits: QueryLimits) -> Result<SqlResult, Fail> {
    let o = SqliteConnectOptions::new()
        .filename(path)
        .read_only(true)
        .create_if_missing(false)
        .pragma("query_only", "ON")
        .busy_timeout(limits.timeout);
    let mut conn = SqliteConnection::connect_with(&o).await?;
    // The statement runs on sqlx's worker thread, which a dropped future does
    // not stop: SQLite itself interrupts it past the deadline.
    let deadline = std::time::Instant::now() + limits.timeout;
    conn.lock_handle()
        .await?
        .set_progress_handler(10_000, move || std::time::Instant::now() < deadline);
    let wrapped = format!("SELECT * FROM ({sql}\n) LIMIT {}", limits.max_rows + 1);
    let columns: Vec<String> = match (&mut conn)
        .prepare(AssertSqlSafe(wrapped.clone()).into_sql_str())
        .await
    {
        Ok(statement) => statement
            .columns()
            .iter()
            .map(|c| c.name().to_owned())
            .collect(),
        // Wrong as our subquery only, or wrong itself (then its own error)?
        Err(e) => {
            let own = AssertSqlSafe(sql.to_owned()).into_sql_str();
            return Err(match (&mut conn).prepare(own).await {
                Ok(_) => Fail::Wrapped(e),
                Err(own) => Fail::Sql(own),
            });
        }
    };
    let mut out = Collector::new(limits);
    {
        use futures_util::TryStreamExt;
        let mut rows = sqlx::query(AssertSqlSafe(wrapped)).fetch(&mut conn);
        while let Some(row) = rows.try_next().await? {
            if !out.push(sqlite_row(&row)) {
                break;
            }
        }
    }
    conn.close().await?;
    Ok(SqlResult {
        columns,
        rows: out.rows,
        truncated: out.truncated,
    })
}

/// A SQLite row as JSON values, by each value's storage class.
fn sqlite_row(row: &SqliteRow) -> Vec<Value> {
    (0..row.len())
        .map(|i| {
            let Ok(raw) = row.try_get_raw(i) else {
                return Value::Null;
            };
            if raw.is_null() {
                return Value::Null;
            }
            match raw.type_info().name() {
                "INTEGER" => row.try_get::<i64, _>(i).map_or(Value::Null, Value::from),
                "REAL" => row.try_get::<f64, _>(i).map_or(Value::Null, Value::from),
                "BLOB" => row.try_get::<Vec<u8>, _>(i).map_or(Value::Null, |b| {
                    Value::String(format!("<{} bytes>", b.len()))
                }),
                _ => row
                    .try_get::<String, _>(i)
                    .map_or(Value::Null, Value::String),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::one_statement;

    #[test]
    fn one_statement_at_a_time() {
        assert_eq!(one_statement("SELECT 1;"), Some("SELECT 1"));
        assert_eq!(one_statement(" SELECT 1 ; ;\n"), Some("SELECT 1"));
        assert_eq!(one_statement("SELECT ';' AS x"), Some("SELECT ';' AS x"));
        assert_eq!(
            one_statement("SELECT 1 -- ; DROP\n"),
            Some("SELECT 1 -- ; DROP")
        );
        assert_eq!(
            one_statement("SELECT \"a;b\" FROM t /* ; */"),
            Some("SELECT \"a;b\" FROM t /* ; */")
        );
        assert_eq!(one_statement("SELECT 1; DROP TABLE t"), None);
        assert_eq!(one_statement("SELECT 1); ATTACH 'x' AS y; SELECT (1"), None);
        assert_eq!(one_statement(";"), None);
        assert_eq!(one_statement("SELECT 1) \0 x"), None);
        assert_eq!(
            one_statement("SELECT 'unterminated"),
            Some("SELECT 'unterminated")
        );
    }
}
