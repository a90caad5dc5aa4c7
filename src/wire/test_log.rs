//! Envelopes for the encoders' tests.

use serde_json::Value;

use crate::protocol::{Display, Envelope, EventKind};

/// `kind` logged at `seq`.
pub(super) fn env(seq: u64, kind: EventKind) -> Envelope {
    Envelope::new(
        kind,
        uuid::Uuid::nil(),
        seq,
        "2026-11-21T00:00:00.000Z".into(),
    )
}

/// A model turn of agent `a`.
pub(super) fn turn() -> EventKind {
    EventKind::SelectSpeaker {
        agent: "a".into(),
        method: None,
        reason: None,
    }
}

/// A call of the tool `guarded`: a UI call (awaiting a response) when it
/// has a component type, else a backend one.
pub(super) fn call(corr: &str, component: Option<&str>, payload: Value) -> EventKind {
    EventKind::ToolCall {
        tool_name: "guarded".into(),
        component_type: component.map(str::to_owned),
        awaiting_response: component.is_some(),
        payload,
        corr: corr.into(),
        display: Display::Inline,
        agent: None,
    }
}

/// The successful result of the call `corr`.
pub(super) fn response(corr: &str, content: Value) -> EventKind {
    EventKind::ToolResponse {
        tool_name: "guarded".into(),
        content,
        success: true,
        corr: corr.into(),
        agent: None,
    }
}
