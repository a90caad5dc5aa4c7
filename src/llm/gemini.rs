//! Gemini (`POST {base}/v1beta/models/{model}:streamGenerateContent?alt=sse`).
//!
//! Each event is a whole `GenerateContentResponse`: `candidates[0].content.parts`
//! hold `text` (or `thought` text) and complete `functionCall`s; the last
//! carries `finishReason` and `usageMetadata`. The stream just ends.

use async_trait::async_trait;
use futures_util::stream::BoxStream;
use serde_json::{Value, json};

use super::transport::{Decoder, Endpoint, Framing, KeyHeader, Wire, cut_short, malformed};
use super::{
    ChatRequest, Message, Part, Provider, ProviderError, StopReason, StreamEvent, Usage, user_parts,
};
use crate::protocol::ErrorCode;

const VENDOR: &str = "gemini";
const WIRE: Wire = Wire {
    vendor: VENDOR,
    key: KeyHeader::Named("x-goog-api-key"),
    headers: &[],
    framing: Framing::Sse,
};

/// The Gemini API.
#[derive(Debug, Clone)]
pub struct Gemini {
    endpoint: Endpoint,
}

impl Gemini {
    /// `base_url` defaults to `https://generativelanguage.googleapis.com`.
    pub fn new(endpoint: Endpoint) -> Self {
        Self { endpoint }
    }

    /// The request body for `request`. Consecutive function responses share
    /// one `user` turn, as the API expects.
    pub fn body(&self, request: &ChatRequest) -> Value {
        let mut contents: Vec<Value> = Vec::new();
        for m in &request.messages {
            match m {
                Message::User { text, files } if files.is_empty() => user_text(&mut contents, text),
                Message::User { text, files } => {
                    let parts: Vec<Value> = user_parts(text, files, self.endpoint.inputs)
                        .into_iter()
                        .map(|p| match p {
                            Part::Text(text) => json!({"text": text}),
                            Part::Bytes {
                                media_type, data, ..
                            } => json!({"inline_data": {"mime_type": media_type, "data": data}}),
                        })
                        .collect();
                    user_turn(&mut contents, parts);
                }
                Message::Peer { name, text } => {
                    user_text(&mut contents, &Message::prefixed(name, text))
                }
                Message::Assistant { text, tool_calls } => {
                    let mut parts = Vec::new();
                    if !text.is_empty() {
                        parts.push(json!({"text": text}));
                    }
                    for c in tool_calls {
                        parts.push(json!({"functionCall": {"name": c.name, "args": c.input}}));
                    }
                    contents.push(json!({"role": "model", "parts": parts}));
                }
                Message::ToolResult {
                    name,
                    content,
                    is_error,
                    ..
                } => {
                    let key = if *is_error { "error" } else { "content" };
                    let part =
                        json!({"functionResponse": {"name": name, "response": {key: content}}});
                    match contents.last_mut() {
                        Some(last)
                            if last["role"] == "user"
                                && last["parts"][0].get("functionResponse").is_some() =>
                        {
                            last["parts"].as_array_mut().expect("array").push(part);
                        }
                        _ => contents.push(json!({"role": "user", "parts": [part]})),
                    }
                }
            }
        }
        let mut body = json!({
            "contents": contents,
            "generationConfig": {"maxOutputTokens": request.max_tokens},
        });
        if !request.system_prompt.is_empty() {
            body["systemInstruction"] = json!({"parts": [{"text": request.system_prompt}]});
        }
        if !request.tools.is_empty() {
            let decls: Vec<Value> = request
                .tools
                .iter()
                .map(|t| json!({"name": t.name, "description": t.description, "parameters": t.input_schema}))
                .collect();
            body["tools"] = json!([{"functionDeclarations": decls}]);
        }
        body
    }
}

#[async_trait]
impl Provider for Gemini {
    fn names(&self) -> (&'static str, &str) {
        ("gcp.gemini", &self.endpoint.model)
    }

