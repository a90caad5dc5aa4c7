//! Usage quotas (issue 39): a user whose quota is used up gets no more
//! model calls — a run stops before its next turn, the next run before its
//! first — with `QUOTA_EXCEEDED` naming the quota and when it resets; the
//! count is the store's, shared by every node.

use chrono::Datelike;
use serde_json::{Value, json};
use uuid::Uuid;

use crate::auth::{SECRET, token};
use crate::support::*;

fn settings(quotas: agentwire::config::Settings) -> agentwire::config::Settings {
    agentwire::config::Settings {
        auth: Some(agentwire::config::AuthMode::Jwt),
        jwt_secret: Some(SECRET.into()),
        ..quotas
    }
}

/// `user`'s run of the priced demo in a new chat: what it logged.
async fn run(server: &Server, user: &str, text: &str) -> Vec<Value> {
    let mut c = crate::server_api::connect_as(server, user).await;
    let chat = Uuid::new_v4();
    c.start_with(chat, "priced", text).await;
    c.until_complete(chat).await
}

fn refusal(log: &[Value]) -> &Value {
    let error = log
        .iter()
        .find(|m| m["type"] == "chat.error")
        .unwrap_or_else(|| panic!("no error: {log:#?}"));
    assert_eq!(error["error_code"], "QUOTA_EXCEEDED", "{error}");
    assert_eq!(error["recoverable"], false);
    assert_eq!(log.last().unwrap()["reason"], "error");
    error
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_used_up_quota_stops_the_next_turn_and_the_next_run() {
    let server = Server::start_with(Opts {
        settings: settings(agentwire::config::Settings {
            quota_user_tokens_per_day: Some(1),
            ..Default::default()
        }),
        agents: vec![("priced.yaml".into(), crate::usage::priced())],
    })
    .await;
    // The first turn may go (nothing used yet); it asks, and once answered
    // the run would speak again: its quota stops it first.
    let mut c = crate::server_api::connect_as(&server, "alice").await;
    let chat = Uuid::new_v4();
    c.start_with(chat, "priced", "ask: Your name?").await;
    let asked = c.recv_until(|m| m["type"] == "chat.input_request").await;
    let request = asked.last().unwrap().clone();
    c.send(json!({"type": "user.input.submit", "chat_id": chat,
                  "request_id": request["request_id"], "text": "Ada"}))
        .await;
    let rest = c.until_complete(chat).await;
    let error = refusal(&rest);
    assert!(
        !rest
            .iter()
            .any(|m| m["type"] == "chat.text" && m["agent"] == "priced"),
        "no second turn: {rest:#?}"
    );
    let tomorrow = chrono::Utc::now().date_naive() + chrono::Days::new(1);
    let details = &error["details"];
    assert_eq!(details["quota"], "tokens_per_day");
    assert_eq!(details["scope"], "user");
    assert_eq!(details["limit"], 1.0);
    assert!(details["used"].as_f64().unwrap() >= 1.0, "{details}");
    assert_eq!(details["resets_at"], format!("{tomorrow}T00:00:00Z"));
    let message = error["message"].as_str().unwrap();
    assert!(
        message.contains("alice") && message.contains("quota_user_tokens_per_day"),
        "{message}"
    );

    // The next run makes no model call at all.
    let next = run(&server, "alice", "hello").await;
    refusal(&next);
    assert_eq!(
        types(&next),
        [
            "chat.text",
            "chat.error",
            "chat.usage_summary",
            "chat.run_complete"
        ],
        "{next:#?}"
    );
    // Another user's day is their own.
    let theirs = run(&server, "bob", "hello").await;
    assert_eq!(theirs.last().unwrap()["reason"], "completed", "{theirs:#?}");
    // The refused runs used nothing.
    let (_, usage) = crate::server_api::call(
        &server,
        "GET",
        "/v1/usage",
        &token("alice", 600, SECRET),
        None,
    )
    .await;
    assert_eq!(usage["total"]["runs"], 2, "{usage}");
    let summary = next
        .iter()
        .find(|m| m["type"] == "chat.usage_summary")
        .unwrap();
    assert_eq!(summary["total_tokens"], 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cost_quota_is_counted_across_nodes() {
    let Some(db) = crate::cluster::cluster_database().await else {
        return;
    };
    let node = |db: String| async move {
        Server::start_with(Opts {
            settings: settings(agentwire::config::Settings {
                database_url: Some(db),
                quota_user_cost_per_month: Some(0.000_001),
                ..Default::default()
            }),
            agents: vec![("priced.yaml".into(), crate::usage::priced())],
        })
        .await
    };
    let (a, b) = (node(db.clone()).await, node(db).await);
    let first = run(&a, "carol", "hello there").await;
    assert_eq!(first.last().unwrap()["reason"], "completed");
    let cost = first
        .iter()
        .find(|m| m["type"] == "chat.usage_summary")
        .and_then(|m| m["cost"].as_f64())
        .unwrap();
    assert!(cost >= 0.000_001, "the run costs past the quota: {cost}");
    // On the other node, the month's cost is the same ledger's.
    let next = run(&b, "carol", "hello").await;
    let error = refusal(&next);
    assert_eq!(error["details"]["quota"], "cost_per_month");
    let month = chrono::Utc::now().date_naive();
    let next_month = chrono::NaiveDate::from_ymd_opt(
        month.year() + i32::from(month.month() == 12),
        month.month() % 12 + 1,
        1,
    )
    .unwrap();
    assert_eq!(
        error["details"]["resets_at"],
        format!("{next_month}T00:00:00Z")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agents_quota_counts_every_users_runs() {
    // An agent file's `quota:` is every user's runs of it together.
    let shared = include_str!("../../src/agent/demo.yaml").replacen(
        "id: demo",
        "id: shared\nquota: {tokens_per_day: 1}",
        1,
    );
    let server = Server::start_with(Opts {
        settings: settings(Default::default()),
        agents: vec![("shared.yaml".into(), shared)],
    })
    .await;
    let start = |user: &'static str, agent: &'static str| {
        let server = &server;
        async move {
            let mut c = crate::server_api::connect_as(server, user).await;
            let chat = Uuid::new_v4();
            c.start_with(chat, agent, "hello").await;
            c.until_complete(chat).await
        }
    };
    let first = start("dana", "shared").await;
    assert_eq!(first.last().unwrap()["reason"], "completed");
    let other = start("eli", "shared").await;
    let error = refusal(&other);
    assert_eq!(error["details"]["scope"], "agent");
    assert_eq!(error["details"]["quota"], "tokens_per_day");
    let message = error["message"].as_str().unwrap();
    assert!(message.contains("agent `shared`"), "{message}");
    // Another agent, the same user: not held.
    let demo = start("eli", "demo").await;
    assert_eq!(demo.last().unwrap()["reason"], "completed");
}

/// `user`'s run of `agent` on `server` that streams until cancelled: its
/// socket and chat, once it streams.
async fn streaming(server: &Server, user: &str, agent: &str) -> (Client, Uuid) {
    let mut c = crate::server_api::connect_as(server, user).await;
    let chat = Uuid::new_v4();
    c.start_with(chat, agent, "slow: 100000").await;
    c.recv_until(|m| m["type"] == "chat.print").await;
    (c, chat)
}

/// A new run of `user`'s: what it logged.
async fn started(server: &Server, user: &str, agent: &str) -> Vec<Value> {
    let mut c = crate::server_api::connect_as(server, user).await;
    let chat = Uuid::new_v4();
    c.start_with(chat, agent, "hello").await;
    c.until_complete(chat).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_in_flight_are_counted_on_every_node_for_the_user_and_the_agent() {
    // Two nodes on PostgreSQL (the count is the store's); one on SQLite.
    let db = crate::cluster::cluster_database().await;
    let limited = include_str!("../../src/agent/demo.yaml").replacen(
        "id: demo",
        "id: limited\nquota: {concurrent_runs: 1}",
        1,
    );
    let node = |db: Option<String>| {
        let limited = limited.clone();
        async move {
            Server::start_with(Opts {
                settings: settings(agentwire::config::Settings {
                    database_url: db,
                    quota_user_concurrent_runs: Some(2),
                    ..Default::default()
                }),
                agents: vec![("limited.yaml".into(), limited)],
            })
            .await
        }
    };
    let a = node(db.clone()).await;
    let b = match db {
        Some(db) => Some(node(Some(db)).await),
        None => None,
    };
    let other = b.as_ref().unwrap_or(&a);
    // Alice's two runs in flight (one on each node): her third is refused.
    let (mut first, one) = streaming(&a, "alice", "demo").await;
    let (_second, _two) = streaming(other, "alice", "demo").await;
    let third = started(other, "alice", "demo").await;
    let error = refusal(&third);
    assert_eq!(error["details"]["scope"], "user");
    assert_eq!(error["details"]["quota"], "concurrent_runs");
    assert_eq!(error["details"]["limit"], 2);
    assert_eq!(error["details"]["used"], 2);
    assert!(error["details"]["resets_at"].is_null());
    let message = error["message"].as_str().unwrap();
    assert!(message.contains("quota_user_concurrent_runs"), "{message}");
    // Bob is not held by Alice's runs; one ends, and Alice may run again.
    assert_eq!(
        started(&a, "bob", "demo").await.last().unwrap()["reason"],
        "completed"
    );
    first
        .send(json!({"type": "chat.cancel", "chat_id": one}))
        .await;
    first.until_complete(one).await;
    assert_eq!(
        started(other, "alice", "demo").await.last().unwrap()["reason"],
        "completed"
    );

    // The agent's own quota: one run of it at a time, whoever runs it.
    let (_held, _chat) = streaming(&a, "carol", "limited").await;
    let error = refusal(&started(other, "dave", "limited").await).clone();
    assert_eq!(error["details"]["scope"], "agent");
    assert_eq!(error["details"]["quota"], "concurrent_runs");
    assert_eq!(error["details"]["used"], 1);
}
