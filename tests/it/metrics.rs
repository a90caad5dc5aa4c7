//! `/metrics` after a conversation: the counters move as they should. On the
//! real binary, so no other test's traffic lands in the same recorder.

use std::time::Duration;

use serde_json::json;
use uuid::Uuid;

use crate::support::*;

/// The value of a sample line `name{labels} value` (0 if absent).
fn sample(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or(0.0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_follow_a_conversation() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("agents")).unwrap();
    let url = database_url(dir.path()).await;
    let (_child, addr) = spawn_agentwire(&url, &dir.path().join("agents"), &[]).await;
    let scrape = || async {
        let (status, text) = http_get(addr, "/metrics", &[]).await;
        assert_eq!(status, 200);
        text
    };
    let before = scrape().await;
    assert_eq!(sample(&before, "agentwire_envelopes_appended_total"), 0.0);

    let mut c = Client::connect(&format!("ws://{addr}/v1/ws")).await;
    let chat = Uuid::new_v4();
    c.start(chat, "burst: 50").await;
    let msgs = c.until_complete(chat).await;
    let during = scrape().await;
    assert_eq!(
        sample(&during, r#"agentwire_connections{transport="ws"}"#),
        1.0
    );
    assert_eq!(sample(&during, "agentwire_chat_actors"), 1.0);
    // A resume is a replay of the whole chat.
    c.resume(chat, 0).await;
    c.recv_until(|m| m["type"] == "chat.resume_boundary").await;
    // A tool call is timed by kind.
    c.say(chat, "ask: Your name?").await;
    let asked = c.recv_until(|m| m["type"] == "chat.input_request").await;
    let req = asked.last().unwrap();
    c.send(json!({"type": "user.input.submit", "chat_id": chat, "request_id": req["request_id"], "text": "Ada"}))
        .await;
    let answered = c.until_complete(chat).await;
    let logged = msgs.len() + asked.len() + answered.len();
    // A bad message is an error by code.
    c.send(json!({"type": "user.message", "chat_id": chat}))
        .await;
    c.expect("chat.error").await;

    let after = scrape().await;
    assert_eq!(
        sample(&after, "agentwire_envelopes_appended_total"),
        logged as f64,
        "every envelope of the chat, counted once"
    );
    assert!(sample(&after, "agentwire_commit_envelopes_count") >= 1.0);
    assert_eq!(
        sample(&after, "agentwire_commit_envelopes_sum"),
        logged as f64
    );
    assert_eq!(
        sample(&after, r#"agentwire_tool_seconds_count{kind="input"}"#),
        1.0
    );
    assert!(sample(&after, "agentwire_commit_seconds_count") >= 1.0);
    assert!(sample(&after, "agentwire_delivery_seconds_count") >= 1.0);
    assert_eq!(sample(&after, "agentwire_replays_total"), 1.0);
    assert_eq!(
        sample(&after, "agentwire_replay_envelopes_sum"),
        msgs.len() as f64
    );
    assert_eq!(
        sample(
            &after,
            r#"agentwire_errors_total{code="SCHEMA_VALIDATION_FAILED"}"#
        ),
        1.0
    );
    assert_eq!(sample(&after, "agentwire_runs_active"), 0.0);
    assert!(after.contains("# TYPE agentwire_commit_seconds histogram"));

    c.close().await;
    let mut closed = false;
    for _ in 0..100 {
        if sample(&scrape().await, r#"agentwire_connections{transport="ws"}"#) == 0.0 {
            closed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(closed, "a closed connection is no longer counted");
}

/// A chat followed over a socket goes to sleep when idle (its actor leaves
/// memory, the connection stays subscribed) and wakes on the next message:
/// the same connection gets the new run, numbered on from the log. On
/// PostgreSQL every node is a cluster, where a followed chat keeps its actor.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_followed_chat_sleeps_and_the_next_message_wakes_it() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("agents")).unwrap();
    let url = database_url(dir.path()).await;
    let agents = dir.path().join("agents");
    let (_child, addr) = spawn_agentwire(&url, &agents, &["--idle-chat-seconds", "1"]).await;
    let gauges = || async {
        let (_, text) = http_get(addr, "/metrics", &[]).await;
        let actors = sample(&text, "agentwire_chat_actors");
        (actors, sample(&text, "agentwire_chats_sleeping"))
    };
    let settled = |want: (f64, f64)| async move {
        for _ in 0..150 {
            if gauges().await == want {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(gauges().await, want, "(chat actors, chats sleeping)");
    };
    let asleep = if on_postgres() {
        (1.0, 0.0)
    } else {
        (0.0, 1.0)
    };

    let mut c = Client::connect(&format!("ws://{addr}/v1/ws")).await;
    let chat = Uuid::new_v4();
    c.start(chat, "hello").await;
    let first = c.until_complete(chat).await;
    settled(asleep).await;

    c.say(chat, "again").await;
    let second = c.until_complete(chat).await;
    let all: Vec<u64> = seqs(&first).into_iter().chain(seqs(&second)).collect();
    assert_gap_free(&all);
    assert_eq!(last_text(&second), "You said: again");
    settled(asleep).await;

    // The connection leaving forgets the sleeping chat (on PostgreSQL, the
    // actor stops once idle with nobody following).
    c.close().await;
    settled((0.0, 0.0)).await;
}
