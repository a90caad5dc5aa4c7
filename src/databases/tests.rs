use super::*;
use crate::store::SqliteStore;

fn spec(driver: Driver) -> ConnectionSpec {
    ConnectionSpec {
        name: "sales".into(),
        driver,
        host: None,
        port: None,
        database: None,
        username: None,
        path: None,
        allow_privileged_role: false,
    }
}

#[tokio::test]
async fn specs_are_checked_and_files_stay_in_their_folder() {
    let dir = tempfile::tempdir().unwrap();
    let files = dir.path().join("files");
    std::fs::create_dir(&files).unwrap();
    std::fs::write(files.join("shop.db"), b"").unwrap();
    std::fs::write(dir.path().join("secret.db"), b"").unwrap();
    let store: Arc<dyn Store> =
        Arc::new(SqliteStore::open(&dir.path().join("s.db")).await.unwrap());
    let conns = Connections::new(store.clone(), None, Some(files.clone()), vec![]);

    let mut pg = spec(Driver::Postgres);
    let err = conns.create("u", pg.clone(), None).await.unwrap_err();
    assert!(err.to_string().contains("host"), "{err}");
    pg.host = Some("203.0.113.5".into());
    pg.database = Some("shop".into());
    pg.username = Some("u".into());
    let made = conns.create("u", pg.clone(), None).await.unwrap();
    assert!(!made.has_password);
    // A password needs the master key, and says which variable.
    let err = conns.create("u", pg, Some("pw".into())).await.unwrap_err();
    assert!(err.to_string().contains(MASTER_KEY_VAR), "{err}");

    let mut lite = spec(Driver::Sqlite);
    lite.path = Some("shop.db".into());
    conns.create("u", lite.clone(), None).await.unwrap();
    for escape in ["../secret.db", "missing.db", "/etc/passwd", ""] {
        lite.path = Some(escape.into());
        let err = conns.create("u", lite.clone(), None).await.unwrap_err();
        assert!(matches!(err, DbError::Invalid(_)), "{escape}: {err}");
    }
    // No folder: no sqlite connections at all.
    let off = Connections::new(store, None, None, vec![]);
    lite.path = Some("shop.db".into());
    let err = off.create("u", lite, None).await.unwrap_err();
    assert!(err.to_string().contains("connection_files_dir"), "{err}");
}

#[tokio::test]
async fn passwords_are_sealed_kept_and_cleared() {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn Store> =
        Arc::new(SqliteStore::open(&dir.path().join("s.db")).await.unwrap());
    let conns = Connections::new(store.clone(), Some([3; 32]), None, vec![]);
    let mut pg = spec(Driver::Postgres);
    pg.host = Some("203.0.113.5".into());
    pg.database = Some("shop".into());
    pg.username = Some("u".into());
    let c = conns
        .create("u", pg.clone(), Some("hunter2".into()))
        .await
        .unwrap();
    assert!(c.has_password);
    let raw = store.connection("u", c.id).await.unwrap().unwrap();
    assert!(!String::from_utf8_lossy(raw.secret.as_ref().unwrap()).contains("hunter2"));
    assert_eq!(
        conns.open("u", c.id).await.unwrap().1.as_deref(),
        Some("hunter2")
    );
    assert!(matches!(
        conns.open("v", c.id).await,
        Err(DbError::NotFound)
    ));

    // Another master key cannot read it, and says so.
    let other = Connections::new(store.clone(), Some([4; 32]), None, vec![]);
    let err = other.open("u", c.id).await.unwrap_err();
    assert!(err.to_string().contains("master key"), "{err}");

    pg.name = "renamed".into();
    let kept = conns
        .update("u", c.id, pg.clone(), Password::Keep)
        .await
        .unwrap();
    assert!(kept.has_password && kept.spec.name == "renamed");
    assert_eq!(
        conns.open("u", c.id).await.unwrap().1.as_deref(),
        Some("hunter2")
    );
    let cleared = conns
        .update("u", c.id, pg.clone(), Password::Clear)
        .await
        .unwrap();
    assert!(!cleared.has_password);
    assert!(matches!(
        conns.update("v", c.id, pg, Password::Keep).await,
        Err(DbError::NotFound)
    ));
    conns.delete("u", c.id).await.unwrap();
    assert!(matches!(
        conns.delete("u", c.id).await,
        Err(DbError::NotFound)
    ));
}

mod queries {
    use std::str::FromStr;
    use std::time::Duration;

    use serde_json::{Value, json};
    use sqlx::Connection;

    use crate::databases::introspect::snapshot;
    use crate::databases::query::{ONLY_READS, QueryLimits, Target, run};

