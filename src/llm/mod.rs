//! Models: the seam every provider implements, and the HTTP providers.
//!
//! [`Provider`] is shaped like seed 000's `StreamChat`: a [`ChatRequest`] in, a
//! stream of [`StreamEvent`]s out. One file per vendor wire format
//! (`openai`, `anthropic`, `gemini`, `ollama`), each a request encoder and a
//! stream decoder; `transport` holds what they share (the HTTP client,
//! retries, error mapping, stream plumbing). The scripted provider lives with
//! the agents (its rules are part of the agent file).
//!
//! Uses `protocol` (for error codes) only.

mod anthropic;
mod gemini;
mod ollama;
mod openai;
mod transport;

pub use anthropic::Anthropic;
pub use gemini::Gemini;
pub use ollama::Ollama;
pub use openai::OpenAi;
pub use transport::{Endpoint, http_client};

use async_trait::async_trait;
use futures_util::stream::BoxStream;
use serde_json::Value;

use crate::protocol::ErrorCode;

/// One model call.
#[derive(Debug, Clone, Default)]
pub struct ChatRequest {
    pub system_prompt: String,
    /// The conversation so far, oldest first.
    pub messages: Vec<Message>,
    /// Tools the model may call.
    pub tools: Vec<ToolDefinition>,
    /// Output token limit.
    pub max_tokens: u32,
}

/// A message of the conversation.
#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    User {
        text: String,
    },
    Assistant {
        text: String,
        tool_calls: Vec<ToolCall>,
    },
    /// Another participant's turn in a group chat, as the model being asked
    /// sees it: `name` is the member who said it, as a `name: ` prefix of a
    /// user turn (and in OpenAI's `name` field too).
    Peer {
        name: String,
        text: String,
    },
    /// The result of the assistant's tool call `id`.
    ToolResult {
        id: String,
        name: String,
        content: String,
        is_error: bool,
    },
}

/// A tool call the model made.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    pub input: Value,
}

/// A tool as the model sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolDefinition {
    pub name: String,
    pub description: String,
    pub input_schema: Value,
}

/// Why the model stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    EndTurn,
    ToolUse,
    MaxTokens,
}

/// Token counts of one model call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Usage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
}

/// A failure of the model call, with the contract error code it maps to.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct ProviderError {
    pub code: ErrorCode,
    pub message: String,
    pub recoverable: bool,
}

/// What a provider streams back.
#[derive(Debug, Clone, PartialEq)]
pub enum StreamEvent {
    /// The model started generating.
    MessageStart,
    /// A fragment of the answer.
    ContentDelta(String),
    /// A fragment of reasoning (logged, not shown).
    ThinkingDelta(String),
    /// The model calls a tool. `index` orders the calls of one turn and ties
    /// input deltas to their call (calls may interleave).
    ToolUseStart {
        index: usize,
        id: String,
        name: String,
    },
    /// A fragment of the JSON input of tool call `index`.
    ToolInputDelta { index: usize, json: String },
    /// The model finished this turn.
    MessageComplete { stop: StopReason, usage: Usage },
    /// The call failed.
    Error(ProviderError),
}

/// A model.
#[async_trait]
pub trait Provider: Send + Sync + 'static {
    /// Starts one model call.
    ///
    /// # Errors
    /// The call could not be started (bad configuration, unreachable server).
    /// Failures after the start arrive as [`StreamEvent::Error`].
    async fn stream_chat(
        &self,
        request: ChatRequest,
    ) -> Result<BoxStream<'static, StreamEvent>, ProviderError>;
}

impl Message {
    /// The text of a turn seen by a vendor without a name field.
    pub fn prefixed(name: &str, text: &str) -> String {
        format!("{name}: {text}")
    }
}

/// One model call without tools: its whole text, or why it failed; the
/// call's usage is added to `usage`.
///
/// # Errors
/// The provider's message.
pub async fn complete(
    provider: &dyn Provider,
    system_prompt: &str,
    messages: Vec<Message>,
    max_tokens: u32,
    usage: &mut Usage,
) -> Result<String, String> {
    use futures_util::StreamExt;

    let request = ChatRequest {
        system_prompt: system_prompt.to_owned(),
        messages,
        tools: Vec::new(),
        max_tokens,
    };
    let mut stream = provider.stream_chat(request).await.map_err(|e| e.message)?;
    let mut text = String::new();
    while let Some(event) = stream.next().await {
        match event {
            StreamEvent::ContentDelta(t) => text.push_str(&t),
            StreamEvent::MessageComplete { usage: u, .. } => {
                usage.prompt_tokens += u.prompt_tokens;
                usage.completion_tokens += u.completion_tokens;
            }
            StreamEvent::Error(e) => return Err(e.message),
            _ => {}
        }
    }
    Ok(text)
}

#[cfg(test)]
#[path = "peer_tests.rs"]
mod peer_tests;
