//! Anthropic Messages (`POST {base}/v1/messages`, `stream: true`).
//!
//! Events: `message_start` (input usage), `content_block_start` (a `text`,
//! `thinking` or `tool_use` block at `index`), `content_block_delta`
//! (`text_delta`, `thinking_delta`, `input_json_delta`), `content_block_stop`,
//! `message_delta` (stop reason, output usage), `message_stop`, `ping`, `error`.

use async_trait::async_trait;
use futures_util::stream::BoxStream;
use serde_json::{Value, json};

use super::transport::{Decoder, Endpoint, Framing, KeyHeader, Wire, cut_short, malformed};
use super::{
    ChatRequest, Message, Part, Provider, ProviderError, StopReason, StreamEvent, Usage, user_parts,
};
use crate::protocol::ErrorCode;

const VENDOR: &str = "anthropic";
const WIRE: Wire = Wire {
    vendor: VENDOR,
    key: KeyHeader::Named("x-api-key"),
    headers: &[("anthropic-version", API_VERSION)],
    framing: Framing::Sse,
};

/// The API version header sent with every request.
pub const API_VERSION: &str = "2023-06-01";

/// The Anthropic Messages API.
#[derive(Debug, Clone)]
pub struct Anthropic {
    endpoint: Endpoint,
}

impl Anthropic {
    /// `base_url` defaults to `https://api.anthropic.com`.
    pub fn new(endpoint: Endpoint) -> Self {
        Self { endpoint }
    }

    /// The request body for `request`. Consecutive tool results and user
    /// turns (a group's members speak one after another) are merged into one
    /// user message, as the API's alternation of roles requires.
    pub fn body(&self, request: &ChatRequest) -> Value {
        let mut messages: Vec<Value> = Vec::new();
        for m in &request.messages {
            match m {
                Message::User { text, files } if files.is_empty() => user_text(&mut messages, text),
                Message::User { text, files } => {
                    let blocks = user_parts(text, files, self.endpoint.inputs)
                        .into_iter()
                        .map(|p| match p {
                            Part::Text(text) => json!({"type": "text", "text": text}),
                            Part::Bytes {
                                media_type, data, ..
                            } if media_type.starts_with("image/") => json!({
                                "type": "image",
                                "source": {"type": "base64", "media_type": media_type, "data": data},
                            }),
                            Part::Bytes {
                                name,
                                media_type,
                                data,
                            } => json!({
                                "type": "document",
                                "source": {"type": "base64", "media_type": media_type, "data": data},
                                "title": name,
                            }),
                        })
                        .collect();
                    user_blocks(&mut messages, blocks);
                }
                Message::Peer { name, text } => {
                    user_text(&mut messages, &Message::prefixed(name, text))
                }
                Message::Assistant { text, tool_calls } => {
                    let mut content = Vec::new();
                    if !text.is_empty() {
                        content.push(json!({"type": "text", "text": text}));
                    }
                    for c in tool_calls {
                        content.push(json!({"type": "tool_use", "id": c.id, "name": c.name, "input": c.input}));
                    }
                    messages.push(json!({"role": "assistant", "content": content}));
                }
                Message::ToolResult {
                    id,
                    content,
                    is_error,
                    ..
                } => {
                    let block = json!({"type": "tool_result", "tool_use_id": id, "content": content, "is_error": is_error});
                    match messages.last_mut() {
                        Some(last) if last["role"] == "user" && last["content"].is_array() => {
                            last["content"].as_array_mut().expect("array").push(block);
                        }
                        _ => messages.push(json!({"role": "user", "content": [block]})),
                    }
                }
            }
        }
        let mut body = json!({
            "model": self.endpoint.model,
            "max_tokens": request.max_tokens,
            "messages": messages,
            "stream": true,
        });
        if !request.system_prompt.is_empty() {
            body["system"] = Value::from(request.system_prompt.as_str());
        }
        if !request.tools.is_empty() {
            body["tools"] = request
                .tools
                .iter()
                .map(|t| json!({"name": t.name, "description": t.description, "input_schema": t.input_schema}))
                .collect();
        }
        body
    }
}

#[async_trait]
impl Provider for Anthropic {
    fn names(&self) -> (&'static str, &str) {
        ("anthropic", &self.endpoint.model)
    }

    async fn stream_chat(
        &self,
        request: ChatRequest,
    ) -> Result<BoxStream<'static, StreamEvent>, ProviderError> {
        let url = format!("{}/v1/messages", self.endpoint.base_url);
        let body = self.body(&request);
        self.endpoint
            .stream(&WIRE, &url, &body, EventDecoder::default())
            .await
    }
}

#[derive(Default)]
struct EventDecoder {
    usage: Usage,
    stop: Option<StopReason>,
    done: bool,
}

