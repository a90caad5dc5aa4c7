//! Every behaviour of the `demo` agent (contract §3).

use serde_json::json;
use uuid::Uuid;

use crate::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn echo_streams_then_completes() {
    let server = Server::start().await;
    let mut c = server.client().await;
    let chat = Uuid::new_v4();
    c.start(chat, "hello there").await;
    let msgs = c.until_complete(chat).await;
    let t = types(&msgs);
    assert_eq!(t[0], "chat.text");
    assert_eq!(msgs[0]["agent"], "user");
    assert_eq!(msgs[0]["content"], "hello there");
    assert_eq!(t[1], "chat.select_speaker");
    assert_eq!(msgs[1]["agent"], "demo");
    let prints: Vec<_> = msgs.iter().filter(|m| m["type"] == "chat.print").collect();
    assert!(prints.len() >= 2, "several chunks: {t:?}");
    let joined: String = prints
        .iter()
        .map(|p| p["content"].as_str().unwrap())
        .collect();
    assert_eq!(joined, "You said: hello there");
    assert_eq!(last_text(&msgs), "You said: hello there");
    assert_eq!(
        &t[t.len() - 2..],
        ["chat.usage_summary", "chat.run_complete"]
    );
    assert_eq!(msgs.last().unwrap()["reason"], "completed");
    assert_gap_free(&seqs(&msgs));
    assert!(
        msgs.iter()
            .all(|m| m["chat_id"] == chat.to_string() && m.get("replay").is_none())
    );

    // A second turn continues the numbering.
    c.say(chat, "again").await;
    let more = c.until_complete(chat).await;
    assert_eq!(seqs(&more)[0], msgs.len() as u64 + 1);
    assert_eq!(last_text(&more), "You said: again");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ask_waits_for_the_answer() {
    let server = Server::start().await;
    let mut c = server.client().await;
    let chat = Uuid::new_v4();
    c.start(chat, "ask: Your name?").await;
    let msgs = c.recv_until(|m| m["type"] == "chat.input_request").await;
    let req = msgs.last().unwrap();
    assert_eq!(req["prompt"], "Your name?");
    assert_eq!(req["password"], false);
    assert_eq!(req["corr"], req["request_id"]);
    assert_eq!(req["timeout_seconds"], 300);
    c.send(json!({"type": "user.input.submit", "chat_id": chat, "request_id": req["request_id"], "text": "Ada"}))
        .await;
    let rest = c.until_complete(chat).await;
    let ack = rest
        .iter()
        .find(|m| m["type"] == "chat.input_ack")
        .expect("ack");
    assert_eq!(ack["request_id"], req["request_id"]);
    assert_eq!(ack["corr"], req["request_id"]);
    assert_eq!(last_text(&rest), "You answered: Ada");
    assert_eq!(rest.last().unwrap()["reason"], "completed");
    let all: Vec<_> = msgs.into_iter().chain(rest).collect();
    assert_gap_free(&seqs(&all));
    // Two model turns, each opened by select_speaker.
    assert_eq!(
        types(&all)
            .iter()
            .filter(|t| **t == "chat.select_speaker")
            .count(),
        2
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ui_tool_waits_for_the_component() {
    let server = Server::start().await;
    let mut c = server.client().await;
    let chat = Uuid::new_v4();
    c.start(chat, "ui: date_picker").await;
    let msgs = c.recv_until(|m| m["type"] == "chat.tool_call").await;
    let call = msgs.last().unwrap().clone();
    assert_eq!(call["component_type"], "date_picker");
    assert_eq!(call["awaiting_response"], true);
    assert_eq!(call["display"], "inline");
    let corr = call["corr"].as_str().unwrap().to_owned();

    // Unknown corr: an error to this connection only, nothing logged.
    c.send(json!({"type": "inline_component.result", "chat_id": chat, "corr": "nope", "data": {}}))
        .await;
    let err = c.expect("chat.error").await;
    assert_eq!(err["error_code"], "INPUT_REQUEST_NOT_FOUND");
    assert!(err.get("seq").is_none());

    // The component's state can be patched while it is open.
    c.send(
        json!({"type": "artifact_patch", "chat_id": chat, "corr": corr,
                  "patch": [{"op": "add", "path": "/selected", "value": "2026-01-02"}]}),
    )
    .await;
    let patched = c.expect("chat.tool_call").await;
    assert_eq!(patched["corr"], corr.as_str());
    assert_eq!(patched["payload"]["selected"], "2026-01-02");
    assert_eq!(patched["payload"]["component_type"], "date_picker");
    assert_eq!(patched["awaiting_response"], true);
    assert_eq!(patched["seq"], call["seq"].as_u64().unwrap() + 1);

    c.send(json!({"type": "inline_component.result", "chat_id": chat, "corr": corr, "data": {"date": "2026-01-02"}}))
        .await;
    let rest = c.until_complete(chat).await;
    let resp = rest
        .iter()
        .find(|m| m["type"] == "chat.tool_response")
        .expect("tool_response");
    assert_eq!(resp["success"], true);
    assert_eq!(resp["corr"], corr.as_str());
    assert_eq!(resp["content"], json!({"date": "2026-01-02"}));
    assert_eq!(
        last_text(&rest),
        r#"Component returned: {"date":"2026-01-02"}"#
    );

    // After the run the state can still be patched; no longer awaiting.
    c.send(
        json!({"type": "artifact_patch", "chat_id": chat, "corr": corr,
                  "patch": [{"op": "replace", "path": "/selected", "value": "2026-02-01"}]}),
    )
    .await;
    let patched = c.expect("chat.tool_call").await;
    assert_eq!(patched["awaiting_response"], false);
    assert_eq!(patched["payload"]["selected"], "2026-02-01");

    // A patch that does not apply, and one that is not a patch.
    c.send(
        json!({"type": "artifact_patch", "chat_id": chat, "corr": corr,
                  "patch": [{"op": "remove", "path": "/missing"}]}),
    )
    .await;
    assert_eq!(
        c.expect("chat.error").await["error_code"],
        "SCHEMA_VALIDATION_FAILED"
    );
    c.send(json!({"type": "artifact_patch", "chat_id": chat, "corr": corr, "patch": [{"op": "jump", "path": "/"}]}))
        .await;
    assert_eq!(
        c.expect("chat.error").await["error_code"],
        "SCHEMA_VALIDATION_FAILED"
    );
    c.send(json!({"type": "artifact_patch", "chat_id": chat, "corr": "nope", "patch": []}))
        .await;
    assert_eq!(
        c.expect("chat.error").await["error_code"],
        "INPUT_REQUEST_NOT_FOUND"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_reports_each_step() {
    let server = Server::start().await;
    let mut c = server.client().await;
    let chat = Uuid::new_v4();
    c.start(chat, "progress: 4").await;
    let msgs = c.until_complete(chat).await;
    let call = msgs.iter().find(|m| m["type"] == "chat.tool_call").unwrap();
    assert!(call["component_type"].is_null());
    assert_eq!(call["awaiting_response"], false);
    let percents: Vec<f64> = msgs
        .iter()
        .filter(|m| m["type"] == "chat.tool_progress")
        .map(|m| m["progress_percent"].as_f64().unwrap())
        .collect();
    assert_eq!(percents, vec![0.0, 25.0, 50.0, 75.0, 100.0]);
    let resp = msgs
        .iter()
        .find(|m| m["type"] == "chat.tool_response")
        .unwrap();
    assert_eq!(resp["success"], true);
    assert_eq!(resp["corr"], call["corr"]);
    assert_eq!(last_text(&msgs), "Done");
    assert_gap_free(&seqs(&msgs));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_and_burst_stream_numbered_words() {
    let server = Server::start().await;
    let mut c = server.client().await;
    for (text, n) in [("slow: 5", 5), ("burst: 2000", 2000)] {
        let chat = Uuid::new_v4();
        c.start(chat, text).await;
        let msgs = c.until_complete(chat).await;
        let prints: Vec<&str> = msgs
            .iter()
            .filter(|m| m["type"] == "chat.print")
            .map(|m| m["content"].as_str().unwrap())
            .collect();
        assert_eq!(prints.len(), n, "one chat.print per word, never coalesced");
        assert_eq!(prints[0], "w1 ");
        let expected: Vec<String> = (1..=n).map(|i| format!("w{i}")).collect();
        assert_eq!(last_text(&msgs), expected.join(" "));
        assert_gap_free(&seqs(&msgs));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fail_logs_an_error_and_ends_the_run() {
    let server = Server::start().await;
    let mut c = server.client().await;
    let chat = Uuid::new_v4();
    c.start(chat, "fail").await;
    let msgs = c.until_complete(chat).await;
    let err = msgs
        .iter()
        .find(|m| m["type"] == "chat.error")
        .expect("error");
    assert_eq!(err["error_code"], "TOOL_EXECUTION_ERROR");
    assert_eq!(err["recoverable"], true);
    assert!(err["seq"].is_u64(), "run errors are persisted");
    assert_eq!(msgs.last().unwrap()["reason"], "error");
    assert_eq!(msgs[msgs.len() - 2]["type"], "chat.usage_summary");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_run_at_a_time_and_cancel() {
    let server = Server::start().await;
    let mut c = server.client().await;
    let chat = Uuid::new_v4();
    c.start(chat, "slow: 300").await;
    c.recv_until(|m| m["type"] == "chat.print").await;
    c.say(chat, "hello").await;
    let msgs = c.recv_until(|m| m["type"] == "chat.error").await;
    let err = msgs.last().unwrap();
    assert_eq!(err["error_code"], "RUN_IN_PROGRESS");
    assert_eq!(err["recoverable"], true);
    assert!(err.get("seq").is_none(), "not persisted");
    c.send(json!({"type": "chat.cancel", "chat_id": chat}))
        .await;
    let rest = c.until_complete(chat).await;
    assert_eq!(rest.last().unwrap()["reason"], "cancelled");
    let prints = rest.iter().filter(|m| m["type"] == "chat.print").count() + msgs.len();
    assert!(prints < 300, "the run stopped early");
    // Idle again: a new turn is accepted.
    c.say(chat, "after").await;
    assert_eq!(last_text(&c.until_complete(chat).await), "You said: after");
    // Cancelling with no run is a no-op.
    c.send(json!({"type": "chat.cancel", "chat_id": chat}))
        .await;
    c.send(json!({"type": "ping"})).await;
    assert_eq!(c.recv().await, json!({"type": "pong"}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_agent_and_restart_of_an_existing_chat() {
    let server = Server::start().await;
    let mut c = server.client().await;
    let chat = Uuid::new_v4();
    c.send(json!({"type": "chat.start", "chat_id": chat, "agent": "nobody"}))
        .await;
    let err = c.expect("chat.error").await;
    assert_eq!(err["error_code"], "WORKFLOW_NOT_FOUND");
    assert_eq!(err["chat_id"], chat.to_string());

    c.start(chat, "hi").await;
    let first = c.until_complete(chat).await;
    // Starting it again resumes from the start: a replay and a boundary, no second run.
    c.start(chat, "hi").await;
    let replay = c.recv_until(|m| m["type"] == "chat.resume_boundary").await;
    assert_eq!(replay.len(), first.len() + 1);
    assert!(replay[..first.len()].iter().all(|m| m["replay"] == true));
    assert_eq!(replay.last().unwrap()["last_seq"], first.len() as u64);
    c.send(json!({"type": "ping"})).await;
    assert_eq!(c.recv().await["type"], "pong", "no second run started");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_msg_id_has_no_second_effect() {
    let server = Server::start().await;
    let mut c = server.client().await;
    let chat = Uuid::new_v4();
    c.send(json!({"type": "chat.start", "chat_id": chat, "agent": "demo"}))
        .await;
    let msg =
        json!({"type": "user.message", "chat_id": chat, "text": "once", "client_msg_id": "m-1"});
    c.send(msg.clone()).await;
    let first = c.until_complete(chat).await;
    c.send(msg).await;
    c.send(json!({"type": "ping"})).await;
    assert_eq!(c.recv().await["type"], "pong", "the repeat started nothing");
    c.say(chat, "twice").await;
    let next = c.until_complete(chat).await;
    assert_eq!(seqs(&next)[0], first.len() as u64 + 1);
}
