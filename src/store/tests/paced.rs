//! Appends spread thin over many chats, the shape of paced model output: one
//! word per chat per commit. On SQLite they go through the journal first
//! (`store::sqlite::journal`); every read must see them all the same, a taken
//! seq must still be refused, and a restart must lose none.

use std::sync::Arc;

use uuid::Uuid;

use super::{Opener, chat, postgres, spread, sqlite};
use crate::store::*;

/// A word of about 200 bytes; every tenth a tool call, the third a user text.
fn word(seq: u64) -> NewEnvelope {
    let (kind, corr) = if seq.is_multiple_of(10) {
        ("chat.tool_call", Some(format!("c-{seq}")))
    } else {
        ("chat.text", None)
    };
    NewEnvelope {
        seq,
        kind,
        ts_ms: seq as i64,
        corr,
        client_msg_id: (seq == 3).then(|| "m-3".to_owned()),
        json: format!(
            r#"{{"type":"{kind}","seq":{seq},"pad":"{}"}}"#,
            "w".repeat(160)
        )
        .into(),
    }
}

fn batch(chat_id: Uuid, envelopes: Vec<NewEnvelope>) -> AppendBatch {
    AppendBatch {
        chat_id,
        envelopes,
        state: None,
        conversation_state: None,
        fence: None,
    }
}

/// Appends words `from..=to` to every chat, one word per chat per commit.
async fn paced(store: &Arc<dyn Store>, chats: &[Uuid], from: u64, to: u64) {
    for seq in from..=to {
        let batches: Vec<_> = chats.iter().map(|&c| batch(c, vec![word(seq)])).collect();
        store.append(&batches).await.unwrap();
    }
}

/// Every read of every chat sees exactly words `1..=upto`.
async fn reads_see_all(store: &Arc<dyn Store>, chats: &[Uuid], upto: u64) {
    let seqs = |page: &[StoredEnvelope]| page.iter().map(|e| e.seq).collect::<Vec<_>>();
    for &c in chats {
        let all = store.load_after(c, 0, 1000).await.unwrap();
        assert_eq!(seqs(&all), (1..=upto).collect::<Vec<_>>(), "load_after");
        assert_eq!(all[0].json, &*word(1).json, "the JSON as written");
        let some = store.load_after(c, upto - 5, 3).await.unwrap();
        assert_eq!(seqs(&some), vec![upto - 4, upto - 3, upto - 2]);
        let (rest, more) = store.load_bounded(c, 2, 1000, 1 << 20).await.unwrap();
        assert_eq!((seqs(&rest), more), ((3..=upto).collect(), false));
        let (first, more) = store.load_bounded(c, 0, 1000, 1000).await.unwrap();
        assert!(more && !first.is_empty() && first.len() < 10);
        assert_eq!(seqs(&first), (1..=first.len() as u64).collect::<Vec<_>>());
        let (page, more) = store.load_bounded(c, upto - 4, 2, 1 << 20).await.unwrap();
        assert_eq!((seqs(&page), more), (vec![upto - 3, upto - 2], true));
        let kind = word(upto).kind.to_owned();
        assert_eq!(store.last(c).await.unwrap(), Some((upto, kind)));
        assert_eq!(store.transcript(c).await.unwrap().len() as u64, upto);
        assert!(store.has_client_msg_id(c, "m-3").await.unwrap());
        assert!(!store.has_client_msg_id(c, "m-4").await.unwrap());
        let corr = format!("c-{}", upto / 10 * 10);
        let call = store.last_tool_call(c, &corr).await.unwrap();
        assert_eq!(call.map(|e| e.seq), Some(upto / 10 * 10));
    }
}

