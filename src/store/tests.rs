//! The store conformance suite: every test runs unchanged against SQLite and
//! PostgreSQL (a throwaway server, see `crate::testing`).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use uuid::Uuid;

use super::*;

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

/// Runs a conformance test on both backends.
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
        }
    };
}

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

    // Models and archiving.
    store.set_chat_model(b.id, Some("qwen")).await.unwrap();
    store.archive_chat(b.id).await.unwrap();
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
    let first = store.list_chats("carol", None, 2).await.unwrap();
    let cursor = first.last().map(|c| (c.created_at, c.id));
    let rest = store.list_chats("carol", cursor, 10).await.unwrap();
    let got: Vec<(i64, Uuid)> = first
        .iter()
        .chain(&rest)
        .map(|c| (c.created_at, c.id))
        .collect();
    assert_eq!(got, ids);
}

conformance!(the_writer_isolates_a_failing_batch, writer_on);
async fn writer_on(open: Opener) {
    let store = open().await;
    let good = store.create_chat(&chat("a")).await.unwrap();
    let (writer, task) = LogWriter::spawn(store.clone());

    // Many concurrent appends share commits; a batch for a chat that does not
    // exist (foreign key) fails alone.
    let mut joins = Vec::new();
    for seq in 1..=200u64 {
        let w = writer.clone();
        joins.push(tokio::spawn(async move {
            w.append(AppendBatch {
                chat_id: good.id,
                envelopes: vec![env(seq, "chat.print", None, None)],
                state: None,
                conversation_state: None,
                fence: None,
            })
            .await
        }));
    }
    let bad = writer
        .append(AppendBatch {
            chat_id: Uuid::new_v4(),
            envelopes: vec![env(1, "chat.print", None, None)],
            state: None,
            conversation_state: None,
            fence: None,
        })
        .await;
    assert!(bad.is_err());
    for j in joins {
        j.await.unwrap().unwrap();
    }
    assert_eq!(store.last(good.id).await.unwrap().unwrap().0, 200);
    drop(writer);
    task.await.unwrap();
}

// ----- several nodes (PostgreSQL only) ------------------------------------

async fn pg_pair() -> Option<(PgStore, PgCluster, PgCluster)> {
    let server = crate::testing::postgres()?;
    let url = server.fresh_database().await;
    let store = PgStore::open(&url, 4).await.unwrap();
    let a = PgCluster::join(&store).await.unwrap();
    let b = PgCluster::join(&store).await.unwrap();
    Some((store, a, b))
}

