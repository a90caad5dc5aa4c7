//! What every SSE dialect is: an [`Encoder`] from log envelopes to [`Out`]
//! events, and the [`Dialect`]s by their `?dialect=` name. The SSE handlers
//! (`http::sse`) attach each event's `id` (the envelope's seq) and stream.

use serde_json::Value;

use super::agent_chat::AgentChat;
use super::agent_host::AgentHost;
use super::chat::Chat;
use super::threads::Threads;
use crate::protocol::Envelope;

/// One SSE event before its `id` (the envelope's seq) is attached.
#[derive(Debug, Clone, PartialEq)]
pub struct Out {
    /// `None`: a data-only event (the `message` type).
    pub event: Option<&'static str>,
    pub data: String,
}

pub(super) fn out(event: &'static str, data: Value) -> Out {
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
            Self::Chat => Box::new(Chat),
            Self::AgentChat => Box::new(AgentChat::new(conversation)),
            Self::AgentHost => Box::new(AgentHost::default()),
            Self::Threads => Box::new(Threads::default()),
        }
    }
}
