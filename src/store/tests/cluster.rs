//! Several nodes on one PostgreSQL: leases, fences, sealed commands and
//! takeovers (skipped without a PostgreSQL server, like the suite).

use uuid::Uuid;

use super::{chat, env};
use crate::store::*;

async fn pg_pair() -> Option<(PgStore, PgCluster, PgCluster)> {
    let server = crate::testing::postgres()?;
    let url = server.fresh_database().await;
    let store = PgStore::open(&url, 4).await.unwrap();
    let a = PgCluster::join(&store).await.unwrap();
    let b = PgCluster::join(&store).await.unwrap();
    Some((store, a, b))
}

fn one(chat_id: Uuid, seq: u64, fence: Option<Fence>) -> AppendBatch {
    AppendBatch {
        chat_id,
        envelopes: vec![env(seq, "chat.text", None, None)],
        state: None,
        conversation_state: None,
        fence,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_is_held_until_released_or_its_node_dies() {
    let Some((store, a, b)) = pg_pair().await else {
        return;
    };
    let id = Uuid::new_v4();
    let Lease::Owned { epoch } = a.acquire(id).await.unwrap() else {
        panic!("a free lease is granted");
    };
    assert_eq!(b.acquire(id).await.unwrap(), Lease::Held { node: a.node() });
    assert_eq!(
        a.acquire(id).await.unwrap(),
        Lease::Owned { epoch: epoch + 1 },
        "a node takes its own lease again, with a new epoch"
    );
    a.release(id, epoch).await.unwrap();
    assert_eq!(
        b.acquire(id).await.unwrap(),
        Lease::Held { node: a.node() },
        "a stale release does nothing"
    );
    a.release(id, epoch + 1).await.unwrap();
    assert!(matches!(b.acquire(id).await.unwrap(), Lease::Owned { .. }));

    // A node whose lock session is gone is dead: its leases are taken over.
    let live = a.live_nodes().await.unwrap();
    assert!(live.contains(&a.node()) && live.contains(&b.node()));
    let other = Uuid::new_v4();
    assert!(matches!(
        a.acquire(other).await.unwrap(),
        Lease::Owned { .. }
    ));
    drop(a);
    let mut taken = false;
    for _ in 0..100 {
        if let Lease::Owned { .. } = b.acquire(other).await.unwrap() {
            taken = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert!(taken, "the lease of a dead node is taken over");
    drop(store);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn appends_are_fenced_by_the_lease() {
    let Some((store, a, b)) = pg_pair().await else {
        return;
    };
    let c = chat("u");
    store.create_chat(&c).await.unwrap();
    let Lease::Owned { epoch } = a.acquire(c.id).await.unwrap() else {
        panic!()
    };
    let fa = Fence {
        node: a.node(),
        epoch,
    };
    store.append(&[one(c.id, 1, Some(fa))]).await.unwrap();
    // The lease moves (a is declared dead by a release, then b takes it).
    a.release(c.id, epoch).await.unwrap();
    let Lease::Owned { epoch: eb } = b.acquire(c.id).await.unwrap() else {
        panic!()
    };
    let err = store.append(&[one(c.id, 2, Some(fa))]).await.unwrap_err();
    assert!(
        matches!(err, StoreError::Fenced(ref ids) if ids[..] == [c.id]),
        "{err}"
    );
    assert_eq!(
        store.last(c.id).await.unwrap().unwrap().0,
        1,
        "nothing of it landed"
    );
    let fb = Fence {
        node: b.node(),
        epoch: eb,
    };
    store.append(&[one(c.id, 2, Some(fb))]).await.unwrap();

    // Through the writer, a fenced chat fails alone.
    let d = chat("u");
    store.create_chat(&d).await.unwrap();
    let store: Arc<dyn Store> = Arc::new(store);
    let (w, task) = LogWriter::spawn(store.clone());
    let (r1, r2) = tokio::join!(
        w.append(one(c.id, 3, Some(fa))),
        w.append(one(d.id, 1, None))
    );
    assert!(matches!(r1, Err(StoreError::Fenced(_))));
    r2.unwrap();
    assert_eq!(store.last(c.id).await.unwrap().unwrap().0, 2);
    drop(w);
    task.await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_travel_sealed_and_commits_are_announced() {
    let Some((store, a, b)) = pg_pair().await else {
        return;
    };
    let mut inbox = b.listen_on(0).await.unwrap();
    let mut outbox = a.listen_on(0).await.unwrap();
    let id = Uuid::new_v4();
    a.send_command(id, b.node(), b"secret answer")
        .await
        .unwrap();
    let raw: Vec<u8> = sqlx::query_scalar("SELECT body FROM node_commands WHERE id = $1")
        .bind(id)
        .fetch_one(store.pool())
        .await
        .unwrap();
    assert!(!raw.windows(6).any(|w| w == b"secret"), "stored sealed");
    let n = inbox.recv().await.unwrap();
    assert_eq!(
        PgCluster::parse(n.channel(), n.payload()),
        Some(NodeMessage::Command(id))
    );
    assert_eq!(
        b.take_command(id).await.unwrap(),
        Some((a.node(), b"secret answer".to_vec()))
    );
    assert_eq!(b.take_command(id).await.unwrap(), None, "taken once");
    assert!(
        !a.withdraw_command(id).await.unwrap(),
        "too late to withdraw"
    );
    b.reply(a.node(), id, r#"{"ok":true}"#).await.unwrap();
    let n = outbox.recv().await.unwrap();
    assert_eq!(
        PgCluster::parse(n.channel(), n.payload()),
        Some(NodeMessage::Reply {
            id,
            body: r#"{"ok":true}"#.into()
        })
    );

    // A commit is announced to every node, once, after it is visible.
    let c = chat("u");
    store.create_chat(&c).await.unwrap();
    store
        .append(&[AppendBatch {
            chat_id: c.id,
            envelopes: vec![
                env(1, "chat.text", None, None),
                env(2, "chat.print", None, None),
            ],
            state: None,
            conversation_state: None,
            fence: None,
        }])
        .await
        .unwrap();
    let n = inbox.recv().await.unwrap();
    assert_eq!(
        PgCluster::parse(n.channel(), n.payload()),
        Some(NodeMessage::Log(vec![LogNotice {
            chat_id: c.id,
            seq: 2,
            node: 0
        }]))
    );
}

/// A zombie (a node declared dead that still appends) against two live nodes
/// racing to take its chat over: exactly one takes it; from the moment it
/// does, the zombie's appends are refused; the new owner's first append, at
/// the seq after what it read, always lands. Hammered, since races hide.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_takeovers_never_both_append() {
    let Some((store, a, b)) = pg_pair().await else {
        return;
    };
    let store = Arc::new(store);
    for round in 0..60_i64 {
        let c = chat("u");
        store.create_chat(&c).await.unwrap();
        let zombie = Fence {
            node: 1_000_000 + round, // no such node holds a lock: dead
            epoch: 7,
        };
        sqlx::query("INSERT INTO chat_leases (chat_id, node_id, epoch) VALUES ($1, $2, $3)")
            .bind(c.id)
            .bind(zombie.node)
            .bind(zombie.epoch)
            .execute(store.pool())
            .await
            .unwrap();
        let zombie_store = store.clone();
        let zombie_task = tokio::spawn(async move {
            let mut seq = 1;
            loop {
                match zombie_store.append(&[one(c.id, seq, Some(zombie))]).await {
                    Ok(()) => seq += 1,
                    Err(StoreError::Fenced(_)) => return seq - 1,
                    Err(e) => panic!("the zombie hit something else than the fence: {e}"),
                }
            }
        });
        tokio::time::sleep(std::time::Duration::from_millis(round as u64 % 7)).await;
        async fn take(node: &PgCluster, store: &PgStore, c: &ChatRecord) -> Option<u64> {
            {
                let Lease::Owned { epoch } = node.acquire(c.id).await.unwrap() else {
                    return None;
                };
                let last = store.last(c.id).await.unwrap().map_or(0, |l| l.0);
                let fence = Fence {
                    node: node.node(),
                    epoch,
                };
                store
                    .append(&[one(c.id, last + 1, Some(fence))])
                    .await
                    .unwrap();
                Some(last + 1)
            }
        }
        let (ta, tb) = tokio::join!(take(&a, &store, &c), take(&b, &store, &c));
        let zombie_last = zombie_task.await.unwrap();
        let winner = match (ta, tb) {
            (Some(seq), None) | (None, Some(seq)) => seq,
            other => panic!("round {round}: exactly one node takes over, got {other:?}"),
        };
        assert_eq!(winner, zombie_last + 1, "round {round}");
        let log = store.load_after(c.id, 0, 10_000).await.unwrap();
        let seqs: Vec<u64> = log.iter().map(|e| e.seq).collect();
        assert_eq!(seqs, (1..=winner).collect::<Vec<_>>(), "round {round}");
    }
}
