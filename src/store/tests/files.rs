//! Files and their blobs, on both stores: chunks staged then sealed under
//! their digest, one content once per owner, ownership, and a purge that
//! takes a chat's files and the contents nothing else holds.

use super::*;
use crate::store::files::{CHUNK_BYTES, FileRecord, Kept, Put};

fn record(owner: &str, chat_id: Uuid, sha256: &str, size: u64) -> FileRecord {
    FileRecord {
        id: Uuid::new_v4(),
        owner: owner.into(),
        chat_id,
        name: "report.pdf".into(),
        media_type: "application/pdf".into(),
        size,
        sha256: sha256.into(),
        created_at: 1000,
    }
}

/// Stages `parts` as an upload of `owner` and records it as `sha` in
/// `chat`: whether it was recorded.
async fn stored(store: &Arc<dyn Store>, file: &FileRecord, parts: &[Vec<u8>]) -> bool {
    kept(store, file, parts, u64::MAX).await == Kept::Recorded
}

/// Stages `parts` and records `file` within `max_owner_bytes`; what is not
/// recorded has its chunks dropped, as the callers do.
async fn kept(
    store: &Arc<dyn Store>,
    file: &FileRecord,
    parts: &[Vec<u8>],
    max_owner_bytes: u64,
) -> Kept {
    let upload = Uuid::new_v4();
    for (i, p) in parts.iter().enumerate() {
        let owner = &file.owner;
        store
            .blobs()
            .stage_chunk(owner, upload, i as u32, p)
            .await
            .unwrap();
    }
    let put = Put {
        upload,
        max_owner_bytes,
    };
    let kept = store.put_file(file, put).await.unwrap();
    if kept != Kept::Recorded {
        store.blobs().discard(&file.owner, upload).await.unwrap();
    }
    kept
}

conformance!(
    the_quota_holds_inside_the_transaction_even_for_uploads_at_once,
    quota_on
);
async fn quota_on(open: Opener) {
    let store = open().await;
    let chat_id = store.create_chat(&chat("ivy")).await.unwrap().id;
    // Eight uploads of different contents at once, 4 bytes each, under a
    // quota of 10: two are recorded, whatever their order.
    let uploads = (0..8_u8).map(|i| {
        let store = store.clone();
        async move {
            let file = record("ivy", chat_id, &format!("q{i}"), 4);
            kept(&store, &file, &[vec![i; 4]], 10).await
        }
    });
    let kept_all = futures_util::future::join_all(uploads).await;
    let recorded = kept_all.iter().filter(|k| **k == Kept::Recorded).count();
    assert_eq!(recorded, 2, "{kept_all:?}");
    assert!(
        kept_all
            .iter()
            .all(|k| matches!(k, Kept::Recorded | Kept::OverQuota(12))),
        "{kept_all:?}"
    );
    assert_eq!(store.blobs().owner_bytes("ivy").await.unwrap(), 8);
    // The same content again takes nothing more.
    let again = kept_all.iter().position(|k| *k == Kept::Recorded).unwrap();
    let same = record("ivy", chat_id, &format!("q{again}"), 4);
    assert_eq!(
        kept(&store, &same, &[vec![again as u8; 4]], 10).await,
        Kept::Recorded
    );
}

