//! A user's feed and unread counts (issue 38): the user's own connections
//! hear of chats they did not start (a backend's, through the server API),
//! of runs and posts that ended and of chats read elsewhere, on the
//! WebSocket (`feed.subscribe`) and over SSE (`GET /v1/feed`), on one node
//! or another; `GET /v1/chats` shows unread counts; `chat.read` and
//! `POST /v1/chats/{id}/read` mark a chat read.

use std::time::Duration;

use futures_util::StreamExt;
use serde_json::{Value, json};
use uuid::Uuid;

use crate::auth::{SECRET, token};
use crate::server_api::{call, connect_as, keys};
use crate::support::*;

/// The next `feed.chat` of a connection's (other messages skipped).
async fn next_feed(c: &mut Client) -> Value {
    let m = c.recv_until(|m| m["type"] == "feed.chat").await;
    let event = m.last().unwrap().clone();
    assert_outbound_valid(&event);
    event
}

async fn jwt_server(settings: agentwire::config::Settings) -> Server {
    Server::start_with(Opts {
        settings: agentwire::config::Settings {
            auth: Some(agentwire::config::AuthMode::Jwt),
            jwt_secret: Some(SECRET.into()),
            ..settings
        },
        ..Default::default()
    })
    .await
}

/// The caller's chat as the list shows it.
async fn listed(server: &Server, user: &str, chat: Uuid) -> Value {
    let (status, list) = call(server, "GET", "/v1/chats", &token(user, 600, SECRET), None).await;
    assert_eq!(status, 200);
    list["chats"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == chat.to_string())
        .cloned()
        .unwrap_or(Value::Null)
}

/// An SSE feed: its events' `(event, data)` as they come.
fn sse_feed(
    addr: std::net::SocketAddr,
    user: &str,
) -> tokio::sync::mpsc::UnboundedReceiver<(String, Value)> {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let url = format!("http://{addr}/v1/feed");
    let bearer = token(user, 600, SECRET);
    tokio::spawn(async move {
        let response = reqwest::Client::new()
            .get(url)
            .bearer_auth(bearer)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        let mut body = response.bytes_stream();
        let mut text = String::new();
        while let Some(Ok(chunk)) = body.next().await {
            text.push_str(&String::from_utf8_lossy(&chunk));
            while let Some(end) = text.find("\n\n") {
                let block: String = text.drain(..end + 2).collect();
                let field = |name: &str| {
                    block
                        .lines()
                        .find_map(|l| l.strip_prefix(name))
                        .map(str::trim)
                        .map(str::to_owned)
                };
                if let (Some(event), Some(data)) = (field("event:"), field("data:")) {
                    let _ = tx.send((event, serde_json::from_str(&data).unwrap()));
                }
            }
        }
    });
    rx
}

