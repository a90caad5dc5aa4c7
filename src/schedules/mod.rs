//! Agents that start on their own: schedules. A schedule starts an agent
//! (or a template) for a user on a cron expression in a time zone, each
//! time in a chat of its own made for that user (so their feed hears of
//! it). Schedules live in the store; every node runs the [`Scheduler`],
//! and a due time fires once across all of them: its chat's id is made
//! from the schedule and the due time (two nodes firing it start one
//! chat), and the schedule moves on by a conditional update.
//!
//! Uses `store`, `session` and `config`.

mod run;
mod spec;

pub use run::Scheduler;
pub use spec::{Missed, Spec};

use uuid::Uuid;

/// The chat a schedule's due time starts: the same on every node, and
/// marked as derived, so no client can take it first (a client's
/// `chat.start` of a marked id is refused).
pub fn chat_for(schedule: Uuid, due_at: i64) -> Uuid {
    use sha2::{Digest, Sha256};
    let mut hash = Sha256::new();
    hash.update(b"agentwire-schedule\0");
    hash.update(schedule.as_bytes());
    hash.update(due_at.to_be_bytes());
    let bytes: [u8; 16] = hash.finalize()[..16].try_into().expect("16 bytes");
    crate::session::marked_chat(bytes)
}