conformance!(paced_appends_read_back_whole, paced_on);
async fn paced_on(open: Opener) {
    let store = open().await;
    let mut chats = Vec::new();
    for _ in 0..60 {
        chats.push(store.create_chat(&chat("p")).await.unwrap().id);
    }
    paced(&store, &chats, 1, 25).await;
    reads_see_all(&store, &chats, 25).await;
    // Past the size at which SQLite folds a chat's words into its pages
    // (at most 96 KiB: ~490 of these words).
    paced(&store, &chats, 26, 520).await;
    reads_see_all(&store, &chats, 520).await;

    // A taken seq is refused whether it sits in the journal or the table,
    // and the refused commit changes nothing.
    for taken in [vec![word(521), word(520)], vec![word(520)], vec![word(2)]] {
        assert!(store.append(&[batch(chats[0], taken)]).await.is_err());
    }
    // (A store spread over databases commits each database's batches in
    // a transaction of its own: these three are in one.)
    let near: Vec<Uuid> = chats
        .iter()
        .copied()
        .filter(|&c| store.part_of(c) == store.part_of(chats[0]))
        .take(3)
        .collect();
    let words = vec![word(521)];
    let other = batch(near[1], vec![word(521)]);
    assert!(
        store
            .append(&[
                batch(near[0], words),
                other,
                batch(near[2], vec![word(519)])
            ])
            .await
            .is_err()
    );
    reads_see_all(&store, &chats, 520).await;
    // A chat that does not exist is refused too.
    assert!(
        store
            .append(&[batch(Uuid::new_v4(), vec![word(1)])])
            .await
            .is_err()
    );

    paced(&store, &chats, 521, 523).await;
    drop(store);
    let store = open().await;
    reads_see_all(&store, &chats, 523).await;
    paced(&store, &chats, 524, 530).await;
    reads_see_all(&store, &chats, 530).await;
}

/// SQLite only: where the words sit, and that start-up empties the journal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sqlite_journal_is_folded_and_recovered() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agentwire.db");
    let count = |sql: &'static str, chat: Option<Uuid>| {
        let path = path.clone();
        async move {
            let pool = sqlx::SqlitePool::connect(&format!("sqlite://{}", path.display()))
                .await
                .unwrap();
            let n: i64 = sqlx::query_scalar(sql)
                .bind(chat.map(|c| c.to_string()))
                .fetch_one(&pool)
                .await
                .unwrap();
            pool.close().await;
            n
        }
    };
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&path).await.unwrap());
    let (a, b) = (
        store.create_chat(&chat("j")).await.unwrap().id,
        store.create_chat(&chat("j")).await.unwrap().id,
    );
    paced(&store, &[a], 1, 5).await;
    let in_journal = "SELECT COUNT(*) FROM journal WHERE chat_id = ?";
    let in_table = "SELECT COUNT(*) FROM envelopes WHERE chat_id = ?";
    // The first word of a chat this process has not written goes to the
    // table (its last seq is unknown); the next ones to the journal.
    assert_eq!(count(in_table, Some(a)).await, 1);
    assert_eq!(count(in_journal, Some(a)).await, 4);

    // A burst (eight words or more) of a chat with rows journaled joins
    // them: its tail is not folded in the commit that carries it.
    store
        .append(&[batch(a, (6..=13).map(word).collect())])
        .await
        .unwrap();
    assert_eq!(count(in_table, Some(a)).await, 1);
    assert_eq!(count(in_journal, Some(a)).await, 12);

    // Words left alone are folded by a later commit once they are quiet.
    paced(&store, &[a], 14, 15).await;
    assert_eq!(count(in_table, Some(a)).await, 1);
    tokio::time::sleep(std::time::Duration::from_millis(600)).await;
    paced(&store, &[b], 1, 2).await;
    assert_eq!(count(in_table, Some(a)).await, 15);
    reads_see_all(&store, &[a], 15).await;

    // A burst of a chat with nothing journaled fills its pages by itself.
    store
        .append(&[batch(a, (16..=23).map(word).collect())])
        .await
        .unwrap();
    assert_eq!(count(in_table, Some(a)).await, 23);

    // Two batches of a chat in one commit, one after the other, are
    // journaled together; two that take the same seq are refused.
    paced(&store, &[a], 24, 24).await;
    let (w25, w26) = (batch(a, vec![word(25)]), batch(a, vec![word(26)]));
    store.append(&[w25, w26]).await.unwrap();
    // (Rows folded earlier may still wait in the journal's head, deleted
    // 256 at a time.)
    let journaled_after_23 = "SELECT COUNT(*) FROM journal WHERE chat_id = ? AND seq > 23";
    assert_eq!(count(journaled_after_23, Some(a)).await, 3);
    let twice = [batch(a, vec![word(27)]), batch(a, vec![word(27)])];
    assert!(store.append(&twice).await.is_err());
    reads_see_all(&store, &[a], 26).await;

    // A process that dies with words in the journal: the next start moves them.
    paced(&store, &[a], 27, 30).await;
    paced(&store, &[b], 3, 30).await;
    assert!(count("SELECT COUNT(*) FROM journal WHERE ? IS NULL", None).await > 0);
    drop(store);
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&path).await.unwrap());
    assert_eq!(
        count("SELECT COUNT(*) FROM journal WHERE ? IS NULL", None).await,
        0
    );
    assert_eq!(count(in_table, Some(a)).await, 30);
    reads_see_all(&store, &[a, b], 30).await;

    // While a store owns the file, a second one may not open it: it would
    // recover (and delete) the journal the first still counts on.
    let err = SqliteStore::open(&path).await.unwrap_err().to_string();
    assert!(err.contains("in use by another process"), "{err}");

    // A first write after a start that fills a hole below the chat's last seq
    // does not make the store forget what is above it.
    let c = store.create_chat(&chat("j")).await.unwrap().id;
    let upto: Vec<_> = (2..=11).map(word).collect();
    store.append(&[batch(c, upto)]).await.unwrap();
    drop(store);
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&path).await.unwrap());
    store.append(&[batch(c, vec![word(1)])]).await.unwrap();
    for taken in [5, 11] {
        let again = store.append(&[batch(c, vec![word(taken)])]).await;
        assert!(again.is_err(), "seq {taken}");
    }
    store.append(&[batch(c, vec![word(12)])]).await.unwrap();
    reads_see_all(&store, &[c], 12).await;
}

