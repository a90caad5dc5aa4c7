//! Seed 003's product over its own routes: a user connects a database (a
//! SQLite file, or the test suite's PostgreSQL with a password), binds it to
//! a thread, and asks; a model on a local OpenAI-compatible server writes the
//! SQL, the server runs it read-only, and the thread's state keeps the
//! result. A model's write is refused and the data stays.

use serde_json::{Value, json};
use sqlx::Connection;

use crate::mock_llm::MockServer;
use crate::sse::{all, open};
use crate::support::*;
use crate::vendors::{OpenAiWire, Wire};

const W: OpenAiWire = OpenAiWire;
const KEY: &str = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";
const OTHER_KEY: &str = "ff0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";

const SALES: &[&str] = &[
    "CREATE TABLE regions (id INTEGER PRIMARY KEY, name TEXT NOT NULL)",
    "CREATE TABLE sales (id INTEGER PRIMARY KEY, region_id INTEGER NOT NULL, amount INTEGER NOT NULL)",
    "INSERT INTO regions (id, name) VALUES (1, 'North'), (2, 'South')",
    "INSERT INTO sales (id, region_id, amount) VALUES (1, 1, 10), (2, 1, 5), (3, 2, 7)",
];
const TOTALS: &str = "SELECT r.name AS region, SUM(s.amount) AS total FROM sales s \
                      JOIN regions r ON r.id = s.region_id GROUP BY r.name ORDER BY r.name";

fn analyst(llm: &MockServer) -> String {
    format!(
        r#"id: analyst
model: {{provider: openai, name: test-model, base_url: "{}/v1", api_key_env: AGENTWIRE_TEST_KEY}}
system_prompt: You answer questions about the user's data.
tools:
  - name: ask_database
    builtin: ask_database
  - name: ask_analyst
    builtin: ask_analyst
"#,
        llm.url()
    )
}

/// The model: ask, write `first` (refused or failing), ask again, write the
/// right SQL, answer.
fn replies(first: &str) -> Vec<crate::mock_llm::Reply> {
    let ask = |id: &str| {
        W.tools(
            None,
            &[(
                id,
                "ask_database",
                r#"{"question":"total sales by region"}"#,
            )],
            (1, 1),
        )
    };
    vec![
        ask("call_1"),
        W.text(&[&format!("```sql\n{first}\n```")], (1, 1)),
        ask("call_2"),
        W.text(&[TOTALS], (1, 1)),
        W.text(&["North leads."], (1, 1)),
    ]
}

async fn start(
    llm: &MockServer,
    files: &std::path::Path,
    key: &str,
    dir: Option<tempfile::TempDir>,
) -> Server {
    crate::providers::set_key();
    let opts = Opts {
        settings: agentwire::config::Settings {
            master_key: Some(key.into()),
            connection_files_dir: Some(files.to_owned()),
            // The suite's PostgreSQL is on loopback, like this server.
            connection_hosts: Some(vec!["127.0.0.1".into()]),
            ..Default::default()
        },
        agents: vec![("analyst.yaml".into(), analyst(llm))],
    };
    match dir {
        Some(dir) => Server::start_in(dir, opts).await,
        None => Server::start_with(opts).await,
    }
}

/// A fresh database on the suite's PostgreSQL (None: no PostgreSQL here):
/// its URL and a connection as the server's superuser.
async fn fresh_postgres() -> Option<(String, sqlx::PgConnection)> {
    let url = agentwire::testing::postgres()?.fresh_database().await;
    let db = sqlx::PgConnection::connect(&url).await.unwrap();
    Some((url, db))
}

/// A connection's body for the database at `url`, as `username`, with `more`.
fn pg_connection(url: &str, username: &str, more: Value) -> Value {
    let parsed = reqwest::Url::parse(url).unwrap();
    let mut body = json!({"name": username, "driver": "postgres", "host": parsed.host_str().unwrap(),
        "port": parsed.port().unwrap_or(5432), "database": parsed.path().trim_start_matches('/'),
        "username": username});
    body.as_object_mut()
        .unwrap()
        .extend(more.as_object().unwrap().clone());
    body
}

async fn post(server: &Server, path: &str, body: Value) -> (u16, Value) {
    http_json(server, "POST", path, &body.to_string()).await
}

