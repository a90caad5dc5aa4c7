//! The cloneable handle to a chat actor, and the messages it sends.

use serde_json::{Map, Value};
use tokio::sync::{mpsc, oneshot};

use super::{SessionError, Subscriber};

/// The answer to a command.
pub(super) type Reply = oneshot::Sender<Result<(), SessionError>>;

/// Everything a chat actor is asked to do. Every command carries a reply, so a
/// command lost to an actor that just stopped shows up as [`Gone`] and the
/// registry retries on a fresh actor.
#[derive(Debug)]
pub(super) enum Command {
    /// Answer once loaded (start-up recovery of interrupted runs).
    Touch {
        reply: Reply,
    },
    Start {
        user: String,
        agent: String,
        message: Option<String>,
        extras: RunExtras,
        /// Who follows the chat from now on (`None`: nobody, as REST creates it).
        sub: Option<Subscriber>,
        reply: Reply,
    },
    /// Subscribe; with `after`, replay what follows it first.
    Resume {
        user: String,
        after: Option<u64>,
        sub: Subscriber,
        reply: Reply,
    },
    UserMessage {
        user: String,
        text: String,
        client_msg_id: Option<String>,
        extras: RunExtras,
        reply: Reply,
    },
    SubmitInput {
        user: String,
        request_id: String,
        text: String,
        reply: Reply,
    },
    ComponentResult {
        user: String,
        corr: String,
        data: Value,
        reply: Reply,
    },
    ArtifactPatch {
        user: String,
        corr: String,
        patch: Value,
        reply: Reply,
    },
    Cancel {
        user: String,
        reply: Reply,
    },
    /// Archive the chat.
    Archive {
        user: String,
        reply: Reply,
    },
    /// Switch the chat's model (already resolved from an alias).
    SetModel {
        user: String,
        model: String,
        reply: Reply,
    },
    Unsubscribe {
        conn_id: u64,
        reply: Reply,
    },
}

/// What a request adds to the run it starts. Never stored, never logged.
#[derive(Clone, Default)]
pub struct RunExtras {
    /// Forwarded to the run's HTTP tools.
    pub bearer: Option<String>,
    pub context_type: Option<String>,
    /// The UI state for this run; at `chat.start` also kept with the chat.
    pub context: Option<Map<String, Value>>,
}

impl std::fmt::Debug for RunExtras {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunExtras")
            .field("bearer", &self.bearer.as_ref().map(|_| "<redacted>"))
            .field("context_type", &self.context_type)
            .finish_non_exhaustive()
    }
}

/// The actor stopped before answering; ask a fresh one.
#[derive(Debug)]
pub(super) struct Gone;

/// A chat actor's mailbox.
#[derive(Debug, Clone)]
pub(super) struct Handle {
    pub(super) tx: mpsc::Sender<Command>,
}

impl Handle {
    /// Sends a command built around a fresh reply channel and awaits the answer.
    pub(super) async fn ask(
        &self,
        make: impl FnOnce(Reply) -> Command,
    ) -> Result<Result<(), SessionError>, Gone> {
        let (reply, answer) = oneshot::channel();
        self.tx.send(make(reply)).await.map_err(|_| Gone)?;
        answer.await.map_err(|_| Gone)
    }
}
