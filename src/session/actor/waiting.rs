//! Plain data the actor's modules share, kept in a leaf so none imports
//! another for it: a message sent during a run, as the chat keeps it until
//! a run takes it (what `queue.rs` does with it), and the marks a batch's
//! envelopes carry.

/// A message sent during a run, waiting for one (`queue.rs`).
#[derive(Debug)]
pub(super) struct Queued {
    /// Its `chat.queued`.
    pub(super) seq: u64,
    pub(super) text: String,
    pub(super) mode: crate::protocol::MultitaskStrategy,
    /// What its request adds to the run that takes it (in memory only: a
    /// message restored after a restart runs without a bearer).
    pub(super) extras: crate::session::handle::RunExtras,
}

/// The waiting messages of a chat, in the order runs take them.
pub(super) type Queue = std::collections::VecDeque<Queued>;

/// What a run's envelopes carry for a restart (`Envelope::context_type` and
/// `run_usage`).
#[derive(Default)]
pub(super) struct Marks {
    /// On the first envelope: the user's message that starts the run.
    pub(super) context_type: Option<String>,
    /// On the first envelope that can carry it.
    pub(super) run_usage: Option<std::collections::BTreeMap<String, crate::protocol::AgentUsage>>,
    /// On the batch's user texts, in order: the `chat.queued` each takes.
    pub(super) queued: Vec<u64>,
    /// The batch's first user text starts a run.
    pub(super) starts_run: bool,
    /// The batch's agent text is what a stopped run had said (`partial`).
    pub(super) partial: bool,
}
