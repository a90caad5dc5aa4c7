//! SIGKILL during a stream: what a client saw survives, the run ends
//! `interrupted` (these servers run with `continue_runs_after_restart =
//! false`; `continued.rs` tests the default, which goes on), and the chat
//! carries on from the next seq.

use std::net::SocketAddr;
use std::path::Path;

use tokio::process::Child;
use uuid::Uuid;

use crate::support::*;

/// Starts the real binary on `dir` and waits for `/healthz`.
async fn spawn_server(dir: &Path) -> (Child, SocketAddr) {
    let flags = ["--continue-runs-after-restart", "false"];
    spawn_agentwire(&database_url(dir).await, &dir.join("agents"), &flags).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_mid_stream_then_restart() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("agents")).unwrap();
    let (mut child, addr) = spawn_server(dir.path()).await;
    let chat = Uuid::new_v4();
    let mut c = Client::connect(&format!("ws://{addr}/v1/ws")).await;
    c.start(chat, "slow: 500").await;
    let mut seen = Vec::new();
    while seen.len() < 60 {
        seen.push(c.recv().await);
    }
    child.start_kill().unwrap(); // SIGKILL
    child.wait().await.unwrap();
    // Whatever was in flight on the socket still counts as seen.
    while let Ok(m) = c.next().await {
        seen.push(m);
    }
    assert_gap_free(&seqs(&seen));

    let (_child, addr) = spawn_server(dir.path()).await;
    let mut c = Client::connect(&format!("ws://{addr}/v1/ws")).await;
    c.resume(chat, 0).await;
    let replay = c.recv_until(|m| m["type"] == "chat.resume_boundary").await;
    let log = &replay[..replay.len() - 1];
    assert_gap_free(&seqs(log));
    for m in &seen {
        let seq = m["seq"].as_u64().unwrap() as usize;
        assert_eq!(
            without_replay(&log[seq - 1]),
            *m,
            "seq {seq} changed after the crash"
        );
    }
    let last = log.last().unwrap();
    assert_eq!(last["type"], "chat.run_complete");
    assert_eq!(last["reason"], "interrupted");
    assert!(
        log.len() > seen.len(),
        "the interrupted completion was appended"
    );

    // The chat carries on from the next seq.
    c.say(chat, "after the crash").await;
    let more = c.until_complete(chat).await;
    assert_eq!(seqs(&more)[0], log.len() as u64 + 1);
    assert_gap_free(&seqs(&[log.to_vec(), more.clone()].concat()));
    assert_eq!(last_text(&more), "You said: after the crash");
}

/// Many chats streaming at model speed: on SQLite their words sit in the
/// journal, not yet in the chat-clustered table, when the process dies; the
/// next start must replay every word any client saw, once, in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_with_many_paced_chats_loses_no_word() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("agents")).unwrap();
    let (mut child, addr) = spawn_server(dir.path()).await;
    let mut clients = Vec::new();
    for _ in 0..24 {
        let chat = Uuid::new_v4();
        let mut c = Client::connect(&format!("ws://{addr}/v1/ws")).await;
        c.start(chat, "slow: 400").await;
        clients.push((chat, c, Vec::new()));
    }
    for (_, c, seen) in &mut clients {
        while seen.len() < 30 {
            seen.push(c.recv().await);
        }
    }
    child.start_kill().unwrap(); // SIGKILL
    child.wait().await.unwrap();
    for (_, c, seen) in &mut clients {
        while let Ok(m) = c.next().await {
            seen.push(m);
        }
        assert_gap_free(&seqs(seen));
    }

    let (_child, addr) = spawn_server(dir.path()).await;
    for (chat, _, seen) in &clients {
        let mut c = Client::connect(&format!("ws://{addr}/v1/ws")).await;
        c.resume(*chat, 0).await;
        let replay = c.recv_until(|m| m["type"] == "chat.resume_boundary").await;
        let log = &replay[..replay.len() - 1];
        assert_gap_free(&seqs(log));
        assert!(
            log.len() > seen.len(),
            "everything seen, then the interruption"
        );
        for m in seen {
            let seq = m["seq"].as_u64().unwrap() as usize;
            assert_eq!(without_replay(&log[seq - 1]), *m, "seq {seq} of {chat}");
        }
        assert_eq!(log.last().unwrap()["reason"], "interrupted");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graceful_shutdown_closes_with_1001_and_marks_the_run() {
    let opts = Opts {
        settings: agentwire::config::Settings {
            continue_runs_after_restart: Some(false),
            ..Default::default()
        },
        ..Default::default()
    };
    let server = Server::start_with(opts.clone()).await;
    let chat = Uuid::new_v4();
    let mut c = server.client().await;
    c.start(chat, "slow: 1000").await;
    c.recv_until(|m| m["type"] == "chat.print").await;
    let stopping = tokio::spawn(server.stop());
    let mut seen = Vec::new();
    let ended = loop {
        match c.next().await {
            Ok(m) => seen.push(m),
            Err(e) => break e,
        }
    };
    assert_eq!(ended, Ended::Closed(Some(1001)));
    let dir = stopping.await.unwrap();

    let server = Server::start_in(dir, opts).await;
    let mut c = server.client().await;
    c.resume(chat, 0).await;
    let log = c.recv_until(|m| m["type"] == "chat.resume_boundary").await;
    let log = &log[..log.len() - 1];
    assert_gap_free(&seqs(log));
    assert_eq!(log.last().unwrap()["reason"], "interrupted");
    assert_eq!(
        log[log.len() - 2]["type"],
        "chat.usage_summary",
        "the run ended itself"
    );
}
