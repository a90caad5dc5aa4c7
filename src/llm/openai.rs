//! OpenAI-compatible Chat Completions (`POST {base}/chat/completions`,
//! `stream: true`): OpenAI, Ollama's `/v1`, vLLM, LM Studio, llama.cpp's
//! server, DeepSeek.
//!
//! Tool calls arrive as `delta.tool_calls[]` fragments keyed by `index`, the
//! first with `id` and `function.name` (some servers repeat them on every
//! fragment), the rest with `function.arguments` pieces. Usage comes in a
//! final chunk with empty `choices` (`stream_options.include_usage`); the
//! stream ends with `data: [DONE]`.

use std::collections::HashSet;

use async_trait::async_trait;
use futures_util::stream::BoxStream;
use serde_json::{Value, json};

use super::transport::{Decoder, Endpoint, Framing, KeyHeader, Wire, cut_short, malformed};
use super::{
    ChatRequest, Message, Part, Provider, ProviderError, StopReason, StreamEvent, ToolDefinition,
    Usage, user_parts,
};
use crate::protocol::ErrorCode;

const VENDOR: &str = "openai";
const WIRE: Wire = Wire {
    vendor: VENDOR,
    key: KeyHeader::Bearer,
    headers: &[],
    framing: Framing::Sse,
};

/// An OpenAI-compatible server.
#[derive(Debug, Clone)]
pub struct OpenAi {
    endpoint: Endpoint,
}

impl OpenAi {
    /// `base_url` defaults to `https://api.openai.com/v1`.
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
                Message::User { text, files } if files.is_empty() => {
                    json!({"role": "user", "content": text})
                }
                Message::User { text, files } => {
                    let content: Vec<Value> = user_parts(text, files, self.endpoint.inputs)
                        .into_iter()
                        .map(|p| match p {
                            Part::Text(text) => json!({"type": "text", "text": text}),
                            Part::Bytes {
                                media_type, data, ..
                            } if media_type.starts_with("image/") => json!({
                                "type": "image_url",
                                "image_url": {"url": format!("data:{media_type};base64,{data}")},
                            }),
                            Part::Bytes {
                                name,
                                media_type,
                                data,
                            } => json!({
                                "type": "file",
                                "file": {"filename": name, "file_data": format!("data:{media_type};base64,{data}")},
                            }),
                        })
                        .collect();
                    json!({"role": "user", "content": content})
                }
                // `name` for OpenAI; the prefix for the compatible servers
                // that drop it (Ollama, llama.cpp, vLLM's chat templates).
                Message::Peer { name, text } => {
                    json!({"role": "user", "name": name, "content": Message::prefixed(name, text)})
                }
                Message::Assistant { text, tool_calls } => {
                    let mut msg = json!({
                        "role": "assistant",
                        "content": if text.is_empty() { Value::Null } else { Value::from(text.as_str()) },
                    });
                    if !tool_calls.is_empty() {
                        msg["tool_calls"] = tool_calls
                            .iter()
                            .map(|c| {
                                json!({
                                    "id": c.id,
                                    "type": "function",
                                    "function": {"name": c.name, "arguments": c.input.to_string()},
                                })
                            })
                            .collect();
                    }
                    msg
                }
                Message::ToolResult { id, content, .. } => {
                    json!({"role": "tool", "tool_call_id": id, "content": content})
                }
            });
        }
        let mut body = json!({
            "model": self.endpoint.model,
            "messages": messages,
            "stream": true,
            "stream_options": {"include_usage": true},
        });
        if !request.tools.is_empty() {
            body["tools"] = function_tools(&request.tools);
        }
        body
    }
}

/// Tools in the OpenAI `{"type": "function", "function": {…}}` shape (Ollama
/// takes the same).
pub(super) fn function_tools(tools: &[ToolDefinition]) -> Value {
    tools
        .iter()
        .map(|t| {
            json!({
                "type": "function",
                "function": {"name": t.name, "description": t.description, "parameters": t.input_schema},
            })
        })
        .collect()
}

