//! No stalls: a chat's actor answers every request in bounded time, whatever
//! its run is doing, and a connection is never stopped being read by one
//! chat. The soak test runs many connections of mixed valid and invalid
//! messages, random disconnects and a restart of the real binary, on the
//! store under test, and checks that nothing was lost or logged twice.

use serde_json::json;
use uuid::Uuid;

use crate::support::*;

/// A run that streams as fast as the log takes it does not keep its chat
/// from reading commands: each message sent while a long burst streams is
/// answered within a batch of the run's envelopes (before, the actor read
/// its run first while the run had anything queued, so a message waited for
/// most of the burst, and a cancel could find the run over).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chat_reads_commands_while_its_run_streams_without_pause() {
    // A queue that holds the burst: this client reads slower than it streams.
    let settings = agentwire::config::Settings {
        outbound_queue: Some(1 << 20),
        outbound_queue_bytes: Some(1 << 30),
        ..Default::default()
    };
    let server = Server::start_with(Opts {
        settings,
        ..Default::default()
    })
    .await;
    let mut c = server.client().await;
    let chat = Uuid::new_v4();
    c.start(chat, "burst: 100000").await;
    c.recv_until(|m| m["type"] == "chat.print").await;
    const ASKED: usize = 10;
    for _ in 0..ASKED {
        c.say(chat, "meanwhile").await;
    }
    // Each answer is a connection frame queued when the actor answered,
    // among the envelopes it had committed by then.
    let mut words = 0;
    let mut answered = 0;
    while answered < ASKED {
        let m = c.recv().await;
        match m["type"].as_str() {
            Some("chat.print") => words += 1,
            Some("chat.error") => {
                assert_eq!(m["error_code"], "RUN_IN_PROGRESS", "{m}");
                answered += 1;
            }
            Some("chat.run_complete") => panic!("the burst ended first ({words} words)"),
            _ => {}
        }
    }
    // About a batch (at most 256 envelopes) each, at most a few when the
    // connection's reader is slow to send the next; before, 25,000 to all of
    // the burst.
    assert!(words < 12_000, "{ASKED} answers took {words} words");
    c.send(json!({"type": "chat.cancel", "chat_id": chat})).await;
    let rest = c.until_complete(chat).await;
    assert_eq!(rest.last().unwrap()["reason"], "cancelled");
}
