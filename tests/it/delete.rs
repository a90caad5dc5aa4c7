//! A chat deleted for good (`DELETE /v1/chats/{id}?purge=true`): gone from
//! the log, the list, search and every route, mid-run too, across a
//! restart; and `agentwire reindex`, which rebuilds the search index from
//! the log.

use std::time::Duration;

use serde_json::{Value, json};
use uuid::Uuid;

use crate::support::*;

async fn found(server: &Server, q: &str) -> Vec<String> {
    let (status, body) = http_json(server, "GET", &format!("/v1/chats?q={q}"), "").await;
    assert_eq!(status, 200, "{body}");
    let chats = body["chats"].as_array().unwrap();
    chats
        .iter()
        .map(|c| c["id"].as_str().unwrap().to_owned())
        .collect()
}

async fn purge(server: &Server, chat: Uuid) -> (u16, Value) {
    http_json(
        server,
        "DELETE",
        &format!("/v1/chats/{chat}?purge=true"),
        "",
    )
    .await
}

/// Reads for a while: everything `client` gets meanwhile.
async fn quiet(client: &mut Client, wait: Duration) -> Vec<Value> {
    let mut seen = Vec::new();
    while let Ok(v) = tokio::time::timeout(wait, client.recv()).await {
        seen.push(v);
    }
    seen
}

#[tokio::test]
async fn a_deleted_chat_is_gone_from_the_log_the_list_search_and_every_route() {
    let server = Server::start().await;
    let mut client = server.client().await;
    let (gone, kept) = (Uuid::new_v4(), Uuid::new_v4());
    client.start(gone, "pancakes for breakfast").await;
    client.until_complete(gone).await;
    client.start(kept, "pancakes for dinner").await;
    client.until_complete(kept).await;
    let mut other = server.client().await;
    other.resume(gone, 0).await;
    other
        .recv_until(|m| m["type"] == "chat.resume_boundary")
        .await;
    let mut both = found(&server, "pancakes").await;
    both.sort();
    let mut expected = [gone.to_string(), kept.to_string()];
    expected.sort();
    assert_eq!(both, expected);

    assert_eq!(purge(&server, gone).await.0, 204);
    // Every connection on it hears it is gone, once, and nothing after.
    for c in [&mut client, &mut other] {
        let said = c.recv().await;
        assert_eq!(
            (&said["type"], &said["chat_id"], &said["error_code"]),
            (&json!("chat.error"), &json!(gone), &json!("RESUME_FAILED")),
            "{said}"
        );
        assert_eq!(said.get("seq"), None, "not an envelope: {said}");
    }
    let (status, err) = http_json(&server, "GET", &format!("/v1/chats/{gone}"), "").await;
    assert_eq!(
        (status, &err["error"]["code"]),
        (404, &json!("RESUME_FAILED"))
    );
    assert_eq!(found(&server, "pancakes").await, [kept.to_string()]);
    assert_eq!(found(&server, "breakfast").await, Vec::<String>::new());
    let (_, listed) = http_json(&server, "GET", "/v1/chats", "").await;
    assert_eq!(listed["chats"].as_array().unwrap().len(), 1, "{listed}");
    let export = format!("/v1/chats/{gone}/export");
    assert_eq!(http_json(&server, "GET", &export, "").await.0, 404);
    for path in [
        format!("/v1/ai-sdk/chat/{gone}/messages"),
        format!("/v1/ag-ui/{gone}/messages"),
    ] {
        assert_eq!(
            http_json(&server, "GET", &path, "").await,
            (200, json!([])),
            "{path}"
        );
    }
    let (status, err) = purge(&server, gone).await;
    assert_eq!(
        (status, &err["error"]["code"]),
        (404, &json!("RESUME_FAILED")),
        "once"
    );
    let (status, _) = http_json(&server, "DELETE", &format!("/v1/chats/{gone}"), "").await;
    assert_eq!(status, 404, "nor archived");
    other.resume(gone, 0).await;
    let err = other.expect("chat.error").await;
    assert_eq!(err["error_code"], "RESUME_FAILED");

    // The id is free: a new chat under it starts at seq 1.
    client.start(gone, "waffles").await;
    let run = client.until_complete(gone).await;
    assert_eq!(run[0]["seq"], 1, "{}", run[0]);
    assert_eq!(found(&server, "pancakes").await, [kept.to_string()]);
}

