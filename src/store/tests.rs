use std::sync::Arc;

use uuid::Uuid;

use super::*;

fn chat(owner: &str) -> ChatRecord {
    ChatRecord {
        id: Uuid::new_v4(),
        owner: owner.into(),
        agent: "demo".into(),
        state: ChatState::Idle,
        context: None,
        model: None,
        archived: false,
        created_at: 1,
        updated_at: 1,
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

#[tokio::test]
async fn append_load_and_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nested/db.sqlite");
    let store = SqliteStore::open(&path).await.unwrap();
    let a = store.create_chat(&chat("alice")).await.unwrap();
    let b = store.create_chat(&chat("bob")).await.unwrap();

    // A second create of the same id keeps the first owner.
    let again = store
        .create_chat(&ChatRecord {
            owner: "mallory".into(),
            ..a.clone()
        })
        .await
        .unwrap();
    assert_eq!(again.owner, "alice");

    // Two chats in one transaction; 2,500 rows crosses the multi-row chunk size.
    let many: Vec<_> = (1..=2500)
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
    assert_eq!(store.transcript(b.id).await.unwrap().len(), 1);

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

    drop(store);
    let store = SqliteStore::open(&path).await.unwrap();
    assert_eq!(
        store.last(a.id).await.unwrap(),
        Some((2500, "chat.print".to_owned()))
    );
    assert_eq!(store.chat(b.id).await.unwrap().unwrap().owner, "bob");
    assert_eq!(store.last(Uuid::new_v4()).await.unwrap(), None);
}

#[tokio::test]
async fn writer_isolates_a_failing_batch() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(SqliteStore::open(&dir.path().join("db")).await.unwrap());
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
