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
            },
            AppendBatch {
                chat_id: b.id,
                envelopes: vec![
                    env(1, "chat.text", None, Some("m-1")),
                    env(2, "chat.tool_call", Some("c-1"), None),
                    env(3, "chat.tool_call", Some("c-1"), None),
                ],
                state: None,
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
            })
            .await
        }));
    }
    let bad = writer
        .append(AppendBatch {
            chat_id: Uuid::new_v4(),
            envelopes: vec![env(1, "chat.print", None, None)],
            state: None,
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_node_per_postgres_database() {
    let Some(server) = crate::testing::postgres() else {
        return;
    };
    let url = server.fresh_database().await;
    let first = PgStore::open(&url, 2).await.unwrap();
    assert!(matches!(
        PgStore::open(&url, 2).await,
        Err(StoreError::InUse)
    ));
    drop(first);
    // The lock goes with the node.
    let mut reopened = None;
    for _ in 0..50 {
        if let Ok(s) = PgStore::open(&url, 2).await {
            reopened = Some(s);
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(
        reopened.is_some(),
        "a node that is gone releases the database"
    );
}
