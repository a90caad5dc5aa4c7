//! Webhooks' waits for a person, on both stores: opened and closed with the
//! envelopes that open and close them, reminded once per interval by one
//! claimer, not while the last telling waits, and gone with their chat.

use super::listing::append;
use super::*;

fn said(seq: u64, kind: &'static str, json: &str) -> NewEnvelope {
    NewEnvelope {
        json: json.to_owned().into(),
        ..env(seq, kind, None, None)
    }
}

/// Marks every event due delivered; their ids.
async fn deliver_all(outbox: &Outbox) -> Vec<String> {
    let mut ids = Vec::new();
    loop {
        let due = outbox.due(i64::MAX - 1, 100).await.unwrap();
        if due.is_empty() {
            return ids;
        }
        for row in due {
            outbox.delivered(&row.id, 1).await.unwrap();
            ids.push(row.id);
        }
    }
}

/// The seqs of the waits due a reminder (one every second), long after.
async fn due(outbox: &Outbox) -> Vec<u64> {
    let now = chrono::Utc::now().timestamp_millis() + 3_600_000;
    let waits = outbox.waits_due(now, 1000, 10).await.unwrap();
    waits.iter().map(|w| w.seq).collect()
}

conformance!(waits_for_a_person_open_close_and_remind, waits_on);
async fn waits_on(open: Opener) {
    let store = open().await;
    store.enable_outbox();
    let outbox = store.outbox();
    let c = store.create_chat(&chat("dana")).await.unwrap().id;
    append(
        &store,
        c,
        vec![
            said(1, "chat.text", r#"{"type":"chat.text","agent":"user"}"#),
            said(2, "chat.input_request", r#"{"request_id":"q1"}"#),
            said(
                3,
                "chat.tool_call",
                r#"{"component_type":"approval","awaiting_response":true,"corr":"c1.approval"}"#,
            ),
        ],
    )
    .await;
    // Not while their first telling waits to be delivered.
    assert_eq!(due(&outbox).await, Vec::<u64>::new());
    assert_eq!(deliver_all(&outbox).await.len(), 3);
    assert_eq!(due(&outbox).await, [2, 3]);

    // One claimer makes reminder 1; a second with the same view makes none.
    let now = chrono::Utc::now().timestamp_millis() + 3_600_000;
    let waits = outbox.waits_due(now, 1000, 10).await.unwrap();
    let q1 = waits.iter().find(|w| w.seq == 2).unwrap().clone();
    assert!(outbox.remind(&q1, 1, q1.opened_at + 1000).await.unwrap());
    assert!(!outbox.remind(&q1, 1, q1.opened_at + 1000).await.unwrap());
    assert_eq!(due(&outbox).await, [3], "q1's reminder waits to be sent");
    let sent = deliver_all(&outbox).await;
    assert_eq!(sent, [format!("msg_{}_2_r1", c.simple())]);

    // The answer closes its wait only; the other's answer closes it.
    append(
        &store,
        c,
        vec![said(4, "chat.input_ack", r#"{"request_id":"q1"}"#)],
    )
    .await;
    assert_eq!(due(&outbox).await, [3]);
    append(
        &store,
        c,
        vec![said(5, "chat.tool_response", r#"{"corr":"c1.approval"}"#)],
    )
    .await;
    assert_eq!(due(&outbox).await, Vec::<u64>::new());

    // A run's end closes every wait before it; a purge forgets them too.
    append(
        &store,
        c,
        vec![
            said(6, "chat.input_request", r#"{"request_id":"q2"}"#),
            said(7, "chat.run_complete", r#"{"reason":"timeout"}"#),
            said(8, "chat.input_request", r#"{"request_id":"q3"}"#),
        ],
    )
    .await;
    deliver_all(&outbox).await;
    assert_eq!(due(&outbox).await, [8]);
    assert!(store.purge_chat(c).await.unwrap());
    assert_eq!(due(&outbox).await, Vec::<u64>::new());
}