    const SALES: &[&str] = &[
        "CREATE TABLE regions (id INTEGER PRIMARY KEY, name TEXT NOT NULL)",
        "CREATE TABLE sales (id INTEGER PRIMARY KEY, region_id INTEGER NOT NULL, amount REAL NOT NULL)",
        "INSERT INTO regions (id, name) VALUES (1, 'North'), (2, 'South')",
        "INSERT INTO sales (id, region_id, amount) VALUES (1, 1, 10.5), (2, 1, 4.5), (3, 2, 7.0), (4, 2, 1.0), (5, 2, 2.0)",
    ];
    const TOTALS: &str = "SELECT r.name AS region, SUM(s.amount) AS total FROM sales s JOIN regions r ON r.id = s.region_id GROUP BY r.name ORDER BY r.name;";

    async fn sqlite_db(dir: &std::path::Path) -> Target {
        let path = dir.join("shop.db");
        let o = sqlx::sqlite::SqliteConnectOptions::new()
            .filename(&path)
            .create_if_missing(true);
        let mut conn = sqlx::SqliteConnection::connect_with(&o).await.unwrap();
        for s in SALES {
            sqlx::query(*s).execute(&mut conn).await.unwrap();
        }
        conn.close().await.unwrap();
        Target::Sqlite(path)
    }

    async fn postgres_db() -> Option<Target> {
        let url = crate::testing::postgres()?.fresh_database().await;
        let mut conn = sqlx::PgConnection::connect(&url).await.unwrap();
        for s in SALES {
            sqlx::query(sqlx::AssertSqlSafe(s.replace("REAL", "DOUBLE PRECISION")))
                .execute(&mut conn)
                .await
                .unwrap();
        }
        Some(Target::postgres(role(&url, "SELECT", &[]).await, false))
    }

    /// A new login role on `url`'s database, granted `privileges` on its
    /// tables and then `grants` (whole statements, `{role}` its name): the
    /// options to connect as it.
    pub(super) async fn role(
        url: &str,
        privileges: &str,
        grants: &[&str],
    ) -> sqlx::postgres::PgConnectOptions {
        let mut conn = sqlx::PgConnection::connect(url).await.unwrap();
        let name = format!("r_{}", uuid::Uuid::new_v4().simple());
        let database = url.rsplit('/').next().unwrap();
        let setup = [
            format!("CREATE ROLE {name} LOGIN"),
            format!("GRANT CONNECT ON DATABASE {database} TO {name}"),
            format!("GRANT USAGE ON SCHEMA public TO {name}"),
            format!("GRANT {privileges} ON ALL TABLES IN SCHEMA public TO {name}"),
        ];
        let more = grants.iter().map(|g| g.replace("{role}", &name));
        for statement in setup.into_iter().chain(more) {
            sqlx::query(sqlx::AssertSqlSafe(statement))
                .execute(&mut conn)
                .await
                .unwrap();
        }
        sqlx::postgres::PgConnectOptions::from_str(url)
            .unwrap()
            .username(&name)
    }

    async fn behaves(target: Target) {
        let limits = QueryLimits::default();
        let r = run(&target, TOTALS, limits).await.unwrap();
        assert_eq!(r.columns, ["region", "total"]);
        let got: Vec<(Value, f64)> = r
            .rows
            .iter()
            .map(|row| (row[0].clone(), row[1].as_f64().unwrap()))
            .collect();
        assert_eq!(got, vec![(json!("North"), 15.0), (json!("South"), 10.0)]);
        assert_eq!(r.truncated, None);

        // Nothing the SQL says can change the data, and the model is told
        // plainly what may run (not a syntax error our wrapping caused).
        for write in [
            "DROP TABLE sales",
            "DELETE FROM sales",
            "INSERT INTO regions (id, name) VALUES (3, 'East')",
            "UPDATE sales SET amount = 0",
        ] {
            let err = run(&target, write, limits).await.unwrap_err();
            assert_eq!(err, ONLY_READS, "{write}");
        }
        for write in [
            "SELECT 1; DROP TABLE sales",
            "WITH d AS (DELETE FROM sales RETURNING *) SELECT * FROM d",
        ] {
            let err = run(&target, write, limits).await.unwrap_err();
            assert!(!err.is_empty(), "{write}");
        }
        let count = run(&target, "SELECT COUNT(*) AS n FROM sales", limits)
            .await
            .unwrap();
        assert_eq!(count.rows[0][0], json!(5), "every row is still there");

        // Caps: rows, then bytes; said in the result.
        let capped = QueryLimits {
            max_rows: 2,
            ..limits
        };
        let r = run(&target, "SELECT * FROM sales ORDER BY id", capped)
            .await
            .unwrap();
        assert_eq!(r.rows.len(), 2);
        assert!(r.truncated.unwrap().contains("first 2 rows"));
        let tiny = QueryLimits {
            max_bytes: 20,
            ..limits
        };
        let r = run(&target, "SELECT * FROM sales ORDER BY id", tiny)
            .await
            .unwrap();
        assert!(r.rows.len() < 5 && r.truncated.unwrap().contains("20 bytes"));
        let err = run(&target, "SELECT nope FROM sales", limits)
            .await
            .unwrap_err();
        assert!(err.contains("nope"), "{err}");

        let md = snapshot(&target, limits).await.unwrap();
        assert!(
            md.contains("## regions") || md.contains("## \"regions\""),
            "{md}"
        );
        assert!(md.contains("| region_id |"), "{md}");
        assert!(
            md.contains("| 1 | North |"),
            "a sample row of regions: {md}"
        );
        assert!(
            md.matches("| 1 |").count() <= 6,
            "three sample rows at most: {md}"
        );
    }

