//! The chat list and search, on both stores.

use std::time::Duration;

use super::*;
use crate::store::search::Terms;

pub(super) fn said(seq: u64, agent: &str, content: &str, ts_ms: i64) -> NewEnvelope {
    let json =
        serde_json::json!({"type": "chat.text", "seq": seq, "agent": agent, "content": content});
    NewEnvelope {
        ts_ms,
        json: json.to_string().into(),
        ..env(seq, "chat.text", None, None)
    }
}

pub(super) fn titled(seq: u64, title: &str) -> NewEnvelope {
    let json =
        serde_json::json!({"type": "chat.title", "seq": seq, "title": title, "source": "user"});
    NewEnvelope {
        json: json.to_string().into(),
        ..env(seq, "chat.title", None, None)
    }
}

pub(super) async fn append(store: &Arc<dyn Store>, chat_id: Uuid, envelopes: Vec<NewEnvelope>) {
    let batch = AppendBatch {
        chat_id,
        envelopes,
        state: None,
        conversation_state: None,
        fence: None,
    };
    store.append(&[batch]).await.unwrap();
}

pub(super) async fn search(
    store: &Arc<dyn Store>,
    owner: &str,
    q: &str,
    archived: bool,
) -> Vec<SearchHit> {
    let terms = Terms::parse(q).unwrap().unwrap();
    let budget = Duration::from_secs(5);
    store
        .search_chats(owner, &terms, archived, 20, budget)
        .await
        .unwrap()
}

pub(super) async fn listed(store: &Arc<dyn Store>, owner: &str, archived: bool) -> Vec<Uuid> {
    let chats = store.list_chats(owner, archived, None, 100).await.unwrap();
    chats.iter().map(|c| c.id).collect()
}

conformance!(chats_are_listed_titled_and_searched, listing_on);
async fn listing_on(open: Opener) {
    let store = open().await;
    let mut made = Vec::new();
    for (i, owner) in ["carol", "carol", "carol", "dave"].iter().enumerate() {
        let mut c = chat(owner);
        c.created_at = 1000 + i as i64;
        made.push(store.create_chat(&c).await.unwrap().id);
    }
    let [a, b, c, d] = made[..] else {
        unreachable!()
    };
    append(
        &store,
        a,
        vec![
            said(1, "user", "How do I reverse a linked list in Rust?", 5000),
            said(2, "assistant", "Use  iter().rev()\non a Vec.", 5001),
        ],
    )
    .await;
    append(
        &store,
        b,
        vec![
            said(1, "user", "Plan a trip to Lyon", 3000),
            titled(2, "Trip to Lyon"),
        ],
    )
    .await;
    append(
        &store,
        d,
        vec![said(1, "user", "reverse polish notation", 6000)],
    )
    .await;

    // The latest activity first; a chat with no text by its creation.
    assert_eq!(listed(&store, "carol", false).await, [a, b, c]);
    let row = store.chat(a).await.unwrap().unwrap();
    assert_eq!(
        row.listing.preview.as_deref(),
        Some("Use iter().rev() on a Vec.")
    );
    assert_eq!(row.listing.active_at, 5001);
    assert_eq!(row.listing.title, None);
    let row = store.chat(b).await.unwrap().unwrap();
    assert_eq!(row.listing.title.as_deref(), Some("Trip to Lyon"));
    assert_eq!(row.listing.preview.as_deref(), Some("Plan a trip to Lyon"));

    // Pinned first; pages by cursor; archived apart.
    let pin = ChatFlags {
        pinned: Some(true),
        ..Default::default()
    };
    store.set_chat_flags(c, pin).await.unwrap();
    assert_eq!(listed(&store, "carol", false).await, [c, a, b]);
    let first = store.list_chats("carol", false, None, 2).await.unwrap();
    let after = ListCursor::after(first.last().unwrap());
    let rest = store
        .list_chats("carol", false, Some(after), 2)
        .await
        .unwrap();
    let paged: Vec<Uuid> = first.iter().chain(&rest).map(|c| c.id).collect();
    assert_eq!(paged, [c, a, b]);
    let archive = ChatFlags {
        archived: Some(true),
        ..Default::default()
    };
    store.set_chat_flags(b, archive).await.unwrap();
    assert_eq!(listed(&store, "carol", false).await, [c, a]);
    assert_eq!(listed(&store, "carol", true).await, [b]);

    // Search: the owner's chats only, every word as a word's start.
    let hits = search(&store, "carol", "REVERS", false).await;
    assert_eq!(hits.iter().map(|h| h.chat.id).collect::<Vec<_>>(), [a]);
    assert_eq!((hits[0].seq, hits[0].title), (1, false));
    assert_eq!(hits[0].body, "How do I reverse a linked list in Rust?");
    assert!(
        search(&store, "carol", "reverse vec", false)
            .await
            .is_empty(),
        "every word, in one text"
    );
    assert_eq!(search(&store, "dave", "reverse", false).await.len(), 1);
    assert!(search(&store, "carol", "polish", false).await.is_empty());
    assert!(
        search(&store, "carol", "lyon", false).await.is_empty(),
        "archived apart"
    );
    let hits = search(&store, "carol", "lyon", true).await;
    assert_eq!(hits.len(), 1, "one hit a chat");
    assert!(hits[0].title, "the title first");
    assert_eq!(hits[0].body, "Trip to Lyon");

    // A renamed chat is found by its new title, and no longer by the old.
    append(&store, b, vec![titled(3, "Weekend plans")]).await;
    let hits = search(&store, "carol", "weekend", true).await;
    assert!(hits[0].title);
    let hits = search(&store, "carol", "trip", true).await;
    assert_eq!(
        (hits[0].seq, hits[0].title),
        (1, false),
        "the old title no longer counts"
    );

    // Durable: the index and the list are the store's.
    drop(store);
    let store = open().await;
    assert_eq!(search(&store, "carol", "linked list", false).await.len(), 1);
    assert_eq!(listed(&store, "carol", false).await, [c, a]);
    let unpin = ChatFlags {
        pinned: Some(false),
        archived: Some(false),
        read: None,
    };
    store.set_chat_flags(c, unpin).await.unwrap();
    store.set_chat_flags(b, unpin).await.unwrap();
    assert_eq!(listed(&store, "carol", false).await, [a, b, c]);
}
