//! Files (issue 36): the records users and tools see — an owner, the chat a
//! file came in, a name, a sniffed media type — over blobs, each content
//! stored once per owner by its SHA-256, in chunks of [`CHUNK_BYTES`], so
//! neither an upload nor a download holds a whole file in memory.
//!
//! [`Blobs`] is where contents live: the log's own database by default
//! (both stores implement it); an object store can implement it later
//! without the records changing.

use async_trait::async_trait;
use uuid::Uuid;

use super::error::StoreError;

/// The bytes of one stored chunk (the last of a blob may be shorter).
pub const CHUNK_BYTES: usize = 512 * 1024;

/// A file as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileRecord {
    pub id: Uuid,
    pub owner: String,
    /// The chat it was uploaded to (or produced in).
    pub chat_id: Uuid,
    pub name: String,
    /// Sniffed from the content, never the client's word alone.
    pub media_type: String,
    pub size: u64,
    /// The blob: the content's SHA-256, lowercase hex.
    pub sha256: String,
    /// Unix milliseconds.
    pub created_at: i64,
}

/// How a file is recorded: its staged chunks, and the owner's quota.
#[derive(Debug, Clone, Copy)]
pub struct Put {
    /// The upload whose staged chunks are the content.
    pub upload: Uuid,
    /// The bytes the owner's contents may take, this one included.
    pub max_owner_bytes: u64,
}

/// What became of a file to record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kept {
    Recorded,
    /// The chat is another user's.
    ChatTaken,
    /// The owner's contents would take this many bytes, over the quota.
    OverQuota(u64),
}

/// Where file contents live, by owner and digest.
#[async_trait]
pub trait Blobs: Send + Sync {
    /// Stores chunk `idx` (from 0) of `owner`'s upload `upload`, staged
    /// until the file is recorded ([`Store::put_file`](super::Store::put_file)).
    async fn stage_chunk(
        &self,
        owner: &str,
        upload: Uuid,
        idx: u32,
        data: &[u8],
    ) -> Result<(), StoreError>;

    /// Drops what an upload staged (it failed or was refused).
    async fn discard(&self, owner: &str, upload: Uuid) -> Result<(), StoreError>;

    /// Chunk `idx` of `owner`'s blob `sha256`; `None` past its end.
    async fn chunk(
        &self,
        owner: &str,
        sha256: &str,
        idx: u32,
    ) -> Result<Option<Vec<u8>>, StoreError>;

    /// Whether `owner` has the blob `sha256`.
    async fn has(&self, owner: &str, sha256: &str) -> Result<bool, StoreError>;

    /// The bytes of `owner`'s blobs (each content once).
    async fn owner_bytes(&self, owner: &str) -> Result<u64, StoreError>;
}

/// The staged name of an upload's chunks.
pub(crate) fn staged(upload: Uuid) -> String {
    format!("upload:{upload}")
}

/// The most characters of a file's name.
const MAX_NAME_CHARS: usize = 255;

/// What a file starting with `head` is: its magic bytes' type (HTML and
/// XML are known by their start, and refused unless configured); else, for
/// UTF-8 text without NULs, the declared text kind (`text/csv`,
/// `text/markdown`, `application/json`) or `text/plain` — never what the
/// client declared beyond those (an SVG declared as such is text); else
/// `application/octet-stream`.
pub fn sniff(head: &[u8], declared: Option<&str>) -> String {
    if let Some(kind) = infer::get(head) {
        return kind.mime_type().to_owned();
    }
    let text = match std::str::from_utf8(head) {
        Ok(_) => true,
        // A character cut by the end of the head.
        Err(e) => e.error_len().is_none(),
    };
    if !text || head.contains(&0) {
        return "application/octet-stream".into();
    }
    match declared {
        Some(t @ ("text/csv" | "text/markdown" | "application/json")) => t.to_owned(),
        _ => "text/plain".into(),
    }
}

/// A name safe to show and to put in `Content-Disposition`.
pub fn clean_name(name: Option<&str>) -> String {
    let cleaned: String = name
        .unwrap_or("")
        .chars()
        .map(|c| {
            // Controls, path separators, quotes, and the invisible marks
            // that reorder or hide text (U+202E shows `gpj.exe` as `exe.jpg`).
            if c.is_control()
                || matches!(c, '/' | '\\' | '"')
                || matches!(c, '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{FEFF}')
            {
                '_'
            } else {
                c
            }
        })
        .take(MAX_NAME_CHARS)
        .collect();
    let cleaned = cleaned.trim();
    if cleaned.is_empty() || cleaned == "." || cleaned == ".." {
        "file".into()
    } else {
        cleaned.to_owned()
    }
}
