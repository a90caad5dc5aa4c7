//! Test support: a throwaway PostgreSQL server for the test suites.
//!
//! Not part of the API (hidden from the docs); it lives in the library so the
//! unit tests and the integration tests share it. `postgres()` starts one
//! server per test process, once: `initdb` into a temporary folder (as the
//! `postgres` user when running as root, since PostgreSQL refuses root), a
//! free port on 127.0.0.1, `fsync` off. A small shell watchdog stops the server
//! and deletes its folder when the test process exits, however it exits.
//!
//! `AGENTWIRE_TEST_POSTGRES_URL` points the tests at an existing server
//! instead (a URL whose user may `CREATE DATABASE`). Without either, the
//! PostgreSQL tests are skipped with a message, unless
//! `AGENTWIRE_REQUIRE_POSTGRES=1` (set by `.ci/run`), which makes that a failure.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

/// A PostgreSQL server the tests may create databases on.
#[derive(Debug)]
pub struct TestPostgres {
    /// `postgres://user@host:port` (no database).
    base: String,
    /// Where its data lives (None for an external server).
    pub data_dir: Option<PathBuf>,
}

impl TestPostgres {
    /// A new, empty database on this server; its URL.
    ///
    /// # Panics
    /// The server refused to create it.
    pub async fn fresh_database(&self) -> String {
        use sqlx::Connection;
        let name = format!("t_{}", uuid::Uuid::new_v4().simple());
        let mut admin = sqlx::PgConnection::connect(&format!("{}/postgres", self.base))
            .await
            .expect("connect to the test PostgreSQL");
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
            .execute(&mut admin)
            .await
            .expect("create a test database");
        format!("{}/{name}", self.base)
    }
}

/// Takes `url`'s database down (new connections refused, those open cut)
/// or brings it back, from the server's `postgres` database: a database of
/// several that fails alone.
///
/// # Panics
/// The server refused.
pub async fn set_database_down(url: &str, down: bool) {
    use sqlx::Connection;
    let (base, name) = url.rsplit_once('/').expect("a database URL");
    let mut admin = sqlx::PgConnection::connect(&format!("{base}/postgres"))
        .await
        .expect("connect to the test PostgreSQL");
    let mut sql = format!("ALTER DATABASE {name} ALLOW_CONNECTIONS {}", !down);
    if down {
        sql.push_str(&format!(
            "; SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{name}'"
        ));
    }
    sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
        .execute(&mut admin)
        .await
        .expect("take the database down or up");
}

/// The test server, started on first use; `None` (after a message) when there
/// is no PostgreSQL to use and none is required.
///
/// # Panics
/// `AGENTWIRE_REQUIRE_POSTGRES=1` and no server could be had.
pub fn postgres() -> Option<&'static TestPostgres> {
    static SERVER: OnceLock<Option<TestPostgres>> = OnceLock::new();
    SERVER
        .get_or_init(|| {
            let found = std::env::var("AGENTWIRE_TEST_POSTGRES_URL")
                .ok()
                .map(|url| TestPostgres {
                    base: url.trim_end_matches('/').to_owned(),
                    data_dir: None,
                })
                .or_else(start);
            if found.is_none() {
                let required = std::env::var("AGENTWIRE_REQUIRE_POSTGRES").is_ok_and(|v| v == "1");
                assert!(!required, "AGENTWIRE_REQUIRE_POSTGRES=1 but no PostgreSQL could be started");
                eprintln!(
                    "note: no PostgreSQL server binaries (initdb) found and AGENTWIRE_TEST_POSTGRES_URL unset: \
                     skipping the PostgreSQL tests"
                );
            }
            found
        })
        .as_ref()
}

/// The folder holding `initdb` and `postgres`.
fn bin_dir() -> Option<PathBuf> {
    if let Ok(out) = Command::new("pg_config").arg("--bindir").output()
        && out.status.success()
    {
        let dir = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        if dir.join("initdb").exists() {
            return Some(dir);
        }
    }
    let mut candidates: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path().join("bin")))
        .filter(|p| p.join("initdb").exists())
        .collect();
    candidates.sort();
    candidates.pop()
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// Runs a command as the `postgres` user when we are root.
fn as_pg_user(root: bool, program: &Path) -> Command {
    if root {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--"]).arg(program);
        c
    } else {
        Command::new(program)
    }
}

fn start() -> Option<TestPostgres> {
    let bin = bin_dir()?;
    let root = is_root();
    let dir = std::env::temp_dir().join(format!(
        "agentwire-pg-{}-{}",
        std::process::id(),
        uuid::Uuid::new_v4().simple()
    ));
    std::fs::create_dir_all(&dir).ok()?;
    if root {
        Command::new("chown")
            .args(["-R", "postgres:postgres"])
            .arg(&dir)
            .status()
            .ok()?;
    }
    let data = dir.join("data");
    let ok = as_pg_user(root, &bin.join("initdb"))
        .args(["-D"])
        .arg(&data)
        .args([
            "-U",
            "postgres",
            "-A",
            "trust",
            "-E",
            "UTF8",
            "--locale=C.UTF-8",
            "--no-sync",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .ok()?
        .success();
    if !ok {
        eprintln!("note: initdb failed in {}", dir.display());
        return None;
    }
    let port = free_port();
    // The server runs under a watchdog shell: when this test process is gone,
    // the server is stopped and its folder removed.
    let script = r#"
        "$1/postgres" -D "$2/data" -p "$3" -k "$2" -c listen_addresses=127.0.0.1 \
            -c fsync=off -c synchronous_commit=off -c full_page_writes=off \
            -c max_connections=300 > "$2/server.log" 2>&1 &
        pg=$!
        while [ -d "/proc/$4" ]; do sleep 1; done
        kill -INT "$pg"; wait "$pg"; rm -rf "$2"
    "#;
    let shell = if root {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--", "sh", "-c", script, "sh"]);
        c
    } else {
        let mut c = Command::new("sh");
        c.args(["-c", script, "sh"]);
        c
    };
    let mut shell = shell;
    shell
        .arg(&bin)
        .arg(&dir)
        .arg(port.to_string())
        .arg(std::process::id().to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    for _ in 0..200 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            // Accepting connections is not yet accepting queries; pg_isready knows.
            let ready = Command::new(bin.join("pg_isready"))
                .args(["-h", "127.0.0.1", "-p", &port.to_string(), "-U", "postgres"])
                .stdout(Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            if ready {
                return Some(TestPostgres {
                    base: format!("postgres://postgres@127.0.0.1:{port}"),
                    data_dir: Some(dir),
                });
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    eprintln!(
        "note: the test PostgreSQL did not start; see {}/server.log",
        dir.display()
    );
    None
}
