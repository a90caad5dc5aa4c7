//! The operator's API (issue 39): only an operator (a token with `"admin":
//! true`, a key with `admin`) reads it; it lists every run in flight with its
//! age, step and open waits, recent errors, the MCP servers; it ends a wait
//! and cancels a run of another user's, each act recorded with who did it;
//! on two nodes it says which node holds each run, and an act on either
//! node reaches the run.

use serde_json::{Value, json};
use uuid::Uuid;

use crate::auth::{SECRET, token};
use crate::server_api::{call, connect_as, keys};
use crate::support::*;

fn operator_token(sub: &str, admin: Value) -> String {
    let now = chrono::Utc::now().timestamp();
    jsonwebtoken::encode(
        &jsonwebtoken::Header::default(),
        &json!({"sub": sub, "admin": admin, "exp": now + 600, "iat": now}),
        &jsonwebtoken::EncodingKey::from_secret(SECRET.as_bytes()),
    )
    .unwrap()
}

fn settings(db: Option<String>) -> agentwire::config::Settings {
    agentwire::config::Settings {
        auth: Some(agentwire::config::AuthMode::Jwt),
        jwt_secret: Some(SECRET.into()),
        database_url: db,
        ..Default::default()
    }
}

/// The overview's run of `chat`, once it shows (and `ready` holds of it).
async fn run_of(
    server: &Server,
    bearer: &str,
    chat: Uuid,
    ready: impl Fn(&Value) -> bool,
) -> (Value, Value) {
    for _ in 0..200 {
        let (status, overview) = call(server, "GET", "/v1/admin/overview", bearer, None).await;
        assert_eq!(status, 200, "{overview}");
        if let Some(run) = overview["runs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["chat_id"] == chat.to_string())
            && ready(run)
        {
            return (run.clone(), overview);
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("the run of {chat} never showed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_sees_every_run_and_ends_a_wait_and_a_run_of_anyone() {
    let server = Server::start_with(Opts {
        settings: settings(None),
        ..Default::default()
    })
    .await;
    let root = operator_token("root", json!(true));
    // Not operators: a user, a string "true", a key with `read`.
    let alice = token("alice", 600, SECRET);
    let pretender = operator_token("mallory", json!("true"));
    let read = keys(&server, &["create", "--name", "reader", "--scopes", "read"])
        .await
        .unwrap();
    for bearer in [&alice, &pretender, &read] {
        let (status, body) = call(&server, "GET", "/v1/admin/overview", bearer, None).await;
        assert_eq!(status, 403, "{body}");
        assert_eq!(body["error"]["code"], "UNAUTHORIZED");
    }
    assert_eq!(
        call(&server, "GET", "/v1/admin/overview", "", None).await.0,
        401
    );

    // Alice's chats: one waits for her answer, one streams, one failed.
    let mut c = connect_as(&server, "alice").await;
    let (asking, streaming, failing) = (Uuid::new_v4(), Uuid::new_v4(), Uuid::new_v4());
    c.start(failing, "fail").await;
    c.until_complete(failing).await;
    c.start(asking, "ask: Your name?").await;
    let asked = c.recv_until(|m| m["type"] == "chat.input_request").await;
    let request_id = asked.last().unwrap()["request_id"]
        .as_str()
        .unwrap()
        .to_owned();
    c.start(streaming, "slow: 100000").await;

    let (run, overview) = run_of(&server, &root, asking, |r| {
        !r["waiting"].as_array().unwrap().is_empty()
    })
    .await;
    assert_eq!(run["owner"], "alice");
    assert_eq!(run["agent"], "demo");
    assert_eq!(run["step"], "chat.input_request");
    let wait = &run["waiting"][0];
    assert_eq!(wait["kind"], "input");
    assert_eq!(wait["id"], request_id.as_str());
    assert_eq!(wait["tool_name"], "ask_user");
    assert!(wait["seconds"].as_f64().unwrap() >= 0.0);
    assert!(run["age_seconds"].as_f64().unwrap() >= 0.0);
    // One node: itself (its cluster id on PostgreSQL).
    let nodes = overview["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 1, "{overview}");
    assert_eq!(nodes[0]["id"], overview["node"]["id"]);
    let error = overview["errors"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["chat_id"] == failing.to_string())
        .expect("the failed chat's error");
    assert_eq!(error["error_code"], "TOOL_EXECUTION_ERROR");
    let (streamed, _) = run_of(&server, &root, streaming, |r| r["step"] == "chat.print").await;
    assert!(streamed["waiting"].as_array().unwrap().is_empty());

    // The run's log, for its timeline.
    let (status, log) = call(
        &server,
        "GET",
        &format!("/v1/admin/chats/{asking}/log"),
        &root,
        None,
    )
    .await;
    assert_eq!(status, 200, "{log}");
    assert_eq!(log["owner"], "alice");
    let types: Vec<&str> = log["envelopes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["type"].as_str().unwrap())
        .collect();
    assert!(types.contains(&"chat.input_request"), "{types:?}");
    let (_, after) = call(
        &server,
        "GET",
        &format!("/v1/admin/chats/{asking}/log?after=2"),
        &root,
        None,
    )
    .await;
    assert_eq!(after["envelopes"][0]["seq"], 3);

    // Ending the wait: Alice's run ends as if no answer came in time.
    let missing = format!("/v1/admin/chats/{asking}/waits/nope/end");
    assert_eq!(call(&server, "POST", &missing, &root, None).await.0, 404);
    let end = format!("/v1/admin/chats/{asking}/waits/{request_id}/end");
    assert_eq!(call(&server, "POST", &end, &alice, None).await.0, 403);
    let (status, done) = call(&server, "POST", &end, &root, None).await;
    assert_eq!(status, 200, "{done}");
    assert_eq!(
        done,
        json!({"chat_id": asking, "action": "end_wait", "by": "user:root"})
    );
    let seen = c.until_complete(asking).await;
    assert!(
        seen.iter()
            .any(|m| m["type"] == "chat.input_timeout" && m["request_id"] == request_id.as_str())
    );
    assert_eq!(seen.last().unwrap()["reason"], "timeout");

    // Cancelling, with a key that has `admin`.
    let ops = keys(&server, &["create", "--name", "ops", "--scopes", "admin"])
        .await
        .unwrap();
    let cancel = format!("/v1/admin/chats/{streaming}/cancel");
    let (status, done) = call(&server, "POST", &cancel, &ops, None).await;
    assert_eq!(status, 200, "{done}");
    assert_eq!(done["by"], "key:ops");
    let seen = c.until_complete(streaming).await;
    assert_eq!(seen.last().unwrap()["reason"], "cancelled");
    // No run in flight any more: nothing to cancel, nothing recorded.
    assert_eq!(call(&server, "POST", &cancel, &ops, None).await.0, 404);
    let unknown = format!("/v1/admin/chats/{}/cancel", Uuid::new_v4());
    assert_eq!(call(&server, "POST", &unknown, &ops, None).await.0, 404);

    // Each act, with who did it, newest first; no run is left.
    let (_, overview) = call(&server, "GET", "/v1/admin/overview", &ops, None).await;
    let acts: Vec<(String, String, String)> = overview["acts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            (
                a["actor"].as_str().unwrap().into(),
                a["action"].as_str().unwrap().into(),
                a["chat_id"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert_eq!(
        acts,
        vec![
            ("key:ops".into(), "cancel".into(), streaming.to_string()),
            ("user:root".into(), "end_wait".into(), asking.to_string()),
        ]
    );
    assert_eq!(overview["acts"][1]["target"], request_id.as_str());
    assert!(
        overview["runs"].as_array().unwrap().is_empty(),
        "{overview}"
    );
    // An operator sees everyone's usage too.
    let (_, usage) = call(&server, "GET", "/v1/usage", &ops, None).await;
    assert!(usage["total"]["runs"].as_u64().unwrap() >= 1, "{usage}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_two_nodes_each_run_names_its_node_and_either_node_acts_on_it() {
    let Some(db) = crate::cluster::cluster_database().await else {
        return;
    };
    let node = |db: String| async move {
        Server::start_with(Opts {
            settings: settings(Some(db)),
            ..Default::default()
        })
        .await
    };
    let (a, b) = (node(db.clone()).await, node(db).await);
    let root = operator_token("root", json!(true));
    let mut c = connect_as(&a, "alice").await;
    let chat = Uuid::new_v4();
    c.start(chat, "slow: 100000").await;
    c.recv_until(|m| m["type"] == "chat.print").await;
    // Node b sees the run held by node a.
    let (run, overview) = run_of(&b, &root, chat, |_| true).await;
    let nodes = overview["nodes"].as_array().unwrap();
    assert!(nodes.len() >= 2, "{overview}");
    let holder = run["node"].as_i64().expect("the run's node");
    let (_, on_a) = call(&a, "GET", "/v1/admin/overview", &root, None).await;
    assert_eq!(on_a["node"]["id"].as_i64(), Some(holder), "node a holds it");
    assert_ne!(overview["node"]["id"].as_i64(), Some(holder));
    assert!(
        nodes
            .iter()
            .any(|n| n["id"].as_i64() == Some(holder) && n["runs"].as_u64() >= Some(1))
    );
    // Cancelled from node b: the run on node a stops.
    let (status, done) = call(
        &b,
        "POST",
        &format!("/v1/admin/chats/{chat}/cancel"),
        &root,
        None,
    )
    .await;
    assert_eq!(status, 200, "{done}");
    let seen = c.until_complete(chat).await;
    assert_eq!(seen.last().unwrap()["reason"], "cancelled");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_agent_that_fails_shows_its_last_error() {
    let (_held, closed) = refused_addr();
    let server = Server::start_with(Opts {
        settings: settings(None),
        agents: vec![(
            "gone.yaml".into(),
            format!("id: gone\nag_ui: {{url: \"http://{closed}/\"}}\n"),
        )],
    })
    .await;
    let root = operator_token("root", json!(true));
    let (_, before) = call(&server, "GET", "/v1/admin/overview", &root, None).await;
    let gone = &before["upstream_agents"][0];
    assert_eq!(
        (gone["agent"].as_str(), gone["runs"].as_u64()),
        (Some("gone"), Some(0))
    );
    let mut c = connect_as(&server, "alice").await;
    let chat = Uuid::new_v4();
    c.start_with(chat, "gone", "hello").await;
    c.until_complete(chat).await;
    let (_, after) = call(&server, "GET", "/v1/admin/overview", &root, None).await;
    let gone = &after["upstream_agents"][0];
    assert_eq!(gone["runs"], 1, "{after}");
    assert_eq!(gone["errors"], 1, "{after}");
    let error = gone["last_error"].as_str().unwrap();
    assert!(
        error.contains("agent `gone`") && error.contains("cannot connect"),
        "{error}"
    );
    assert!(gone["last_error_at"].is_string() && gone["last_ok_at"].is_null());
}
