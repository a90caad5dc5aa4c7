//! Files on messages (issue 36): what a client names (`attachments:
//! [{file_id}]`) and what the log records of each on the user's
//! `chat.text` (and `chat.queued`).

use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// A file a client attaches to a message: one it uploaded to the same chat.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileRef {
    pub file_id: Uuid,
}

/// A file a user's message attaches, as logged: enough to show it (its
/// bytes are at `GET /v1/files/{file_id}`, never in the log).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attachment {
    pub file_id: Uuid,
    pub name: String,
    /// Sniffed from the content when it was stored.
    pub media_type: String,
    pub size: u64,
}

/// The most files one message may name, whatever the configuration says
/// (the schema's bound; `max_files_per_message` is at most this).
pub const MAX_ATTACHMENTS: usize = 32;
