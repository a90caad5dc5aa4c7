//! The store conformance suite: every test runs unchanged against SQLite and
//! PostgreSQL (a throwaway server, see `crate::testing`).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use uuid::Uuid;

use super::*;

mod cluster;

/// Opens the store under test on its data (again, for reopen tests).
type Opener = Arc<dyn Fn() -> Pin<Box<dyn Future<Output = Arc<dyn Store>> + Send>> + Send + Sync>;

fn sqlite() -> (Opener, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nested/db.sqlite");
    let open: Opener = Arc::new(move || {
        let path = path.clone();
        Box::pin(async move { Arc::new(SqliteStore::open(&path).await.unwrap()) as Arc<dyn Store> })
    });
    (open, dir)
}

async fn postgres() -> Option<Opener> {
    let server = crate::testing::postgres()?;
    let url = server.fresh_database().await;
    Some(Arc::new(move || {
        let url = url.clone();
        Box::pin(async move { Arc::new(PgStore::open(&url, 5).await.unwrap()) as Arc<dyn Store> })
    }))
}

/// Chats spread over two PostgreSQL databases (`store::sharded`).
async fn spread() -> Option<Opener> {
    let server = crate::testing::postgres()?;
    let urls = [server.fresh_database().await, server.fresh_database().await];
    Some(Arc::new(move || {
        let urls = urls.clone();
        Box::pin(async move {
            let mut parts = Vec::new();
            for (i, url) in urls.iter().enumerate() {
                parts.push((format!("db{i}"), PgStore::open(url, 5).await.unwrap()));
            }
            Arc::new(ShardedStore::new(parts)) as Arc<dyn Store>
        })
    }))
}

/// Runs a conformance test on both backends, and on PostgreSQL spread over
/// two databases.
macro_rules! conformance {
    ($name:ident, $body:ident) => {
        mod $name {
            use super::*;

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                let (open, _dir) = super::sqlite();
                $body(open).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                if let Some(open) = super::postgres().await {
                    $body(open).await;
                }
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sharded() {
                if let Some(open) = super::spread().await {
                    $body(open).await;
                }
            }
        }
    };
}

mod files;
mod listing;
mod operations;
mod paced;
mod purge;
mod sharded;
mod usage;
mod waits;

