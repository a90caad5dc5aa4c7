//! Reconnecting by `seq`: exactly what was missed, then live events.

use serde_json::{Value, json};
use uuid::Uuid;

use crate::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resume_mid_stream_misses_nothing() {
    let server = Server::start().await;
    let chat = Uuid::new_v4();
    let mut a = server.client().await;
    a.start(chat, "slow: 200").await;
    let mut before = Vec::new();
    while before.len() < 40 {
        before.push(a.recv().await);
    }
    drop(a); // Gone without a goodbye, mid-answer.
    let held = *seqs(&before).last().unwrap();

    let mut b = server.client().await;
    b.resume(chat, held).await;
    let replayed = b.recv_until(|m| m["type"] == "chat.resume_boundary").await;
    let boundary = replayed.last().unwrap().clone();
    let replayed = &replayed[..replayed.len() - 1];
    assert!(replayed.iter().all(|m| m["replay"] == true));
    assert_eq!(boundary["recovered"], true);
    assert!(boundary.get("seq").is_none());
    let last_replayed = seqs(replayed).last().copied().unwrap_or(held);
    assert_eq!(boundary["last_seq"], last_replayed);

    let live = b.until_complete(chat).await;
    assert!(live.iter().all(|m| m.get("replay").is_none()));
    let all: Vec<Value> = before
        .into_iter()
        .chain(replayed.iter().cloned())
        .chain(live)
        .collect();
    assert_gap_free(&seqs(&all));
    let words = all.iter().filter(|m| m["type"] == "chat.print").count();
    assert_eq!(words, 200);
    assert_eq!(all.last().unwrap()["reason"], "completed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resume_positions() {
    let server = Server::start().await;
    let chat = Uuid::new_v4();
    let mut c = server.client().await;
    c.start(chat, "hello").await;
    let log = c.until_complete(chat).await;
    let n = log.len() as u64;
    c.close().await;

    let mut c = server.client().await;
    // Absent lastClientIndex: everything.
    c.send(json!({"type": "client.resume", "chat_id": chat}))
        .await;
    let all = c.recv_until(|m| m["type"] == "chat.resume_boundary").await;
    assert_eq!(seqs(&all), (1..=n).collect::<Vec<_>>());
    for (got, original) in all.iter().zip(&log) {
        assert_eq!(
            &without_replay(got),
            original,
            "replay is the same envelope"
        );
    }

    // Up to date: nothing replayed, just the boundary.
    c.resume(chat, n).await;
    let b = c.expect("chat.resume_boundary").await;
    assert_eq!(b["last_seq"], n);
    assert_eq!(b["recovered"], true);

    // Beyond the log (a restored backup): everything again, recovered false.
    c.resume(chat, n + 1000).await;
    let again = c.recv_until(|m| m["type"] == "chat.resume_boundary").await;
    assert_eq!(again.len() as u64, n + 1);
    assert_eq!(again.last().unwrap()["recovered"], false);

    // A chat that does not exist.
    let nowhere = Uuid::new_v4();
    c.resume(nowhere, 0).await;
    let err = c.expect("chat.error").await;
    assert_eq!(err["error_code"], "RESUME_FAILED");
    assert_eq!(err["chat_id"], nowhere.to_string());

    // Unsubscribed: no more live events of that chat.
    c.send(json!({"type": "client.unsubscribe", "chat_id": chat}))
        .await;
    // A connection's messages are handled in order: the pong means the
    // unsubscribe is done.
    c.send(json!({"type": "ping"})).await;
    assert_eq!(c.recv().await["type"], "pong");
    let mut other = server.client().await;
    other.resume(chat, n).await;
    other.expect("chat.resume_boundary").await;
    other.say(chat, "more").await;
    other.until_complete(chat).await;
    c.send(json!({"type": "ping"})).await;
    assert_eq!(
        c.recv().await["type"],
        "pong",
        "no events after unsubscribe"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_client_is_closed_with_1013_and_resumes() {
    const WORDS: u64 = 100_000;
    let server = Server::start_with(Opts {
        settings: agentwire::config::Settings {
            outbound_queue: Some(16),
            ..Default::default()
        },
        ..Default::default()
    })
    .await;
    let chat = Uuid::new_v4();
    let mut slow = Client::connect_small_buffer(server.addr).await;
    slow.start(chat, &format!("burst: {WORDS}")).await;

    // The slow client reads nothing while the chat runs far past what socket
    // buffers and the 16-slot queue can hold for it (watched over REST, which
    // no WebSocket queue slows down).
    let path = format!("/v1/chats/{chat}");
    loop {
        let (_, view) = http_json(&server, "GET", &path, "").await;
        if view["last_seq"].as_u64().unwrap_or(0) >= WORDS / 2 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }

    let mut held = Vec::new();
    let ended = loop {
        match slow.next().await {
            Ok(m) => held.push(m["seq"].as_u64().unwrap()),
            Err(e) => break e,
        }
    };
    assert_eq!(ended, Ended::Closed(Some(1013)));
    assert!(!held.is_empty());
    assert_gap_free(&held);
    assert!((held.len() as u64) < WORDS, "closed before the end");

    // Resume from the last seq held; with a 16-slot queue, a loaded machine
    // may close this connection with 1013 too: then resume again.
    let mut all = held;
    'resume: loop {
        let mut again = server.client().await;
        again.resume(chat, *all.last().unwrap()).await;
        loop {
            match again.next().await {
                Ok(m) => {
                    if let Some(seq) = m["seq"].as_u64() {
                        all.push(seq);
                    }
                    if m["type"] == "chat.run_complete" {
                        break 'resume;
                    }
                }
                Err(Ended::Closed(Some(1013))) => continue 'resume,
                Err(e) => panic!("unexpected end: {e:?}"),
            }
        }
    }
    assert_gap_free(&all);
    // user text, speaker, the words, text, usage, complete.
    assert_eq!(all.len() as u64, WORDS + 5);
}
