//! `threads` (seed 003): data-only `{type: chunk|tool_result|end|error}`.

use serde_json::{Value, json};

use super::sse::{Encoder, Out};
use crate::protocol::{Envelope, EventKind};

/// `threads` (seed 003): data-only events.
#[derive(Default)]
pub(super) struct Threads {
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