fn chat(owner: &str) -> ChatRecord {
    ChatRecord {
        id: Uuid::new_v4(),
        owner: owner.into(),
        agent: "demo".into(),
        state: ChatState::Idle,
        context: Some(r#"{"k":1}"#.into()),
        model: None,
        archived: false,
        conversation_state: None,
        created_at: chrono::Utc::now().timestamp_millis(),
        updated_at: chrono::Utc::now().timestamp_millis(),
        listing: Default::default(),
    }
}

fn env(
    seq: u64,
    kind: &'static str,
    corr: Option<&str>,
    client_msg_id: Option<&str>,
) -> NewEnvelope {
    NewEnvelope {
        seq,
        kind,
        ts_ms: seq as i64,
        corr: corr.map(Into::into),
        client_msg_id: client_msg_id.map(Into::into),
        json: format!(r#"{{"type":"{kind}","seq":{seq}}}"#).into(),
    }
}

conformance!(pages_are_bounded_in_bytes, pages_are_bounded_in_bytes_on);
async fn pages_are_bounded_in_bytes_on(open: Opener) {
    let store = open().await;
    let c = store.create_chat(&chat("alice")).await.unwrap();
    // One tiny envelope, then large ones: a page must not guess from the first.
    let sized = |seq: u64, bytes: usize| NewEnvelope {
        json: format!(
            r#"{{"type":"chat.text","seq":{seq},"pad":"{}"}}"#,
            "p".repeat(bytes)
        )
        .into(),
        ..env(seq, "chat.text", None, None)
    };
    let mut envelopes = vec![sized(1, 10)];
    envelopes.extend((2..=6).map(|seq| sized(seq, 600_000)));
    store
        .append(&[AppendBatch {
            chat_id: c.id,
            envelopes,
            state: None,
            conversation_state: None,
            fence: None,
        }])
        .await
        .unwrap();
    let (page, more) = store.load_bounded(c.id, 0, 500, 1 << 20).await.unwrap();
    let seqs: Vec<u64> = page.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, vec![1, 2, 3], "read until 1 MiB is crossed");
    assert!(more);
    // A budget smaller than one envelope still reads that one.
    let (page, more) = store.load_bounded(c.id, 2, 500, 1000).await.unwrap();
    assert_eq!(page.len(), 1);
    assert!(more);
    let (page, more) = store.load_bounded(c.id, 5, 500, 1 << 20).await.unwrap();
    assert_eq!((page.len(), more), (1, false));
    let (page, more) = store.load_bounded(c.id, 0, 2, 1 << 30).await.unwrap();
    assert_eq!((page.len(), more), (2, true), "a full page may have more");
    let (page, more) = store.load_bounded(c.id, 6, 500, 1 << 20).await.unwrap();
    assert_eq!((page.len(), more), (0, false));
}

conformance!(append_load_and_reopen, append_load_and_reopen_on);
async fn append_load_and_reopen_on(open: Opener) {
    let store = open().await;
    store.ping().await.unwrap();
    let a = store.create_chat(&chat("alice")).await.unwrap();
    let b = store.create_chat(&chat("bob")).await.unwrap();
    assert_eq!(a.context.as_deref(), Some(r#"{"k":1}"#));

    // A second create of the same id keeps the first owner.
    let again = store
        .create_chat(&ChatRecord {
            owner: "mallory".into(),
            ..a.clone()
        })
        .await
        .unwrap();
    assert_eq!(again.owner, "alice");

    // Two chats in one transaction; 6,500 rows crosses both backends' chunk sizes.
    let many: Vec<_> = (1..=6500)
        .map(|s| env(s, "chat.print", None, None))
        .collect();
    store
        .append(&[
            AppendBatch {
                chat_id: a.id,
                envelopes: many,
                state: Some(ChatState::Running),
                conversation_state: None,
                fence: None,
            },
            AppendBatch {
                chat_id: b.id,
                envelopes: vec![
                    env(1, "chat.text", None, Some("m-1")),
                    env(2, "chat.tool_call", Some("c-1"), None),
                    env(3, "chat.tool_call", Some("c-1"), None),
                ],
                state: None,
                conversation_state: None,
                fence: None,
            },
        ])
        .await
        .unwrap();

    let page = store.load_after(a.id, 100, 50).await.unwrap();
    assert_eq!(page.len(), 50);
    assert_eq!(page[0].seq, 101);
    assert_eq!(
        page[0].json, r#"{"type":"chat.print","seq":101}"#,
        "the JSON text as written"
    );
    assert_eq!(page[49].seq, 150);
    assert!(page.windows(2).all(|w| w[1].seq == w[0].seq + 1));

    assert_eq!(
        store.chats_in_state(ChatState::Running).await.unwrap(),
        vec![a.id]
    );
    assert!(store.has_client_msg_id(b.id, "m-1").await.unwrap());
    assert!(!store.has_client_msg_id(a.id, "m-1").await.unwrap());
    assert_eq!(
        store
            .last_tool_call(b.id, "c-1")
            .await
            .unwrap()
            .unwrap()
            .seq,
        3
    );
    assert!(store.last_tool_call(b.id, "c-2").await.unwrap().is_none());
    assert_eq!(store.transcript(b.id).await.unwrap().len(), 3);
    // The tree's rows: in the transcript, and alone.
    let d = store.create_chat(&chat("dora")).await.unwrap();
    let kinds = [
        "chat.text",
        "chat.print",
        "chat.branch",
        "chat.text",
        "chat.branch",
    ];
    let envelopes = (1..)
        .zip(kinds)
        .map(|(s, k)| env(s, k, None, None))
        .collect();
    store
        .append(&[AppendBatch {
            chat_id: d.id,
            envelopes,
            state: None,
            conversation_state: None,
            fence: None,
        }])
        .await
        .unwrap();
    let seqs =
        |rows: Vec<crate::store::StoredEnvelope>| rows.iter().map(|e| e.seq).collect::<Vec<_>>();
    assert_eq!(seqs(store.transcript(d.id).await.unwrap()), [1, 3, 4, 5]);
    assert_eq!(seqs(store.branches(d.id).await.unwrap()), [3, 5]);
    assert!(store.branches(a.id).await.unwrap().is_empty());
    // A path's ranges, read without what lies between them (d's rows may
    // still be in SQLite's journal, a's are in the table).
    assert_eq!(
        seqs(
            store
                .load_ranges(d.id, &[1..=1, 3..=5], 1 << 20)
                .await
                .unwrap()
        ),
        [1, 3, 4, 5]
    );
    let ranges = [1..=3, 10..=10, 100..=200, 6400..=6500];
    let got = seqs(store.load_ranges(a.id, &ranges, 1 << 20).await.unwrap());
    let want: Vec<u64> = ranges.iter().flat_map(|r| r.clone()).collect();
    assert_eq!(got, want);
    // More ranges than one query filters by.
    let many: Vec<_> = (0..150).map(|i| 1 + 40 * i..=2 + 40 * i).collect();
    let got = seqs(store.load_ranges(a.id, &many, 1 << 20).await.unwrap());
    assert_eq!(got, many.iter().flat_map(|r| r.clone()).collect::<Vec<_>>());
    // A byte budget: the row that crosses it is the last.
    let one = store.load_after(a.id, 0, 1).await.unwrap()[0].json.len();
    assert_eq!(
        store
            .load_ranges(a.id, &ranges, 2 * one + 1)
            .await
            .unwrap()
            .len(),
        3
    );
    assert!(
        store
            .load_ranges(a.id, &[], 1 << 20)
            .await
            .unwrap()
            .is_empty()
    );

    // A duplicate seq fails the whole transaction: nothing of it is stored.
    let err = store
        .append(&[AppendBatch {
            chat_id: b.id,
            envelopes: vec![
                env(4, "chat.text", None, None),
                env(3, "chat.text", None, None),
            ],
            state: None,
            conversation_state: None,
            fence: None,
        }])
        .await;
    assert!(err.is_err());
    assert_eq!(store.last(b.id).await.unwrap().unwrap().0, 3);
    // Where the last run begins: after the last `chat.run_complete`.
    assert_eq!(store.run_start(b.id, u64::MAX).await.unwrap(), 1);
    store
        .append(&[AppendBatch {
            chat_id: b.id,
            envelopes: vec![
                env(4, "chat.run_complete", None, None),
                env(5, "chat.text", None, None),
            ],
            state: None,
            conversation_state: None,
            fence: None,
        }])
        .await
        .unwrap();
    assert_eq!(store.run_start(b.id, u64::MAX).await.unwrap(), 5);
    assert_eq!(
        store.run_start(b.id, 4).await.unwrap(),
        1,
        "the run holding seq 3"
    );

    // Models and archiving.
    store.set_chat_model(b.id, Some("qwen")).await.unwrap();
    let archive = ChatFlags {
        archived: Some(true),
        ..Default::default()
    };
    store.set_chat_flags(b.id, archive).await.unwrap();
    let b_now = store.chat(b.id).await.unwrap().unwrap();
    assert_eq!(
        (b_now.model.as_deref(), b_now.archived),
        (Some("qwen"), true)
    );

    drop(store);
    let store = open().await;
    assert_eq!(
        store.last(a.id).await.unwrap(),
        Some((6500, "chat.print".to_owned()))
    );
    assert_eq!(store.chat(b.id).await.unwrap().unwrap().owner, "bob");
    assert_eq!(store.last(Uuid::new_v4()).await.unwrap(), None);
    assert_eq!(store.chat(Uuid::new_v4()).await.unwrap(), None);
}

conformance!(chats_are_listed_newest_first, list_chats_on);
async fn list_chats_on(open: Opener) {
    let store = open().await;
    let mut ids = Vec::new();
    for i in 0..5 {
        let mut c = chat("carol");
        c.created_at = 1000 + i / 2; // ties on created_at are ordered by id
        ids.push((c.created_at, store.create_chat(&c).await.unwrap().id));
    }
    store.create_chat(&chat("dave")).await.unwrap();
    ids.sort_by(|x, y| y.cmp(x));
    let first = store.list_chats("carol", false, None, 2).await.unwrap();
    let cursor = first.last().map(ListCursor::after);
    let rest = store.list_chats("carol", false, cursor, 10).await.unwrap();
    let got: Vec<(i64, Uuid)> = first
        .iter()
        .chain(&rest)
        .map(|c| (c.created_at, c.id))
        .collect();
    assert_eq!(got, ids);
}

/// Records the seqs of the batches the writer says are committed.
#[derive(Default)]
struct Seen(std::sync::Mutex<Vec<u64>>);

impl OnCommit for Seen {
    fn committed(&self, batch: &AppendBatch) {
        let mut seen = self.0.lock().unwrap();
        seen.extend(batch.envelopes.iter().map(|e| e.seq));
    }
}

impl Seen {
    fn has(&self, seq: u64) -> bool {
        self.0.lock().unwrap().contains(&seq)
    }
}

conformance!(the_writer_isolates_a_failing_batch, writer_on);
async fn writer_on(open: Opener) {
    let store = open().await;
    let good = store.create_chat(&chat("a")).await.unwrap();
    let (writer, task) = LogWriter::spawn(store.clone());

    // Many concurrent appends share commits; a batch for a chat that does not
    // exist (foreign key) fails alone. Each committed batch is handed to its
    // `OnCommit` before its append returns; the failed one to nobody.
    let seen = Arc::new(Seen::default());
    let mut joins = Vec::new();
    for seq in 1..=200u64 {
        let (w, seen) = (writer.clone(), seen.clone());
        joins.push(tokio::spawn(async move {
            let batch = AppendBatch {
                chat_id: good.id,
                envelopes: vec![env(seq, "chat.print", None, None)],
                state: None,
                conversation_state: None,
                fence: None,
            };
            w.append_then(batch, Some(seen.clone())).await?;
            assert!(
                seen.has(seq),
                "{seq} was handed over before the append returned"
            );
            Ok::<_, StoreError>(())
        }));
    }
    let refused = Arc::new(Seen::default());
    let bad = writer
        .append_then(
            AppendBatch {
                chat_id: Uuid::new_v4(),
                envelopes: vec![env(1, "chat.print", None, None)],
                state: None,
                conversation_state: None,
                fence: None,
            },
            Some(refused.clone()),
        )
        .await;
    assert!(bad.is_err());
    assert!(
        refused.0.lock().unwrap().is_empty(),
        "a failed batch is not delivered"
    );
    for j in joins {
        j.await.unwrap().unwrap();
    }
    let mut all = seen.0.lock().unwrap().clone();
    all.sort_unstable();
    assert_eq!(all, (1..=200).collect::<Vec<u64>>(), "each once");
    assert_eq!(store.last(good.id).await.unwrap().unwrap().0, 200);
    drop(writer);
    task.await.unwrap();
}

conformance!(
    the_writer_keeps_each_chats_order,
    writer_keeps_each_chats_order_on
);
/// Chats appending one batch at a time, as their actors do, while other
/// chats' commits are in flight (PostgreSQL takes several at once): each
/// chat's batches are committed and handed on in seq order.
async fn writer_keeps_each_chats_order_on(open: Opener) {
    let store = open().await;
    let (writer, task) = LogWriter::spawn(store.clone());
    let mut chats = Vec::new();
    for _ in 0..24 {
        chats.push(store.create_chat(&chat("a")).await.unwrap().id);
    }
    let mut joins = Vec::new();
    for &c in &chats {
        let (w, seen) = (writer.clone(), Arc::new(Seen::default()));
        joins.push(tokio::spawn(async move {
            for seq in 1..=40u64 {
                let envelopes = vec![env(seq, "chat.text", None, None)];
                let batch = AppendBatch {
                    chat_id: c,
                    envelopes,
                    state: None,
                    conversation_state: None,
                    fence: None,
                };
                w.append_then(batch, Some(seen.clone())).await.unwrap();
            }
            seen
        }));
    }
    for j in joins {
        let order = j.await.unwrap().0.lock().unwrap().clone();
        assert_eq!(order, (1..=40).collect::<Vec<u64>>(), "in seq order");
    }
    drop(writer);
    task.await.unwrap();
    for &c in &chats {
        assert_eq!(store.last(c).await.unwrap().unwrap().0, 40);
    }
}

conformance!(answer_keys_are_kept, answer_keys_are_kept_on);
async fn answer_keys_are_kept_on(open: Opener) {
    let store = open().await;
    let c = store.create_chat(&chat("u")).await.unwrap();
    assert_eq!(store.answer(c.id, "q1-ab").await.unwrap(), None);
    store.put_answer(c.id, "q1-ab", r#""Paris""#).await.unwrap();
    store
        .put_answer(c.id, "q2-cd", r#"["Oslo","Helsinki"]"#)
        .await
        .unwrap();
    store.put_answer(c.id, "q1-ab", r#""Lyon""#).await.unwrap();
    assert_eq!(
        store.answer(c.id, "q1-ab").await.unwrap().as_deref(),
        Some(r#""Lyon""#)
    );
    assert_eq!(
        store.answer(c.id, "q2-cd").await.unwrap().as_deref(),
        Some(r#"["Oslo","Helsinki"]"#)
    );
    // Kept across a reopen.
    drop(store);
    let store = open().await;
    assert_eq!(
        store.answer(c.id, "q1-ab").await.unwrap().as_deref(),
        Some(r#""Lyon""#)
    );
}

#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sqlite_files_are_private() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fresh/data/agentwire.db");
    let store = SqliteStore::open(&path).await.unwrap();
    let c = chat("alice");
    store.create_chat(&c).await.unwrap();
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&path), 0o600, "the database");
    assert_eq!(mode(&dir.path().join("fresh/data")), 0o700, "its folder");
    assert_eq!(
        mode(&dir.path().join("fresh")),
        0o700,
        "every folder it made"
    );
    let wal = path.with_extension("db-wal");
    assert!(wal.exists(), "WAL mode writes a -wal file");
    assert_eq!(mode(&wal), 0o600, "the WAL");
}

conformance!(connections_belong_to_their_owner, connections_on);
async fn connections_on(open: Opener) {
    let store = open().await;
    let mut c = ConnectionRecord {
        id: Uuid::new_v4(),
        owner: "alice".into(),
        spec: r#"{"driver":"sqlite","path":"/data/a.db"}"#.into(),
        secret: Some(vec![1, 2, 3]),
        created_at: 10,
        updated_at: 10,
    };
    assert!(store.put_connection(&c).await.unwrap());
    let mut other = c.clone();
    other.id = Uuid::new_v4();
    other.secret = None;
    other.created_at = 20;
    assert!(store.put_connection(&other).await.unwrap());
    assert_eq!(
        store.connections("alice").await.unwrap(),
        vec![c.clone(), other.clone()]
    );
    assert!(store.connections("bob").await.unwrap().is_empty());
    assert_eq!(store.connection("bob", c.id).await.unwrap(), None);

    // An update replaces spec and secret; another user cannot take the id.
    c.spec = r#"{"driver":"sqlite","path":"/data/b.db"}"#.into();
    c.secret = None;
    c.updated_at = 30;
    assert!(store.put_connection(&c).await.unwrap());
    assert_eq!(
        store.connection("alice", c.id).await.unwrap(),
        Some(c.clone())
    );
    let mut theft = c.clone();
    theft.owner = "bob".into();
    assert!(!store.put_connection(&theft).await.unwrap());
    assert_eq!(
        store.connection("alice", c.id).await.unwrap(),
        Some(c.clone())
    );

    assert!(!store.update_connection(&theft).await.unwrap());
    assert!(!store.delete_connection("bob", c.id).await.unwrap());
    assert!(store.delete_connection("alice", c.id).await.unwrap());
    // An update after a delete does not bring it back.
    assert!(!store.update_connection(&c).await.unwrap());
    assert_eq!(store.connection("alice", c.id).await.unwrap(), None);
    assert_eq!(store.connections("alice").await.unwrap(), vec![other]);
}

conformance!(a_chat_keeps_its_database, chat_database_on);
async fn chat_database_on(open: Opener) {
    let store = open().await;
    let chat = store.create_chat(&chat("frank")).await.unwrap().id;
    let (a, b) = (Uuid::new_v4(), Uuid::new_v4());
    assert_eq!(store.chat_database(chat).await.unwrap(), None);
    assert!(
        !store.put_sql_result(chat, a, "{}").await.unwrap(),
        "no database yet"
    );
    store.put_chat_database(chat, a, "## t").await.unwrap();
    assert!(
        store
            .put_sql_result(chat, a, r#"{"columns":[],"rows":[]}"#)
            .await
            .unwrap()
    );
    let kept = store.chat_database(chat).await.unwrap().unwrap();
    assert_eq!(kept.connection_id, a);
    assert_eq!(
        kept.sql_result.as_deref(),
        Some(r#"{"columns":[],"rows":[]}"#)
    );
    // Another connection: a new schema, no result yet; a late result of the
    // old one is not kept.
    store.put_chat_database(chat, b, "## u").await.unwrap();
    assert!(!store.put_sql_result(chat, a, "{}").await.unwrap());
    drop(store);
    let again = open().await.chat_database(chat).await.unwrap().unwrap();
    assert_eq!(
        (
            again.connection_id,
            again.db_schema.as_str(),
            again.sql_result
        ),
        (b, "## u", None)
    );
}