    #[tokio::test]
    async fn a_runaway_sqlite_query_is_interrupted() {
        let dir = tempfile::tempdir().unwrap();
        let target = sqlite_db(dir.path()).await;
        let limits = QueryLimits {
            timeout: Duration::from_millis(500),
            ..QueryLimits::default()
        };
        let forever = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c";
        let started = std::time::Instant::now();
        let err = run(&target, forever, limits).await.unwrap_err();
        assert!(err.contains("interrupt"), "{err}");
        assert!(started.elapsed() < Duration::from_secs(5));
    }

    #[tokio::test]
    async fn sqlite_is_read_only_and_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let target = sqlite_db(dir.path()).await;
        behaves(target).await;
        // ATTACH cannot reach another file: it is not a query.
        let target = Target::Sqlite(dir.path().join("shop.db"));
        let attach = format!(
            "ATTACH DATABASE '{}' AS x",
            dir.path().join("other.db").display()
        );
        assert!(run(&target, &attach, QueryLimits::default()).await.is_err());
        assert!(!dir.path().join("other.db").exists());
    }

    #[tokio::test]
    async fn postgres_is_read_only_bounded_and_timed() {
        let Some(target) = postgres_db().await else {
            return;
        };
        // A function that writes, called from a query: the read-only
        // transaction refuses it (not the SQL's shape).
        let url = crate::testing::postgres().unwrap().fresh_database().await;
        let mut conn = sqlx::PgConnection::connect(&url).await.unwrap();
        for s in SALES {
            sqlx::query(sqlx::AssertSqlSafe(s.replace("REAL", "DOUBLE PRECISION")))
                .execute(&mut conn)
                .await
                .unwrap();
        }
        sqlx::query(
            "CREATE FUNCTION wipe() RETURNS int LANGUAGE sql AS 'DELETE FROM sales; SELECT 1'",
        )
        .execute(&mut conn)
        .await
        .unwrap();
        // A role that may write (so the read-only transaction, not its
        // rights, is what refuses).
        let own = Target::postgres(role(&url, "ALL", &[]).await, false);
        let err = run(&own, "SELECT wipe()", QueryLimits::default())
            .await
            .unwrap_err();
        assert_eq!(err, ONLY_READS);
        for write in [
            "SELECT * INTO copy FROM sales",
            "WITH d AS (DELETE FROM sales RETURNING *) SELECT * FROM d",
        ] {
            let err = run(&own, write, QueryLimits::default()).await.unwrap_err();
            assert_eq!(err, ONLY_READS, "{write}");
        }
        // The SQL's own mistakes keep the database's words, for the model
        // to fix.
        let err = run(&own, "SELEC 1", QueryLimits::default())
            .await
            .unwrap_err();
        assert!(err.contains("SELEC"), "{err}");
        let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM sales")
            .fetch_one(&mut conn)
            .await
            .unwrap();
        assert_eq!(n, 5);
        // Equal column names stay apart.
        let r = run(&own, "SELECT 1 AS a, 2 AS a", QueryLimits::default())
            .await
            .unwrap();
        assert_eq!(r.rows, vec![vec![json!(1), json!(2)]]);

        let slow = QueryLimits {
            timeout: Duration::from_secs(1),
            ..QueryLimits::default()
        };
        let err = run(&target, "SELECT pg_sleep(30)", slow).await.unwrap_err();
        assert!(
            err.contains("statement timeout") || err.contains("canceling"),
            "{err}"
        );
        behaves(target).await;
    }
}

#[tokio::test]
async fn the_example_database_answers() {
    use crate::databases::query::{QueryLimits, Target, run};
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/data/sales.db");
    let target = Target::Sqlite(path);
    let md = crate::databases::introspect::snapshot(&target, QueryLimits::default())
        .await
        .unwrap();
    for table in ["orders", "customers", "products", "regions"] {
        assert!(md.contains(&format!("## \"{table}\"")), "{md}");
    }
    let by_region = "SELECT r.name, SUM(o.quantity * p.unit_price) AS sales FROM orders o \
                     JOIN customers c ON c.id = o.customer_id JOIN regions r ON r.id = c.region_id \
                     JOIN products p ON p.id = o.product_id GROUP BY r.name ORDER BY r.name";
    let r = run(&target, by_region, QueryLimits::default())
        .await
        .unwrap();
    assert_eq!(r.rows.len(), 4);
}

