//! Several nodes on one PostgreSQL, each a server of its own (the real binary
//! as a process of its own, or a server in this test process where the test
//! needs to reach into it): to a client they behave like one node.
//!
//! These tests need PostgreSQL whatever the suite's backend, so they run in
//! the default (SQLite) pass of the suite only, not again in the PostgreSQL pass.

use std::net::SocketAddr;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::process::Child;
use uuid::Uuid;

use crate::support::*;

/// A fresh database for a cluster, or `None` when this pass skips them.
pub(crate) async fn cluster_database() -> Option<String> {
    if on_postgres() {
        return None; // Run once, in the default pass.
    }
    Some(agentwire::testing::postgres()?.fresh_database().await)
}

async fn node(url: &str) -> Server {
    node_continuing(url, true).await
}

/// A node that continues the runs it takes over, or ends them `interrupted`.
async fn node_continuing(url: &str, continues: bool) -> Server {
    Server::start_with(Opts {
        settings: agentwire::config::Settings {
            database_url: Some(url.to_owned()),
            continue_runs_after_restart: Some(continues),
            ..Default::default()
        },
        ..Default::default()
    })
    .await
}

/// A node as a process of its own (the real binary), killed when dropped.
struct Process {
    _child: Child,
    addr: SocketAddr,
    _agents: tempfile::TempDir,
}

impl Process {
    async fn start(url: &str, extra: &[&str]) -> Self {
        let agents = tempfile::tempdir().unwrap();
        let (child, addr) = spawn_agentwire(url, agents.path(), extra).await;
        Self {
            _child: child,
            addr,
            _agents: agents,
        }
    }

    async fn client(&self) -> Client {
        Client::connect(&format!("ws://{}/v1/ws", self.addr)).await
    }
}

/// The `X-Agentwire-Node` header of the node's `/healthz`.
async fn node_id(addr: SocketAddr) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let req = format!("GET /healthz HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream.write_all(req.as_bytes()).await.unwrap();
    let mut out = String::new();
    stream.read_to_string(&mut out).await.unwrap();
    out.lines()
        .find_map(|l| l.strip_prefix("x-agentwire-node: "))
        .expect("the node names itself")
        .to_owned()
}

