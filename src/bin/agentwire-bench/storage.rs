//! The storage ceiling: agentwire's own store (the same schema, statements and
//! durability settings as the server), appending the envelopes a `burst` run
//! logs, with nothing else in the way: no actor, no socket, one writer.

use std::sync::Arc;
use std::time::Instant;

use agentwire::store::{
    AppendBatch, ChatRecord, ChatState, NewEnvelope, PgStore, SqliteStore, Store,
};
use serde_json::{Value, json};
use uuid::Uuid;

/// A `chat.print` as the server logs it (~150 bytes).
fn envelope(chat: Uuid, seq: u64) -> NewEnvelope {
    let ts = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    let json = format!(
        r#"{{"type":"chat.print","chat_id":"{chat}","seq":{seq},"ts":"{ts}","agent":"demo","content":"w{seq} "}}"#
    );
    NewEnvelope {
        seq,
        kind: "chat.print",
        ts_ms: chrono::Utc::now().timestamp_millis(),
        corr: None,
        client_msg_id: None,
        json: json.into(),
    }
}

pub async fn open(url: &str) -> anyhow::Result<Arc<dyn Store>> {
    Ok(match url.strip_prefix("sqlite://") {
        Some(path) => Arc::new(SqliteStore::open(std::path::Path::new(path)).await?),
        None => Arc::new(PgStore::open(url, 4).await?),
    })
}

/// Appends `rows` envelopes to a fresh chat per batch size; rows/s of each.
pub async fn run(url: &str, rows: u64, batches: &[usize]) -> anyhow::Result<Value> {
    let store = open(url).await?;
    let mut by_batch = serde_json::Map::new();
    let mut best = 0.0_f64;
    for &size in batches {
        let size = size.max(1);
        let chat = Uuid::new_v4();
        let now = chrono::Utc::now().timestamp_millis();
        store
            .create_chat(&ChatRecord {
                id: chat,
                owner: "bench".into(),
                agent: "demo".into(),
                state: ChatState::Idle,
                context: None,
                model: None,
                archived: false,
                conversation_state: None,
                created_at: now,
                updated_at: now,
                listing: Default::default(),
            })
            .await?;
        let started = Instant::now();
        let mut seq = 1;
        while seq <= rows {
            let end = (seq + size as u64 - 1).min(rows);
            let batch = AppendBatch {
                chat_id: chat,
                envelopes: (seq..=end).map(|s| envelope(chat, s)).collect(),
                state: None,
                conversation_state: None,
                fence: None,
            };
            store.append(std::slice::from_ref(&batch)).await?;
            seq = end + 1;
        }
        let per_s = rows as f64 / started.elapsed().as_secs_f64();
        best = best.max(per_s);
        by_batch.insert(size.to_string(), json!(per_s.round()));
    }
    Ok(json!({
        "rows_per_s_by_batch": by_batch,
        "best_rows_per_s": best.round(),
    }))
}