/// Roles that can do more than read: refused on every connection unless the
/// connection allows them; a read-only role is not.
#[tokio::test]
async fn a_postgres_role_that_can_do_more_than_read_is_refused() {
    use crate::databases::query::{QueryLimits, Target, powers, run};
    use std::str::FromStr;
    let Some(pg) = crate::testing::postgres() else {
        return;
    };
    let url = pg.fresh_database().await;
    // The test server's own user is a superuser.
    let superuser = sqlx::postgres::PgConnectOptions::from_str(&url).unwrap();
    let signals = queries::role(&url, "SELECT", &["GRANT pg_signal_backend TO {role}"]).await;
    let reader = queries::role(&url, "SELECT", &[]).await;
    for (options, power) in [(superuser, "superuser"), (signals, "pg_signal_backend")] {
        let refused = Target::postgres(options.clone(), false);
        assert_eq!(powers(&refused).await.unwrap(), [power]);
        let err = run(&refused, "SELECT 1", QueryLimits::default())
            .await
            .unwrap_err();
        assert!(
            err.contains(power) && err.contains("allow_privileged_role"),
            "{err}"
        );
        let allowed = Target::postgres(options, true);
        let r = run(&allowed, "SELECT 1 AS one", QueryLimits::default())
            .await
            .unwrap();
        assert_eq!(r.rows, vec![vec![serde_json::json!(1)]]);
    }
    let reader = Target::postgres(reader, false);
    assert!(powers(&reader).await.unwrap().is_empty());
    run(&reader, "SELECT 1", QueryLimits::default())
        .await
        .unwrap();
}

#[tokio::test]
async fn a_host_must_be_written_plainly_and_lead_outside_at_every_address() {
    use super::spec::reach;
    // Numbers in the forms only some parsers read, each 127.0.0.1 or 10.0.0.1.
    for host in [
        "127.1",
        "2130706433",
        "0x7f000001",
        "0177.0.0.1",
        "0",
        "10.1",
        "127.0.0.1.",
        "0X7F.1",
    ] {
        let err = reach(host, 5432).await.unwrap_err();
        assert!(err.contains("usual form"), "{host}: {err}");
    }
    // Canonical, but inside: loopback, private, "this network", shared,
    // link-local (the cloud metadata address), multicast, IPv6 and IPv4
    // carried in IPv6.
    for host in [
        "127.0.0.1",
        "10.1.2.3",
        "0.0.0.0",
        "0.1.2.3",
        "100.64.0.1",
        "169.254.169.254",
        "224.0.0.1",
        "[::1]",
        "::",
        "[fe80::1]",
        "[fd00::1]",
        "[::ffff:127.0.0.1]",
        "[::ffff:7f00:1]",
        "[::127.0.0.1]",
        "[64:ff9b::a00:1]",
    ] {
        let err = reach(host, 5432).await.unwrap_err();
        assert!(err.contains("own network"), "{host}: {err}");
    }
    // A name is resolved, and refused for where it leads.
    let err = reach("localhost", 5432).await.unwrap_err();
    assert!(err.contains("resolves to 127.0.0.1"), "{err}");
    for host in ["/var/run/postgresql", "@pg", "fe80::1%eth0", "a host", ""] {
        assert!(reach(host, 5432).await.is_err(), "{host}");
    }
    let err = reach("nowhere.invalid", 5432).await.unwrap_err();
    assert!(err.contains("`nowhere.invalid`"), "{err}");
    // Public addresses pass, as written.
    assert_eq!(
        reach("203.0.113.5", 5432).await.unwrap(),
        ["203.0.113.5".parse::<std::net::IpAddr>().unwrap()]
    );
    assert_eq!(
        reach("[2001:db8::1]", 5432).await.unwrap(),
        ["2001:db8::1".parse::<std::net::IpAddr>().unwrap()]
    );
}

#[test]
fn a_postgres_target_connects_to_the_checked_address() {
    use crate::databases::query::Target;
    let mut pg = spec(Driver::Postgres);
    pg.host = Some("db.example".into());
    let host = |address: Option<std::net::IpAddr>| match Target::new(&pg, None, None, address) {
        Target::Postgres(t) => t.options.get_host().to_owned(),
        Target::Sqlite(_) => panic!("a postgres target"),
    };
    assert_eq!(host(Some("203.0.113.5".parse().unwrap())), "203.0.113.5");
    assert_eq!(host(None), "db.example", "a listed host, as written");
}
