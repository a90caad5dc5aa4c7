//! The SSE dialects: pure mappings from log envelopes to SSE events.
//!
//! - `chat`: every `chat.*` envelope as `event: <type>`, `data: <envelope>`.
//! - `agent-chat` (seed 000 §2): `message_start {turn}`, `content_chunk {chunk}`,
//!   `tool_call_start {tool_use_id, name}`, `tool_call_result {tool_use_id, name,
//!   is_error}`, `error {message}`, `message_complete {}`.
//! - `agent-host` (seed 004 §1.2): `message_added`, `content_chunk {content}`,
//!   `tool_call`, `tool_result`, `message_complete {role, content}`,
//!   `stream_complete {}`, `error {error, error_code, is_retryable}`, `cancelled`.
//! - `threads` (seed 003): data-only `{type: chunk|tool_result|end|error}`.

use std::collections::HashSet;

use serde_json::{Value, json};

use crate::protocol::{Envelope, EventKind, RunEndReason};

/// One SSE event before its `id` (the envelope's seq) is attached.
#[derive(Debug, Clone, PartialEq)]
pub struct Out {
    /// `None`: a data-only event (the `message` type).
    pub event: Option<&'static str>,
    pub data: String,
}

fn out(event: &'static str, data: Value) -> Out {
    Out {
        event: Some(event),
        data: data.to_string(),
    }
}

/// A dialect: envelopes in, SSE events out.
pub trait Encoder: Send + 'static {
    /// Events for one envelope (`raw` is its JSON as stored or replayed).
    fn encode(&mut self, env: &Envelope, raw: &str, out: &mut Vec<Out>);
    /// Whether the stream ends with a run (`chat` never does).
    fn ends_with_run(&self) -> bool {
        true
    }
}

/// The dialects, by their `?dialect=` name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    Chat,
    AgentChat,
    AgentHost,
    Threads,
}

impl Dialect {
    /// The dialect called `name`.
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "chat" => Some(Self::Chat),
            "agent-chat" => Some(Self::AgentChat),
            "agent-host" => Some(Self::AgentHost),
            "threads" => Some(Self::Threads),
            _ => None,
        }
    }

    /// A fresh encoder. `conversation` is named in the first event where the
    /// dialect has room for it.
    pub fn encoder(self, conversation: Option<String>) -> Box<dyn Encoder> {
        match self {
            Self::Chat => Box::new(ChatEncoder),
            Self::AgentChat => Box::new(AgentChat {
                turn: 0,
                conversation,
                seen_calls: HashSet::new(),
            }),
            Self::AgentHost => Box::new(AgentHost {
                seen_calls: HashSet::new(),
            }),
            Self::Threads => Box::new(Threads {
                response: String::new(),
            }),
        }
    }
}

/// `chat`: the envelopes themselves.
struct ChatEncoder;

impl Encoder for ChatEncoder {
    fn encode(&mut self, env: &Envelope, raw: &str, out: &mut Vec<Out>) {
        out.push(Out {
            event: Some(env.kind.type_name()),
            data: raw.to_owned(),
        });
    }

    fn ends_with_run(&self) -> bool {
        false
    }
}

/// `agent-chat` (seed 000).
struct AgentChat {
    /// The model turn within the current run.
    turn: u64,
    conversation: Option<String>,
    /// Tool calls announced already (a patched component is logged again).
    seen_calls: HashSet<String>,
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

/// `agent-host` (seed 004).
struct AgentHost {
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

/// `threads` (seed 003): data-only events.
struct Threads {
    /// The answer so far, for `end.full_response`.
    response: String,
}

fn data(v: Value) -> Out {
    Out {
        event: None,
        data: v.to_string(),
    }
}

impl Encoder for Threads {
    fn encode(&mut self, env: &Envelope, _raw: &str, o: &mut Vec<Out>) {
        match &env.kind {
            EventKind::Text { agent, .. } if agent == "user" => self.response.clear(),
            EventKind::Print { content, .. } => {
                self.response.push_str(content);
                o.push(data(json!({"type": "chunk", "content": content})));
            }
            EventKind::ToolResponse { content, .. } => {
                o.push(data(json!({"type": "tool_result", "content": content})));
            }
            EventKind::Error { message, .. } => {
                o.push(data(json!({"type": "error", "error": message})))
            }
            EventKind::RunComplete { .. } => {
                let full = std::mem::take(&mut self.response);
                o.push(data(json!({"type": "end", "full_response": full})));
            }
            _ => {}
        }
    }
}

#[cfg(test)]
#[path = "dialects_tests.rs"]
mod tests;
