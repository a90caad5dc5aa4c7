//! The REST API: every route, its errors and its pagination.

use std::time::Duration;

use serde_json::{Value, json};
use uuid::Uuid;

use crate::support::*;

/// Waits until the chat's run is over.
async fn idle(server: &Server, id: &str) -> Value {
    for _ in 0..200 {
        let (_, chat) = http_json(server, "GET", &format!("/v1/chats/{id}"), "").await;
        if chat["state"] == "idle" {
            return chat;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("chat {id} never went idle");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agents_and_a_chat_lifecycle() {
    let server = Server::start().await;
    let (status, agents) = http_json(&server, "GET", "/v1/agents", "").await;
    assert_eq!(status, 200);
    assert_eq!(agents["agents"][0]["id"], "demo");
    assert_eq!(agents["agents"][0]["agent_starts_first"], false);
    assert!(
        agents["agents"][0]["description"]
            .as_str()
            .unwrap()
            .contains("scripted")
    );

    let (status, chat) = http_json(
        &server,
        "POST",
        "/v1/chats",
        r#"{"agent": "demo", "message": "hello"}"#,
    )
    .await;
    assert_eq!(status, 201, "{chat}");
    let id = chat["id"].as_str().unwrap().to_owned();
    assert_eq!(chat["agent"], "demo");
    let chat = idle(&server, &id).await;
    assert_eq!(chat["last_seq"], 8);
    assert_eq!(chat["archived"], false);
    assert!(chat["created_at"].as_str().unwrap().ends_with('Z'));

    // The log as JSON pages.
    let (status, page) = http_json(
        &server,
        "GET",
        &format!("/v1/chats/{id}/events?after=0&limit=4"),
        "",
    )
    .await;
    assert_eq!(status, 200);
    let seqs: Vec<u64> = page["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(seqs, [1, 2, 3, 4]);
    assert_eq!(page["next_after"], 4);
    let (_, page) = http_json(
        &server,
        "GET",
        &format!("/v1/chats/{id}/events?after=6&limit=4"),
        "",
    )
    .await;
    assert_eq!(page["events"].as_array().unwrap().len(), 2);
    assert_eq!(page["next_after"], Value::Null);

    // Another turn by REST; a second one while it runs is refused.
    let (status, _) = http_json(
        &server,
        "POST",
        &format!("/v1/chats/{id}/messages"),
        r#"{"text": "slow: 100"}"#,
    )
    .await;
    assert_eq!(status, 202);
    let (status, err) = http_json(
        &server,
        "POST",
        &format!("/v1/chats/{id}/messages"),
        r#"{"text": "again"}"#,
    )
    .await;
    assert_eq!(
        (status, &err["error"]["code"]),
        (409, &json!("RUN_IN_PROGRESS"))
    );
    let (status, _) = http_json(&server, "POST", &format!("/v1/chats/{id}/cancel"), "").await;
    assert_eq!(status, 200);
    idle(&server, &id).await;

    // Archive: the history stays, new turns are refused.
    let (status, _) = http_json(&server, "DELETE", &format!("/v1/chats/{id}"), "").await;
    assert_eq!(status, 204);
    let (_, chat) = http_json(&server, "GET", &format!("/v1/chats/{id}"), "").await;
    assert_eq!(chat["archived"], true);
    let (status, err) = http_json(
        &server,
        "POST",
        &format!("/v1/chats/{id}/messages"),
        r#"{"text": "more"}"#,
    )
    .await;
    assert_eq!(status, 409, "{err}");
    let (_, page) = http_json(
        &server,
        "GET",
        &format!("/v1/chats/{id}/events?limit=1000"),
        "",
    )
    .await;
    assert!(page["events"].as_array().unwrap().len() > 8);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chats_are_listed_newest_first_in_pages() {
    let server = Server::start().await;
    let mut made = Vec::new();
    for _ in 0..5 {
        let (_, chat) = http_json(&server, "POST", "/v1/chats", r#"{"agent": "demo"}"#).await;
        made.push(chat["id"].as_str().unwrap().to_owned());
        tokio::time::sleep(Duration::from_millis(3)).await;
    }
    made.reverse();
    let mut seen = Vec::new();
    let mut cursor = String::new();
    loop {
        let (status, page) = http_json(
            &server,
            "GET",
            &format!("/v1/chats?limit=2&cursor={cursor}"),
            "",
        )
        .await;
        assert_eq!(status, 200, "{page}");
        seen.extend(
            page["chats"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| c["id"].as_str().unwrap().to_owned()),
        );
        match page["next_cursor"].as_str() {
            Some(c) => cursor = c.to_owned(),
            None => break,
        }
    }
    assert_eq!(seen, made);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rest_errors() {
    let server = Server::start().await;
    let missing = Uuid::new_v4();
    for (method, path, body, status, code) in [
        (
            "POST",
            "/v1/chats".to_owned(),
            r#"{"agent": "nobody"}"#,
            422,
            "WORKFLOW_NOT_FOUND",
        ),
        (
            "POST",
            "/v1/chats".to_owned(),
            r#"{"agnt": "demo"}"#,
            400,
            "SCHEMA_VALIDATION_FAILED",
        ),
        (
            "GET",
            format!("/v1/chats/{missing}"),
            "",
            404,
            "RESUME_FAILED",
        ),
        (
            "GET",
            "/v1/chats/nope".to_owned(),
            "",
            400,
            "SCHEMA_VALIDATION_FAILED",
        ),
        (
            "DELETE",
            format!("/v1/chats/{missing}"),
            "",
            404,
            "RESUME_FAILED",
        ),
        (
            "POST",
            format!("/v1/chats/{missing}/messages"),
            r#"{"text": "hi"}"#,
            404,
            "RESUME_FAILED",
        ),
        (
            "POST",
            format!("/v1/chats/{missing}/messages"),
            r#"{"txt": "hi"}"#,
            400,
            "SCHEMA_VALIDATION_FAILED",
        ),
        (
            "GET",
            "/v1/chats?cursor=garbage".to_owned(),
            "",
            400,
            "SCHEMA_VALIDATION_FAILED",
        ),
    ] {
        let (got, v) = http_json(&server, method, &path, body).await;
        assert_eq!(
            (got, v["error"]["code"].as_str()),
            (status, Some(code)),
            "{method} {path}: {v}"
        );
    }
    // Errors axum answers by itself get the same shape.
    let big = json!({"agent": "demo", "message": "x".repeat(2 << 20)}).to_string();
    let (got, v) = http_json(&server, "POST", "/v1/chats", &big).await;
    assert_eq!(
        (got, v["error"]["code"].as_str()),
        (413, Some("SCHEMA_VALIDATION_FAILED"))
    );
    let (got, v) = http_json(&server, "GET", "/v1/nothing-here", "").await;
    assert_eq!(
        (got, v["error"]["message"].as_str()),
        (404, Some("no such route"))
    );

    // Creating a chat twice.
    let body = json!({"agent": "demo", "chat_id": missing}).to_string();
    assert_eq!(http_json(&server, "POST", "/v1/chats", &body).await.0, 201);
    assert_eq!(http_json(&server, "POST", "/v1/chats", &body).await.0, 409);
}
