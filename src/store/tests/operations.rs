//! What the operator's page reads and records, on both stores: the latest
//! `chat.error`s of every chat, newest first, and operators' acts.

use super::listing::append;
use super::*;
use crate::store::OperatorAct;

fn error(seq: u64, ts_ms: i64, code: &str) -> NewEnvelope {
    NewEnvelope {
        ts_ms,
        json: format!(r#"{{"type":"chat.error","error_code":"{code}"}}"#).into(),
        ..env(seq, "chat.error", None, None)
    }
}

conformance!(errors_come_newest_first_and_acts_are_kept, operations_on);
async fn operations_on(open: Opener) {
    let store = open().await;
    let ops = store.operations();
    assert!(ops.recent_errors(10).await.unwrap().is_empty());
    let a = store.create_chat(&chat("erin")).await.unwrap().id;
    let b = store.create_chat(&chat("femi")).await.unwrap().id;
    append(
        &store,
        a,
        vec![
            env(1, "chat.text", None, None),
            error(2, 1_000, "TOOL_EXECUTION_ERROR"),
        ],
    )
    .await;
    append(&store, b, vec![error(1, 3_000, "QUOTA_EXCEEDED")]).await;
    append(&store, a, vec![error(3, 2_000, "TRANSPORT_ERROR")]).await;
    let errors = ops.recent_errors(2).await.unwrap();
    let seen: Vec<(Uuid, u64, i64)> = errors.iter().map(|e| (e.chat_id, e.seq, e.ts)).collect();
    assert_eq!(seen, vec![(b, 1, 3_000), (a, 3, 2_000)]);
    assert!(errors[0].json.contains("QUOTA_EXCEEDED"));

    assert!(ops.acts(10).await.unwrap().is_empty());
    let act = |at, action: &str, target: Option<&str>| OperatorAct {
        at,
        actor: "key:ops".into(),
        action: action.into(),
        chat_id: a,
        target: target.map(str::to_owned),
    };
    ops.record(&act(10, "cancel", None)).await.unwrap();
    ops.record(&act(20, "end_wait", Some("call_1")))
        .await
        .unwrap();
    assert_eq!(
        ops.acts(10).await.unwrap(),
        vec![act(20, "end_wait", Some("call_1")), act(10, "cancel", None)]
    );
}