fn one(chat_id: Uuid, seq: u64, fence: Option<Fence>) -> AppendBatch {
    AppendBatch {
        chat_id,
        envelopes: vec![env(seq, "chat.text", None, None)],
        state: None,
        conversation_state: None,
        fence,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_is_held_until_released_or_its_node_dies() {
    let Some((store, a, b)) = pg_pair().await else {
        return;
    };
    let id = Uuid::new_v4();
    let Lease::Owned { epoch } = a.acquire(id).await.unwrap() else {
        panic!("a free lease is granted");
    };
    assert_eq!(b.acquire(id).await.unwrap(), Lease::Held { node: a.node() });
    assert_eq!(
        a.acquire(id).await.unwrap(),
        Lease::Owned { epoch: epoch + 1 },
        "a node takes its own lease again, with a new epoch"
    );
    a.release(id, epoch).await.unwrap();
    assert_eq!(
        b.acquire(id).await.unwrap(),
        Lease::Held { node: a.node() },
        "a stale release does nothing"
    );
    a.release(id, epoch + 1).await.unwrap();
    assert!(matches!(b.acquire(id).await.unwrap(), Lease::Owned { .. }));

    // A node whose lock session is gone is dead: its leases are taken over.
    let live = a.live_nodes().await.unwrap();
    assert!(live.contains(&a.node()) && live.contains(&b.node()));
    let other = Uuid::new_v4();
    assert!(matches!(
        a.acquire(other).await.unwrap(),
        Lease::Owned { .. }
    ));
    drop(a);
    let mut taken = false;
    for _ in 0..100 {
        if let Lease::Owned { .. } = b.acquire(other).await.unwrap() {
            taken = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert!(taken, "the lease of a dead node is taken over");
    drop(store);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn appends_are_fenced_by_the_lease() {
    let Some((store, a, b)) = pg_pair().await else {
        return;
    };
    let c = chat("u");
    store.create_chat(&c).await.unwrap();
    let Lease::Owned { epoch } = a.acquire(c.id).await.unwrap() else {
        panic!()
    };
    let fa = Fence {
        node: a.node(),
        epoch,
    };
    store.append(&[one(c.id, 1, Some(fa))]).await.unwrap();
    // The lease moves (a is declared dead by a release, then b takes it).
    a.release(c.id, epoch).await.unwrap();
    let Lease::Owned { epoch: eb } = b.acquire(c.id).await.unwrap() else {
        panic!()
    };
    let err = store.append(&[one(c.id, 2, Some(fa))]).await.unwrap_err();
    assert!(
        matches!(err, StoreError::Fenced(ref ids) if ids[..] == [c.id]),
        "{err}"
    );
    assert_eq!(
        store.last(c.id).await.unwrap().unwrap().0,
        1,
        "nothing of it landed"
    );
    let fb = Fence {
        node: b.node(),
        epoch: eb,
    };
    store.append(&[one(c.id, 2, Some(fb))]).await.unwrap();

    // Through the writer, a fenced chat fails alone.
    let d = chat("u");
    store.create_chat(&d).await.unwrap();
    let store: Arc<dyn Store> = Arc::new(store);
    let (w, task) = LogWriter::spawn(store.clone());
    let (r1, r2) = tokio::join!(
        w.append(one(c.id, 3, Some(fa))),
        w.append(one(d.id, 1, None))
    );
    assert!(matches!(r1, Err(StoreError::Fenced(_))));
    r2.unwrap();
    assert_eq!(store.last(c.id).await.unwrap().unwrap().0, 2);
    drop(w);
    task.await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_travel_sealed_and_commits_are_announced() {
    let Some((store, a, b)) = pg_pair().await else {
        return;
    };
    let mut inbox = b.listen().await.unwrap();
    let mut outbox = a.listen().await.unwrap();
    let id = Uuid::new_v4();
    a.send_command(id, b.node(), b"secret answer")
        .await
        .unwrap();
    let raw: Vec<u8> = sqlx::query_scalar("SELECT body FROM node_commands WHERE id = $1")
        .bind(id)
        .fetch_one(store.pool())
        .await
        .unwrap();
    assert!(!raw.windows(6).any(|w| w == b"secret"), "stored sealed");
    let n = inbox.recv().await.unwrap();
    assert_eq!(
        PgCluster::parse(n.channel(), n.payload()),
        Some(NodeMessage::Command(id))
    );
    assert_eq!(
        b.take_command(id).await.unwrap(),
        Some((a.node(), b"secret answer".to_vec()))
    );
    assert_eq!(b.take_command(id).await.unwrap(), None, "taken once");
    assert!(
        !a.withdraw_command(id).await.unwrap(),
        "too late to withdraw"
    );
    b.reply(a.node(), id, r#"{"ok":true}"#).await.unwrap();
    let n = outbox.recv().await.unwrap();
    assert_eq!(
        PgCluster::parse(n.channel(), n.payload()),
        Some(NodeMessage::Reply {
            id,
            body: r#"{"ok":true}"#.into()
        })
    );

    // A commit is announced to every node, once, after it is visible.
    let c = chat("u");
    store.create_chat(&c).await.unwrap();
    store
        .append(&[AppendBatch {
            chat_id: c.id,
            envelopes: vec![
                env(1, "chat.text", None, None),
                env(2, "chat.print", None, None),
            ],
            state: None,
            conversation_state: None,
            fence: None,
        }])
        .await
        .unwrap();
    let n = inbox.recv().await.unwrap();
    assert_eq!(
        PgCluster::parse(n.channel(), n.payload()),
        Some(NodeMessage::Log(LogNotice {
            chat_id: c.id,
            seq: 2,
            node: 0
        }))
    );
}

/// A zombie (a node declared dead that still appends) against two live nodes
/// racing to take its chat over: exactly one takes it; from the moment it
/// does, the zombie's appends are refused; the new owner's first append, at
/// the seq after what it read, always lands. Hammered, since races hide.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_takeovers_never_both_append() {
    let Some((store, a, b)) = pg_pair().await else {
        return;
    };
    let store = Arc::new(store);
    for round in 0..60_i64 {
        let c = chat("u");
        store.create_chat(&c).await.unwrap();
        let zombie = Fence {
            node: 1_000_000 + round, // no such node holds a lock: dead
            epoch: 7,
        };
        sqlx::query("INSERT INTO chat_leases (chat_id, node_id, epoch) VALUES ($1, $2, $3)")
            .bind(c.id)
            .bind(zombie.node)
            .bind(zombie.epoch)
            .execute(store.pool())
            .await
            .unwrap();
        let zombie_store = store.clone();
        let zombie_task = tokio::spawn(async move {
            let mut seq = 1;
            loop {
                match zombie_store.append(&[one(c.id, seq, Some(zombie))]).await {
                    Ok(()) => seq += 1,
                    Err(StoreError::Fenced(_)) => return seq - 1,
                    Err(e) => panic!("the zombie hit something else than the fence: {e}"),
                }
            }
        });
        tokio::time::sleep(std::time::Duration::from_millis(round as u64 % 7)).await;
        async fn take(node: &PgCluster, store: &PgStore, c: &ChatRecord) -> Option<u64> {
            {
                let Lease::Owned { epoch } = node.acquire(c.id).await.unwrap() else {
                    return None;
                };
                let last = store.last(c.id).await.unwrap().map_or(0, |l| l.0);
                let fence = Fence {
                    node: node.node(),
                    epoch,
                };
                store
                    .append(&[one(c.id, last + 1, Some(fence))])
                    .await
                    .unwrap();
                Some(last + 1)
            }
        }
        let (ta, tb) = tokio::join!(take(&a, &store, &c), take(&b, &store, &c));
        let zombie_last = zombie_task.await.unwrap();
        let winner = match (ta, tb) {
            (Some(seq), None) | (None, Some(seq)) => seq,
            other => panic!("round {round}: exactly one node takes over, got {other:?}"),
        };
        assert_eq!(winner, zombie_last + 1, "round {round}");
        let log = store.load_after(c.id, 0, 10_000).await.unwrap();
        let seqs: Vec<u64> = log.iter().map(|e| e.seq).collect();
        assert_eq!(seqs, (1..=winner).collect::<Vec<_>>(), "round {round}");
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
