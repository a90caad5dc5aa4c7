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
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rusqlite::{Connection, OptionalExtension, Transaction, TransactionBehavior, params};
use tokio::sync::oneshot;
use uuid::Uuid;

use super::super::{AppendBatch, ChatRecord, NewEnvelope, StoreError};
use super::journal::Plan;

/// Told when its chat's row is committed.
type Created = oneshot::Sender<Result<(), StoreError>>;

/// Chats waiting to be created, committed by whichever transaction takes the
/// writing connection next: an append's (chats are created in the same
/// commit as the words in flight, no fsync or write lock of their own) or,
/// when none is under way, the creator's own with every chat queued by then.
///
/// Through a pooled connection of their own, 500 chats created at once held
/// SQLite's write lock for a transaction and an fsync each, and every word in
/// flight waited behind them (`bench/notes.md`).
#[derive(Debug, Default)]
pub(super) struct Creates {
    queue: Mutex<Vec<(ChatRecord, Created)>>,
    /// A creator's own commit is started and has not taken the queue yet.
    committing: AtomicBool,
}

impl Creates {
    /// Queues `chat`; the receiver hears when its row is committed. `true`:
    /// the caller starts a commit of its own ([`Self::take_committing`]), as
    /// no other is started yet (so 500 chats created at once wait on one
    /// thread for the writer, not 500).
    pub fn push(&self, chat: ChatRecord) -> (oneshot::Receiver<Result<(), StoreError>>, bool) {
        let (done, created) = oneshot::channel();
        self.queue().push((chat, done));
        (created, !self.committing.swap(true, Ordering::SeqCst))
    }

    /// Everything queued so far, for an append's transaction.
    pub fn take(&self) -> Vec<(ChatRecord, Created)> {
        std::mem::take(&mut *self.queue())
    }

    /// Everything queued so far, for the commit a creator started: a chat
    /// queued from now on starts one of its own.
    pub fn take_committing(&self) -> Vec<(ChatRecord, Created)> {
        self.committing.store(false, Ordering::SeqCst);
        self.take()
    }

    fn queue(&self) -> std::sync::MutexGuard<'_, Vec<(ChatRecord, Created)>> {
        // Pushing and taking cannot panic halfway.
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Tells each of `creates` that its chat is committed (`result`).
pub(super) fn created(creates: Vec<(ChatRecord, Created)>, result: &Result<(), StoreError>) {
    for (_, done) in creates {
        // The creator may have gone away: the row stays, nothing else to do.
        let _ = done.send(result.clone());
    }
}

/// Creates `creates` in a transaction of their own.
pub(super) fn create(conn: &mut Connection, creates: Vec<(ChatRecord, Created)>) {
    if creates.is_empty() {
        return;
    }
    let result = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .and_then(|tx| {
            insert_chats(&tx, creates.iter().map(|(c, _)| c))?;
            tx.commit()
        })
        .map_err(StoreError::from);
    created(creates, &result);
}

/// Inserts chats' rows; one that exists is left as it is (the creator reads
/// the row back: it may be someone else's, or an earlier start's).
fn insert_chats<'a>(
    tx: &Transaction<'_>,
    chats: impl Iterator<Item = &'a ChatRecord>,
) -> rusqlite::Result<()> {
    let mut insert = tx.prepare_cached(
        "INSERT INTO chats (id, owner, agent, state, context, created_at, updated_at, active_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6, ?6) ON CONFLICT (id) DO NOTHING",
    )?;
    for chat in chats {
        insert.execute(params![
            chat.id.to_string(),
            chat.owner,
            chat.agent,
            chat.state.as_str(),
            chat.context,
            chat.created_at
        ])?;
    }
    Ok(())
}

/// Runs `f` on a blocking thread (the writer's connection is `rusqlite`'s).
pub(super) async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, StoreError> + Send + 'static,
) -> Result<T, StoreError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| StoreError::Io(Arc::new(std::io::Error::other(e))))?
}

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

/// Creates the database's folder (0700) and file (0600) when they do not
/// exist yet: the log holds every conversation, so only the server's user may
/// read it. SQLite gives its `-wal` and `-shm` files the database file's mode.
pub(super) fn create_private(path: &Path) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)?;
        }
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(path)
        {
            Ok(_) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
            Err(e) => Err(e),
        }
    }
    #[cfg(not(unix))]
    {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)?;
        }
        Ok(())
    }
}