    async fn stream_chat(
        &self,
        request: ChatRequest,
    ) -> Result<BoxStream<'static, StreamEvent>, ProviderError> {
        let url = format!(
            "{}/v1beta/models/{}:streamGenerateContent?alt=sse",
            self.endpoint.base_url, self.endpoint.model
        );
        let body = self.body(&request);
        self.endpoint
            .stream(&WIRE, &url, &body, ResponseDecoder::default())
            .await
    }
}

#[derive(Default)]
struct ResponseDecoder {
    started: bool,
    calls: usize,
    finished: Option<StopReason>,
    usage: Usage,
}

impl Decoder for ResponseDecoder {
    fn feed(&mut self, _event: &str, data: &str, out: &mut Vec<StreamEvent>) {
        let v: Value = match serde_json::from_str(data) {
            Ok(v) => v,
            Err(e) => return out.push(malformed(VENDOR, e)),
        };
        if let Some(error) = v.get("error") {
            return out.push(StreamEvent::Error(ProviderError {
                code: ErrorCode::TransportError,
                message: format!(
                    "{VENDOR}: {}: {}",
                    error["status"].as_str().unwrap_or("error"),
                    error["message"].as_str().unwrap_or("unknown error")
                ),
                recoverable: true,
            }));
        }
        if !self.started {
            self.started = true;
            out.push(StreamEvent::MessageStart {
                model: v["modelVersion"].as_str().map(str::to_owned),
            });
        }
        if let Some(u) = v.get("usageMetadata") {
            self.usage = Usage {
                prompt_tokens: u["promptTokenCount"].as_u64().unwrap_or(0),
                completion_tokens: u["candidatesTokenCount"].as_u64().unwrap_or(0),
            };
        }
        let candidate = &v["candidates"][0];
        for part in candidate["content"]["parts"]
            .as_array()
            .into_iter()
            .flatten()
        {
            if let Some(text) = part["text"].as_str().filter(|t| !t.is_empty()) {
                if part["thought"].as_bool() == Some(true) {
                    out.push(StreamEvent::ThinkingDelta(text.to_owned()));
                } else {
                    out.push(StreamEvent::ContentDelta(text.to_owned()));
                }
            }
            if let Some(call) = part.get("functionCall") {
                let index = self.calls;
                self.calls += 1;
                let id = call["id"].as_str().map_or_else(
                    || format!("call_{}", uuid::Uuid::new_v4().simple()),
                    str::to_owned,
                );
                out.push(StreamEvent::ToolUseStart {
                    index,
                    id,
                    name: call["name"].as_str().unwrap_or_default().to_owned(),
                });
                let args = call.get("args").cloned().unwrap_or_else(|| json!({}));
                out.push(StreamEvent::ToolInputDelta {
                    index,
                    json: args.to_string(),
                });
            }
        }
        if let Some(reason) = candidate["finishReason"].as_str() {
            self.finished = Some(match reason {
                "MAX_TOKENS" => StopReason::MaxTokens,
                _ if self.calls > 0 => StopReason::ToolUse,
                _ => StopReason::EndTurn,
            });
        }
    }

    fn is_done(&self) -> bool {
        false // Gemini's stream ends by closing.
    }

    fn finish(&mut self, out: &mut Vec<StreamEvent>) {
        match self.finished {
            Some(stop) => out.push(StreamEvent::MessageComplete {
                stop,
                usage: self.usage,
            }),
            None => out.push(cut_short(VENDOR)),
        }
    }
}

/// Adds a user text turn: a part of the user turn before it if there is one
/// (a group's members speak one after another; roles alternate).
fn user_text(contents: &mut Vec<Value>, text: &str) {
    user_turn(contents, vec![json!({"text": text})]);
}

/// Parts of a user's turn: after the user turn before (not one of function
/// responses), if one is there, else a turn of their own.
fn user_turn(contents: &mut Vec<Value>, parts: Vec<Value>) {
    match contents.last_mut() {
        Some(last)
            if last["role"] == "user" && last["parts"][0].get("functionResponse").is_none() =>
        {
            if let Some(all) = last["parts"].as_array_mut() {
                all.extend(parts);
            }
        }
        _ => contents.push(json!({"role": "user", "parts": parts})),
    }
}
