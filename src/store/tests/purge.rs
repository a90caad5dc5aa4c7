//! A chat deleted for good, and the search index rebuilt from the log, on
//! both stores.

use super::listing::{append, listed, said, search, titled};
use super::*;

/// A chat of `owner` with `words` said one commit at a time (so SQLite
/// journals them), then titled.
async fn talked(store: &Arc<dyn Store>, owner: &str, words: &[&str], title: &str) -> Uuid {
    let id = store.create_chat(&chat(owner)).await.unwrap().id;
    for (i, w) in words.iter().enumerate() {
        let seq = i as u64 + 1;
        append(store, id, vec![said(seq, "user", w, 1000 + seq as i64)]).await;
    }
    append(store, id, vec![titled(words.len() as u64 + 1, title)]).await;
    id
}

conformance!(a_purged_chat_leaves_nothing, purge_on);
async fn purge_on(open: Opener) {
    let store = open().await;
    let words = ["pancakes with syrup", "and pancakes again", "more pancakes"];
    let gone = talked(&store, "carol", &words, "Breakfast").await;
    let kept = talked(&store, "carol", &words, "Brunch").await;
    store.put_answer(gone, "q1", r#""a""#).await.unwrap();
    let db = Uuid::new_v4();
    store
        .put_chat_database(gone, db, "CREATE TABLE t (x)")
        .await
        .unwrap();
    assert_eq!(search(&store, "carol", "pancakes", false).await.len(), 2);

    assert!(store.purge_chat(gone).await.unwrap());
    assert!(!store.purge_chat(gone).await.unwrap(), "once");
    assert_eq!(store.chat(gone).await.unwrap(), None);
    assert_eq!(store.load_after(gone, 0, 100).await.unwrap(), vec![]);
    assert_eq!(store.last(gone).await.unwrap(), None);
    assert_eq!(store.answer(gone, "q1").await.unwrap(), None);
    assert_eq!(store.chat_database(gone).await.unwrap(), None);
    // A binding that comes after (its schema read outlasted the purge) is
    // dropped, not left for a chat that takes the id again.
    store
        .put_chat_database(gone, db, "CREATE TABLE t (x)")
        .await
        .unwrap();
    assert_eq!(store.chat_database(gone).await.unwrap(), None);
    assert_eq!(listed(&store, "carol", false).await, [kept]);
    let hits = search(&store, "carol", "pancakes", false).await;
    assert_eq!(hits.iter().map(|h| h.chat.id).collect::<Vec<_>>(), [kept]);
    assert!(search(&store, "carol", "breakfast", false).await.is_empty());
    // The other chat is whole.
    assert_eq!(store.load_after(kept, 0, 100).await.unwrap().len(), 4);

    // The id is free again: a new chat starts its log at 1.
    let mut again = chat("dave");
    again.id = gone;
    assert_eq!(store.create_chat(&again).await.unwrap().owner, "dave");
    append(&store, gone, vec![said(1, "user", "waffles", 9000)]).await;
    let log = store.load_after(gone, 0, 100).await.unwrap();
    assert_eq!(log.iter().map(|e| e.seq).collect::<Vec<_>>(), [1]);
    assert!(search(&store, "dave", "pancakes", false).await.is_empty());

    // Across a restart too.
    drop(store);
    let store = open().await;
    assert_eq!(store.load_after(gone, 0, 100).await.unwrap().len(), 1);
    assert_eq!(listed(&store, "carol", false).await, [kept]);
}

fn hits_of(hits: Vec<SearchHit>) -> Vec<(Uuid, u64, bool, String)> {
    hits.into_iter()
        .map(|h| (h.chat.id, h.seq, h.title, h.body))
        .collect()
}

conformance!(a_rebuilt_index_is_the_one_the_appends_wrote, reindex_on);
async fn reindex_on(open: Opener) {
    let store = open().await;
    let a = talked(&store, "erin", &["linked lists in Rust"], "Lists").await;
    append(
        &store,
        a,
        vec![said(3, "assistant", "Use a VecDeque", 5000)],
    )
    .await;
    let b = talked(&store, "erin", &["a trip to Lyon", "by train"], "Lyon").await;
    append(&store, b, vec![titled(4, "Weekend in Lyon")]).await;
    let empty = store.create_chat(&chat("erin")).await.unwrap().id;
    let before = store.list_chats("erin", false, None, 10).await.unwrap();
    let queries = ["rust", "lyon", "weekend", "train", "lists", "vecdeque"];
    let mut found = Vec::new();
    for q in queries {
        found.push(hits_of(search(&store, "erin", q, false).await));
    }

    drop(store);
    let store = open().await;
    let done = store.reindex().await.unwrap();
    assert_eq!(done.chats, 3, "{done:?}");
    assert_eq!(done.rows, 2 + 1 + 2 + 1 + 1, "texts and titles: {done:?}");
    assert_eq!(
        store.list_chats("erin", false, None, 10).await.unwrap(),
        before
    );
    for (q, hits) in queries.iter().zip(&found) {
        assert_eq!(
            &hits_of(search(&store, "erin", q, false).await),
            hits,
            "{q}"
        );
    }
    let row = store.chat(b).await.unwrap().unwrap();
    assert_eq!(row.listing.title.as_deref(), Some("Weekend in Lyon"));
    let row = store.chat(a).await.unwrap().unwrap();
    assert_eq!(row.listing.preview.as_deref(), Some("Use a VecDeque"));
    assert_eq!(row.listing.active_at, 5000);
    let row = store.chat(empty).await.unwrap().unwrap();
    assert_eq!((row.listing.title, row.listing.preview), (None, None));
    // Twice is the same.
    assert_eq!(store.reindex().await.unwrap(), done);
}

/// Frank's chat `id`, its index and list columns lost: a rebuild brings
/// them back.
async fn rebuilt(store: &Arc<dyn Store>, id: Uuid) {
    assert!(search(store, "frank", "gnocchi", false).await.is_empty());
    store.reindex().await.unwrap();
    let hits = search(store, "frank", "gnocchi", false).await;
    assert_eq!(hits.iter().map(|h| h.chat.id).collect::<Vec<_>>(), [id]);
    let row = store.chat(id).await.unwrap().unwrap();
    assert_eq!(row.listing.title.as_deref(), Some("Dinner"));
    assert_eq!(row.listing.preview.as_deref(), Some("gnocchi recipe"));
}

/// An index lost (rows deleted behind the server's back) comes back whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlites_lost_index_is_rebuilt_from_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db.sqlite");
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&path).await.unwrap());
    let id = talked(&store, "frank", &["gnocchi recipe"], "Dinner").await;
    drop(store);
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch(
            "DELETE FROM chat_search; UPDATE chats SET title = NULL, preview = NULL;",
        )
        .unwrap();
    }
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&path).await.unwrap());
    rebuilt(&store, id).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_lost_index_is_rebuilt_from_the_log() {
    let Some(server) = crate::testing::postgres() else {
        return;
    };
    let url = server.fresh_database().await;
    let store: Arc<dyn Store> = Arc::new(PgStore::open(&url, 5).await.unwrap());
    let id = talked(&store, "frank", &["gnocchi recipe"], "Dinner").await;
    let pool = sqlx::PgPool::connect(&url).await.unwrap();
    sqlx::raw_sql("DELETE FROM chat_search; UPDATE chats SET title = NULL, preview = NULL;")
        .execute(&pool)
        .await
        .unwrap();
    rebuilt(&store, id).await;
}
