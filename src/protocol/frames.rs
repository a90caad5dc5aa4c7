//! The frames a connection gets that are not envelopes of the log: never
//! persisted, no `seq`.

use serde_json::Value;
use uuid::Uuid;

use super::{ErrorCode, now_ts};

/// `chat.resume_boundary`: sent after a replay, never persisted, no `seq`.
pub fn resume_boundary(chat_id: Uuid, last_seq: u64, recovered: bool) -> String {
    serde_json::json!({
        "type": "chat.resume_boundary",
        "chat_id": chat_id,
        "last_seq": last_seq,
        "recovered": recovered,
        "ts": now_ts(),
    })
    .to_string()
}

/// A `chat.error` for one connection's bad message: not persisted, no `seq`,
/// `chat_id` null when it could not be read.
pub fn connection_error(
    chat_id: Option<Uuid>,
    code: ErrorCode,
    message: &str,
    details: Option<Value>,
    recoverable: bool,
) -> String {
    let mut v = serde_json::json!({
        "type": "chat.error",
        "chat_id": chat_id,
        "message": message,
        "error_code": code,
        "recoverable": recoverable,
        "ts": now_ts(),
    });
    if let Some(d) = details {
        v["details"] = d;
    }
    v.to_string()
}

/// The answer to `ping`.
pub fn pong() -> String {
    r#"{"type":"pong"}"#.to_owned()
}
