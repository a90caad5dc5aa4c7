//! Ollama's native chat API (`POST {base}/api/chat`, NDJSON stream).
//!
//! Each line is `{"message": {"content", "thinking"?, "tool_calls"?}, "done": false}`;
//! tool calls arrive whole, with arguments as an object. The last line has
//! `"done": true`, `done_reason`, `prompt_eval_count` and `eval_count`.

use async_trait::async_trait;
use futures_util::stream::BoxStream;
use serde_json::{Value, json};

use super::transport::{Decoder, Endpoint, Framing, KeyHeader, Wire, cut_short, malformed};
use super::{
    ChatRequest, Inputs, Message, Part, Provider, ProviderError, StopReason, StreamEvent, Usage,
    user_parts,
};
use crate::protocol::ErrorCode;

const VENDOR: &str = "ollama";
const WIRE: Wire = Wire {
    vendor: VENDOR,
    key: KeyHeader::Bearer,
    headers: &[],
    framing: Framing::NdJson,
};

/// An Ollama server.
#[derive(Debug, Clone)]
pub struct Ollama {
    endpoint: Endpoint,
}

impl Ollama {
    /// `base_url` defaults to `http://127.0.0.1:11434`.
    pub fn new(endpoint: Endpoint) -> Self {
        Self { endpoint }
    }

    /// The request body for `request`.
    pub fn body(&self, request: &ChatRequest) -> Value {
        let mut messages = Vec::new();
        if !request.system_prompt.is_empty() {
            messages.push(json!({"role": "system", "content": request.system_prompt}));
        }
        for m in &request.messages {
            messages.push(match m {
                Message::User { text, files } => {
                    // Ollama takes images only, as base64 beside the text.
                    let inputs = Inputs {
                        pdf: false,
                        ..self.endpoint.inputs
                    };
                    let mut words = Vec::new();
                    let mut images = Vec::new();
                    for p in user_parts(text, files, inputs) {
                        match p {
                            Part::Text(t) => words.push(t),
                            Part::Bytes { data, .. } => images.push(Value::from(data)),
                        }
                    }
                    let mut msg = json!({"role": "user", "content": words.join("\n\n")});
                    if !images.is_empty() {
                        msg["images"] = Value::Array(images);
                    }
                    msg
                }
                Message::Peer { name, text } => {
                    json!({"role": "user", "content": Message::prefixed(name, text)})
                }
                Message::Assistant { text, tool_calls } => {
                    let mut msg = json!({"role": "assistant", "content": text});
                    if !tool_calls.is_empty() {
                        msg["tool_calls"] = tool_calls
                            .iter()
                            .map(|c| json!({"function": {"name": c.name, "arguments": c.input}}))
                            .collect();
                    }
                    msg
                }
                Message::ToolResult { name, content, .. } => {
                    json!({"role": "tool", "content": content, "tool_name": name})
                }
            });
        }
        let mut body = json!({
            "model": self.endpoint.model,
            "messages": messages,
            "stream": true,
            "options": {"num_predict": request.max_tokens},
        });
        if !request.tools.is_empty() {
            body["tools"] = super::openai::function_tools(&request.tools);
        }
        body
    }
}

#[async_trait]
impl Provider for Ollama {
    fn names(&self) -> (&'static str, &str) {
        ("ollama", &self.endpoint.model)
    }

    async fn stream_chat(
        &self,
        request: ChatRequest,
    ) -> Result<BoxStream<'static, StreamEvent>, ProviderError> {
        let url = format!("{}/api/chat", self.endpoint.base_url);
        let body = self.body(&request);
        self.endpoint
            .stream(&WIRE, &url, &body, LineDecoder::default())
            .await
    }
}

#[derive(Default)]
struct LineDecoder {
    started: bool,
    calls: usize,
    done: bool,
}

impl Decoder for LineDecoder {
    fn feed(&mut self, _event: &str, line: &str, out: &mut Vec<StreamEvent>) {
        let v: Value = match serde_json::from_str(line) {
            Ok(v) => v,
            Err(e) => return out.push(malformed(VENDOR, e)),
        };
        if let Some(error) = v["error"].as_str() {
            return out.push(StreamEvent::Error(ProviderError {
                code: ErrorCode::TransportError,
                message: format!("{VENDOR}: {error}"),
                recoverable: true,
            }));
        }
        if !self.started {
            self.started = true;
            out.push(StreamEvent::MessageStart {
                model: v["model"].as_str().map(str::to_owned),
            });
        }
        let message = &v["message"];
        if let Some(t) = message["thinking"].as_str().filter(|t| !t.is_empty()) {
            out.push(StreamEvent::ThinkingDelta(t.to_owned()));
        }
        if let Some(t) = message["content"].as_str().filter(|t| !t.is_empty()) {
            out.push(StreamEvent::ContentDelta(t.to_owned()));
        }
        for call in message["tool_calls"].as_array().into_iter().flatten() {
            let index = self.calls;
            self.calls += 1;
            let f = &call["function"];
            out.push(StreamEvent::ToolUseStart {
                index,
                id: call["id"].as_str().map_or_else(
                    || format!("call_{}", uuid::Uuid::new_v4().simple()),
                    str::to_owned,
                ),
                name: f["name"].as_str().unwrap_or_default().to_owned(),
            });
            let args = match &f["arguments"] {
                Value::String(s) => s.clone(),
                Value::Null => "{}".to_owned(),
                other => other.to_string(),
            };
            out.push(StreamEvent::ToolInputDelta { index, json: args });
        }
        if v["done"].as_bool() == Some(true) {
            self.done = true;
            let stop = match v["done_reason"].as_str() {
                Some("length") => StopReason::MaxTokens,
                _ if self.calls > 0 => StopReason::ToolUse,
                _ => StopReason::EndTurn,
            };
            out.push(StreamEvent::MessageComplete {
                stop,
                usage: Usage {
                    prompt_tokens: v["prompt_eval_count"].as_u64().unwrap_or(0),
                    completion_tokens: v["eval_count"].as_u64().unwrap_or(0),
                },
            });
        }
    }

    fn is_done(&self) -> bool {
        self.done
    }

    fn finish(&mut self, out: &mut Vec<StreamEvent>) {
        out.push(cut_short(VENDOR));
    }
}
