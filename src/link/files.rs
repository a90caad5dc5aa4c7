//! A run's files (issue 36): those its messages attach, read from the
//! store on the run's own task before a model call, and those its tools
//! produce, kept in the store and named from the log.

use std::collections::HashMap;
use std::sync::Arc;

use base64::Engine as _;
use sha2::Digest;
use uuid::Uuid;

use crate::llm::{File, FileContent, Message};
use crate::protocol::Attachment;
use crate::store::Store;
use crate::store::files::{CHUNK_BYTES, FileRecord, Kept, Put, clean_name, sniff};

/// Bytes of files (before base64) one model request carries at most: the
/// newest files first; older ones are named in a note instead (vendors
/// refuse larger requests: Anthropic's whole request is 32 MB).
pub const REQUEST_FILE_BYTES: u64 = 20 << 20;

/// Characters of a text file a model reads at most.
const TEXT_CHARS: usize = 100_000;

/// Bytes of a text file read at most: enough for `TEXT_CHARS` characters.
const TEXT_BYTES: u64 = TEXT_CHARS as u64 * 4;

/// A run's chat's files: its owner's, in the chat.
pub struct RunFiles {
    store: Arc<dyn Store>,
    owner: String,
    chat_id: Uuid,
    /// What a tool's file may be (size, type, the owner's quota).
    limits: crate::config::FileLimits,
    /// What the run's requests have read: one budget for the run (its
    /// history and what steers it), each content read once.
    read: tokio::sync::Mutex<Read>,
}

#[derive(Default)]
struct Read {
    /// Bytes of files the run's requests may still carry.
    budget: u64,
    by_digest: HashMap<String, FileContent>,
}

impl std::fmt::Debug for RunFiles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunFiles")
            .field("chat_id", &self.chat_id)
            .finish_non_exhaustive()
    }
}

/// The files of a user's message as a model gets them: named, for the run
/// to read before its model call.
pub fn named(attachments: &[Attachment]) -> Vec<File> {
    attachments
        .iter()
        .map(|a| File {
            name: a.name.clone(),
            media_type: a.media_type.clone(),
            content: FileContent::Stored(a.file_id),
        })
        .collect()
}

/// How a file of a media type goes to a model.
enum Kind {
    Bytes,
    Text,
}

fn kind(media_type: &str) -> Option<Kind> {
    match media_type {
        "image/png" | "image/jpeg" | "image/gif" | "image/webp" | "application/pdf" => {
            Some(Kind::Bytes)
        }
        "application/json" => Some(Kind::Text),
        t if t.starts_with("text/") => Some(Kind::Text),
        _ => None,
    }
}

impl RunFiles {
    /// The files of `owner`'s chat `chat_id`, within `limits`.
    pub fn new(
        store: Arc<dyn Store>,
        owner: String,
        chat_id: Uuid,
        limits: crate::config::FileLimits,
    ) -> Self {
        let read = Read {
            budget: REQUEST_FILE_BYTES,
            by_digest: HashMap::new(),
        };
        Self {
            store,
            owner,
            chat_id,
            limits,
            read: tokio::sync::Mutex::new(read),
        }
    }

    /// Reads the files `messages` name (oldest first), newest first within
    /// what is left of the run's [`REQUEST_FILE_BYTES`]: every appearance
    /// of a file is charged (each is sent), each content is read once.
    pub async fn read(&self, messages: Vec<&mut Message>) {
        let mut read = self.read.lock().await;
        for message in messages.into_iter().rev() {
            let Message::User { files, .. } = message else {
                continue;
            };
            for f in files.iter_mut().rev() {
                let FileContent::Stored(id) = f.content else {
                    continue;
                };
                f.content = self.read_one(id, &f.media_type, &mut read).await;
            }
        }
    }