conformance!(
    files_are_stored_once_per_owner_and_go_with_their_chat,
    files_on
);
async fn files_on(open: Opener) {
    let store = open().await;
    let parts = vec![
        vec![1_u8; CHUNK_BYTES],
        vec![2_u8; CHUNK_BYTES],
        vec![3_u8; 10],
    ];
    let size = (2 * CHUNK_BYTES + 10) as u64;
    let a = store.create_chat(&chat("gina")).await.unwrap().id;
    let b = store.create_chat(&chat("gina")).await.unwrap().id;
    let in_a = record("gina", a, "aa", size);
    assert!(stored(&store, &in_a, &parts).await);
    assert_eq!(store.file(in_a.id).await.unwrap(), Some(in_a.clone()));
    let in_b = record("gina", b, "aa", size);
    assert!(
        stored(&store, &in_b, &parts).await,
        "the same content again"
    );
    assert_eq!(
        store.blobs().owner_bytes("gina").await.unwrap(),
        size,
        "once"
    );
    assert!(store.blobs().has("gina", "aa").await.unwrap());
    for (i, p) in parts.iter().enumerate() {
        let got = store.blobs().chunk("gina", "aa", i as u32).await.unwrap();
        assert_eq!(got.as_ref(), Some(p));
    }
    assert_eq!(store.blobs().chunk("gina", "aa", 3).await.unwrap(), None);
    assert_eq!(
        store.blobs().chunk("hank", "aa", 0).await.unwrap(),
        None,
        "gina's"
    );
    assert!(!store.blobs().has("hank", "aa").await.unwrap());
    assert_eq!(store.blobs().owner_bytes("hank").await.unwrap(), 0);

    // A file is not recorded in another user's chat, nothing of it kept;
    // a chat not started yet takes files (for its first message).
    assert!(!stored(&store, &record("hank", a, "cc", 3), &[b"abc".to_vec()]).await);
    assert!(!store.blobs().has("hank", "cc").await.unwrap());
    let early = record("gina", Uuid::new_v4(), "cc", 3);
    assert!(stored(&store, &early, &[b"abc".to_vec()]).await);
    assert_eq!(store.file(early.id).await.unwrap(), Some(early.clone()));
    let only_a = record("gina", a, "bb", 9);
    assert!(stored(&store, &only_a, &[b"only in a".to_vec()]).await);
    assert_eq!(store.blobs().owner_bytes("gina").await.unwrap(), size + 12);

    // A purge takes the chat's files, and the contents nothing else holds.
    assert!(store.purge_chat(a).await.unwrap());
    assert_eq!(store.file(in_a.id).await.unwrap(), None);
    assert_eq!(store.file(only_a.id).await.unwrap(), None);
    assert_eq!(store.blobs().chunk("gina", "bb", 0).await.unwrap(), None);
    assert!(!store.blobs().has("gina", "bb").await.unwrap());
    assert_eq!(store.file(in_b.id).await.unwrap(), Some(in_b.clone()));
    assert!(
        store
            .blobs()
            .chunk("gina", "aa", 2)
            .await
            .unwrap()
            .is_some(),
        "b holds it"
    );
    assert_eq!(store.blobs().owner_bytes("gina").await.unwrap(), size + 3);
    // The early file goes with the chat that took its id.
    let mut later = chat("gina");
    later.id = early.chat_id;
    store.create_chat(&later).await.unwrap();
    assert!(store.purge_chat(early.chat_id).await.unwrap());
    assert_eq!(store.file(early.id).await.unwrap(), None);
    assert_eq!(store.blobs().owner_bytes("gina").await.unwrap(), size);
    assert!(store.purge_chat(b).await.unwrap());
    assert_eq!(store.blobs().chunk("gina", "aa", 0).await.unwrap(), None);
    assert_eq!(store.blobs().owner_bytes("gina").await.unwrap(), 0);
}

/// SQLite: one process owns the file, so what an upload had staged when its
/// server died is dropped when the next one opens it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_drops_a_dead_servers_unfinished_uploads_at_opening() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db.sqlite");
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&path).await.unwrap());
    let kept = store.create_chat(&chat("gina")).await.unwrap().id;
    assert!(stored(&store, &record("gina", kept, "aa", 3), &[b"abc".to_vec()]).await);
    let cut = Uuid::new_v4();
    store
        .blobs()
        .stage_chunk("gina", cut, 0, b"half a file")
        .await
        .unwrap();
    drop(store);
    let count = |path: &std::path::Path| -> i64 {
        let conn = rusqlite::Connection::open(path).unwrap();
        conn.query_row("SELECT COUNT(*) FROM blob_chunks", [], |r| r.get(0))
            .unwrap()
    };
    assert_eq!(count(&path), 2);
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&path).await.unwrap());
    assert_eq!(
        count(&path),
        1,
        "the staged chunk is gone, the file's is kept"
    );
    let got = store.blobs().chunk("gina", "aa", 0).await.unwrap();
    assert_eq!(got.as_deref(), Some(&b"abc"[..]));
}

/// PostgreSQL: an upload a dead node left staged is swept once old; the
/// chunks of a recorded file (staged as long ago) stay.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_sweeps_old_unrecorded_uploads() {
    let Some(open) = super::postgres().await else {
        return;
    };
    let store = open().await;
    let chat_id = store.create_chat(&chat("gina")).await.unwrap().id;
    let file = record("gina", chat_id, "kept", 3);
    assert!(stored(&store, &file, &[b"abc".to_vec()]).await);
    let dead = Uuid::new_v4();
    store
        .blobs()
        .stage_chunk("gina", dead, 0, b"half")
        .await
        .unwrap();
    // Not old enough yet: nothing goes.
    let day = std::time::Duration::from_secs(24 * 3600);
    assert_eq!(store.sweep_staged(day).await.unwrap(), 0);
    assert_eq!(
        store.sweep_staged(std::time::Duration::ZERO).await.unwrap(),
        1
    );
    let kept = store.blobs().chunk("gina", "kept", 0).await.unwrap();
    assert_eq!(
        kept.as_deref(),
        Some(&b"abc"[..]),
        "a recorded file's chunks stay"
    );
}
