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
    /// A request that changes the chat: run by the node that owns the chat,
    /// forwarded there from any other.
    Op {
        /// Boxed: a mailbox's slots are as large as its largest command.
        op: Box<Op>,
        origin: Origin,
        reply: Reply,
    },
    /// `chat.start`: a resume from 0 for a chat this node knows, else an
    /// [`Op::Create`].
    Start {
        user: String,
        agent: String,
        message: Option<String>,
        /// Boxed, as `Op`'s: keeps the mailbox's slots small.
        extras: Box<RunExtras>,
        /// Who follows the chat from now on (`None`: nobody, as REST creates it).
        sub: Option<Subscriber>,
        reply: Reply,
    },
    /// Subscribe; with `after`, replay what follows it first. Served by every
    /// node from its own copy of the log.
    Resume {
        user: String,
        after: Option<u64>,
        sub: Subscriber,
        reply: Reply,
    },
    Unsubscribe {
        conn_id: u64,
        reply: Reply,
    },
}

impl Command {
    /// The reply channel of any command, borrowed.
    pub(super) fn reply(&self) -> &Reply {
        match self {
            Command::Op { reply, .. }
            | Command::Start { reply, .. }
            | Command::Resume { reply, .. }
            | Command::Unsubscribe { reply, .. } => reply,
        }
    }

    /// The reply channel of any command.
    pub(super) fn into_reply(self) -> Reply {
        match self {
            Command::Op { reply, .. }
            | Command::Start { reply, .. }
            | Command::Resume { reply, .. }
            | Command::Unsubscribe { reply, .. } => reply,
        }
    }
}

/// Where an [`Command::Op`] comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Origin {
    /// A client of this node; `attempt` counts forwards that found the chat
    /// had moved.
    Local { attempt: u8 },
    /// Another node forwarded it here, believing this node owns the chat.
    Remote,
}

/// A request that changes a chat. Serializable: it may travel to the chat's
/// owner through PostgreSQL (sealed, see `store::seal`).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub(super) enum Op {
    /// Answer once loaded (start-up recovery of interrupted runs).
    Touch,
    /// Create the chat (it was unknown to the node that got `chat.start`).
    Create {
        user: String,
        agent: String,
        message: Option<String>,
        extras: RunExtras,
    },
    UserMessage {
        user: String,
        text: String,
        client_msg_id: Option<String>,
        extras: RunExtras,
        /// What it does if a run is in flight (`None`: the agent's choice).
        #[serde(default)]
        multitask_strategy: Option<crate::protocol::MultitaskStrategy>,
    },
    SubmitInput {
        user: String,
        request_id: String,
        text: String,
    },
    ComponentResult {
        user: String,
        corr: String,
        data: Value,
    },
    ArtifactPatch {
        user: String,
        corr: String,
        patch: Value,
    },
    Cancel {
        user: String,
    },
    /// End a wait for a person as if its time ran out (an operator's act).
    EndWait {
        user: String,
        id: String,
    },
    /// Pause a template conversation.
    Pause {
        user: String,
    },
    /// Resume a paused template conversation.
    ResumeRun {
        user: String,
    },
    /// Archive the chat.
    Archive {
        user: String,
    },
    /// Delete the chat for good.
    Purge {
        user: String,
    },
    /// `PATCH /v1/chats/{id}`: rename, pin, archive or restore.
    Update {
        user: String,
        title: Option<String>,
        pinned: Option<bool>,
        archived: Option<bool>,
    },
    /// A title made for the chat (by its own actor, after a run).
    Title {
        user: String,
        title: String,
        source: crate::protocol::TitleSource,
        usage: Option<crate::protocol::TitleUsage>,
    },
    /// Run a workflow (in `extras`).
    Workflow {
        user: String,
        extras: RunExtras,
    },
    /// Switch the chat's model (already resolved from an alias).
    SetModel {
        user: String,
        model: String,
    },
    /// `chat.edit`: go on from `text` in place of the user's message `seq`.
    Edit {
        user: String,
        seq: MessageRef,
        text: String,
        client_msg_id: Option<String>,
        extras: RunExtras,
    },
    /// `chat.regenerate`: answer the user's message `seq` again (the last
    /// on the active path if `None`), with `model` (resolved) for that run.
    Regenerate {
        user: String,
        seq: Option<u64>,
        /// Instead of `seq`: the `n`-th (0: the first) user's message that
        /// started a run on the active path (the AI SDK names it so).
        #[serde(default)]
        nth: Option<usize>,
        model: Option<String>,
        extras: RunExtras,
    },
    /// `chat.switch`: make the version holding `to` the active one.
    Switch {
        user: String,
        to: u64,
    },
    /// Mark the chat read up to `seq` (its end if `None`).
    MarkRead {
        user: String,
        seq: Option<u64>,
    },
    /// A backend's post (the server API): `events` logged as `agent`'s
    /// turn, between runs.
    Post {
        user: String,
        agent: String,
        events: Vec<crate::protocol::EventKind>,
    },
    /// Create this chat as a copy of another's path (`POST …/fork`): its
    /// agent, context and model, and the events to log, read already.
    Fork {
        user: String,
        agent: String,
        context: Option<String>,
        model: Option<String>,
        events: Vec<crate::protocol::EventKind>,
        /// The places among `events` of texts marked `partial`.
        #[serde(default)]
        partial: Vec<usize>,
    },
}

