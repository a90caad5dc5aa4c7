//! Input requests: timeouts, idempotent answers, and secrets that never land.

use std::path::Path;

use serde_json::json;
use uuid::Uuid;

use crate::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unanswered_request_times_out() {
    let server = Server::start_with(Opts {
        settings: agentwire::config::Settings {
            input_timeout_seconds: Some(1),
            ..Default::default()
        },
        ..Default::default()
    })
    .await;
    let mut c = server.client().await;
    let chat = Uuid::new_v4();
    c.start(chat, "ask: Anyone?").await;
    let req = c
        .recv_until(|m| m["type"] == "chat.input_request")
        .await
        .pop()
        .unwrap();
    assert_eq!(req["timeout_seconds"], 1);
    let rest = c.until_complete(chat).await;
    let timeout = rest
        .iter()
        .find(|m| m["type"] == "chat.input_timeout")
        .expect("input_timeout");
    assert_eq!(timeout["request_id"], req["request_id"]);
    assert_eq!(timeout["corr"], req["request_id"]);
    assert_eq!(timeout["timeout_seconds"], 1);
    assert_eq!(rest.last().unwrap()["reason"], "timeout");

    // Too late now.
    c.send(json!({"type": "user.input.submit", "chat_id": chat, "request_id": req["request_id"], "text": "me"}))
        .await;
    assert_eq!(
        c.expect("chat.error").await["error_code"],
        "INPUT_REQUEST_NOT_FOUND"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_submit_has_no_second_effect() {
    let server = Server::start().await;
    let mut c = server.client().await;
    let chat = Uuid::new_v4();
    c.start(chat, "ask: Colour?").await;
    let req = c
        .recv_until(|m| m["type"] == "chat.input_request")
        .await
        .pop()
        .unwrap();
    let submit = json!({"type": "user.input.submit", "chat_id": chat, "request_id": req["request_id"], "text": "blue", "last_client_seq": req["seq"]});
    c.send(submit.clone()).await;
    c.send(submit).await;
    let mut acks = 0;
    let mut errors = Vec::new();
    let msgs = c.until_complete(chat).await;
    for m in &msgs {
        match m["type"].as_str().unwrap() {
            "chat.input_ack" => acks += 1,
            "chat.error" => errors.push(m["error_code"].clone()),
            _ => {}
        }
    }
    if errors.is_empty() {
        // The duplicate's error may come after run_complete.
        errors.push(c.expect("chat.error").await["error_code"].clone());
    }
    assert_eq!(acks, 1);
    assert_eq!(errors, vec![json!("INPUT_REQUEST_NOT_FOUND")]);
    assert_eq!(last_text(&msgs), "You answered: blue");

    c.send(
        json!({"type": "user.input.submit", "chat_id": chat, "request_id": "made-up", "text": "x"}),
    )
    .await;
    assert_eq!(
        c.expect("chat.error").await["error_code"],
        "INPUT_REQUEST_NOT_FOUND"
    );
}

/// Every file below `dir` that contains `needle`.
pub(crate) fn files_containing(dir: &Path, needle: &[u8]) -> Vec<String> {
    let mut hits = Vec::new();
    // A folder that does not exist holds nothing; files may come and go while
    // a database runs.
    let Ok(entries) = std::fs::read_dir(dir) else {
        return hits;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            hits.extend(files_containing(&path, needle));
        } else if path.extension().is_some_and(|x| x == "pid" || x == "opts") {
            // PostgreSQL's own bookkeeping: never data.
        } else if let Ok(bytes) = std::fs::read(&path)
            && bytes.windows(needle.len()).any(|w| w == needle)
        {
            hits.push(path.display().to_string());
        }
    }
    hits
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secret_is_never_stored() {
    const SECRET: &str = "hunter2-Zq8Xv-never-on-disk";
    let server = Server::start().await;
    let mut c = server.client().await;
    let chat = Uuid::new_v4();
    c.start(chat, "secret: Your PIN?").await;
    let req = c
        .recv_until(|m| m["type"] == "chat.input_request")
        .await
        .pop()
        .unwrap();
    assert_eq!(req["password"], true);
    c.send(json!({"type": "user.input.submit", "chat_id": chat, "request_id": req["request_id"], "text": SECRET}))
        .await;
    let msgs = c.until_complete(chat).await;
    let echoed = msgs
        .iter()
        .find(|m| m["type"] == "chat.text" && m["agent"] == "user")
        .unwrap();
    assert_eq!(echoed["content"], "[redacted]");
    assert_eq!(
        last_text(&msgs),
        format!("Secret received ({} characters)", SECRET.len())
    );
    assert!(msgs.iter().all(|m| !m.to_string().contains(SECRET)));

    // Not in the database, its WAL or anything else where data lands (the
    // SQLite folder, or PostgreSQL's data directory), while running and after
    // shutdown.
    if !on_postgres() {
        assert!(
            server.data_dir().join("agentwire.db-wal").exists(),
            "the WAL is checked too"
        );
    }
    if on_postgres() {
        // Push what PostgreSQL holds in memory to its files before looking.
        use sqlx::Connection;
        let url = std::fs::read_to_string(server.dir.path().join("postgres_url")).unwrap();
        let mut conn = sqlx::PgConnection::connect(&url).await.unwrap();
        sqlx::query("CHECKPOINT").execute(&mut conn).await.unwrap();
    }
    let dirs = storage_dirs(server.dir.path());
    // The scan sees the chat (the reply is there), just never the secret.
    let seen: Vec<String> = dirs
        .iter()
        .flat_map(|d| files_containing(d, b"Secret received"))
        .collect();
    assert!(!seen.is_empty(), "the scan reads the stored chat");
    for dir in &dirs {
        assert_eq!(
            files_containing(dir, SECRET.as_bytes()),
            Vec::<String>::new()
        );
    }
    let dir = server.stop().await;
    for dir in storage_dirs(dir.path()) {
        assert_eq!(
            files_containing(&dir, SECRET.as_bytes()),
            Vec::<String>::new()
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_closes_open_requests_and_ui_calls_time_out() {
    let server = Server::start_with(Opts {
        settings: agentwire::config::Settings {
            ui_timeout_seconds: Some(1),
            ..Default::default()
        },
        ..Default::default()
    })
    .await;
    let mut c = server.client().await;
    let chat = Uuid::new_v4();
    c.start(chat, "ask: Still there?").await;
    let req = c
        .recv_until(|m| m["type"] == "chat.input_request")
        .await
        .pop()
        .unwrap();
    c.send(json!({"type": "chat.cancel", "chat_id": chat}))
        .await;
    c.send(json!({"type": "user.input.submit", "chat_id": chat, "request_id": req["request_id"], "text": "yes"}))
        .await;
    let msgs = c.until_complete(chat).await;
    assert_eq!(msgs.last().unwrap()["reason"], "cancelled");
    assert!(msgs.iter().all(|m| m["type"] != "chat.input_ack"));
    let err = if let Some(e) = msgs.iter().find(|m| m["type"] == "chat.error") {
        e.clone()
    } else {
        c.expect("chat.error").await
    };
    assert_eq!(err["error_code"], "INPUT_REQUEST_NOT_FOUND");

    // A UI tool call nobody answers.
    c.say(chat, "ui: form").await;
    let msgs = c.until_complete(chat).await;
    let err = msgs
        .iter()
        .find(|m| m["type"] == "chat.error")
        .expect("a logged timeout");
    assert_eq!(err["error_code"], "UI_TOOL_TIMEOUT");
    assert!(err["seq"].is_u64());
    assert_eq!(msgs.last().unwrap()["reason"], "timeout");
}
