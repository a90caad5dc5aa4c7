//! What changes the file besides the appends, on the writer's connection:
//! a chat purged, and the search index rebuilt from the log.

use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};
use uuid::Uuid;

use super::listing;
use crate::store::Reindexed;
use crate::store::rebuild::{INDEXED_KINDS, Logged, as_logged};

/// Deletes every row of `chat` in one transaction: its journaled and
/// folded envelopes, its search rows (found through its owner's token, as
/// `chat_id` is not indexed), its files and the contents no other file of
/// the owner holds, its answers, its database link and its row.
/// `false`: no such chat. The caller forgets the chat's tail.
pub(super) fn purge(conn: &mut Connection, chat: &Uuid) -> rusqlite::Result<bool> {
    let id = chat.to_string();
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let owner: Option<(String, String)> = tx
        .query_row(
            "SELECT owner, 'o' || hex(owner) FROM chats WHERE id = ?1",
            [&id],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()?;
    let Some((user, owner)) = owner else {
        return Ok(false);
    };
    // The chat's files, and the contents no other file of the owner holds.
    for sql in [
        "DELETE FROM blob_chunks WHERE owner = ?1 AND blob IN (
             SELECT chunks FROM blobs WHERE owner = ?1 AND sha256 IN (
                 SELECT sha256 FROM files WHERE owner = ?1 AND chat_id = ?2 EXCEPT
                 SELECT sha256 FROM files WHERE owner = ?1 AND chat_id <> ?2))",
        "DELETE FROM blobs WHERE owner = ?1 AND sha256 IN (
             SELECT sha256 FROM files WHERE owner = ?1 AND chat_id = ?2 EXCEPT
             SELECT sha256 FROM files WHERE owner = ?1 AND chat_id <> ?2)",
        "DELETE FROM files WHERE chat_id = ?2 AND owner = ?1",
    ] {
        tx.execute(sql, params![user, id])?;
    }
    tx.execute(
        "DELETE FROM chat_search WHERE rowid IN (
             SELECT rowid FROM chat_search WHERE chat_search MATCH ?1 AND chat_id = ?2)",
        params![format!("owner : \"{owner}\""), id],
    )?;
    for table in [
        "journal",
        "envelopes",
        "template_answers",
        "chat_databases",
        "webhook_waits",
    ] {
        tx.execute(&format!("DELETE FROM {table} WHERE chat_id = ?1"), [&id])?;
    }
    tx.execute("DELETE FROM chats WHERE id = ?1", [&id])?;
    tx.commit()?;
    Ok(true)
}

/// Empties the index and the chats' list columns, then indexes every
/// `chat.text` and `chat.title` of the log, chat by chat, with the code an
/// append runs: one transaction, so a rebuild cut short changes nothing.
/// Run on a file no server has open (the journal was folded at opening).
pub(super) fn reindex(conn: &mut Connection) -> rusqlite::Result<Reindexed> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    tx.execute("DELETE FROM chat_search", [])?;
    // What users read is not in the log: kept as it is (indexing again
    // would count the agents' texts a second time).
    tx.execute(
        "CREATE TEMP TABLE kept_reads AS SELECT id, unread, read_seq FROM chats",
        [],
    )?;
    let chats = tx.execute(
        "UPDATE chats SET title = NULL, title_seq = NULL, preview = NULL, active_at = created_at",
        [],
    )?;
    let mut rows = 0;
    {
        let mut read = tx.prepare(&format!(
            "SELECT chat_id, seq, type, ts, payload FROM envelopes
             WHERE type IN ('{}', '{}') ORDER BY chat_id, seq",
            INDEXED_KINDS[0], INDEXED_KINDS[1]
        ))?;
        let mut cursor = read.query([])?;
        let mut chat: Option<String> = None;
        let mut logged: Vec<Logged> = Vec::new();
        let flush = |chat: &str, logged: Vec<_>| -> rusqlite::Result<u64> {
            let id = Uuid::parse_str(chat).unwrap_or_default();
            let batch = as_logged(id, logged);
            listing::index(&tx, chat, &batch)?;
            Ok(batch.envelopes.len() as u64)
        };
        while let Some(row) = cursor.next()? {
            let id: String = row.get(0)?;
            if chat.as_deref() != Some(&id)
                && let Some(done) = chat.replace(id)
            {
                rows += flush(&done, std::mem::take(&mut logged))?;
            }
            let seq: i64 = row.get(1)?;
            logged.push((seq as u64, row.get(2)?, row.get(3)?, row.get(4)?));
        }
        if let Some(done) = chat {
            rows += flush(&done, logged)?;
        }
    }
    tx.execute(
        "UPDATE chats SET unread = k.unread, read_seq = k.read_seq
         FROM kept_reads AS k WHERE k.id = chats.id",
        [],
    )?;
    tx.execute("DROP TABLE kept_reads", [])?;
    tx.commit()?;
    Ok(Reindexed {
        chats: chats as u64,
        rows,
    })
}
