//! The files a run's messages attach, read from the store by the run's own
//! task before the agent speaks (never on the chat's actor): images and
//! PDFs as base64, text files as text, and, for what cannot go, the reason
//! the model is told instead.

use std::collections::HashMap;

use base64::Engine as _;
use uuid::Uuid;

use crate::link::Said;
use crate::llm::{FileContent, Message};
use crate::store::Store;

/// The largest file a model call carries (vendors refuse larger requests:
/// Anthropic's whole request is at most 32 MB, OpenAI's images 20 MB).
pub(super) const MODEL_FILE_BYTES: u64 = 20 << 20;

/// Characters of a text file a model reads at most.
const TEXT_CHARS: usize = 100_000;

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

/// A run, after `delay` (a continued run's, in tests), then the files its
/// messages attach read by its own task.
pub(super) async fn then_run(
    store: std::sync::Arc<dyn Store>,
    mut spec: crate::agent::runtime::RunSpec,
    link: crate::link::RunLink,
    control: crate::link::RunControl,
    delay: std::time::Duration,
) {
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
    let owner = spec.user.clone();
    read_files(store.as_ref(), &owner, &mut spec.history).await;
    crate::agent::runtime::run(spec, link, control).await;
}

/// Reads every file the history's user messages name (each once).
pub(super) async fn read_files(store: &dyn Store, owner: &str, history: &mut [Said]) {
    let mut read: HashMap<Uuid, FileContent> = HashMap::new();
    for said in history {
        let Message::User { files, .. } = &mut said.message else {
            continue;
        };
        for f in files {
            let FileContent::Stored(id) = f.content else {
                continue;
            };
            if let Some(content) = read.get(&id) {
                f.content = content.clone();
                continue;
            }
            let content = self::read(store, owner, id, &f.media_type).await;
            read.insert(id, content.clone());
            f.content = content;
        }
    }
}

async fn read(store: &dyn Store, owner: &str, id: Uuid, media_type: &str) -> FileContent {
    let missing = |why: &str| FileContent::Missing(why.to_owned());
    let Some(kind) = kind(media_type) else {
        return missing("no model reads files of this type");
    };
    let file = match store.file(id).await {
        Ok(Some(f)) if f.owner == owner => f,
        Ok(_) => return missing("it was deleted"),
        Err(e) => {
            tracing::warn!(error = %e, file = %id, "an attached file could not be read");
            return missing("it could not be read");
        }
    };
    if file.size > MODEL_FILE_BYTES {
        return FileContent::Missing(format!(
            "it has {} bytes, more than the {} MiB a model call carries",
            file.size,
            MODEL_FILE_BYTES >> 20
        ));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(file.size).unwrap_or(0));
    for idx in 0.. {
        match store.blobs().chunk(owner, &file.sha256, idx).await {
            Ok(Some(chunk)) => bytes.extend_from_slice(&chunk),
            Ok(None) => break,
            Err(e) => {
                tracing::warn!(error = %e, file = %id, "an attached file could not be read");
                return missing("it could not be read");
            }
        }
    }
    match kind {
        Kind::Bytes => FileContent::Base64(
            base64::engine::general_purpose::STANDARD
                .encode(&bytes)
                .into(),
        ),
        Kind::Text => FileContent::Text(
            crate::tools::cap(&String::from_utf8_lossy(&bytes), TEXT_CHARS).into(),
        ),
    }
}
