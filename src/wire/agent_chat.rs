//! `agent-chat` (seed 000 §2): `message_start {turn}`, `content_chunk
//! {chunk}`, `tool_call_start {tool_use_id, name}`, `tool_call_result
//! {tool_use_id, name, is_error}`, `error {message}`, `message_complete {}`;
//! seed 000's `workflow_preview` for a preview; and, in the same style, the
//! steps that wait for a person: `input_request` (then `input_received` or
//! `input_timeout`), `approval_request` (then `approval_result`),
//! `component_request` (after its `tool_call_start`; then its
//! `tool_call_result`). In a group run, `message_start` names the member
//! that speaks (`agent`). A turn a restart cut off is `turn_discarded
//! {turn, reason}`: its chunks are void, and the turn starts over with a
//! new `message_start` of the same number.

use std::collections::HashSet;

use serde_json::{Value, json};

use super::hitl::{approved_call, request};
use super::sse::{Encoder, Out, out};
use crate::protocol::{Envelope, EventKind};

/// `agent-chat` (seed 000).
pub(super) struct AgentChat {
    /// The model turn within the current run.
    turn: u64,
    conversation: Option<String>,
    /// Tool calls announced already (a patched component is logged again).
    seen_calls: HashSet<String>,
    /// The `message_start` of the turn in flight (what a join inside it
    /// is told first).
    current: Option<Value>,
}

impl AgentChat {
    pub(super) fn new(conversation: Option<String>) -> Self {
        Self {
            turn: 0,
            conversation,
            seen_calls: HashSet::new(),
            current: None,
        }
    }
}

impl Encoder for AgentChat {
    fn encode(&mut self, env: &Envelope, _raw: &str, o: &mut Vec<Out>) {
        match &env.kind {
            EventKind::Text { agent, .. } if agent == "user" => {
                self.turn = 0;
                self.current = None;
            }
            EventKind::SelectSpeaker { agent, method, .. } => {
                let mut data = json!({"turn": self.turn});
                // A group run names each turn's member.
                if method.is_some() {
                    data["agent"] = Value::String(agent.clone());
                }
                self.current = Some(data.clone());
                if let Some(c) = self.conversation.take() {
                    data["conversation_id"] = Value::String(c);
                }
                o.push(out("message_start", data));
                self.turn += 1;
            }
            EventKind::Print { content, .. } => {
                o.push(out("content_chunk", json!({"chunk": content})))
            }
            EventKind::TurnDiscarded { reason, .. } => {
                self.turn = self.turn.saturating_sub(1);
                self.current = None;
                o.push(out(
                    "turn_discarded",
                    json!({"turn": self.turn, "reason": reason}),
                ));
            }
            EventKind::ToolCall {
                tool_name, corr, ..
            } if self.seen_calls.insert(corr.clone()) => {
                let waiting = request(env);
                match waiting {
                    Some(r) if r.action == "approval" => {
                        let f = r.fields;
                        o.push(out(
                            "approval_request",
                            json!({"tool_use_id": f["tool_call_id"], "name": f["tool_name"],
                                   "input": f["input"], "corr": f["corr"], "answer_url": f["answer_url"]}),
                        ));
                    }
                    Some(r) if r.action == "preview" => {
                        let mut data = r.fields["payload"].clone();
                        // Seed 000: `is_update` iff an existing workflow is named.
                        if let Some(p) = data.as_object_mut()
                            && !p.contains_key("is_update")
                        {
                            let update = p.get("workflow_id").is_some_and(|id| !id.is_null());
                            p.insert("is_update".into(), Value::Bool(update));
                        }
                        o.push(out("workflow_preview", data));
                    }
                    other => {
                        o.push(out(
                            "tool_call_start",
                            json!({"tool_use_id": corr, "name": tool_name}),
                        ));
                        if let Some(r) = other {
                            let f = r.fields;
                            o.push(out(
                                "component_request",
                                json!({"tool_use_id": corr, "name": tool_name,
                                       "component_type": f["component_type"], "payload": f["payload"],
                                       "display": f["display"], "answer_url": f["answer_url"]}),
                            ));
                        }
                    }
                }
            }
            EventKind::ToolResponse { content, corr, .. } if approved_call(corr).is_some() => {
                let mut data = json!({"tool_use_id": approved_call(corr), "approved": content["approved"] == true});
                if let Some(reason) = content.get("reason").filter(|r| r.is_string()) {
                    data["reason"] = reason.clone();
                }
                o.push(out("approval_result", data));
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
            EventKind::InputRequest { .. } => {
                if let Some(r) = request(env) {
                    let mut data = r.fields;
                    if let Some(d) = data.as_object_mut() {
                        d.remove("corr");
                    }
                    o.push(out("input_request", data));
                }
            }
            EventKind::InputAck { request_id, .. } => {
                o.push(out("input_received", json!({"request_id": request_id})))
            }
            EventKind::InputTimeout {
                request_id,
                timeout_seconds,
                ..
            } => o.push(out(
                "input_timeout",
                json!({"request_id": request_id, "timeout_seconds": timeout_seconds}),
            )),
            EventKind::Error { message, .. } => o.push(out("error", json!({"message": message}))),
            EventKind::RunComplete { .. } => {
                self.current = None;
                o.push(out("message_complete", json!({})));
            }
            _ => {}
        }
    }

    /// A join inside a turn is told the turn first: its number and, in a
    /// group, who speaks.
    fn rejoined(&mut self, o: &mut Vec<Out>) {
        if let Some(data) = &self.current {
            o.push(out("message_start", data.clone()));
        }
    }
}