/// Binds a new thread to `connection`, asks, and checks the answer and state.
async fn ask(server: &Server, llm: &MockServer, connection: &str) -> String {
    let (_, t) = post(server, "/chat", json!({"agent": "analyst"})).await;
    let thread = t["thread_id"].as_str().unwrap().to_owned();
    let (status, bound) = post(
        server,
        &format!("/chat/{thread}/connection"),
        json!({"connection_id": connection}),
    )
    .await;
    assert_eq!(status, 200, "{bound}");
    let schema = bound["db_schema"].as_str().unwrap();
    assert!(
        schema.contains("sales") && schema.contains("region_id") && schema.contains("North"),
        "{schema}"
    );
    assert_eq!(bound["connection"]["connection_id"], connection);
    assert_eq!(bound["sql_result"], Value::Null);

    let before = llm.requests().len();
    let o = open(
        server,
        "POST",
        &format!("/chat/{thread}/message"),
        Some(json!({"message": "total sales by region"})),
        None,
    )
    .await;
    let events = all(o.events).await;
    let results: Vec<&Value> = events
        .iter()
        .filter(|e| e.data["type"] == "tool_result")
        .map(|e| &e.data["content"])
        .collect();
    assert_eq!(results.len(), 2, "{events:?}");
    // The refused write is told plainly to the model, not as the syntax
    // error our wrapping made of it.
    let refused = results[0].as_str().unwrap();
    assert!(
        refused.starts_with("Query failed: only one read-only SELECT may run"),
        "{refused}"
    );
    assert_eq!(results[1]["columns"], json!(["region", "total"]));
    assert_eq!(results[1]["rows"][0][0], "North");
    assert_eq!(results[1]["rows"][0][1].as_f64(), Some(15.0));
    assert_eq!(events.last().unwrap().data["full_response"], "North leads.");

    // The run's prompt is grounded on the schema (seed 003's aigis_prompt)…
    let system = llm.requests()[before].body["messages"][0]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        system.contains("connected database") && system.contains("region_id"),
        "{system}"
    );
    // …and so was the call that wrote the SQL.
    let writer = &llm.requests()[llm.requests().len() - 4].body;
    assert!(
        writer["messages"][0]["content"]
            .as_str()
            .unwrap()
            .contains("region_id")
    );

    // The SQL-writing calls count in the run's usage: five calls of 1 + 1 tokens.
    let (_, page) = http_json(
        server,
        "GET",
        &format!("/v1/chats/{thread}/events?limit=100"),
        "",
    )
    .await;
    let summary = page["events"]
        .as_array()
        .unwrap()
        .iter()
        .rfind(|e| e["type"] == "chat.usage_summary")
        .unwrap()
        .clone();
    assert_eq!(summary["total_tokens"], 10, "{summary}");

    let (_, state) = http_json(server, "GET", &format!("/chat/{thread}/state"), "").await;
    assert_eq!(state["sql_result"]["columns"], json!(["region", "total"]));
    assert_eq!(state["connection"]["connection_id"], connection);
    thread
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sqlite_file_answers_and_a_write_is_refused() {
    let files = tempfile::tempdir().unwrap();
    let path = files.path().join("shop.db");
    let o = sqlx::sqlite::SqliteConnectOptions::new()
        .filename(&path)
        .create_if_missing(true);
    let mut db = sqlx::SqliteConnection::connect_with(&o).await.unwrap();
    for s in SALES {
        sqlx::query(*s).execute(&mut db).await.unwrap();
    }
    let llm = MockServer::start(replies("DROP TABLE sales")).await;
    let server = start(&llm, files.path(), KEY, None).await;
    let (_, c) = post(
        &server,
        "/connections",
        json!({"name": "shop", "driver": "sqlite", "path": "shop.db"}),
    )
    .await;
    ask(&server, &llm, c["id"].as_str().unwrap()).await;
    let left: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM sales")
        .fetch_one(&mut db)
        .await
        .unwrap();
    assert_eq!(left, 3, "the table and its rows are still there");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_postgres_database_with_a_password_and_a_changed_master_key() {
    let Some((url, mut db)) = fresh_postgres().await else {
        return;
    };
    for s in SALES {
        sqlx::query(*s).execute(&mut db).await.unwrap();
    }
    // A role of the user's own, with a password.
    sqlx::query("CREATE ROLE analyst LOGIN PASSWORD 'pw-analyst-42'")
        .execute(&mut db)
        .await
        .ok();
    sqlx::query("GRANT SELECT ON ALL TABLES IN SCHEMA public TO analyst")
        .execute(&mut db)
        .await
        .unwrap();
    let files = tempfile::tempdir().unwrap();
    let llm = MockServer::start(replies("UPDATE sales SET amount = 0")).await;
    let server = start(&llm, files.path(), KEY, None).await;
    let body = pg_connection(
        &url,
        "analyst",
        json!({"name": "warehouse", "password": "pw-analyst-42"}),
    );
    let (status, c) = post(&server, "/v1/connections", body).await;
    assert_eq!(status, 201, "{c}");
    let id = c["id"].as_str().unwrap().to_owned();
    ask(&server, &llm, &id).await;
    let total: i64 = sqlx::query_scalar("SELECT SUM(amount)::bigint FROM sales")
        .fetch_one(&mut db)
        .await
        .unwrap();
    assert_eq!(total, 22, "nothing was changed");

    // Another master key cannot open the password, and says so.
    let dir = server.stop().await;
    let llm2 = MockServer::start(vec![]).await;
    let server = start(&llm2, files.path(), OTHER_KEY, Some(dir)).await;
    let (_, t) = post(&server, "/chat", json!({"agent": "analyst"})).await;
    let thread = t["thread_id"].as_str().unwrap().to_owned();
    let (status, err) = post(
        &server,
        &format!("/chat/{thread}/connection"),
        json!({"connection_id": id}),
    )
    .await;
    assert_eq!(
        (status, &err["error"]["code"]),
        (409, &json!("MASTER_KEY_MISMATCH")),
        "{err}"
    );
    assert!(
        err["error"]["message"]
            .as_str()
            .unwrap()
            .contains("master key"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_owner_binds_and_reads_the_state() {
    use crate::auth::{SECRET, token};
    let files = tempfile::tempdir().unwrap();
    std::fs::write(files.path().join("shop.db"), b"").unwrap();
    let server = Server::start_with(Opts {
        settings: agentwire::config::Settings {
            auth: Some(agentwire::config::AuthMode::Jwt),
            jwt_secret: Some(SECRET.into()),
            connection_files_dir: Some(files.path().to_owned()),
            ..Default::default()
        },
        ..Default::default()
    })
    .await;
    let client = agentwire::llm::http_client();
    let url = |p: &str| format!("http://{}{p}", server.addr);
    let (alice, bob) = (token("alice", 600, SECRET), token("bob", 600, SECRET));
    let c: Value = client
        .post(url("/connections"))
        .bearer_auth(&alice)
        .json(&json!({"name": "shop", "driver": "sqlite", "path": "shop.db"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let t: Value = client
        .post(url("/chat"))
        .bearer_auth(&alice)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let thread = t["thread_id"].as_str().unwrap();
    let bind = json!({"connection_id": c["id"]});
    // Bob can neither bind Alice's thread nor use Alice's connection.
    let r = client
        .post(url(&format!("/chat/{thread}/connection")))
        .bearer_auth(&bob)
        .json(&bind)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    let t2: Value = client
        .post(url("/chat"))
        .bearer_auth(&bob)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let theirs = t2["thread_id"].as_str().unwrap();
    let r = client
        .post(url(&format!("/chat/{theirs}/connection")))
        .bearer_auth(&bob)
        .json(&bind)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    let r = client
        .get(url(&format!("/chat/{thread}/state")))
        .bearer_auth(&bob)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    let r = client
        .post(url(&format!("/chat/{thread}/connection")))
        .bearer_auth(&alice)
        .json(&bind)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let state: Value = client
        .get(url(&format!("/v1/chats/{thread}/state")))
        .bearer_auth(&alice)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(state["connection"]["user_id"], "alice");
    assert_eq!(state["db_schema"], "The database has no tables.\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chart_after_three_bad_specs_and_an_error_after_four() {
    let files = tempfile::tempdir().unwrap();
    let o = sqlx::sqlite::SqliteConnectOptions::new()
        .filename(files.path().join("shop.db"))
        .create_if_missing(true);
    let mut db = sqlx::SqliteConnection::connect_with(&o).await.unwrap();
    for s in SALES {
        sqlx::query(*s).execute(&mut db).await.unwrap();
    }
    let call = |id: &str, tool: &str| {
        W.tools(
            None,
            &[(
                id,
                tool,
                r#"{"question":"total sales by region as a bar chart"}"#,
            )],
            (1, 1),
        )
    };
    let good = r#"{"mark": "bar", "data": {"values": [{"region": "North", "total": 15}]}, "encoding": {"x": {"field": "region"}}}"#;
    let bad = [
        "not json",
        "[1, 2]",
        r#"{"encoding": {}}"#,
        r#"{"mark": "bar"}"#,
    ];
    let mut replies = vec![
        call("c1", "ask_database"),
        W.text(&[TOTALS], (1, 1)),
        call("c2", "ask_analyst"),
    ];
    replies.extend(bad[..3].iter().map(|b| W.text(&[b], (1, 1))));
    replies.push(W.text(&[good], (1, 1)));
    replies.push(W.text(&["Here is the chart."], (1, 1)));
    replies.push(call("c3", "ask_analyst"));
    replies.extend(bad.iter().map(|b| W.text(&[b], (1, 1))));
    replies.push(W.text(&["No chart, sorry."], (1, 1)));
    let llm = MockServer::start(replies).await;
    let server = start(&llm, files.path(), KEY, None).await;
    let (_, c) = post(
        &server,
        "/connections",
        json!({"name": "shop", "driver": "sqlite", "path": "shop.db"}),
    )
    .await;
    let (_, t) = post(&server, "/chat", json!({"agent": "analyst"})).await;
    let thread = t["thread_id"].as_str().unwrap().to_owned();
    let (status, _) = post(
        &server,
        &format!("/chat/{thread}/connection"),
        json!({"connection_id": c["id"]}),
    )
    .await;
    assert_eq!(status, 200);

    let turn = |message: &'static str| {
        let path = format!("/chat/{thread}/message");
        let server = &server;
        async move {
            let o = open(
                server,
                "POST",
                &path,
                Some(json!({"message": message})),
                None,
            )
            .await;
            all(o.events).await
        }
    };
    let events = turn("total sales by region as a bar chart").await;
    let chart = events
        .iter()
        .map(|e| &e.data["content"])
        .find(|c| c["type"] == "vega_lite_spec")
        .unwrap_or_else(|| panic!("a chart: {events:?}"));
    let spec: Value = serde_json::from_str(chart["spec"].as_str().unwrap()).unwrap();
    assert_eq!(spec["mark"], "bar");
    // Each bad spec went back with what was wrong.
    let fixes = &llm.requests()[6].body["messages"];
    let last = fixes.as_array().unwrap().last().unwrap()["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(last.contains("no `mark`"), "{last}");

    let events = turn("again").await;
    let failed = events
        .iter()
        .filter_map(|e| e.data["content"].as_str())
        .find(|c| c.contains("no valid Vega-Lite spec after 4 attempts"));
    assert!(failed.is_some(), "{events:?}");
    assert_eq!(
        events.last().unwrap().data["full_response"],
        "No chart, sorry."
    );
}

/// A role that can do more than read (a superuser, a member of
/// `pg_signal_backend`…) is refused at the binding unless its connection
/// says `allow_privileged_role: true`; nothing is bound when refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_postgres_role_that_can_do_more_than_read_is_not_bound() {
    let Some((url, mut db)) = fresh_postgres().await else {
        return;
    };
    let signals = format!("signals_{}", uuid::Uuid::new_v4().simple());
    for s in [
        format!("CREATE ROLE {signals} LOGIN"),
        format!("GRANT pg_signal_backend TO {signals}"),
    ] {
        sqlx::query(sqlx::AssertSqlSafe(s))
            .execute(&mut db)
            .await
            .unwrap();
    }
    let files = tempfile::tempdir().unwrap();
    let llm = MockServer::start(vec![]).await;
    let server = start(&llm, files.path(), KEY, None).await;
    let connection = |user: &str, allow: bool| {
        pg_connection(&url, user, json!({"allow_privileged_role": allow}))
    };
    let bind = |connection: Value| {
        let server = &server;
        async move {
            let (status, c) = post(server, "/v1/connections", connection).await;
            assert_eq!(status, 201, "{c}");
            let (_, t) = post(server, "/chat", json!({"agent": "analyst"})).await;
            let thread = t["thread_id"].as_str().unwrap().to_owned();
            let (status, answer) = post(
                server,
                &format!("/chat/{thread}/connection"),
                json!({"connection_id": c["id"]}),
            )
            .await;
            let (_, state) = http_json(server, "GET", &format!("/chat/{thread}/state"), "").await;
            (status, answer, state)
        }
    };
    // The test server's own `postgres` user is a superuser.
    for (user, power) in [
        ("postgres", "superuser"),
        (signals.as_str(), "pg_signal_backend"),
    ] {
        let (status, err, state) = bind(connection(user, false)).await;
        assert_eq!(
            (status, &err["error"]["code"]),
            (400, &json!("SCHEMA_VALIDATION_FAILED")),
            "{user}: {err}"
        );
        let message = err["error"]["message"].as_str().unwrap();
        assert!(
            message.contains(power) && message.contains("allow_privileged_role"),
            "{message}"
        );
        assert_eq!(state["connection"], Value::Null, "nothing was bound");
    }
    let (status, bound, _) = bind(connection("postgres", true)).await;
    assert_eq!(status, 200, "{bound}");
    assert_eq!(bound["db_schema"], "The database has no tables.\n");
}