/// Resumes `chat` from 0: the replayed envelopes (unmarked) and the boundary.
pub(crate) async fn replay_all(c: &mut Client, chat: Uuid) -> (Vec<Value>, Value) {
    c.resume(chat, 0).await;
    let mut got = c.recv_until(|m| m["type"] == "chat.resume_boundary").await;
    let boundary = got.pop().unwrap();
    (got.iter().map(without_replay).collect(), boundary)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_on_two_nodes_see_one_chat_identically() {
    let Some(url) = cluster_database().await else {
        return;
    };
    let (a, b) = (
        Process::start(&url, &[]).await,
        Process::start(&url, &[]).await,
    );
    assert_ne!(node_id(a.addr).await, node_id(b.addr).await);
    let (mut ca, mut cb) = (a.client().await, b.client().await);
    let chat = Uuid::new_v4();
    ca.start(chat, "hello").await;
    let first = ca.until_complete(chat).await;

    // A client of the other node catches up, then follows live.
    let (replayed, boundary) = replay_all(&mut cb, chat).await;
    assert_eq!(replayed, first);
    assert_eq!(boundary["last_seq"], first.len());
    ca.say(chat, "burst: 300").await;
    let on_a = ca.until_complete(chat).await;
    let on_b = cb.until_complete(chat).await;
    assert_eq!(on_a.len(), 300 + 5, "{:?}", types(&on_a));
    assert_eq!(on_b, on_a, "the same envelopes, in the same order, once");

    // A turn taken on the node that does not run the chat works the same.
    cb.say(chat, "from b").await;
    let last_b = cb.until_complete(chat).await;
    assert_eq!(ca.until_complete(chat).await, last_b);
    assert_eq!(last_text(&last_b), "You said: from b");
    let all: Vec<Value> = [first, on_a, last_b.clone()].concat();
    assert_gap_free(&seqs(&all));

    // A third node, just started (on a pool of one connection: listening
    // and the node's lock take none of it), replays the whole log and works.
    let c = Process::start(&url, &["--database-pool-size", "1"]).await;
    let mut cc = c.client().await;
    let (replayed, _) = replay_all(&mut cc, chat).await;
    assert_eq!(replayed, all);
    cc.say(chat, "from c").await;
    let last_c = cc.until_complete(chat).await;
    assert_eq!(ca.until_complete(chat).await, last_c);
    assert_eq!(last_c[0]["seq"], all.len() + 1);
    if crate::nats::cluster_nats_url().is_some() {
        // The NATS pass: the other nodes heard the commits on NATS.
        let (_, metrics) = http_get(b.addr, "/metrics", &[]).await;
        assert!(
            metrics.contains("agentwire_cluster_notices_total{via=\"nats\"}"),
            "{metrics}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_sent_to_the_other_node_reach_the_run() {
    let Some(url) = cluster_database().await else {
        return;
    };
    let (a, b) = (
        Process::start(&url, &[]).await,
        Process::start(&url, &[]).await,
    );
    let (mut ca, mut cb) = (a.client().await, b.client().await);
    let chat = Uuid::new_v4();
    ca.start(chat, "ask: Your name?").await;
    let asked = ca.recv_until(|m| m["type"] == "chat.input_request").await;
    let req = asked.last().unwrap().clone();
    let (replayed, _) = replay_all(&mut cb, chat).await;
    assert_eq!(replayed, asked);

    // Errors from the owner come back as they would locally.
    cb.say(chat, "too early").await;
    let err = cb.expect("chat.error").await;
    assert_eq!(err["error_code"], "RUN_IN_PROGRESS");
    cb.send(
        json!({"type": "user.input.submit", "chat_id": chat, "request_id": "nope", "text": "x"}),
    )
    .await;
    assert_eq!(
        cb.expect("chat.error").await["error_code"],
        "INPUT_REQUEST_NOT_FOUND"
    );

    cb.send(json!({"type": "user.input.submit", "chat_id": chat, "request_id": req["request_id"], "text": "Ada"}))
        .await;
    let on_b = cb.until_complete(chat).await;
    let on_a = ca.until_complete(chat).await;
    assert_eq!(on_a, on_b);
    assert!(types(&on_b).contains(&"chat.input_ack"));
    assert_eq!(last_text(&on_b), "You answered: Ada");

    // A UI tool call answered through the other node.
    ca.say(chat, "ui: date_picker").await;
    let call = ca
        .recv_until(|m| m["type"] == "chat.tool_call")
        .await
        .pop()
        .unwrap();
    cb.recv_until(|m| m["type"] == "chat.tool_call").await;
    cb.send(json!({"type": "inline_component.result", "chat_id": chat, "corr": call["corr"], "data": {"date": "2026-01-02"}}))
        .await;
    let on_b = cb.until_complete(chat).await;
    assert_eq!(ca.until_complete(chat).await, on_b);
    assert_eq!(
        last_text(&on_b),
        r#"Component returned: {"date":"2026-01-02"}"#
    );

    // A cancel through the other node reaches the run.
    ca.say(chat, "slow: 500").await;
    ca.recv_until(|m| m["type"] == "chat.print").await;
    let path = format!("/v1/chats/{chat}/cancel");
    let (status, _) = http_request(b.addr, "POST", &path, &[], "").await;
    assert!(status < 300, "{status}");
    let end = ca.until_complete(chat).await;
    assert_eq!(end.last().unwrap()["reason"], "cancelled");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_the_owner_and_carry_on_from_another_node() {
    let Some(url) = cluster_database().await else {
        return;
    };
    let agents = tempfile::tempdir().unwrap();
    // These nodes end a cut run `interrupted` (the default, continuing it,
    // is `a_run_cut_by_a_dead_owner_goes_on_on_another_node`).
    let flags = ["--continue-runs-after-restart", "false"];
    let (mut owner, addr) = spawn_agentwire(&url, agents.path(), &flags).await;
    // Two more nodes follow the chat; both will race to take it over.
    let (b, c) = (
        node_continuing(&url, false).await,
        node_continuing(&url, false).await,
    );
    let chat = Uuid::new_v4();
    let mut ca = Client::connect(&format!("ws://{addr}/v1/ws")).await;
    ca.start(chat, "slow: 400").await;
    let mut seen = Vec::new();
    while seen.len() < 40 {
        seen.push(ca.recv().await);
    }
    let mut cc = c.client().await;
    cc.resume(chat, 0).await;
    cc.recv_until(|m| m["type"] == "chat.resume_boundary").await;

    owner.start_kill().unwrap(); // SIGKILL
    owner.wait().await.unwrap();

    // The client resumes on another node: everything it saw, then the end.
    let mut cb = b.client().await;
    let last_seen = seen.last().unwrap()["seq"].as_u64().unwrap();
    cb.resume(chat, 0).await;
    let mut got = cb.recv_until(|m| m["type"] == "chat.resume_boundary").await;
    got.pop();
    // The takeover may come before the replay (in it) or after (live).
    if !types(&got).contains(&"chat.run_complete") {
        got.extend(cb.until_complete(chat).await);
    }
    let got: Vec<Value> = got.iter().map(without_replay).collect();
    assert_eq!(
        &got[..seen.len()],
        &seen[..],
        "every envelope the client saw"
    );
    let end = got.last().unwrap();
    assert_eq!(end["reason"], "interrupted");
    assert!(end["seq"].as_u64().unwrap() > last_seen);
    assert_gap_free(&seqs(&got));

    // The other follower saw the same end, once.
    let mut on_c = cc.until_complete(chat).await;
    on_c.retain(|m| m["seq"].is_u64());
    assert_eq!(on_c.last().unwrap(), end);

    // A new turn continues with the next seq, and each node logged one end.
    cb.say(chat, "still there?").await;
    let more = cb.until_complete(chat).await;
    assert_eq!(seqs(&more)[0], end["seq"].as_u64().unwrap() + 1);
    assert_eq!(last_text(&more), "You said: still there?");
    assert_eq!(cc.until_complete(chat).await, more);
    let (log, _) = replay_all(&mut cc, chat).await;
    assert_gap_free(&seqs(&log));
    assert_eq!(
        log.iter()
            .filter(|m| m["type"] == "chat.run_complete" && m["reason"] == "interrupted")
            .count(),
        1,
        "one takeover, one interrupted"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_database_connections_on_two_nodes_lose_and_double_nothing() {
    let Some(url) = cluster_database().await else {
        return;
    };
    let (a, b) = (node(&url).await, node(&url).await);
    let (mut ca, mut cb) = (a.client().await, b.client().await);
    let chat = Uuid::new_v4();
    ca.start(chat, "hello").await;
    ca.until_complete(chat).await;
    cb.resume(chat, 0).await;
    let mut on_b: Vec<Value> = cb.recv_until(|m| m["type"] == "chat.resume_boundary").await;
    on_b.pop();
    ca.say(chat, "slow: 200").await;
    while on_b.iter().filter(|m| m["type"] == "chat.print").count() < 20 {
        on_b.push(cb.recv().await);
    }
    // Every session of both nodes goes away at once: pools, listeners, locks.
    use sqlx::Connection;
    let mut admin = sqlx::PgConnection::connect(&url).await.unwrap();
    sqlx::query(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
         WHERE datname = current_database() AND pid <> pg_backend_pid()",
    )
    .execute(&mut admin)
    .await
    .unwrap();
    // The run ends (completed, or interrupted if a node took it over while
    // the owner's lock was gone); the follower saw each envelope once.
    on_b.extend(cb.until_complete(chat).await);
    let on_b: Vec<Value> = on_b.iter().map(without_replay).collect();
    assert_gap_free(&seqs(&on_b));

    // Both nodes still serve, and agree with the log.
    cb.say(chat, "still there?").await;
    let more = cb.until_complete(chat).await;
    assert_eq!(seqs(&more)[0], on_b.len() as u64 + 1);
    assert_eq!(last_text(&more), "You said: still there?");
    let mut fresh = a.client().await;
    let (log, _) = replay_all(&mut fresh, chat).await;
    let live: Vec<Value> = on_b.into_iter().chain(more).collect();
    assert_eq!(log, live, "the log is exactly what was delivered, once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secret_answered_through_the_other_node_is_never_stored() {
    const SECRET: &str = "hunter3-Kp2Wd-forwarded-never-on-disk";
    let Some(url) = cluster_database().await else {
        return;
    };
    let (a, b) = (node(&url).await, node(&url).await);
    let (mut ca, mut cb) = (a.client().await, b.client().await);
    let chat = Uuid::new_v4();
    ca.start(chat, "secret: Your PIN?").await;
    let req = ca
        .recv_until(|m| m["type"] == "chat.input_request")
        .await
        .pop()
        .unwrap();
    cb.send(json!({"type": "user.input.submit", "chat_id": chat, "request_id": req["request_id"], "text": SECRET}))
        .await;
    let msgs = ca.until_complete(chat).await;
    assert_eq!(
        last_text(&msgs),
        format!("Secret received ({} characters)", SECRET.len()),
        "the run got the answer"
    );
    assert!(msgs.iter().all(|m| !m.to_string().contains(SECRET)));

    // It crossed PostgreSQL sealed: not in a table, the WAL or any file.
    use sqlx::Connection;
    let mut conn = sqlx::PgConnection::connect(&url).await.unwrap();
    sqlx::query("CHECKPOINT").execute(&mut conn).await.unwrap();
    let Some(data) = agentwire::testing::postgres().and_then(|p| p.data_dir.clone()) else {
        return; // An external server: its files are not ours to read.
    };
    assert!(
        !crate::input::files_containing(&data, b"Secret received").is_empty(),
        "the scan reads the stored chat"
    );
    assert_eq!(
        crate::input::files_containing(&data, SECRET.as_bytes()),
        Vec::<String>::new()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owner_whose_lock_was_lost_follows_the_node_that_took_over() {
    let Some(url) = cluster_database().await else {
        return;
    };
    let (a, b) = (node(&url).await, node(&url).await);
    let (id_a, id_b) = (node_id(a.addr).await, node_id(b.addr).await);
    let (mut ca, mut cb) = (a.client().await, b.client().await);
    let chat = Uuid::new_v4();
    ca.start(chat, "hello").await;
    let first = ca.until_complete(chat).await;
    let (replayed, _) = replay_all(&mut cb, chat).await;
    assert_eq!(replayed, first);

    // A's lock session goes (A lives on): B, which follows the chat, takes it.
    use sqlx::Connection;
    let mut admin = sqlx::PgConnection::connect(&url).await.unwrap();
    let holder = || {
        sqlx::query_scalar::<_, i64>("SELECT node_id FROM chat_leases WHERE chat_id = $1")
            .bind(chat)
    };
    for _ in 0..100 {
        if holder().fetch_one(&mut admin).await.unwrap().to_string() == id_b {
            break;
        }
        sqlx::query(
            "SELECT pg_terminate_backend(pid) FROM pg_locks
             WHERE locktype = 'advisory' AND classid = 1634170740 AND objid = $1::int8::oid
               AND database = (SELECT oid FROM pg_database WHERE datname = current_database())",
        )
        .bind(id_a.parse::<i64>().unwrap())
        .execute(&mut admin)
        .await
        .unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        holder().fetch_one(&mut admin).await.unwrap().to_string(),
        id_b
    );

    // A still believes nothing changed; a turn sent to it lands at B's, once.
    ca.say(chat, "from a").await;
    let on_a = ca.until_complete(chat).await;
    assert_eq!(cb.until_complete(chat).await, on_a);
    assert_eq!(last_text(&on_a), "You said: from a");
    // And A's client follows what B runs.
    cb.say(chat, "from b").await;
    let on_b = cb.until_complete(chat).await;
    assert_eq!(ca.until_complete(chat).await, on_b);
    let all = [first, on_a, on_b].concat();
    assert_gap_free(&seqs(&all));
    let mut fresh = a.client().await;
    assert_eq!(replay_all(&mut fresh, chat).await.0, all);
}

/// With `continue_runs_after_restart`, the node that takes a chat over from
/// a dead owner continues its run: the turn cut mid-stream is dropped and
/// asked again there, and the answer completes (issue 19).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_cut_by_a_dead_owner_goes_on_on_another_node() {
    let Some(url) = cluster_database().await else {
        return;
    };
    let agents = tempfile::tempdir().unwrap();
    let flags = ["--continue-runs-after-restart", "true"];
    let (mut owner, addr) = spawn_agentwire(&url, agents.path(), &flags).await;
    let b = node(&url).await;
    let chat = Uuid::new_v4();
    let mut ca = Client::connect(&format!("ws://{addr}/v1/ws")).await;
    ca.start(chat, "slow: 120").await;
    let mut seen = Vec::new();
    while seen.len() < 30 {
        seen.push(ca.recv().await);
    }
    // A client of the other node follows the chat: that node takes it over.
    let mut cb = b.client().await;
    cb.resume(chat, 0).await;
    let mut got = cb.recv_until(|m| m["type"] == "chat.resume_boundary").await;
    got.pop();
    owner.start_kill().unwrap(); // SIGKILL
    owner.wait().await.unwrap();
    got.extend(cb.until_complete(chat).await);
    let got: Vec<Value> = got.iter().map(without_replay).collect();
    assert_gap_free(&seqs(&got));
    assert_eq!(
        &got[..seen.len()],
        &seen[..],
        "every envelope the client saw"
    );
    let discarded: Vec<&Value> = got
        .iter()
        .filter(|m| m["type"] == "chat.turn_discarded")
        .collect();
    assert_eq!(discarded.len(), 1, "{:?}", types(&got));
    let words: Vec<String> = (1..=120).map(|i| format!("w{i}")).collect();
    assert_eq!(last_text(&got), words.join(" "));
    assert_eq!(got.last().unwrap()["reason"], "completed");
    assert!(!got.iter().any(|m| m["reason"] == "interrupted"));
}

/// A rolling restart: a node stopping gracefully leaves its run between two
/// model turns, and another node takes it up on its own within about a
/// second (no client touches the chat) and finishes it (issue 19).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_left_by_a_stopping_node_is_taken_up_by_another() {
    let Some(url) = cluster_database().await else {
        return;
    };
    let (a, b) = (node(&url).await, node(&url).await);
    let chat = Uuid::new_v4();
    let mut ca = a.client().await;
    // A tool of 40 steps (25 ms each), then a second model turn.
    ca.start(chat, "progress: 40").await;
    ca.recv_until(|m| m["type"] == "chat.tool_progress").await;
    drop(a.stop().await);

    // Nobody asks node B about the chat: it finds the run on its own.
    let mut state = Value::Null;
    for _ in 0..100 {
        let (status, chat_view) = http_json(&b, "GET", &format!("/v1/chats/{chat}"), "").await;
        assert_eq!(status, 200);
        state = chat_view["state"].clone();
        if state == "idle" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(state, "idle", "the run was taken up and finished");
    let mut cb = b.client().await;
    let (log, _) = replay_all(&mut cb, chat).await;
    assert_gap_free(&seqs(&log));
    let count = |ty: &str| log.iter().filter(|m| m["type"] == ty).count();
    assert_eq!(count("chat.select_speaker"), 2, "{:?}", types(&log));
    assert_eq!(count("chat.tool_call"), 1, "the tool ran once");
    assert_eq!(count("chat.turn_discarded"), 0);
    assert_eq!(last_text(&log), "Done");
    assert_eq!(log.last().unwrap()["reason"], "completed");
}
