//! `agent-host` (seed 004 §1.2): `message_added`, `content_chunk {content}`,
//! `tool_call`, `tool_result`, `message_complete {role, content}`,
//! `stream_complete {}`, `error {error, error_code, is_retryable}`,
//! `cancelled`; and seed 004's `client_action` for every step that waits for
//! the user or shows them something: `{action: input|approval|component|
//! preview, call_id, …, answer_url}`. An approval gate is only a
//! `client_action`; a UI tool is its `tool_call` then its `client_action`;
//! an input request's end is a `tool_result` on its `call_id`. In a group
//! run each model turn is announced by `message_added {message_id, role:
//! "assistant", name, content: ""}`, and its `message_complete` carries the
//! member's `name` too. A model turn a restart cut off is `message_discarded
//! {reason}` (with the turn's `message_id` in a group run): the chunks since
//! the turn began are void, and the turn is streamed again.

use std::collections::HashSet;

use serde_json::json;

use super::hitl::{Request, request};
use super::sse::{Encoder, Out, out};
use crate::protocol::{Envelope, EventKind, RunEndReason};

/// `agent-host` (seed 004).
#[derive(Default)]
pub(super) struct AgentHost {
    seen_calls: HashSet<String>,
    /// Inside a group run (a `chat.select_speaker` said how it chose).
    group: bool,
    /// The `message_added` of the group turn in flight (what a join
    /// inside it is told first).
    current: Option<serde_json::Value>,
}

impl Encoder for AgentHost {
    fn encode(&mut self, env: &Envelope, _raw: &str, o: &mut Vec<Out>) {
        match &env.kind {
            EventKind::Text { agent, content } if agent == "user" => o.push(out(
                "message_added",
                json!({"message_id": format!("{}:{}", env.chat_id, env.seq), "role": "user", "content": content}),
            )),
            EventKind::SelectSpeaker { agent, method, .. } => {
                self.group = method.is_some();
                self.current = None;
                if self.group {
                    let data = json!({"message_id": format!("{}:{}", env.chat_id, env.seq),
                                      "role": "assistant", "name": agent, "content": ""});
                    self.current = Some(data.clone());
                    o.push(out("message_added", data));
                }
            }
            EventKind::Text { agent, content } => {
                let mut data = json!({"role": "assistant", "content": content});
                if self.group {
                    data["name"] = json!(agent);
                }
                o.push(out("message_complete", data))
            }
            EventKind::Print { content, .. } => o.push(out("content_chunk", json!({"content": content}))),
            EventKind::TurnDiscarded {
                from_seq, reason, ..
            } => {
                self.current = None;
                let mut data = json!({"reason": reason});
                if self.group {
                    data["message_id"] = json!(format!("{}:{from_seq}", env.chat_id));
                }
                o.push(out("message_discarded", data));
            }
            EventKind::ToolCall {
                tool_name,
                payload,
                corr,
                ..
            } if self.seen_calls.insert(corr.clone()) => match request(env) {
                Some(r) if r.action != "component" => o.push(client_action(r)),
                waiting => {
                    o.push(out(
                        "tool_call",
                        json!({"call_id": corr, "tool_name": tool_name, "arguments": payload}),
                    ));
                    o.extend(waiting.map(client_action));
                }
            },
            EventKind::InputRequest { .. } => o.extend(request(env).map(client_action)),
            EventKind::InputAck { request_id, .. } => o.push(out(
                "tool_result",
                json!({"call_id": request_id, "success": true, "result": {"answered": true}}),
            )),
            EventKind::InputTimeout { request_id, .. } => o.push(out(
                "tool_result",
                json!({"call_id": request_id, "success": false, "result": {"timed_out": true}}),
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
            } => {
                self.group = false;
                self.current = None;
                o.push(out("cancelled", json!({"message": "the run was cancelled"})))
            }
            EventKind::RunComplete { .. } => {
                self.group = false;
                self.current = None;
                o.push(out("stream_complete", json!({})))
            }
            _ => {}
        }
    }

    /// A join inside a group's turn is told whose turn it is first.
    fn rejoined(&mut self, o: &mut Vec<Out>) {
        if let Some(data) = &self.current {
            o.push(out("message_added", data.clone()));
        }
    }
}

/// A waiting step as seed 004's `client_action`: the request's fields, its
/// `corr` as `call_id`.
fn client_action(r: Request) -> Out {
    let mut data = r.fields;
    if let Some(d) = data.as_object_mut() {
        if let Some(corr) = d.remove("corr") {
            d.insert("call_id".into(), corr);
        }
        d.insert("action".into(), r.action.into());
    }
    out("client_action", data)
}
