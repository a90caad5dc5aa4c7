//! The append transaction, run whole on a blocking thread over a connection
//! of its own (`rusqlite`, the same bundled SQLite as sqlx's readers).
//!
//! Through sqlx every statement of a commit is a round trip between the
//! caller's task and sqlx's worker thread; with the two cores busy (hundreds
//! of paced chats, the load generator), each of those waits for a time slice,
//! and a commit of five statements took 10 ms at 500 paced chats. Here a
//! commit is one hand-over to this thread and one back.

use std::path::Path;
use std::time::Duration;

use rusqlite::{Connection, TransactionBehavior, params};

use super::super::{AppendBatch, NewEnvelope};
use super::journal::Plan;

/// Opens the writing connection on the store's (migrated) file.
pub(super) fn open(path: &Path) -> rusqlite::Result<Connection> {
    let conn = Connection::open(path)?;
    conn.busy_timeout(Duration::from_secs(10))?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", "FULL")?;
    conn.pragma_update(None, "foreign_keys", true)?;
    Ok(conn)
}

/// Commits `plan`: the folded rows (`folded`, chat id as text) and the direct
/// rows into `envelopes`, the journal's rows, the journal head's deletion and
/// the chats' new states, all or nothing.
pub(super) fn append(
    conn: &mut Connection,
    plan: &Plan,
    folded: &[(String, NewEnvelope)],
    batches: &[AppendBatch],
    now_ms: i64,
) -> rusqlite::Result<()> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let ids: Vec<String> = batches.iter().map(|b| b.chat_id.to_string()).collect();
    {
        let mut table = tx.prepare_cached(
            "INSERT INTO envelopes (chat_id, seq, type, ts, corr, client_msg_id, payload)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        )?;
        let direct = plan
            .direct
            .iter()
            .map(|&(b, r)| (ids[b].as_str(), &batches[b].envelopes[r]));
        for (chat, e) in folded.iter().map(|(id, e)| (id.as_str(), e)).chain(direct) {
            table.execute(params![
                chat,
                e.seq as i64,
                e.kind,
                e.ts_ms,
                e.corr,
                e.client_msg_id,
                &*e.json
            ])?;
        }
        let mut journal = tx.prepare_cached(
            "INSERT INTO journal (id, chat_id, seq, type, ts, corr, client_msg_id, payload)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        )?;
        for &(id, b, r) in &plan.journal {
            let e = &batches[b].envelopes[r];
            journal.execute(params![
                id,
                ids[b],
                e.seq as i64,
                e.kind,
                e.ts_ms,
                e.corr,
                e.client_msg_id,
                &*e.json
            ])?;
        }
        if let Some(below) = plan.delete_below {
            tx.prepare_cached("DELETE FROM journal WHERE id < ?1")?
                .execute([below])?;
        }
        for (b, batch) in batches.iter().enumerate() {
            if let Some(state) = batch.state {
                tx.prepare_cached("UPDATE chats SET state = ?1, updated_at = ?2 WHERE id = ?3")?
                    .execute(params![state.as_str(), now_ms, ids[b]])?;
            }
            if let Some(cs) = batch.conversation_state {
                tx.prepare_cached(
                    "UPDATE chats SET conversation_state = ?1, updated_at = ?2 WHERE id = ?3",
                )?
                .execute(params![cs, now_ms, ids[b]])?;
            }
        }
    }
    tx.commit()
}
