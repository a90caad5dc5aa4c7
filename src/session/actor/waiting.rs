//! A message sent during a run, as the chat keeps it until a run takes it
//! (what `queue.rs` does with it).

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
