//! What agentwire sends an upstream agent: its `ag_ui:` section as written
//! ([`AgUiSpec`]) and each run's `RunAgentInput` ([`RunInput`]), the chat's
//! history written as AG-UI messages.

use serde::Deserialize;
use serde_json::{Value, json};

use crate::llm::{Inputs, Message, Part};

/// An upstream agent is sent every file it is attached: what it reads is
/// its own model's business.
const ALL: Inputs = Inputs {
    image: true,
    pdf: true,
    max_image_bytes: u64::MAX,
};

/// An agent file's `ag_ui:` section.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgUiSpec {
    /// The AG-UI endpoint a run is POSTed to.
    pub url: String,
    /// Headers sent with every run (`${env:NAME}` replaced).
    #[serde(default)]
    pub headers: std::collections::BTreeMap<String, String>,
    /// Send the caller's bearer token as `Authorization`.
    #[serde(default)]
    pub forward_bearer: bool,
    /// Longest wait for the answer, and between two of its events.
    #[serde(default = "default_timeout")]
    pub timeout_seconds: u64,
    /// Asking again a run a restart cut off is safe.
    #[serde(default)]
    pub idempotent: bool,
    /// What of the chat's history each run sends.
    #[serde(default)]
    pub history: History,
}

/// `ag_ui.history`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum History {
    /// All of it: for a server that keeps nothing between runs (Pydantic
    /// AI's adapter).
    #[default]
    Full,
    /// What came after the agent's last message, and no `state`: for a
    /// server that keeps the thread itself (LangGraph's checkpointer), which
    /// would take the messages it has, under agentwire's ids, for new ones.
    New,
}

fn default_timeout() -> u64 {
    120
}

/// One run's `RunAgentInput`.
pub struct RunInput<'a> {
    /// The chat (AG-UI's thread).
    pub thread_id: String,
    pub run_id: String,
    /// The conversation so far, in the run's order.
    pub messages: &'a [Message],
    /// The tools a client brought: the upstream agent may call them, and
    /// the client answers.
    pub tools: &'a [crate::llm::ToolDefinition],
    /// The agent's state, as its last snapshot and deltas left it.
    pub state: Option<&'a Value>,
    /// The chat's `context` object.
    pub context: Option<&'a Value>,
    /// Answers to the interrupts the previous run ended with.
    pub resume: Vec<Value>,
    pub history: History,
}

impl RunInput<'_> {
    /// The JSON body.
    pub fn to_json(&self) -> Value {
        let sent = match self.history {
            History::Full => 0,
            History::New => self
                .messages
                .iter()
                .rposition(|m| matches!(m, Message::Assistant { .. }))
                .map_or(0, |i| i + 1),
        };
        let mut input = json!({
            "threadId": self.thread_id,
            "runId": self.run_id,
            "protocolVersion": "1.0",
            // A server that keeps the thread keeps its state too (LangGraph's
            // snapshots hold its messages, which it would take as new).
            "state": match self.history {
                History::Full => self.state.cloned().unwrap_or_else(|| json!({})),
                History::New => json!({}),
            },
            "messages": messages(self.messages, sent),
            "tools": self.tools.iter().map(|t| json!({
                "name": t.name,
                "description": t.description,
                "parameters": t.input_schema,
            })).collect::<Vec<_>>(),
            "context": self.context.map(|c| vec![json!({
                "description": "The chat's context (JSON)",
                "value": c.to_string(),
            })]).unwrap_or_default(),
            "forwardedProps": {},
        });
        if !self.resume.is_empty() {
            input["resume"] = Value::Array(self.resume.clone());
        }
        input
    }
}

/// The history from `from` on as AG-UI messages. Ids are the message's place and a hash
/// of it, so the same history gets the same ids on every run.
pub fn messages(history: &[Message], from: usize) -> Vec<Value> {
    // Hashed: what the message says and the ids it names, never a file's
    // bytes (a run may carry megabytes of them).
    let id = |i: usize, m: &Message| {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        match m {
            Message::User { text, files } => {
                text.hash(&mut h);
                files.iter().for_each(|f| f.name.hash(&mut h));
            }
            Message::Peer { name, text } => (name, text).hash(&mut h),
            Message::Assistant { text, tool_calls } => {
                text.hash(&mut h);
                tool_calls.iter().for_each(|c| c.id.hash(&mut h));
            }
            Message::ToolResult { id, content, .. } => (id, content).hash(&mut h),
        }
        format!("aw-{i}-{:08x}", h.finish() as u32)
    };
    history
        .iter()
        .enumerate()
        .skip(from)
        .map(|(i, m)| match m {
            Message::User { text, files } if files.is_empty() => {
                json!({"id": id(i, m), "role": "user", "content": text})
            }
            // Files as AG-UI 1.0's parts: an image or a document by its
            // bytes, a text file (or a note on one not read) as text.
            Message::User { text, files } => {
                let parts: Vec<Value> = crate::llm::user_parts(text, files, ALL)
                    .into_iter()
                    .map(|part| match part {
                        Part::Text(text) => json!({"type": "text", "text": text}),
                        Part::Bytes {
                            media_type, data, ..
                        } => {
                            let kind = if media_type.starts_with("image/") {
                                "image"
                            } else {
                                "document"
                            };
                            json!({"type": kind, "source":
                                {"type": "data", "value": data, "mimeType": media_type}})
                        }
                    })
                    .collect();
                json!({"id": id(i, m), "role": "user", "content": parts})
            }
            Message::Peer { name, text } => json!({
                "id": id(i, m), "role": "user", "name": name,
                "content": Message::prefixed(name, text),
            }),
            Message::Assistant { text, tool_calls } => {
                let mut out = json!({"id": id(i, m), "role": "assistant", "content": text});
                if !tool_calls.is_empty() {
                    out["toolCalls"] = tool_calls
                        .iter()
                        .map(|c| {
                            json!({"id": c.id, "type": "function", "function": {
                                "name": c.name, "arguments": c.input.to_string()}})
                        })
                        .collect();
                }
                out
            }
            Message::ToolResult {
                id: call,
                content,
                is_error,
                ..
            } => {
                let mut out =
                    json!({"id": id(i, m), "role": "tool", "toolCallId": call, "content": content});
                if *is_error {
                    out["error"] = json!(content);
                }
                out
            }
        })
        .collect()
}
