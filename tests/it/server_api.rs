//! Keys for backends and the server API (issue 38): `agentwire keys` makes,
//! lists and revokes service keys beside a running server; a key acts with
//! its scopes on `/v1/server/…` and never as a user; what it publishes is
//! logged and reaches the user's connections live like any envelope; the
//! new routes have the old ones' limits.

use std::time::Duration;

use serde_json::{Value, json};
use uuid::Uuid;

use crate::auth::{SECRET, jwt_server, token};
use crate::support::*;

/// `agentwire keys <args>` on the server's database: its stdout, or the
/// failure's stderr.
pub async fn keys(server: &Server, args: &[&str]) -> Result<String, String> {
    keys_at(&database_url(server.dir.path()).await, args).await
}

/// [`keys`] on the database at `url`.
pub async fn keys_at(url: &str, args: &[&str]) -> Result<String, String> {
    let cwd = tempfile::tempdir().unwrap();
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_agentwire"))
        .arg("keys")
        .args(args)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("AGENTWIRE_DATABASE_URL", url)
        .current_dir(cwd.path())
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    match out.status.success() {
        true => Ok(stdout.trim().to_owned()),
        false => Err(stderr),
    }
}

/// A request with `bearer`; the status and the JSON body.
pub async fn call(
    server: &Server,
    method: &str,
    path: &str,
    bearer: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let auth = format!("Bearer {bearer}");
    let mut headers = vec![("authorization", auth.as_str())];
    if body.is_some() {
        headers.push(("content-type", "application/json"));
    }
    let body = body.map(|b| b.to_string()).unwrap_or_default();
    let (status, text) = http_request(server.addr, method, path, &headers, &body).await;
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

pub async fn connect_as(server: &Server, user: &str) -> Client {
    Client::connect(&format!(
        "{}?access_token={}",
        server.ws_url(),
        token(user, 600, SECRET)
    ))
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_key_starts_and_posts_into_a_users_chat_live() {
    let server = jwt_server().await;
    // Made while the server runs (on SQLite, beside the process that holds
    // the file); printed once.
    let publish = keys(
        &server,
        &["create", "--name", "billing", "--scopes", "publish"],
    )
    .await
    .unwrap();
    assert!(publish.starts_with("awk_"), "{publish}");
    let read = keys(
        &server,
        &["create", "--name", "reports", "--scopes", "read"],
    )
    .await
    .unwrap();
    let listed = keys(&server, &["list"]).await.unwrap();
    assert!(
        listed.contains("billing") && listed.contains("reports"),
        "{listed}"
    );
    assert!(!listed.contains(&publish[4..]) && !listed.contains(&read[4..]));
    // A live name is one key; unknown scopes are refused.
    let again = keys(
        &server,
        &["create", "--name", "billing", "--scopes", "read"],
    )
    .await;
    assert!(again.unwrap_err().contains("billing"));
    let bad = keys(&server, &["create", "--name", "x", "--scopes", "admin"]).await;
    assert!(bad.unwrap_err().contains("admin"));

    // A chat started for alice by the backend: an event, told as her turn.
    let chat = Uuid::new_v4();
    let (status, body) = call(
        &server,
        "POST",
        "/v1/server/chats",
        &publish,
        Some(json!({"user": "alice", "agent": "demo", "chat_id": chat,
                    "message": "the export finished", "context": {"job": 7}})),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["id"], chat.to_string());
    let mut alice = connect_as(&server, "alice").await;
    alice.resume(chat, 0).await;
    let log = alice.until_complete(chat).await;
    assert_eq!(last_text(&log), "You said: the export finished");

    // Posted while she follows it: delivered live, as the agent and as the
    // system, a widget with it.
    let (status, posted) = call(
        &server,
        "POST",
        &format!("/v1/server/chats/{chat}/posts"),
        &publish,
        Some(json!({"user": "alice", "text": "Your report is ready",
                    "widget": {"component_type": "report_card",
                               "payload": {"title": "<img src=x onerror=alert(1)>", "rows": 12},
                               "display": "artifact"}})),
    )
    .await;
    assert_eq!(status, 201, "{posted}");
    let live: Vec<Value> = alice
        .until_complete(chat)
        .await
        .into_iter()
        .filter(|m| m["type"] != "chat.resume_boundary")
        .collect();
    for m in &live {
        assert_outbound_valid(m);
    }
    assert_eq!(
        types(&live),
        [
            "chat.select_speaker",
            "chat.text",
            "chat.tool_call",
            "chat.tool_response",
            "chat.run_complete"
        ]
    );
    assert_eq!(live[1]["agent"], "demo");
    assert_eq!(live[1]["content"], "Your report is ready");
    assert_eq!(live[2]["component_type"], "report_card");
    assert_eq!(live[2]["display"], "artifact");
    assert_eq!(live[2]["corr"], posted["corr"]);
    assert_eq!(posted["last_seq"], live[4]["seq"]);
    assert_gap_free(&seqs(&[log.clone(), live.clone()].concat()));

    let (status, _) = call(
        &server,
        "POST",
        &format!("/v1/server/chats/{chat}/posts"),
        &publish,
        Some(json!({"user": "alice", "as": "system", "text": "Maintenance at 22:00"})),
    )
    .await;
    assert_eq!(status, 201);
    let live = alice.until_complete(chat).await;
    assert_eq!(live[1]["agent"], "system");
    // The chat goes on: her next turn answers as before.
    alice.say(chat, "thanks").await;
    assert_eq!(
        last_text(&alice.until_complete(chat).await),
        "You said: thanks"
    );

    // A key reads with `read` only; publishes with `publish` only.
    let (status, list) = call(&server, "GET", "/v1/server/users/alice/chats", &read, None).await;
    assert_eq!(status, 200);
    assert_eq!(list["chats"][0]["id"], chat.to_string());
    let (status, e) = call(
        &server,
        "GET",
        "/v1/server/users/alice/chats",
        &publish,
        None,
    )
    .await;
    assert_eq!(
        (status, e["error"]["code"].as_str()),
        (403, Some("UNAUTHORIZED"))
    );
    let (status, e) = call(
        &server,
        "POST",
        &format!("/v1/server/chats/{chat}/posts"),
        &read,
        Some(json!({"user": "alice", "text": "x"})),
    )
    .await;
    assert_eq!(status, 403, "{e}");
    assert!(e["error"]["message"].as_str().unwrap().contains("publish"));

    // Never as a user: a key on a user's route is refused, and a user's
    // token on the server API.
    let (status, _) = call(&server, "GET", "/v1/chats", &publish, None).await;
    assert_eq!(status, 403);
    let (status, _) = call(
        &server,
        "GET",
        "/v1/server/users/alice/chats",
        &token("alice", 600, SECRET),
        None,
    )
    .await;
    assert_eq!(status, 401);
    let (status, _) = call(
        &server,
        "GET",
        "/v1/server/users/alice/chats",
        "awk_forged",
        None,
    )
    .await;
    assert_eq!(status, 401);
    // Another user's chat is nobody's to this key: 404, nothing logged.
    let (status, e) = call(
        &server,
        "POST",
        &format!("/v1/server/chats/{chat}/posts"),
        &publish,
        Some(json!({"user": "mallory", "text": "hi"})),
    )
    .await;
    assert_eq!(status, 404, "{e}");

    // Revoked: refused on every node within seconds.
    keys(&server, &["revoke", "billing"]).await.unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let (status, _) = call(&server, "GET", "/v1/server/users/alice/chats", &read, None).await;
        assert_eq!(status, 200, "the other key still works");
        let (status, _) = call(
            &server,
            "POST",
            "/v1/server/chats",
            &publish,
            Some(json!({"user": "alice", "agent": "demo"})),
        )
        .await;
        if status == 401 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the revoked key still works"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let listed = keys(&server, &["list"]).await.unwrap();
    assert!(
        listed
            .lines()
            .any(|l| l.contains("billing") && l.ends_with("revoked")),
        "{listed}"
    );
    assert!(keys(&server, &["revoke", "billing"]).await.is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_api_refuses_bad_input_and_keeps_the_limits() {
    let server = Server::start_with(Opts {
        settings: agentwire::config::Settings {
            auth: Some(agentwire::config::AuthMode::Jwt),
            jwt_secret: Some(SECRET.into()),
            max_message_bytes: Some(16 * 1024),
            rate_messages_per_minute: Some(3),
            ..Default::default()
        },
        ..Default::default()
    })
    .await;
    let key = keys(
        &server,
        &["create", "--name", "ops", "--scopes", "publish,read"],
    )
    .await
    .unwrap();
    let chat = Uuid::new_v4();
    let (status, _) = call(
        &server,
        "POST",
        "/v1/server/chats",
        &key,
        Some(json!({"user": "alice", "agent": "demo", "chat_id": chat})),
    )
    .await;
    assert_eq!(status, 201);
    let posts = format!("/v1/server/chats/{chat}/posts");
    let deep = (0..100).fold(json!(1), |v, _| json!([v]));
    for (body, want) in [
        (json!({"user": "alice"}), 400),
        (json!({"user": "alice", "text": "  "}), 400),
        (json!({"user": "alice", "text": "x", "colour": "red"}), 400),
        (json!({"user": "", "text": "x"}), 400),
        (json!({"user": "al\nice", "text": "x"}), 400),
        (
            json!({"user": "alice", "as": "system", "agent": "demo", "text": "x"}),
            400,
        ),
        (
            json!({"user": "alice", "agent": "nobody", "text": "x"}),
            400,
        ),
        (
            json!({"user": "alice", "widget": {"component_type": "<script>", "payload": {}}}),
            400,
        ),
        (
            json!({"user": "alice", "widget": {"component_type": "card", "payload": deep}}),
            413,
        ),
        (json!({"user": "alice", "text": "x".repeat(20 * 1024)}), 413),
    ] {
        let (status, e) = call(&server, "POST", &posts, &key, Some(body.clone())).await;
        assert_eq!(status, want, "{body:.80} → {e}");
        assert!(e["error"]["code"].is_string(), "{e}");
    }
    for (path, body, want) in [
        (
            "/v1/server/chats/not-a-uuid/posts",
            json!({"user": "alice", "text": "x"}),
            400,
        ),
        (
            "/v1/server/chats",
            json!({"user": "alice", "agent": "nobody"}),
            422,
        ),
        (
            "/v1/server/chats",
            json!({"user": "alice", "agent": "demo", "chat_id": chat}),
            409,
        ),
    ] {
        let (status, e) = call(&server, "POST", path, &key, Some(body)).await;
        assert_eq!(status, want, "{path}: {e}");
    }
    // Posts count as the user's turns: past the rate, 429 with Retry-After.
    let mut statuses = Vec::new();
    for i in 0..6 {
        let body = json!({"user": "alice", "text": format!("note {i}")});
        statuses.push(call(&server, "POST", &posts, &key, Some(body)).await.0);
    }
    assert!(
        statuses.contains(&201) && statuses.contains(&429),
        "{statuses:?}"
    );
    // Nothing refused was logged: the log holds the posts that were taken.
    let mut alice = connect_as(&server, "alice").await;
    alice.resume(chat, 0).await;
    let log = alice
        .recv_until(|m| m["type"] == "chat.resume_boundary")
        .await;
    let texts: Vec<&Value> = log.iter().filter(|m| m["type"] == "chat.text").collect();
    assert_eq!(texts.len(), statuses.iter().filter(|s| **s == 201).count());
}
