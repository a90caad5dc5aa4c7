//! `agent-host` (seed 004 §1.2): `message_added`, `content_chunk {content}`,
//! `tool_call`, `tool_result`, `message_complete {role, content}`,
//! `stream_complete {}`, `error {error, error_code, is_retryable}`,
//! `cancelled`.

use std::collections::HashSet;

use serde_json::json;

use super::sse::{Encoder, Out, out};
use crate::protocol::{Envelope, EventKind, RunEndReason};

/// `agent-host` (seed 004).
#[derive(Default)]
pub(super) struct AgentHost {
    seen_calls: HashSet<String>,
}

impl Encoder for AgentHost {
    fn encode(&mut self, env: &Envelope, _raw: &str, o: &mut Vec<Out>) {
        match &env.kind {
            EventKind::Text { agent, content } if agent == "user" => o.push(out(
                "message_added",
                json!({"message_id": format!("{}:{}", env.chat_id, env.seq), "role": "user", "content": content}),
            )),
            EventKind::Text { content, .. } => o.push(out(
                "message_complete",
                json!({"role": "assistant", "content": content}),
            )),
            EventKind::Print { content, .. } => o.push(out("content_chunk", json!({"content": content}))),
            EventKind::ToolCall {
                tool_name,
                payload,
                corr,
                ..
            } if self.seen_calls.insert(corr.clone()) => o.push(out(
                "tool_call",
                json!({"call_id": corr, "tool_name": tool_name, "arguments": payload}),
            )),
            EventKind::ToolResponse {
                content,
                success,
                corr,
                ..
            } => o.push(out(
                "tool_result",
                json!({"call_id": corr, "success": success, "result": content}),
            )),
            EventKind::Error {
                message,
                error_code,
                recoverable,
                ..
            } => o.push(out(
                "error",
                json!({"error": message, "error_code": error_code.as_str().to_ascii_lowercase(), "is_retryable": recoverable}),
            )),
            EventKind::RunComplete {
                reason: RunEndReason::Cancelled,
            } => o.push(out("cancelled", json!({"message": "the run was cancelled"}))),
            EventKind::RunComplete { .. } => o.push(out("stream_complete", json!({}))),
            _ => {}
        }
    }
}
