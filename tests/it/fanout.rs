//! Several connections on one chat; several chats on one connection.

use std::collections::HashMap;

use serde_json::Value;
use uuid::Uuid;

use crate::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_connections_see_the_same_sequence() {
    let server = Server::start().await;
    let chat = Uuid::new_v4();
    let mut a = server.client().await;
    let mut b = server.client().await;
    a.start(chat, "slow: 30").await;
    a.recv_until(|m| m["type"] == "chat.print").await;
    b.resume(chat, 0).await;
    let (from_a, from_b) = tokio::join!(a.until_complete(chat), b.until_complete(chat));
    let a_all: Vec<Value> = from_a;
    let b_all: Vec<Value> = from_b.into_iter().filter(|m| m["seq"].is_u64()).collect();
    assert_gap_free(&seqs(&b_all));
    // A's tail equals B's tail envelope for envelope.
    let tail = &b_all[b_all.len() - a_all.len()..];
    assert_eq!(
        tail.iter().map(without_replay).collect::<Vec<_>>(),
        a_all.iter().map(without_replay).collect::<Vec<_>>()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_connection_three_chats_keep_their_order() {
    let server = Server::start().await;
    let mut c = server.client().await;
    let chats: Vec<Uuid> = (0..3).map(|_| Uuid::new_v4()).collect();
    for chat in &chats {
        c.start(*chat, "slow: 25").await;
    }
    let mut by_chat: HashMap<String, Vec<u64>> = HashMap::new();
    let mut complete = 0;
    while complete < 3 {
        let m = c.recv().await;
        if m["type"] == "chat.run_complete" {
            complete += 1;
        }
        by_chat
            .entry(m["chat_id"].as_str().unwrap().to_owned())
            .or_default()
            .push(m["seq"].as_u64().unwrap());
    }
    assert_eq!(by_chat.len(), 3);
    for seqs in by_chat.values() {
        assert_gap_free(seqs);
        assert_eq!(
            seqs.len(),
            25 + 5,
            "user text, speaker, words, text, usage, complete"
        );
    }
}
