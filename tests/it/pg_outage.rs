//! PostgreSQL drops every connection mid-stream and comes back: the node keeps
//! serving, the log stays gap-free, and nothing is delivered twice.

use serde_json::Value;
use sqlx::Connection;
use uuid::Uuid;

use crate::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_database_connections_lose_and_double_nothing() {
    let Some(pg) = agentwire::testing::postgres() else {
        return; // No PostgreSQL here (and not required): see src/testing.rs.
    };
    let url = pg.fresh_database().await;
    let server = Server::start_with(Opts {
        settings: agentwire::config::Settings {
            database_url: Some(url.clone()),
            ..Default::default()
        },
        ..Default::default()
    })
    .await;
    let mut admin = sqlx::PgConnection::connect(&url).await.unwrap();

    let mut c = server.client().await;
    let chat = Uuid::new_v4();
    c.start(chat, "slow: 200").await;
    let mut got: Vec<Value> = Vec::new();
    while got.iter().filter(|m| m["type"] == "chat.print").count() < 20 {
        got.push(c.recv().await);
    }
    // Every other session of this database goes away at once.
    sqlx::query(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
         WHERE datname = current_database() AND pid <> pg_backend_pid()",
    )
    .execute(&mut admin)
    .await
    .unwrap();
    got.extend(c.until_complete(chat).await);
    let logged: Vec<&Value> = got.iter().filter(|m| m["seq"].is_u64()).collect();
    let held: Vec<u64> = logged.iter().map(|m| m["seq"].as_u64().unwrap()).collect();
    assert_gap_free(&held);
    assert_eq!(logged.last().unwrap()["type"], "chat.run_complete");

    // The node still serves, from the next seq, and a replay equals what was seen.
    c.say(chat, "still there?").await;
    let more = c.until_complete(chat).await;
    assert_eq!(seqs(&more)[0], *held.last().unwrap() + 1);
    assert_eq!(last_text(&more), "You said: still there?");
    let mut again = server.client().await;
    again.resume(chat, 0).await;
    let replay = again
        .recv_until(|m| m["type"] == "chat.resume_boundary")
        .await;
    let replayed: Vec<Value> = replay[..replay.len() - 1]
        .iter()
        .map(without_replay)
        .collect();
    let live: Vec<Value> = logged.into_iter().cloned().chain(more).collect();
    assert_eq!(
        replayed, live,
        "the log is exactly what was delivered, once"
    );
}