conformance!(chats_created_while_words_commit, created_while_streaming_on);
async fn created_while_streaming_on(open: Opener) {
    let store = open().await;
    let (writer, task) = LogWriter::spawn(store.clone());
    let streaming: Vec<Uuid> = {
        let mut ids = Vec::new();
        for _ in 0..20 {
            ids.push(store.create_chat(&chat("s")).await.unwrap().id);
        }
        ids
    };
    // Words keep committing through the writer while 200 chats are created
    // at once (on SQLite, inside the words' transactions).
    let words = {
        let writer = writer.clone();
        let streaming = streaming.clone();
        tokio::spawn(async move {
            for seq in 1..=40 {
                let commits = streaming
                    .iter()
                    .map(|&c| writer.append(batch(c, vec![word(seq)])));
                for done in futures_util::future::join_all(commits).await {
                    done.unwrap();
                }
            }
        })
    };
    let records: Vec<ChatRecord> = (0..200).map(|i| chat(&format!("u{i}"))).collect();
    let created =
        futures_util::future::join_all(records.iter().map(|r| store.create_chat(r))).await;
    for (record, created) in records.iter().zip(created) {
        let created = created.unwrap();
        assert_eq!((created.id, &created.owner), (record.id, &record.owner));
        assert_eq!(created.context, record.context);
    }
    // Creating one again answers the chat as it is.
    let again = ChatRecord {
        owner: "someone else".into(),
        ..records[7].clone()
    };
    assert_eq!(store.create_chat(&again).await.unwrap().owner, "u7");
    words.await.unwrap();
    reads_see_all(&store, &streaming, 40).await;
    // Each created chat takes words.
    for r in &records[..10] {
        writer.append(batch(r.id, vec![word(1)])).await.unwrap();
    }
    drop(writer);
    task.await.unwrap();
}

/// SQLite only: once no append comes, the writer task folds what is quiet by
/// itself (it does not wait for the next append to carry the folds).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_idle_sqlite_writer_folds_quiet_chats() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agentwire.db");
    let sqlite = Arc::new(SqliteStore::open(&path).await.unwrap());
    let store: Arc<dyn Store> = sqlite.clone();
    let records: Vec<ChatRecord> = (0..30).map(|_| chat("q")).collect();
    let created =
        futures_util::future::join_all(records.iter().map(|r| store.create_chat(r))).await;
    let chats: Vec<Uuid> = created.into_iter().map(|c| c.unwrap().id).collect();
    paced(&store, &chats, 1, 30).await;
    // Fresh words are not due: nothing to fold yet, but work waits.
    assert_eq!(store.tidy().await.unwrap(), Tidy::Later);
    let journaled = || async {
        let pool = sqlx::SqlitePool::connect(&format!("sqlite://{}", path.display()))
            .await
            .unwrap();
        let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM journal")
            .fetch_one(&pool)
            .await
            .unwrap();
        pool.close().await;
        n
    };
    assert!(journaled().await > 800);
    let (writer, task) = LogWriter::spawn(store.clone());
    let started = std::time::Instant::now();
    while journaled().await > 0 {
        assert!(started.elapsed().as_secs() < 20, "the idle writer folds");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(store.tidy().await.unwrap(), Tidy::Done);
    reads_see_all(&store, &chats, 30).await;
    // And reads after a restart see the same.
    drop(writer);
    task.await.unwrap();
    drop((store, sqlite));
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&path).await.unwrap());
    reads_see_all(&store, &chats, 30).await;
}
