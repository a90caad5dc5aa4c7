//! The actor on its own: a real SQLite store, no sockets.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
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
        connections: None,
        store,
        writer,
        agents: AgentRegistry::load(&dir.join("none"), false, &[]).unwrap(),
        input_timeout: Duration::from_secs(60),
        ui_timeout: Duration::from_secs(60),
        idle,
        max_message_bytes: 1 << 20,
        max_versions_per_point: 32,
        files: crate::config::FileLimits::default(),
        max_branches_per_chat: 1000,
        quotas: Quotas::unlimited(),
        usage_quotas: crate::config::Quotas::default(),
        shutdown: CancellationToken::new(),
        tracker: TaskTracker::new(),
        node: None,
        continue_runs: false,
        continue_delay: Duration::ZERO,
        title_model: None,
        // One more envelope after a first run: the tests below count seqs.
        auto_titles: false,
        feed: Arc::default(),
    }))
}

fn subscriber(conn_id: u64) -> (Subscriber, OutboundRx) {
    Subscriber::channel(conn_id, 100_000, 1 << 30)
}

/// Reads live envelopes until one matches.
async fn until(rx: &mut OutboundRx, pred: impl Fn(&Value) -> bool) -> Vec<Value> {
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

/// Starts `chat` with `text`, subscribed by connection `conn_id`, and reads
/// its first run to the end: the queue and what it read.
async fn ran(reg: &Registry, chat: Uuid, text: &str, conn_id: u64) -> (OutboundRx, Vec<Value>) {
    let (sub, mut rx) = subscriber(conn_id);
    reg.start(
        chat,
        Caller::user("dev"),
        "demo",
        Some(text.into()),
        Some(sub),
    )
    .await
    .unwrap();
    let run = until(&mut rx, |v| v["type"] == "chat.run_complete").await;
    (rx, run)
}

/// A chat whose demo run shows a component (`ui: board`), followed by a new
/// subscriber: its queue, the envelopes up to the tool call, the call's corr.
async fn component(reg: &Registry, chat: Uuid) -> (OutboundRx, Vec<Value>, String) {
    let (sub, mut rx) = subscriber(1);
    let ui = Some("ui: board".into());
    reg.start(chat, Caller::user("dev"), "demo", ui, Some(sub))
        .await
        .unwrap();
    let call = until(&mut rx, |v| v["type"] == "chat.tool_call").await;
    let corr = call.last().unwrap()["corr"].as_str().unwrap().to_owned();
    (rx, call, corr)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_events_and_inbound_commands_interleave_without_gaps() {
    let dir = tempfile::tempdir().unwrap();
    let reg = registry(dir.path(), Duration::from_secs(60)).await;
    let chat = Uuid::new_v4();
    // A component to patch: its tool call is answered, so it stays patchable.
    let (mut rx, first, corr) = component(&reg, chat).await;
    reg.component_result(chat, "dev", corr.clone(), json!({"ok": true}))
        .await
        .unwrap();
    let mut log = first;
    log.extend(until(&mut rx, |v| v["type"] == "chat.run_complete").await);

    // While a run streams, 40 patches arrive from 4 concurrent clients.
    reg.user_message(chat, Caller::user("dev"), "slow: 60".into(), None, None)
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
    reg.user_message(chat, Caller::user("dev"), "two".into(), None, None)
        .await
        .unwrap();
    let next = until(&mut rx, |v| v["type"] == "chat.run_complete").await;
    assert_eq!(next[0]["seq"], first.len() as u64 + 1);
    assert!(matches!(
        reg.resume(chat, "someone-else", 0, subscriber(3).0).await,
        Err(SessionError::NotFound)
    ));
}

/// Waits until the registry holds `active` actors and `sleeping` chats.
async fn settle(reg: &Registry, active: usize, sleeping: usize) {
    for _ in 0..200 {
        if (reg.active_chats(), reg.sleeping_chats()) == (active, sleeping) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let now = (reg.active_chats(), reg.sleeping_chats());
    assert_eq!(now, (active, sleeping), "(actors, sleeping chats)");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_followed_chat_sleeps_and_wakes_with_its_subscribers() {
    let dir = tempfile::tempdir().unwrap();
    let reg = registry(dir.path(), Duration::from_millis(50)).await;
    let chat = Uuid::new_v4();
    let (a, mut rx_a) = subscriber(1);
    let (b, mut rx_b) = subscriber(2);
    let one = Some("one".into());
    reg.start(chat, Caller::user("dev"), "demo", one, Some(a))
        .await
        .unwrap();
    let first = until(&mut rx_a, |v| v["type"] == "chat.run_complete").await;
    reg.follow(chat, "dev", b).await.unwrap();
    // Idle with two connections following: the actor stops, the chat sleeps.
    settle(&reg, 0, 1).await;

    // A message wakes it: a new actor, the same subscribers, the next seq.
    reg.user_message(chat, Caller::user("dev"), "two".into(), None, None)
        .await
        .unwrap();
    let next = until(&mut rx_a, |v| v["type"] == "chat.run_complete").await;
    assert_eq!(next[0]["seq"], first.len() as u64 + 1);
    assert_eq!(
        until(&mut rx_b, |v| v["type"] == "chat.run_complete").await,
        next,
        "the follower got the same envelopes"
    );
    settle(&reg, 0, 1).await;

    // Unsubscribing from a sleeping chat does not wake it; the last one
    // leaving forgets the chat (both queues still open: by their ids).
    reg.unsubscribe(chat, 1).await;
    assert_eq!((reg.active_chats(), reg.sleeping_chats()), (0, 1));
    reg.unsubscribe(chat, 2).await;
    assert_eq!((reg.active_chats(), reg.sleeping_chats()), (0, 0));
    drop((rx_a, rx_b));

    // A connection gone without unsubscribing does not keep a chat asleep.
    let (c, rx_c) = subscriber(3);
    reg.resume(chat, "dev", 0, c).await.unwrap();
    drop(rx_c);
    settle(&reg, 0, 0).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sleeping_chat_whose_streams_left_without_a_word_is_swept() {
    let dir = tempfile::tempdir().unwrap();
    let reg = registry(dir.path(), Duration::from_millis(50)).await;
    let (gone, stays) = (Uuid::new_v4(), Uuid::new_v4());
    let (rx_a, _) = ran(&reg, gone, "hi", 1).await;
    settle(&reg, 0, 1).await;
    // The stream goes away as an SSE client's does: its queue closes, and
    // nobody unsubscribes.
    drop(rx_a);
    tokio::time::sleep(Duration::from_millis(60)).await;

    // The next actor to stop sweeps it; a chat still followed stays asleep.
    let (_rx_b, _) = ran(&reg, stays, "hi", 2).await;
    settle(&reg, 0, 1).await;
    reg.unsubscribe(stays, 2).await;
    assert_eq!((reg.active_chats(), reg.sleeping_chats()), (0, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_shutdown_a_sleeping_chat_lets_go_of_its_streams() {
    let dir = tempfile::tempdir().unwrap();
    let reg = registry(dir.path(), Duration::from_millis(50)).await;
    let chat = Uuid::new_v4();
    let (mut rx, _) = ran(&reg, chat, "hi", 1).await;
    settle(&reg, 0, 1).await;
    reg.context().shutdown.cancel();
    reg.forget_sleeping();
    assert_eq!((reg.active_chats(), reg.sleeping_chats()), (0, 0));
    // The chat held the stream's only sender: its queue ends.
    let end = tokio::time::timeout(Duration::from_secs(5), rx.recv()).await;
    assert!(matches!(end, Ok(None)), "the stream's queue ended");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_patch_cannot_grow_a_state_past_the_bounds() {
    let dir = tempfile::tempdir().unwrap();
    let reg = registry(dir.path(), Duration::from_secs(60)).await;
    let chat = Uuid::new_v4();
    let (mut rx, call, corr) = component(&reg, chat).await;
    let last_seq = call.last().unwrap()["seq"].as_u64().unwrap();
    let patch = |p: Value| reg.artifact_patch(chat, "dev", corr.clone(), p);

    // The probe's message: a 1 KiB string, then 16 copies, each doubling the
    // state (it grew to 68 MB before the bound).
    let mut ops = vec![json!({"op": "add", "path": "/a", "value": "x".repeat(1024)})];
    ops.push(json!({"op": "add", "path": "/b", "value": []}));
    for i in 0..16 {
        ops.push(json!({"op": "copy", "from": "/a", "path": format!("/b/-")}));
        ops.push(json!({"op": "copy", "from": "/b", "path": format!("/c{i}")}));
        ops.push(json!({"op": "move", "from": format!("/c{i}"), "path": "/a"}));
    }
    let e = patch(Value::Array(ops[..3 * 16].to_vec()))
        .await
        .unwrap_err();
    assert!(
        matches!(e, SessionError::InvalidPatch(ref m) if m.contains("bytes")),
        "{e}"
    );
    assert_eq!(e.code(), crate::protocol::ErrorCode::SchemaValidationFailed);

    // Too many operations, however small.
    let many: Vec<Value> = (0..65)
        .map(|i| json!({"op": "add", "path": format!("/k{i}"), "value": i}))
        .collect();
    let e = patch(Value::Array(many)).await.unwrap_err();
    assert!(
        matches!(e, SessionError::InvalidPatch(ref m) if m.contains("operations")),
        "{e}"
    );

    // Depth built by copying a value into itself.
    let mut deep = vec![json!({"op": "add", "path": "/d", "value": {"e": [[[[[[[[1]]]]]]]]}})];
    for _ in 0..8 {
        deep.push(json!({"op": "copy", "from": "/d", "path": "/d/e/0/0/0/0/0/0/0/0"}));
    }
    let e = patch(Value::Array(deep)).await.unwrap_err();
    assert!(
        matches!(e, SessionError::InvalidPatch(ref m) if m.contains("deeper")),
        "{e}"
    );

    // Nothing of any refused patch was logged; a sound one still is.
    patch(json!([{"op": "add", "path": "/ok", "value": true}]))
        .await
        .unwrap();
    let next = until(&mut rx, |v| v["type"] == "chat.tool_call").await;
    assert_eq!(next.len(), 1, "nothing else was logged");
    let last = &next[0];
    assert_eq!(last["seq"].as_u64().unwrap(), last_seq + 1);
    assert_eq!(last["payload"]["ok"], true);
    assert!(
        last["payload"].get("a").is_none(),
        "refused patches changed nothing"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queue_bounded_in_bytes_closes_a_connection_that_does_not_read() {
    let dir = tempfile::tempdir().unwrap();
    let reg = registry(dir.path(), Duration::from_secs(60)).await;
    let chat = Uuid::new_v4();
    // Room for 10,000 messages but only 64 KiB: the bytes bind first.
    let (sub, rx) = Subscriber::channel(1, 10_000, 64 << 10);
    let closer = sub.closer.clone();
    let (reader, mut reader_rx) = subscriber(2);
    reg.start(chat, Caller::user("dev"), "demo", None, Some(sub))
        .await
        .unwrap();
    reg.resume(chat, "dev", 0, reader).await.unwrap();
    // 40 KiB of text, echoed back in chunks: well over 64 KiB in all.
    let text = "x".repeat(40 << 10);
    reg.user_message(chat, Caller::user("dev"), text, None, None)
        .await
        .unwrap();
    until(&mut reader_rx, |v| v["type"] == "chat.run_complete").await;
    assert!(
        closer.is_closed(),
        "the connection that never read is closed"
    );
    assert_eq!(closer.why().0, 1013);
    drop(rx);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replay_reads_large_envelopes_a_few_at_a_time() {
    let dir = tempfile::tempdir().unwrap();
    let reg = registry(dir.path(), Duration::from_secs(60)).await;
    let chat = Uuid::new_v4();
    let (sub, mut rx) = subscriber(1);
    reg.start(chat, Caller::user("dev"), "demo", None, Some(sub))
        .await
        .unwrap();
    for _ in 0..3 {
        let text = "y".repeat(200 << 10);
        reg.user_message(chat, Caller::user("dev"), text, None, None)
            .await
            .unwrap();
        until(&mut rx, |v| v["type"] == "chat.run_complete").await;
    }
    let (sub, mut rx) = subscriber(2);
    reg.resume(chat, "dev", 0, sub).await.unwrap();
    let Some(Outbound::Replay(mut replay)) = rx.recv().await else {
        panic!("a replay first");
    };
    let mut pages = Vec::new();
    while let Some(page) = replay.next_page().await.unwrap() {
        let bytes: usize = page.iter().map(String::len).sum();
        pages.push((page.len(), bytes));
    }
    // A page stops at the envelope that crosses 1 MiB: at most that much
    // and one envelope more (each of these is ~200 KiB).
    for (n, bytes) in &pages {
        let most = (1 << 20) + (256 << 10);
        assert!(*bytes <= most, "a page of {n} holds {bytes} bytes");
    }
    assert!(pages.len() > 1, "{pages:?}");
    let total: usize = pages.iter().map(|p| p.0).sum();
    assert!(total > 9, "every envelope is replayed: {pages:?}");
}
