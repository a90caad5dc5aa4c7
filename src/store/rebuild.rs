//! A rebuild of the search index from the log (`agentwire reindex`): the
//! stored envelopes it reads, handed back as the batches an append would
//! have indexed, so both stores rebuild with the code their appends run.

use uuid::Uuid;

use super::{AppendBatch, NewEnvelope};

/// The kinds of envelope the index and the list read, as the log names
/// them: a rebuild reads only these.
pub const INDEXED_KINDS: [&str; 2] = ["chat.text", "chat.title"];

/// A stored envelope as a rebuild reads it: `(seq, kind, ts_ms, json)`.
pub type Logged = (u64, String, i64, String);

/// Stored envelopes of one chat (in seq order)
/// as the batch an append would have indexed: a rebuild hands it to the
/// same code the append's transaction runs. Kinds the index does not read
/// are left out.
pub fn as_logged(chat_id: Uuid, rows: Vec<Logged>) -> AppendBatch {
    let envelopes = rows
        .into_iter()
        .filter_map(|(seq, kind, ts_ms, json)| {
            let kind = INDEXED_KINDS.into_iter().find(|k| *k == kind)?;
            Some(NewEnvelope {
                seq,
                kind,
                ts_ms,
                corr: None,
                client_msg_id: None,
                json: json.into(),
            })
        })
        .collect();
    AppendBatch {
        chat_id,
        envelopes,
        state: None,
        conversation_state: None,
        fence: None,
    }
}
