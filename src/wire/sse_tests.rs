use serde_json::{Value, json};

use super::*;
use crate::protocol::{Display, Envelope, ErrorCode, EventKind, RunEndReason};

fn env(seq: u64, kind: EventKind) -> Envelope {
    Envelope {
        kind,
        chat_id: uuid::Uuid::nil(),
        seq,
        ts: "2026-11-21T00:00:00.000Z".into(),
    }
}

fn run() -> Vec<Envelope> {
    vec![
        env(
            1,
            EventKind::Text {
                agent: "user".into(),
                content: "hi".into(),
            },
        ),
        env(2, EventKind::SelectSpeaker { agent: "a".into() }),
        env(
            3,
            EventKind::Print {
                agent: "a".into(),
                content: "Let me".into(),
                corr: None,
            },
        ),
        env(
            4,
            EventKind::Text {
                agent: "a".into(),
                content: "Let me".into(),
            },
        ),
        env(
            5,
            EventKind::ToolCall {
                tool_name: "t".into(),
                component_type: None,
                awaiting_response: false,
                payload: json!({"x": 1}),
                corr: "c1".into(),
                display: Display::Inline,
            },
        ),
        env(
            6,
            EventKind::ToolResponse {
                tool_name: "t".into(),
                content: json!("ok"),
                success: false,
                corr: "c1".into(),
            },
        ),
        env(7, EventKind::SelectSpeaker { agent: "a".into() }),
        env(
            8,
            EventKind::Print {
                agent: "a".into(),
                content: "Done".into(),
                corr: None,
            },
        ),
        env(
            9,
            EventKind::Error {
                message: "boom".into(),
                error_code: ErrorCode::ToolExecutionError,
                details: None,
                recoverable: true,
            },
        ),
        env(
            10,
            EventKind::RunComplete {
                reason: RunEndReason::Error,
            },
        ),
    ]
}

fn encode(dialect: Dialect) -> Vec<(Option<&'static str>, Value)> {
    let mut enc = dialect.encoder(Some("conv-1".into()));
    let mut outs = Vec::new();
    for e in run() {
        enc.encode(&e, &e.to_json(), &mut outs);
    }
    outs.into_iter()
        .map(|o| (o.event, serde_json::from_str(&o.data).unwrap()))
        .collect()
}

#[test]
fn agent_chat_follows_seed_000() {
    assert_eq!(
        encode(Dialect::AgentChat),
        vec![
            (
                Some("message_start"),
                json!({"turn": 0, "conversation_id": "conv-1"})
            ),
            (Some("content_chunk"), json!({"chunk": "Let me"})),
            (
                Some("tool_call_start"),
                json!({"tool_use_id": "c1", "name": "t"})
            ),
            (
                Some("tool_call_result"),
                json!({"tool_use_id": "c1", "name": "t", "is_error": true})
            ),
            (Some("message_start"), json!({"turn": 1})),
            (Some("content_chunk"), json!({"chunk": "Done"})),
            (Some("error"), json!({"message": "boom"})),
            (Some("message_complete"), json!({})),
        ]
    );
}

#[test]
fn agent_host_follows_seed_004() {
    let events = encode(Dialect::AgentHost);
    let names: Vec<_> = events.iter().map(|(n, _)| n.unwrap()).collect();
    assert_eq!(
        names,
        [
            "message_added",
            "content_chunk",
            "message_complete",
            "tool_call",
            "tool_result",
            "content_chunk",
            "error",
            "stream_complete"
        ]
    );
    assert_eq!(
        events[0].1,
        json!({"message_id": format!("{}:1", uuid::Uuid::nil()), "role": "user", "content": "hi"})
    );
    assert_eq!(
        events[3].1,
        json!({"call_id": "c1", "tool_name": "t", "arguments": {"x": 1}})
    );
    assert_eq!(
        events[4].1,
        json!({"call_id": "c1", "success": false, "result": "ok"})
    );
    assert_eq!(
        events[6].1,
        json!({"error": "boom", "error_code": "tool_execution_error", "is_retryable": true})
    );
}

#[test]
fn threads_and_chat() {
    let events = encode(Dialect::Threads);
    assert!(events.iter().all(|(n, _)| n.is_none()));
    assert_eq!(
        events.last().unwrap().1,
        json!({"type": "end", "full_response": "Let meDone"})
    );
    assert_eq!(events[1].1, json!({"type": "tool_result", "content": "ok"}));
    let chat = encode(Dialect::Chat);
    assert_eq!(chat.len(), 10);
    assert_eq!(chat[0].0, Some("chat.text"));
    assert_eq!(chat[0].1["seq"], 1);
}
