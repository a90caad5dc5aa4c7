//! The process that owns the file: its lock, the journal's recovery, and the
//! append transaction, run whole on a blocking thread over a connection of
//! its own (`rusqlite`, the same bundled SQLite as sqlx's readers).
//!
//! Through sqlx every statement of a commit is a round trip between the
//! caller's task and sqlx's worker thread; with the two cores busy (hundreds
//! of paced chats, the load generator), each of those waits for a time slice,
//! and a commit of five statements took 10 ms at 500 paced chats. Here a
//! commit is one hand-over to this thread and one back.

use std::fs::{File, TryLockError};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};
use uuid::Uuid;

use super::super::{AppendBatch, NewEnvelope, StoreError};
use super::journal::Plan;

/// Takes the exclusive lock on `<file>-owner` (created 0600 beside it), held
/// while the returned file is open. The journal's tail lives in the owner's
/// memory, so a second process appending, or recovering the journal under a
/// live owner, would corrupt the log: it is refused instead.
pub(super) fn lock(path: &Path) -> Result<File, StoreError> {
    let mut name = path.as_os_str().to_owned();
    name.push("-owner");
    let mut options = std::fs::OpenOptions::new();
    options.create(true).truncate(false).write(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let file = options
        .open(&name)
        .map_err(|e| StoreError::Io(Arc::new(e)))?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(TryLockError::WouldBlock) => {
            Err(StoreError::Io(Arc::new(std::io::Error::other(format!(
                "{} is in use by another process (the embedded store has one owner; \
                 run several nodes on PostgreSQL)",
                path.display()
            )))))
        }
        Err(TryLockError::Error(e)) => Err(StoreError::Io(Arc::new(e))),
    }
}

/// Opens the writing connection on the store's (migrated) file and moves what
/// a previous owner left in the journal into `envelopes` (rows it had already
/// folded are there and are skipped), so the tail starts empty.
pub(super) fn open(path: &Path) -> rusqlite::Result<Connection> {
    let mut conn = Connection::open(path)?;
    conn.busy_handler(Some(retry_soon))?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", "FULL")?;
    conn.pragma_update(None, "foreign_keys", true)?;
    conn.pragma_update(
        None,
        "wal_autocheckpoint",
        super::checkpoint::BACKSTOP_PAGES,
    )?;
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let moved = tx.execute(
        "INSERT OR IGNORE INTO envelopes (chat_id, seq, type, ts, corr, client_msg_id, payload)
         SELECT chat_id, seq, type, ts, corr, client_msg_id, payload FROM journal ORDER BY id",
        [],
    )?;
    let left = tx.execute("DELETE FROM journal", [])?;
    tx.commit()?;
    if left > 0 {
        tracing::info!(rows = left, moved, "journal recovered into the log");
    }
    Ok(conn)
}

/// The writer's busy handler: while another connection of this process
/// writes (a chat being created through the pool), retry every 100 µs, for up
/// to 10 s. SQLite's own `busy_timeout` sleeps 1, 2, 5, 10, … 100 ms between
/// tries: a word then waited 20–30 ms behind a lock held for a millisecond.
fn retry_soon(tries: i32) -> bool {
    const EVERY: Duration = Duration::from_micros(100);
    const TRIES: i32 = 100_000; // 10 s
    if tries >= TRIES {
        return false;
    }
    std::thread::sleep(EVERY);
    true
}

/// Commits `plan`: the folded rows (`folded`, chat id as text) and the direct
/// rows into `envelopes`, the journal's rows, the journal head's deletion and
/// the chats' new states, all or nothing. Returns the last seq in `envelopes`
/// of each chat in `plan.probe`, read inside the transaction.
pub(super) fn append(
    conn: &mut Connection,
    plan: &Plan,
    folded: &[(String, NewEnvelope)],
    batches: &[AppendBatch],
    now_ms: i64,
) -> rusqlite::Result<Vec<(Uuid, u64)>> {
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
            let row = params![
                chat,
                e.seq as i64,
                e.kind,
                e.ts_ms,
                e.corr,
                e.client_msg_id,
                &*e.json
            ];
            table.execute(row)?;
        }
        // The same columns, after the journal's own id.
        let mut journal = tx.prepare_cached(
            "INSERT INTO journal (chat_id, seq, type, ts, corr, client_msg_id, payload, id)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        )?;
        for &(id, b, r) in &plan.journal {
            let e = &batches[b].envelopes[r];
            let row = params![
                ids[b],
                e.seq as i64,
                e.kind,
                e.ts_ms,
                e.corr,
                e.client_msg_id,
                &*e.json,
                id
            ];
            journal.execute(row)?;
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
    let mut probed = Vec::with_capacity(plan.probe.len());
    for chat in &plan.probe {
        let last: Option<i64> = tx
            .prepare_cached("SELECT MAX(seq) FROM envelopes WHERE chat_id = ?1")?
            .query_row([chat.to_string()], |r| r.get(0))
            .optional()?
            .flatten();
        probed.extend(last.map(|l| (*chat, l as u64)));
    }
    tx.commit()?;
    Ok(probed)
}
