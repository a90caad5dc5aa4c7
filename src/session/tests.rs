//! The actor on its own: a real SQLite store, no sockets.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use uuid::Uuid;

use super::*;
use crate::agent::AgentRegistry;
use crate::store::{LogWriter, SqliteStore};

async fn registry(dir: &std::path::Path, idle: Duration) -> Registry {
    let store: Arc<dyn crate::store::Store> =
        Arc::new(SqliteStore::open(&dir.join("db")).await.unwrap());
    let (writer, _task) = LogWriter::spawn(store.clone());
    Registry::new(Arc::new(SessionContext {
        store,
        writer,
        agents: AgentRegistry::load(&dir.join("none"), false, &[]).unwrap(),
        input_timeout: Duration::from_secs(60),
        ui_timeout: Duration::from_secs(60),
        idle,
        shutdown: CancellationToken::new(),
        tracker: TaskTracker::new(),
        node: None,
    }))
}

fn subscriber(conn_id: u64) -> (Subscriber, mpsc::Receiver<Outbound>) {
    let (tx, rx) = mpsc::channel(100_000);
    (
        Subscriber {
            conn_id,
            tx,
            closer: Closer::default(),
        },
        rx,
    )
}

/// Reads live envelopes until one matches.
async fn until(rx: &mut mpsc::Receiver<Outbound>, pred: impl Fn(&Value) -> bool) -> Vec<Value> {
    let mut out = Vec::new();
    loop {
        let item = tokio::time::timeout(Duration::from_secs(10), rx.recv())
            .await
            .expect("an envelope in time")
            .expect("channel open");
        if let Outbound::Event(json) = item {
            let v: Value = serde_json::from_str(&json).unwrap();
            let done = pred(&v);
            out.push(v);
            if done {
                return out;
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_events_and_inbound_commands_interleave_without_gaps() {
    let dir = tempfile::tempdir().unwrap();
    let reg = registry(dir.path(), Duration::from_secs(60)).await;
    let chat = Uuid::new_v4();
    let (sub, mut rx) = subscriber(1);

    // A component to patch: its tool call is answered, so it stays patchable.
    reg.start(
        chat,
        Caller::user("dev"),
        "demo",
        Some("ui: board".into()),
        Some(sub),
    )
    .await
    .unwrap();
    let first = until(&mut rx, |v| v["type"] == "chat.tool_call").await;
    let corr = first.last().unwrap()["corr"].as_str().unwrap().to_owned();
    reg.component_result(chat, "dev", corr.clone(), json!({"ok": true}))
        .await
        .unwrap();
    let mut log = first;
    log.extend(until(&mut rx, |v| v["type"] == "chat.run_complete").await);

    // While a run streams, 40 patches arrive from 4 concurrent clients.
    reg.user_message(chat, Caller::user("dev"), "slow: 60".into(), None)
        .await
        .unwrap();
    let mut patchers = Vec::new();
    for p in 0..4 {
        let reg = reg.clone();
        let corr = corr.clone();
        patchers.push(tokio::spawn(async move {
            for i in 0..10 {
                let patch = json!([{"op": "add", "path": format!("/p{p}_{i}"), "value": i}]);
                reg.artifact_patch(chat, "dev", corr.clone(), patch)
                    .await
                    .unwrap();
                tokio::time::sleep(Duration::from_millis(7)).await;
            }
        }));
    }
    for p in patchers {
        p.await.unwrap();
    }
    log.extend(until(&mut rx, |v| v["type"] == "chat.run_complete").await);

    let seqs: Vec<u64> = log.iter().map(|v| v["seq"].as_u64().unwrap()).collect();
    assert_eq!(seqs, (1..=log.len() as u64).collect::<Vec<_>>());
    let patches = log
        .iter()
        .filter(|v| v["type"] == "chat.tool_call" && v["corr"] == corr.as_str())
        .count();
    assert_eq!(patches, 1 + 40, "the call itself and every patch");
    assert_eq!(
        log.iter().filter(|v| v["type"] == "chat.print").count() as u64,
        60 + 3
    );
    // The last patch holds every key.
    let last = log
        .iter()
        .rev()
        .find(|v| v["type"] == "chat.tool_call")
        .unwrap();
    assert_eq!(last["payload"].as_object().unwrap().len(), 1 + 40);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_chat_is_rebuilt_from_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let reg = registry(dir.path(), Duration::from_millis(50)).await;
    let chat = Uuid::new_v4();
    let (sub, mut rx) = subscriber(1);
    reg.start(
        chat,
        Caller::user("dev"),
        "demo",
        Some("one".into()),
        Some(sub),
    )
    .await
    .unwrap();
    let first = until(&mut rx, |v| v["type"] == "chat.run_complete").await;
    reg.unsubscribe(chat, 1).await;
    drop(rx);
    // Idle: the actor leaves memory.
    for _ in 0..100 {
        if reg.active_chats() == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(reg.active_chats(), 0);

    // Used again: rebuilt with the next seq.
    let (sub, mut rx) = subscriber(2);
    reg.resume(chat, "dev", first.len() as u64, sub)
        .await
        .unwrap();
    reg.user_message(chat, Caller::user("dev"), "two".into(), None)
        .await
        .unwrap();
    let next = until(&mut rx, |v| v["type"] == "chat.run_complete").await;
    assert_eq!(next[0]["seq"], first.len() as u64 + 1);
    assert!(matches!(
        reg.resume(chat, "someone-else", 0, subscriber(3).0).await,
        Err(SessionError::NotFound)
    ));
}