#[async_trait]
impl Provider for OpenAi {
    fn names(&self) -> (&'static str, &str) {
        ("openai", &self.endpoint.model)
    }

    async fn stream_chat(
        &self,
        request: ChatRequest,
    ) -> Result<BoxStream<'static, StreamEvent>, ProviderError> {
        let url = format!("{}/chat/completions", self.endpoint.base_url);
        let body = self.body(&request);
        self.endpoint
            .stream(&WIRE, &url, &body, ChunkDecoder::default())
            .await
    }
}

/// Decodes `chat.completion.chunk` events.
#[derive(Default)]
struct ChunkDecoder {
    started: bool,
    /// Tool call indexes already announced.
    calls: HashSet<usize>,
    stop: Option<StopReason>,
    usage: Usage,
    done: bool,
}

impl ChunkDecoder {
    fn complete(&mut self, out: &mut Vec<StreamEvent>) {
        self.done = true;
        out.push(StreamEvent::MessageComplete {
            stop: self.stop.unwrap_or(StopReason::EndTurn),
            usage: self.usage,
        });
    }
}

impl Decoder for ChunkDecoder {
    fn feed(&mut self, _event: &str, data: &str, out: &mut Vec<StreamEvent>) {
        if data.trim() == "[DONE]" {
            return self.complete(out);
        }
        let chunk: Value = match serde_json::from_str(data) {
            Ok(v) => v,
            Err(e) => return out.push(malformed(VENDOR, e)),
        };
        if let Some(error) = chunk.get("error") {
            let message = error["message"]
                .as_str()
                .or(error.as_str())
                .unwrap_or("unknown error");
            return out.push(StreamEvent::Error(ProviderError {
                code: ErrorCode::TransportError,
                message: format!("{VENDOR}: the model server reported an error: {message}"),
                recoverable: true,
            }));
        }
        if !self.started {
            self.started = true;
            out.push(StreamEvent::MessageStart {
                model: chunk["model"].as_str().map(str::to_owned),
            });
        }
        if let Some(usage) = chunk.get("usage").filter(|u| u.is_object()) {
            self.usage = Usage {
                prompt_tokens: usage["prompt_tokens"].as_u64().unwrap_or(0),
                completion_tokens: usage["completion_tokens"].as_u64().unwrap_or(0),
            };
        }
        let Some(choice) = chunk["choices"].get(0) else {
            return;
        };
        let delta = &choice["delta"];
        for field in ["reasoning_content", "reasoning"] {
            if let Some(t) = delta[field].as_str().filter(|t| !t.is_empty()) {
                out.push(StreamEvent::ThinkingDelta(t.to_owned()));
            }
        }
        if let Some(t) = delta["content"].as_str().filter(|t| !t.is_empty()) {
            out.push(StreamEvent::ContentDelta(t.to_owned()));
        }
        for call in delta["tool_calls"].as_array().into_iter().flatten() {
            let index = call["index"].as_u64().unwrap_or(0) as usize;
            if self.calls.insert(index) {
                let id = call["id"].as_str().map_or_else(
                    || format!("call_{}", uuid::Uuid::new_v4().simple()),
                    str::to_owned,
                );
                let name = call["function"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned();
                out.push(StreamEvent::ToolUseStart { index, id, name });
            }
            if let Some(args) = call["function"]["arguments"]
                .as_str()
                .filter(|a| !a.is_empty())
            {
                out.push(StreamEvent::ToolInputDelta {
                    index,
                    json: args.to_owned(),
                });
            }
        }
        if let Some(reason) = choice["finish_reason"].as_str() {
            self.stop = Some(match reason {
                "tool_calls" | "function_call" => StopReason::ToolUse,
                "length" => StopReason::MaxTokens,
                _ => StopReason::EndTurn,
            });
        }
    }

    fn is_done(&self) -> bool {
        self.done
    }

    fn finish(&mut self, out: &mut Vec<StreamEvent>) {
        // Some servers close without `[DONE]` after a finish_reason; a stream
        // with no finish_reason at all was cut.
        if self.stop.is_some() {
            self.complete(out);
        } else {
            out.push(cut_short(VENDOR));
        }
    }
}
