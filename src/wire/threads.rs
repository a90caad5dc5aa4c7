//! `threads` (seed 003): data-only `{type: chunk|tool_result|end|error}`. A
//! step that waits for the user (or a preview) is a `tool_result` whose
//! `content.type` names it, as seed 003's charts are: `input_request`,
//! `approval_request`, `component_request`, `preview`, with the fields a
//! client renders and the `answer_url` it answers at. In a group run every
//! `chunk` names the member that speaks (`agent`).

use std::collections::HashSet;

use serde_json::{Value, json};

use super::hitl::request;

use super::sse::{Encoder, Out};
use crate::protocol::{Envelope, EventKind};

/// `threads` (seed 003): data-only events.
#[derive(Default)]
pub(super) struct Threads {
    /// The answer so far, for `end.full_response`.
    response: String,
    /// Where the model turn in flight began in `response` (a turn a
    /// restart cut off is dropped from it: `chat.turn_discarded`).
    turn_start: usize,
    /// Requests shown already (a patched component is logged again).
    shown: HashSet<String>,
    /// Inside a group run (a `chat.select_speaker` said how it chose).
    group: bool,
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
            EventKind::Text { agent, .. } if agent == "user" => {
                self.response.clear();
                self.turn_start = 0;
            }
            EventKind::SelectSpeaker { method, .. } => {
                self.group = method.is_some();
                self.turn_start = self.response.len();
            }
            EventKind::TurnDiscarded { .. } => self.response.truncate(self.turn_start),
            EventKind::Print { agent, content, .. } => {
                self.response.push_str(content);
                let mut chunk = json!({"type": "chunk", "content": content});
                if self.group {
                    chunk["agent"] = json!(agent);
                }
                o.push(data(chunk));
            }
            EventKind::InputRequest { .. } | EventKind::ToolCall { .. } => {
                let Some(r) = request(env) else { return };
                let corr = r.fields["corr"].as_str().unwrap_or_default().to_owned();
                if self.shown.insert(corr) {
                    let mut content = r.fields;
                    let kind = match r.action {
                        "preview" => "preview".to_owned(),
                        other => format!("{other}_request"),
                    };
                    content["type"] = Value::String(kind);
                    o.push(data(json!({"type": "tool_result", "content": content})));
                }
            }
            EventKind::ToolResponse { content, .. } => {
                o.push(data(json!({"type": "tool_result", "content": content})));
            }
            EventKind::Error { message, .. } => {
                o.push(data(json!({"type": "error", "error": message})))
            }
            EventKind::RunComplete { .. } => {
                self.group = false;
                let full = std::mem::take(&mut self.response);
                self.turn_start = 0;
                o.push(data(json!({"type": "end", "full_response": full})));
            }
            _ => {}
        }
    }
}
