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