/// Opens the writing connection on the store's (migrated) file and moves what
/// a previous owner left in the journal into `envelopes` (rows it had already
/// folded are there and are skipped), so the tail starts empty; drops what
/// its unfinished uploads staged.
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
    // Uploads a previous owner did not finish (no upload runs before this
    // process owns the file): their staged chunks.
    let staged = tx.execute(
        "DELETE FROM blob_chunks WHERE blob NOT IN (SELECT chunks FROM blobs)",
        [],
    )?;
    tx.commit()?;
    if left > 0 {
        tracing::info!(rows = left, moved, "journal recovered into the log");
    }
    if staged > 0 {
        tracing::info!(chunks = staged, "unfinished uploads dropped");
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

/// Commits `plan` (after creating `chats`): the folded rows (`folded`, chat id as text) and the direct
/// rows into `envelopes`, the journal's rows, the journal head's deletion and
/// the chats' new states, all or nothing. Returns the last seq in `envelopes`
/// of each chat in `plan.probe`, read inside the transaction.
pub(super) fn append<'a>(
    conn: &mut Connection,
    chats: impl Iterator<Item = &'a ChatRecord>,
    plan: &Plan,
    folded: &[(String, NewEnvelope)],
    batches: &[AppendBatch],
    now_ms: i64,
    outbox: bool,
) -> rusqlite::Result<Vec<(Uuid, u64)>> {
    let started = std::time::Instant::now();
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let locked = started.elapsed();
    insert_chats(&tx, chats)?;
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
        for (chat, model, day, prompt, completion, cost, unpriced) in
            crate::store::usage::runs_of(batches)
        {
            tx.prepare_cached(crate::store::usage::ADD)?
                .execute(params![
                    chat.to_string(),
                    model,
                    day,
                    prompt,
                    completion,
                    cost,
                    unpriced
                ])?;
        }
        if outbox {
            let effects = crate::store::outbox::effects_of(batches);
            for (id, chat, seq, event) in effects.events {
                tx.prepare_cached(
                    "INSERT INTO webhook_outbox (id, chat_id, seq, event, created_at, next_at)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?5) ON CONFLICT (id) DO NOTHING",
                )?
                .execute(params![id, chat, seq, event, now_ms])?;
            }
            for (chat, seq, event, key) in effects.opens {
                tx.prepare_cached(
                    "INSERT INTO webhook_waits (chat_id, seq, event, wait_key, opened_at)
                     VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT DO NOTHING",
                )?
                .execute(params![chat, seq, event, key, now_ms])?;
            }
            for (chat, seq, key) in effects.closes {
                tx.prepare_cached(crate::store::outbox::CLOSE_WAITS)?
                    .execute(params![chat, seq, key])?;
            }
        }
        for (b, batch) in batches.iter().enumerate() {
            super::listing::index(&tx, &ids[b], batch)?;
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
    let written = started.elapsed();
    tx.commit()?;
    let took = started.elapsed();
    if took >= SLOW_COMMIT {
        // Every word in flight waited for it: where did the time go?
        tracing::debug!(
            ms = took.as_millis(),
            lock_ms = locked.as_millis(),
            statements_ms = (written - locked).as_millis(),
            sync_ms = (took - written).as_millis(),
            journaled = plan.journal.len(),
            direct = plan.direct.len(),
            folded = folded.len(),
            deleted_below = plan.delete_below,
            "slow commit"
        );
    }
    Ok(probed)
}

/// A commit at least this long is logged (at `debug`) with its parts.
const SLOW_COMMIT: std::time::Duration = std::time::Duration::from_millis(10);

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::super::super::{ChatState, Store};
    use super::super::SqliteStore;
    use super::*;

    fn record() -> ChatRecord {
        ChatRecord {
            id: Uuid::new_v4(),
            owner: "o".into(),
            agent: "demo".into(),
            state: ChatState::Idle,
            context: None,
            model: None,
            archived: false,
            conversation_state: None,
            created_at: 1,
            updated_at: 1,
            listing: Default::default(),
        }
    }

    fn word(chat_id: Uuid, seq: u64) -> AppendBatch {
        AppendBatch {
            chat_id,
            envelopes: vec![NewEnvelope {
                seq,
                kind: "chat.text",
                ts_ms: 1,
                corr: None,
                client_msg_id: None,
                json: Arc::from(format!(r#"{{"seq":{seq}}}"#)),
            }],
            state: None,
            conversation_state: None,
            fence: None,
        }
    }

    /// A chat queued for creation is created even when the append that
    /// carried it fails (on a batch that is not its own).
    #[tokio::test]
    async fn a_failed_append_still_creates_the_chats_it_carried() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(&dir.path().join("db")).await.unwrap();
        let a = store.create_chat(&record()).await.unwrap().id;
        store.append(&[word(a, 1)]).await.unwrap();
        let b = record();
        let (mut created, _) = store.creates.push(b.clone());
        let s = store.clone();
        let taken = tokio::task::spawn_blocking(move || s.commit(&[word(a, 1)]))
            .await
            .unwrap();
        assert!(taken.is_err(), "seq 1 is taken");
        assert!(matches!(created.try_recv(), Ok(Ok(()))));
        assert_eq!(
            store.chat(b.id).await.unwrap().map(|c| c.owner),
            Some("o".into())
        );
        store.append(&[word(b.id, 1)]).await.unwrap();
        assert_eq!(store.last(b.id).await.unwrap().map(|l| l.0), Some(1));
    }
}
