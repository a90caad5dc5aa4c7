//! `agent-chat` (seed 000 §2): `message_start {turn}`, `content_chunk
//! {chunk}`, `tool_call_start {tool_use_id, name}`, `tool_call_result
//! {tool_use_id, name, is_error}`, `error {message}`, `message_complete {}`.

use std::collections::HashSet;

use serde_json::{Value, json};

use super::sse::{Encoder, Out, out};
use crate::protocol::{Envelope, EventKind};

/// `agent-chat` (seed 000).
pub(super) struct AgentChat {
    /// The model turn within the current run.
    turn: u64,
    conversation: Option<String>,
    /// Tool calls announced already (a patched component is logged again).
    seen_calls: HashSet<String>,
}

impl AgentChat {
    pub(super) fn new(conversation: Option<String>) -> Self {
        Self {
            turn: 0,
            conversation,
            seen_calls: HashSet::new(),
        }
    }
}

impl Encoder for AgentChat {
    fn encode(&mut self, env: &Envelope, _raw: &str, o: &mut Vec<Out>) {
        match &env.kind {
            EventKind::Text { agent, .. } if agent == "user" => self.turn = 0,
            EventKind::SelectSpeaker { .. } => {
                let mut data = json!({"turn": self.turn});
                if let Some(c) = self.conversation.take() {
                    data["conversation_id"] = Value::String(c);
                }
                o.push(out("message_start", data));
                self.turn += 1;
            }
            EventKind::Print { content, .. } => {
                o.push(out("content_chunk", json!({"chunk": content})))
            }
            EventKind::ToolCall {
                tool_name, corr, ..
            } if self.seen_calls.insert(corr.clone()) => {
                o.push(out(
                    "tool_call_start",
                    json!({"tool_use_id": corr, "name": tool_name}),
                ));
            }
            EventKind::ToolResponse {
                tool_name,
                success,
                corr,
                ..
            } => o.push(out(
                "tool_call_result",
                json!({"tool_use_id": corr, "name": tool_name, "is_error": !success}),
            )),
            EventKind::Error { message, .. } => o.push(out("error", json!({"message": message}))),
            EventKind::RunComplete { .. } => o.push(out("message_complete", json!({}))),
            _ => {}
        }
    }
}