#[tokio::test]
async fn a_chat_deleted_mid_run_stops_logging_and_stays_gone_after_a_restart() {
    let server = Server::start().await;
    let mut client = server.client().await;
    let chat = Uuid::new_v4();
    client.start(chat, "slow: 400").await;
    client
        .recv_until(|m| m["type"] == "chat.print" && m["chat_id"] == chat.to_string())
        .await;
    assert_eq!(purge(&server, chat).await.0, 204);
    let after = client
        .recv_until(|m| m["type"] == "chat.error" && m.get("seq").is_none())
        .await;
    assert_eq!(after.last().unwrap()["error_code"], "RESUME_FAILED");
    // The run was stopped: nothing more of the chat comes, logged or live.
    let late = quiet(&mut client, Duration::from_millis(500)).await;
    assert_eq!(late, Vec::<Value>::new());
    let (status, _) = http_json(&server, "GET", &format!("/v1/chats/{chat}"), "").await;
    assert_eq!(status, 404);

    // A restart finds no run to continue nor to mark interrupted.
    let dir = server.stop().await;
    let server = Server::start_in(dir, Opts::default()).await;
    let (status, _) = http_json(&server, "GET", &format!("/v1/chats/{chat}"), "").await;
    assert_eq!(status, 404);
    let (_, listed) = http_json(&server, "GET", "/v1/chats", "").await;
    assert_eq!(listed["chats"], json!([]));
}

/// `agentwire reindex` on the server's database, as an operator runs it.
fn reindex(database_url: &str) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_agentwire"))
        .args(["reindex", "--database-url", database_url])
        .env("RUST_LOG", "error")
        .output()
        .expect("run agentwire reindex")
}

#[tokio::test]
async fn reindex_rebuilds_a_lost_index_from_the_log() {
    let server = Server::start().await;
    let mut client = server.client().await;
    let chat = Uuid::new_v4();
    client.start(chat, "gnocchi with sage butter").await;
    client.until_complete(chat).await;
    let title = json!({"title": "Dinner"}).to_string();
    let (status, _) = http_json(&server, "PATCH", &format!("/v1/chats/{chat}"), &title).await;
    assert_eq!(status, 200);
    let url = database_url(server.dir.path()).await;
    if !on_postgres() {
        // A running server holds its SQLite file: the rebuild waits for it
        // to stop, and says so.
        let out = reindex(&url);
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("agentwire.db"), "{err}");
    }
    let dir = server.stop().await;

    // The index and the list's columns lost behind the server's back.
    let lose = "DELETE FROM chat_search; UPDATE chats SET title = NULL, preview = NULL";
    if on_postgres() {
        let pool = sqlx::PgPool::connect(&url).await.unwrap();
        sqlx::raw_sql(lose).execute(&pool).await.unwrap();
        pool.close().await;
    } else {
        let path = url.strip_prefix("sqlite://").unwrap();
        let conn = rusqlite::Connection::open(path).unwrap();
        conn.execute_batch(lose).unwrap();
    }
    let server = Server::start_in(dir, Opts::default()).await;
    assert_eq!(found(&server, "gnocchi").await, Vec::<String>::new());
    let dir = server.stop().await;

    let out = reindex(&url);
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{said} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(said.starts_with("reindexed 1 chat(s)"), "{said}");
    let server = Server::start_in(dir, Opts::default()).await;
    assert_eq!(found(&server, "gnocchi").await, [chat.to_string()]);
    assert_eq!(found(&server, "dinner").await, [chat.to_string()]);
    let (_, view) = http_json(&server, "GET", &format!("/v1/chats/{chat}"), "").await;
    assert_eq!(view["title"], "Dinner");
    assert!(
        view["preview"]
            .as_str()
            .is_some_and(|p| p.contains("gnocchi")),
        "{view}"
    );
}

/// Two nodes: the chat runs on one, a client follows it on the other, and
/// the delete is asked of the other. Both clients hear the chat is gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chat_deleted_through_another_node_is_gone_on_both() {
    if on_postgres() {
        return; // A cluster test: run once, in the default pass.
    }
    let Some(pg) = agentwire::testing::postgres() else {
        return;
    };
    let url = pg.fresh_database().await;
    let agents = tempfile::tempdir().unwrap();
    let (_a, a) = spawn_agentwire(&url, agents.path(), &[]).await;
    let (_b, b) = spawn_agentwire(&url, agents.path(), &[]).await;
    let ws = |addr: std::net::SocketAddr| format!("ws://{addr}/v1/ws");
    let (mut ca, mut cb) = (Client::connect(&ws(a)).await, Client::connect(&ws(b)).await);
    let chat = Uuid::new_v4();
    ca.start(chat, "slow: 400").await;
    ca.recv_until(|m| m["type"] == "chat.print").await;
    cb.resume(chat, 0).await;
    cb.recv_until(|m| m["type"] == "chat.print" && m.get("replay").is_none())
        .await;

    let path = format!("/v1/chats/{chat}?purge=true");
    assert_eq!(http_request(b, "DELETE", &path, &[], "").await.0, 204);
    for c in [&mut ca, &mut cb] {
        let told = c
            .recv_until(|m| m["type"] == "chat.error" && m.get("seq").is_none())
            .await;
        assert_eq!(told.last().unwrap()["error_code"], "RESUME_FAILED");
        assert_eq!(
            quiet(c, Duration::from_millis(500)).await,
            Vec::<Value>::new()
        );
    }
    for node in [a, b] {
        let got = http_request(node, "GET", &format!("/v1/chats/{chat}"), &[], "").await;
        assert_eq!(got.0, 404, "{}", got.1);
    }
}