    async fn read_one(&self, id: Uuid, media_type: &str, read: &mut Read) -> FileContent {
        let missing = |why: &str| FileContent::Missing(why.to_owned());
        let Some(kind) = kind(media_type) else {
            return missing("no model reads files of this type");
        };
        let file = match self.store.file(id).await {
            Ok(Some(f)) if f.owner == self.owner => f,
            Ok(_) => return missing("it was deleted"),
            Err(e) => {
                tracing::warn!(error = %e, file = %id, "an attached file could not be read");
                return missing("it could not be read");
            }
        };
        // What a request carries of it: a text file's start only.
        let cost = match kind {
            Kind::Bytes => file.size,
            Kind::Text => file.size.min(TEXT_BYTES),
        };
        if cost > read.budget {
            return FileContent::Missing(format!(
                "with the newer files it is over the {} MiB one request carries",
                REQUEST_FILE_BYTES >> 20
            ));
        }
        read.budget -= cost;
        if let Some(content) = read.by_digest.get(&file.sha256) {
            return content.clone();
        }
        let mut bytes = Vec::with_capacity(usize::try_from(cost).unwrap_or(0));
        for idx in 0.. {
            if bytes.len() as u64 >= cost && cost < file.size {
                break; // A text file's start is enough.
            }
            match self
                .store
                .blobs()
                .chunk(&self.owner, &file.sha256, idx)
                .await
            {
                Ok(Some(chunk)) => bytes.extend_from_slice(&chunk),
                Ok(None) => break,
                Err(e) => {
                    tracing::warn!(error = %e, file = %id, "an attached file could not be read");
                    return missing("it could not be read");
                }
            }
        }
        if (bytes.len() as u64) < cost || (cost == file.size && bytes.len() as u64 != file.size) {
            tracing::error!(file = %id, "an attached file's content is incomplete");
            return missing("its content is incomplete");
        }
        let content = match kind {
            Kind::Bytes => FileContent::Base64(
                base64::engine::general_purpose::STANDARD
                    .encode(&bytes)
                    .into(),
            ),
            Kind::Text => FileContent::Text(
                crate::llm::cap_chars(&String::from_utf8_lossy(&bytes), TEXT_CHARS).into(),
            ),
        };
        read.by_digest.insert(file.sha256, content.clone());
        content
    }

    /// Keeps `bytes` as a file named `name`, its type sniffed (`declared`
    /// tells text kinds apart): what the log names it by.
    ///
    /// # Errors
    /// Why it was not kept (too large, the store failed, the chat went).
    pub async fn keep(
        &self,
        name: &str,
        declared: Option<&str>,
        bytes: &[u8],
    ) -> Result<Attachment, String> {
        if bytes.len() as u64 > self.limits.max_file_bytes {
            return Err(format!(
                "it has {} bytes, more than max_file_bytes ({})",
                bytes.len(),
                self.limits.max_file_bytes
            ));
        }
        let media_type = sniff(&bytes[..bytes.len().min(CHUNK_BYTES)], declared);
        if !self.limits.allows(&media_type) {
            return Err(format!(
                "files of type {media_type} are not accepted (file_media_types)"
            ));
        }
        let upload = Uuid::new_v4();
        let blobs = self.store.blobs();
        let failed = |e: crate::store::StoreError| {
            tracing::warn!(error = %e, "a tool's file could not be kept");
            "the store could not keep it".to_owned()
        };
        for (idx, chunk) in bytes.chunks(CHUNK_BYTES).enumerate() {
            let idx = u32::try_from(idx).unwrap_or(u32::MAX);
            if let Err(e) = blobs.stage_chunk(&self.owner, upload, idx, chunk).await {
                let _ = blobs.discard(&self.owner, upload).await;
                return Err(failed(e));
            }
        }
        let record = FileRecord {
            id: Uuid::new_v4(),
            owner: self.owner.clone(),
            chat_id: self.chat_id,
            name: clean_name(Some(name)),
            media_type,
            size: bytes.len() as u64,
            sha256: hex::encode(sha2::Sha256::digest(bytes)),
            created_at: chrono::Utc::now().timestamp_millis(),
        };
        let put = Put {
            upload,
            max_owner_bytes: self.limits.max_user_bytes,
        };
        match self.store.put_file(&record, put).await {
            Ok(Kept::Recorded) => Ok(Attachment {
                file_id: record.id,
                name: record.name,
                media_type: record.media_type,
                size: record.size,
            }),
            Ok(refused) => {
                let _ = blobs.discard(&self.owner, upload).await;
                Err(match refused {
                    Kept::OverQuota(_) => "the user's files are over max_user_file_bytes".into(),
                    _ => "the chat is gone".into(),
                })
            }
            Err(e) => {
                let _ = blobs.discard(&self.owner, upload).await;
                Err(failed(e))
            }
        }
    }
}
