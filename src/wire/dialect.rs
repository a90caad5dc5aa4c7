//! The SSE dialects by their `?dialect=` name: where a new dialect is
//! registered.

use super::agent_chat::AgentChat;
use super::agent_host::AgentHost;
use super::chat::Chat;
use super::framer::{Framer, Shows};
use super::sse::Encoder;
use super::threads::Threads;

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
    /// dialect has room for it. A dialect knows a group's run by its
    /// `chat.select_speaker.method`: a stream reads the run from its start.
    pub fn encoder(self, conversation: Option<String>) -> Box<dyn Encoder> {
        match self {
            Self::Chat => Box::new(Chat),
            Self::AgentChat => Box::new(AgentChat::new(conversation)),
            Self::AgentHost => Box::<AgentHost>::default(),
            Self::Threads => Box::<Threads>::default(),
        }
    }

    /// A stream of chat `chat` from the envelope after `from` (the chat is
    /// named in the first event where the dialect has room for it).
    pub fn framer(self, chat: uuid::Uuid, from: u64) -> Framer {
        Framer::new(self.encoder(Some(chat.to_string())), Shows::Response, from)
    }
}