impl Decoder for EventDecoder {
    fn feed(&mut self, _event: &str, data: &str, out: &mut Vec<StreamEvent>) {
        let v: Value = match serde_json::from_str(data) {
            Ok(v) => v,
            Err(e) => return out.push(malformed(VENDOR, e)),
        };
        match v["type"].as_str().unwrap_or_default() {
            "message_start" => {
                let usage = &v["message"]["usage"];
                self.usage.prompt_tokens = usage["input_tokens"].as_u64().unwrap_or(0);
                self.usage.completion_tokens = usage["output_tokens"].as_u64().unwrap_or(0);
                out.push(StreamEvent::MessageStart {
                    model: v["message"]["model"].as_str().map(str::to_owned),
                });
            }
            "content_block_start" => {
                let block = &v["content_block"];
                let index = v["index"].as_u64().unwrap_or(0) as usize;
                match block["type"].as_str() {
                    Some("tool_use") => out.push(StreamEvent::ToolUseStart {
                        index,
                        id: block["id"].as_str().unwrap_or_default().to_owned(),
                        name: block["name"].as_str().unwrap_or_default().to_owned(),
                    }),
                    Some("text") => {
                        if let Some(t) = block["text"].as_str().filter(|t| !t.is_empty()) {
                            out.push(StreamEvent::ContentDelta(t.to_owned()));
                        }
                    }
                    _ => {}
                }
            }
            "content_block_delta" => {
                let index = v["index"].as_u64().unwrap_or(0) as usize;
                let delta = &v["delta"];
                match delta["type"].as_str() {
                    Some("text_delta") => {
                        if let Some(t) = delta["text"].as_str().filter(|t| !t.is_empty()) {
                            out.push(StreamEvent::ContentDelta(t.to_owned()));
                        }
                    }
                    Some("input_json_delta") => {
                        if let Some(j) = delta["partial_json"].as_str().filter(|j| !j.is_empty()) {
                            out.push(StreamEvent::ToolInputDelta {
                                index,
                                json: j.to_owned(),
                            });
                        }
                    }
                    Some("thinking_delta") => {
                        if let Some(t) = delta["thinking"].as_str() {
                            out.push(StreamEvent::ThinkingDelta(t.to_owned()));
                        }
                    }
                    _ => {}
                }
            }
            "message_delta" => {
                if let Some(reason) = v["delta"]["stop_reason"].as_str() {
                    self.stop = Some(match reason {
                        "tool_use" => StopReason::ToolUse,
                        "max_tokens" => StopReason::MaxTokens,
                        _ => StopReason::EndTurn,
                    });
                }
                if let Some(n) = v["usage"]["output_tokens"].as_u64() {
                    self.usage.completion_tokens = n;
                }
                if let Some(n) = v["usage"]["input_tokens"].as_u64().filter(|n| *n > 0) {
                    self.usage.prompt_tokens = n;
                }
            }
            "message_stop" => {
                self.done = true;
                out.push(StreamEvent::MessageComplete {
                    stop: self.stop.unwrap_or(StopReason::EndTurn),
                    usage: self.usage,
                });
            }
            "error" => {
                let e = &v["error"];
                let kind = e["type"].as_str().unwrap_or("error");
                let (code, recoverable) = match kind {
                    "overloaded_error" | "api_error" => (ErrorCode::TransportError, true),
                    "rate_limit_error" => (ErrorCode::RateLimitExceeded, true),
                    _ => (ErrorCode::AgentInitializationFailed, false),
                };
                out.push(StreamEvent::Error(ProviderError {
                    code,
                    message: format!(
                        "{VENDOR}: {kind}: {}",
                        e["message"].as_str().unwrap_or("unknown error")
                    ),
                    recoverable,
                }));
            }
            // `ping`, `content_block_stop` and events added later.
            _ => {}
        }
    }

    fn is_done(&self) -> bool {
        self.done
    }

    fn finish(&mut self, out: &mut Vec<StreamEvent>) {
        out.push(cut_short(VENDOR));
    }
}

/// Adds a user text turn, as a text block of the user message before it if
/// there is one.
/// Blocks of a user's turn: after the user turn before, if one is there
/// (roles alternate), else a turn of their own.
fn user_blocks(messages: &mut Vec<Value>, blocks: Vec<Value>) {
    match messages.last_mut() {
        Some(last) if last["role"] == "user" => {
            if let Some(prior) = last["content"].as_str() {
                last["content"] = json!([{"type": "text", "text": prior}]);
            }
            if let Some(all) = last["content"].as_array_mut() {
                all.extend(blocks);
            }
        }
        _ => messages.push(json!({"role": "user", "content": blocks})),
    }
}

fn user_text(messages: &mut Vec<Value>, text: &str) {
    match messages.last_mut() {
        Some(last) if last["role"] == "user" => {
            if let Some(prior) = last["content"].as_str() {
                last["content"] = json!([{"type": "text", "text": prior}]);
            }
            if let Some(blocks) = last["content"].as_array_mut() {
                blocks.push(json!({"type": "text", "text": text}));
            }
        }
        _ => messages.push(json!({"role": "user", "content": text})),
    }
}
