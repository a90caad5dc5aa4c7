//! Chats spread over two PostgreSQL databases (`store::sharded`): each
//! chat in the database its id hashes to, the user's list merged from
//! both, and one database down failing its own chats only.

use super::listing::{append, said};
use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chats_spread_and_one_database_down_fails_only_its_own() {
    let Some(server) = crate::testing::postgres() else {
        return;
    };
    let urls = [server.fresh_database().await, server.fresh_database().await];
    let mut parts = Vec::new();
    for (i, url) in urls.iter().enumerate() {
        parts.push((format!("db{i}"), PgStore::open(url, 4).await.unwrap()));
    }
    let sharded = Arc::new(ShardedStore::new(parts));
    let store: Arc<dyn Store> = sharded.clone();
    store.enable_outbox();

    // Forty chats of one user land on both databases, each where its id
    // hashes, and the list pages through all of them in order.
    let mut on = [Vec::new(), Vec::new()];
    for i in 0..40 {
        let id = store.create_chat(&chat("erin")).await.unwrap().id;
        append(&store, id, vec![said(1, "user", "hello", 1_000 + i)]).await;
        on[sharded.shard_of(id)].push(id);
    }
    assert!(!on[0].is_empty() && !on[1].is_empty(), "{on:?}");
    for (i, ids) in on.iter().enumerate() {
        let (_, name) = urls[i].rsplit_once('/').unwrap();
        let alone = PgStore::open(&urls[i], 1).await.unwrap();
        for id in ids {
            assert!(alone.chat(*id).await.unwrap().is_some(), "{id} in {name}");
        }
    }
    let mut listed = Vec::new();
    let mut after = None;
    loop {
        let page = store.list_chats("erin", false, after, 7).await.unwrap();
        let Some(last) = page.last() else { break };
        after = Some(ListCursor::after(last));
        listed.extend(page.iter().map(|c| c.id));
    }
    let mut expected: Vec<Uuid> = on.iter().flatten().copied().collect();
    expected.sort();
    let mut got = listed.clone();
    got.sort();
    got.dedup();
    assert_eq!((listed.len(), got), (40, expected), "each chat once");

    // The second database goes down: its chats fail, the first's go on,
    // through the writer too (each database has its own).
    let (writer, _task) = LogWriter::spawn(store.clone());
    crate::testing::set_database_down(&urls[1], true).await;
    let (up, down) = (on[0][0], on[1][0]);
    let batch = |chat_id, seq| AppendBatch {
        chat_id,
        envelopes: vec![said(seq, "assistant", "still here", 5_000)],
        state: None,
        conversation_state: None,
        fence: None,
    };
    let (kept, lost) = tokio::join!(writer.append(batch(up, 2)), writer.append(batch(down, 2)));
    kept.unwrap();
    assert!(matches!(lost, Err(StoreError::Database(_))), "{lost:?}");
    assert_eq!(store.load_after(up, 0, 10).await.unwrap().len(), 2);
    assert!(store.load_after(down, 0, 10).await.is_err());
    assert!(store.chat(down).await.is_err());
    assert!(store.chat(up).await.unwrap().is_some());
    assert!(
        store.list_chats("erin", false, None, 50).await.is_err(),
        "a list that cannot be whole is an error"
    );
    // Webhooks of the first database's chats are still sent: its events
    // are listed, taken and marked sent; the second's wait for it.
    let outbox = store.outbox();
    let now = chrono::Utc::now().timestamp_millis() + 1_000;
    let due = outbox.due(now, 100).await.unwrap();
    let chats: Vec<Uuid> = due.iter().map(|r| r.chat_id).collect();
    assert!(chats.contains(&up) && !chats.contains(&down), "{chats:?}");
    assert!(chats.iter().all(|c| on[0].contains(c)));
    let first = due.iter().find(|r| r.chat_id == up).unwrap();
    assert!(outbox.claim(&first.id, now, now + 60_000).await.unwrap());
    outbox.delivered(&first.id, now).await.unwrap();
    let theirs = format!("msg_{}_1", down.simple());
    assert!(outbox.claim(&theirs, now, now + 60_000).await.is_err());

    // Back up: the same chat appends where it stopped.
    crate::testing::set_database_down(&urls[1], false).await;
    writer.append(batch(down, 2)).await.unwrap();
    assert_eq!(store.load_after(down, 0, 10).await.unwrap().len(), 2);
    assert_eq!(
        store
            .list_chats("erin", false, None, 50)
            .await
            .unwrap()
            .len(),
        40
    );
    let due = outbox.due(now, 100).await.unwrap();
    assert!(due.iter().any(|r| r.chat_id == down));
    assert!(!due.iter().any(|r| r.id == first.id), "sent once");
}