impl Op {
    /// The user the request is made for (none for `Touch`).
    pub(super) fn user(&self) -> Option<&str> {
        match self {
            Self::Touch => None,
            Self::Create { user, .. }
            | Self::UserMessage { user, .. }
            | Self::SubmitInput { user, .. }
            | Self::ComponentResult { user, .. }
            | Self::ArtifactPatch { user, .. }
            | Self::Cancel { user }
            | Self::EndWait { user, .. }
            | Self::Pause { user }
            | Self::ResumeRun { user }
            | Self::Archive { user }
            | Self::Purge { user }
            | Self::Update { user, .. }
            | Self::Title { user, .. }
            | Self::SetModel { user, .. }
            | Self::Edit { user, .. }
            | Self::Regenerate { user, .. }
            | Self::Switch { user, .. }
            | Self::Fork { user, .. }
            | Self::Post { user, .. }
            | Self::MarkRead { user, .. }
            | Self::Workflow { user, .. } => Some(user),
        }
    }
}

/// What a request adds to the run it starts. Never stored, never logged (it
/// crosses to another node only sealed).
#[derive(Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct RunExtras {
    /// Forwarded to the run's HTTP tools.
    pub bearer: Option<String>,
    pub context_type: Option<String>,
    /// The UI state for this run; at `chat.start` also kept with the chat.
    pub context: Option<Map<String, Value>>,
    /// The chat's id was derived by the server from the caller's
    /// conversation id: the one way a chat with such an id is created.
    #[serde(default)]
    pub derived_id: bool,
    /// A workflow the user invoked (checked already): the run is its
    /// invocation.
    #[serde(default)]
    pub workflow: Option<WorkflowCall>,
    /// A run a restart cut off, going on (only ever made by the chat's own
    /// actor, so never sent to another node).
    #[serde(skip)]
    pub resumed: Option<crate::agent::runtime::Resumed>,
    /// Tools the client brings with this run (AG-UI's frontend tools),
    /// checked already.
    #[serde(default)]
    pub client_tools: Vec<crate::tools::ClientTool>,
    /// The run goes on from an earlier point of the conversation (an edit
    /// or a regenerate, checked by the chat's actor): its `chat.branch` is
    /// logged in the commit that starts it.
    #[serde(skip)]
    pub branch: Option<BranchStart>,
    /// A continued run that a regenerate began with another model: that
    /// model (its `chat.branch` says which).
    #[serde(skip)]
    pub model: Option<String>,
    /// The files the message attaches, checked and looked up by the node
    /// that took the request (`None`: none named; an edit keeps the edited
    /// message's).
    #[serde(default)]
    pub attachments: Option<Vec<crate::protocol::Attachment>>,
    /// The W3C `traceparent` of the request that started the run (traces
    /// on): the run's span continues that trace, on whichever node runs it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traceparent: Option<String>,
}

/// A user's message that started a run, named by its seq, or by its place
/// among those of the active path (0: the first), as a client that keeps
/// its own message ids (the AI SDK's) names it.
#[derive(Debug, Clone, Copy, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MessageRef {
    Seq(u64),
    Nth(usize),
}

/// Where a run that branches goes on from, and why.
#[derive(Debug, Clone)]
pub struct BranchStart {
    pub at: u64,
    pub reason: crate::protocol::BranchReason,
    /// A model (resolved) for this run only.
    pub model: Option<String>,
}

/// A workflow invocation on its way to the chat.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct WorkflowCall {
    pub id: String,
    pub parameters: Value,
    /// The invocation's `corr` (`workflow_…`).
    pub corr: String,
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

/// A chat actor's mailbox. Commands travel boxed: tokio allocates a
/// channel's slots 32 at a time, and a mailbox of idle chats' actors (one per
/// subscribed connection) then holds 32 pointers, not 32 commands.
#[derive(Debug, Clone)]
pub(super) struct Handle {
    pub(super) tx: mpsc::Sender<Box<Command>>,
}

impl Handle {
    /// Sends a command built around a fresh reply channel and awaits the answer.
    pub(super) async fn ask(
        &self,
        make: impl FnOnce(Reply) -> Command,
    ) -> Result<Result<(), SessionError>, Gone> {
        let (reply, answer) = oneshot::channel();
        self.tx
            .send(Box::new(make(reply)))
            .await
            .map_err(|_| Gone)?;
        answer.await.map_err(|_| Gone)
    }
}

/// What the node tells a following actor without waiting on its mailbox:
/// "the log moved on" and "the chat's owner died". Shared by the actor and
/// its registry entry.
#[derive(Debug, Default)]
pub(super) struct Signal {
    pub(super) wake: tokio::sync::Notify,
    /// The actor follows another node (only followers are woken by commits).
    pub(super) following: std::sync::atomic::AtomicBool,
    /// The node the follower forwards to (0: unknown).
    pub(super) holder: std::sync::atomic::AtomicI64,
    /// Set when that node is gone: try to take the chat over.
    pub(super) take_over: std::sync::atomic::AtomicBool,
    /// The highest seq another node announced for the chat. An owner that
    /// sees one at or past its own next seq has lost the chat.
    pub(super) seen: std::sync::atomic::AtomicU64,
    /// Set when this node's lock was lost for a while: an owner checks that
    /// the lease is still its own.
    pub(super) check_lease: std::sync::atomic::AtomicBool,
    /// Set when a node announced the chat deleted: the actor looks, and
    /// lets its subscribers go.
    pub(super) gone: std::sync::atomic::AtomicBool,
}

impl Signal {
    /// Another node announced the chat's log up to `seq` (0: the chat was
    /// deleted): the actor reads the store.
    pub(super) fn committed(&self, seq: u64) {
        use std::sync::atomic::Ordering;
        if seq == 0 {
            self.gone.store(true, Ordering::Release);
        }
        self.seen.fetch_max(seq, Ordering::AcqRel);
        self.wake.notify_one();
    }
}