async fn next_sse(rx: &mut tokio::sync::mpsc::UnboundedReceiver<(String, Value)>) -> Value {
    let (event, data) = tokio::time::timeout(Duration::from_secs(10), rx.recv())
        .await
        .expect("a feed event in time")
        .expect("the feed is open");
    assert_eq!(event, "feed.chat");
    assert_outbound_valid(&data);
    data
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_users_feed_announces_chats_made_for_them_and_counts_unread() {
    let server = jwt_server(Default::default()).await;
    let key = keys(&server, &["create", "--name", "crm", "--scopes", "publish"])
        .await
        .unwrap();
    let mut alice = connect_as(&server, "alice").await;
    alice.send(json!({"type": "feed.subscribe"})).await;
    assert_eq!(alice.recv().await["type"], "feed.subscribed");
    let mut sse = sse_feed(server.addr, "alice");
    let mut bob = connect_as(&server, "bob").await;
    bob.send(json!({"type": "feed.subscribe"})).await;
    assert_eq!(bob.recv().await["type"], "feed.subscribed");
    // The SSE stream is open once a first event can reach it: give it a
    // moment, then start the chat.
    tokio::time::sleep(Duration::from_millis(300)).await;

    let chat = Uuid::new_v4();
    let (status, _) = call(
        &server,
        "POST",
        "/v1/server/chats",
        &key,
        Some(json!({"user": "alice", "agent": "demo", "chat_id": chat,
                    "message": "your invoice is overdue"})),
    )
    .await;
    assert_eq!(status, 201);
    let created = next_feed(&mut alice).await;
    assert_eq!(
        (created["reason"].as_str(), created["chat_id"].as_str()),
        (Some("created"), Some(chat.to_string().as_str()))
    );
    let updated = next_feed(&mut alice).await;
    assert_eq!(updated["reason"], "updated");
    // The event's text counts as hers (read); the agent's answer is unread.
    assert_eq!(updated["unread"], 1, "{updated}");
    assert_eq!(updated["preview"], "You said: your invoice is overdue");
    assert_eq!(next_sse(&mut sse).await["reason"], "created");
    assert_eq!(next_sse(&mut sse).await["unread"], 1);
    let row = listed(&server, "alice", chat).await;
    assert_eq!(
        (row["unread"].as_u64(), row["read_seq"].as_u64()),
        (Some(1), Some(1))
    );
    assert_eq!(listed(&server, "bob", chat).await, Value::Null);

    // A post: one more unread text (its widget is not a text).
    let (status, _) = call(
        &server,
        "POST",
        &format!("/v1/server/chats/{chat}/posts"),
        &key,
        Some(json!({"user": "alice", "text": "Pay now?",
                    "widget": {"component_type": "pay_button", "payload": {"amount": 12}}})),
    )
    .await;
    assert_eq!(status, 201);
    let posted = next_feed(&mut alice).await;
    assert_eq!(
        (posted["unread"].as_u64(), posted["preview"].as_str()),
        (Some(2), Some("Pay now?"))
    );
    assert_eq!(next_sse(&mut sse).await["unread"], 2);

    // Read up to the end of the first answer (over HTTP): the post's text
    // is still unread.
    let first_end = updated["last_seq"].as_u64().unwrap();
    let (status, _) = call(
        &server,
        "POST",
        &format!("/v1/chats/{chat}/read"),
        &token("alice", 600, SECRET),
        Some(json!({"seq": first_end})),
    )
    .await;
    assert_eq!(status, 204);
    let read = next_feed(&mut alice).await;
    assert_eq!(
        (
            read["reason"].as_str(),
            read["unread"].as_u64(),
            read["read_seq"].as_u64()
        ),
        (Some("read"), Some(1), Some(first_end))
    );
    assert_eq!(next_sse(&mut sse).await["unread"], 1);
    assert_eq!(listed(&server, "alice", chat).await["unread"], 1);
    // Read on one connection (to the end): every feed of hers hears it.
    alice
        .send(json!({"type": "chat.read", "chat_id": chat}))
        .await;
    let read = next_feed(&mut alice).await;
    assert_eq!(
        (read["reason"].as_str(), read["unread"].as_u64()),
        (Some("read"), Some(0))
    );
    assert_eq!(read["read_seq"], read["last_seq"]);
    assert_eq!(next_sse(&mut sse).await["unread"], 0);
    // Another device's older mark changes nothing.
    let (status, _) = call(
        &server,
        "POST",
        &format!("/v1/chats/{chat}/read"),
        &token("alice", 600, SECRET),
        Some(json!({"seq": 1})),
    )
    .await;
    assert_eq!(status, 204);
    assert_eq!(listed(&server, "alice", chat).await["unread"], 0);
    // Her next message reads the chat; the answer is one unread text.
    alice.resume(chat, 0).await;
    alice
        .recv_until(|m| m["type"] == "chat.resume_boundary")
        .await;
    alice.say(chat, "paid").await;
    alice.until_complete(chat).await;
    let row = listed(&server, "alice", chat).await;
    assert_eq!(row["unread"], 1, "{row}");

    // Another's chat is nobody else's business: bob's feed first hears of
    // his own, and he cannot mark hers read.
    let (status, _) = call(
        &server,
        "POST",
        &format!("/v1/chats/{chat}/read"),
        &token("bob", 600, SECRET),
        None,
    )
    .await;
    assert_eq!(status, 404);
    bob.start(Uuid::new_v4(), "hi").await;
    let first = next_feed(&mut bob).await;
    assert_ne!(first["chat_id"], chat.to_string());
    // A bad `chat.read` is refused like any message.
    alice
        .send(json!({"type": "chat.read", "chat_id": chat, "seq": -1}))
        .await;
    let e = alice.recv_until(|m| m["type"] == "chat.error").await;
    assert_eq!(e.last().unwrap()["error_code"], "SCHEMA_VALIDATION_FAILED");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_feed_hears_of_chats_run_by_another_node() {
    let Some(url) = crate::cluster::cluster_database().await else {
        return;
    };
    let settings = || agentwire::config::Settings {
        database_url: Some(url.clone()),
        ..Default::default()
    };
    let a = jwt_server(settings()).await;
    let b = jwt_server(settings()).await;
    let key = crate::server_api::keys_at(&url, &["create", "--name", "crm", "--scopes", "publish"])
        .await
        .unwrap();
    let mut on_b = connect_as(&b, "alice").await;
    on_b.send(json!({"type": "feed.subscribe"})).await;
    assert_eq!(on_b.recv().await["type"], "feed.subscribed");
    let chat = Uuid::new_v4();
    let (status, _) = call(
        &a,
        "POST",
        "/v1/server/chats",
        &key,
        Some(json!({"user": "alice", "agent": "demo", "chat_id": chat, "message": "hi"})),
    )
    .await;
    assert_eq!(status, 201);
    let created = next_feed(&mut on_b).await;
    assert_eq!(created["chat_id"], chat.to_string());
    assert_eq!(next_feed(&mut on_b).await["unread"], 1);
    // Read on node B (the chat runs on A): heard once.
    on_b.send(json!({"type": "chat.read", "chat_id": chat}))
        .await;
    let read = next_feed(&mut on_b).await;
    assert_eq!(
        (read["reason"].as_str(), read["unread"].as_u64()),
        (Some("read"), Some(0))
    );
}
