//! Messages sent while a run is in flight: refused, queued after it,
//! interrupting it, or steering it before its next model turn — each kept
//! in the log as `chat.queued` until a run takes it.

use std::time::Duration;

use serde_json::{Value, json};
use uuid::Uuid;

use crate::mock_llm::{MockServer, Reply};
use crate::providers::{agent_yaml, server_with};
use crate::support::*;
use crate::vendors::{OpenAiWire, Wire};

async fn say_during(c: &mut Client, chat: Uuid, text: &str, strategy: &str) {
    c.send(json!({"type": "user.message", "chat_id": chat, "text": text, "multitask_strategy": strategy}))
        .await;
}

/// The whole log of `chat` on `addr` (replayed, then live) until the
/// run that answers `answer` ends.
async fn log_through(addr: std::net::SocketAddr, chat: Uuid, answer: &str) -> Vec<Value> {
    let mut c = Client::connect(&format!("ws://{addr}/v1/ws")).await;
    c.resume(chat, 0).await;
    let mut log = c
        .recv_until(|m| m["type"] == "chat.text" && m["content"] == answer)
        .await;
    log.extend(c.until_complete(chat).await);
    let log: Vec<Value> = log
        .iter()
        .filter(|m| m["type"] != "chat.resume_boundary")
        .map(without_replay)
        .collect();
    assert_gap_free(&seqs(&log));
    log
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enqueued_messages_run_after_the_run_in_order() {
    let server = Server::start().await;
    let chat = Uuid::new_v4();
    let mut c = server.client().await;
    c.start(chat, "slow: 40").await;
    let mut log = c.recv_until(|m| m["type"] == "chat.print").await;
    // The demo agent refuses by default.
    c.say(chat, "too soon").await;
    let err = c.recv_until(|m| m["type"] == "chat.error").await;
    assert_eq!(err.last().unwrap()["error_code"], "RUN_IN_PROGRESS");
    log.extend(err[..err.len() - 1].iter().cloned());
    say_during(&mut c, chat, "one", "enqueue").await;
    say_during(&mut c, chat, "two", "enqueue").await;
    // Three runs end: the slow one, then one per queued message.
    for _ in 0..3 {
        log.extend(c.until_complete(chat).await);
    }
    assert_gap_free(&seqs(&log));
    let queued: Vec<&Value> = log.iter().filter(|m| m["type"] == "chat.queued").collect();
    assert_eq!(queued.len(), 2);
    assert_eq!(
        (&queued[0]["content"], &queued[0]["mode"]),
        (&json!("one"), &json!("enqueue"))
    );
    let words = (1..=40)
        .map(|i| format!("w{i}"))
        .collect::<Vec<_>>()
        .join(" ");
    assert_eq!(
        turns(&log),
        vec![
            "user: slow: 40".to_owned(),
            format!("demo: {words}"),
            "user: one".into(),
            "demo: You said: one".into(),
            "user: two".into(),
            "demo: You said: two".into(),
        ]
    );
    // Each taken message names its chat.queued, and follows a run's end
    // directly (logged with it).
    for (text, q) in ["one", "two"].iter().zip(&queued) {
        let taken = log
            .iter()
            .position(|m| m["type"] == "chat.text" && m["content"] == *text)
            .unwrap();
        assert_eq!(log[taken]["queued"], q["seq"]);
        assert_eq!(log[taken - 1]["type"], "chat.run_complete");
    }
    let (_, state) = http_json(&server, "GET", &format!("/v1/chats/{chat}"), "").await;
    assert_eq!(state["state"], "idle");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupt_cancels_the_run_and_answers_the_new_message() {
    let server = Server::start().await;
    let chat = Uuid::new_v4();
    let mut c = server.client().await;
    c.start(chat, "slow: 300").await;
    let mut log = c.recv_until(|m| m["type"] == "chat.print").await;
    say_during(&mut c, chat, "stop, say hi", "interrupt").await;
    let cut = c.until_complete(chat).await;
    assert_eq!(cut.last().unwrap()["reason"], "cancelled");
    let words = cut.iter().filter(|m| m["type"] == "chat.print").count();
    assert!(words < 300, "the run was cut: {words} words");
    // What it had said stays, as its text marked partial, before its end.
    let printed: String = log
        .iter()
        .chain(&cut)
        .filter(|m| m["type"] == "chat.print")
        .map(|m| m["content"].as_str().unwrap())
        .collect();
    let partial = cut.iter().find(|m| m["type"] == "chat.text").unwrap();
    assert_eq!(
        (&partial["agent"], &partial["content"], &partial["partial"]),
        (&json!("demo"), &json!(printed), &json!(true))
    );
    assert_eq!(
        cut[cut.len() - 3]["seq"],
        partial["seq"],
        "then its usage and end"
    );
    log.extend(cut);
    log.extend(c.until_complete(chat).await);
    assert_gap_free(&seqs(&log));
    let t = turns(&log);
    assert_eq!(t.first().unwrap(), "user: slow: 300");
    assert_eq!(
        &t[t.len() - 2..],
        ["user: stop, say hi", "demo: You said: stop, say hi"]
    );
    assert_eq!(log.last().unwrap()["reason"], "completed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agents_own_strategy_applies_and_a_full_queue_is_refused() {
    let agent = "id: queueing\nmultitask_strategy: enqueue\nmodel: {provider: scripted, script: {rules: [{prefix: \"slow: \", arg: count, stream: {delay_ms: 20}}, {reply: \"You said: {text}\"}]}}\n";
    let server = Server::start_with(Opts {
        agents: vec![("queueing.yaml".into(), agent.into())],
        ..Default::default()
    })
    .await;
    let chat = Uuid::new_v4();
    let mut c = server.client().await;
    c.start_with(chat, "queueing", "hello").await;
    c.until_complete(chat).await;
    c.say(chat, "slow: 200").await;
    c.recv_until(|m| m["type"] == "chat.print").await;
    for i in 0..16 {
        c.say(chat, &format!("m{i}")).await;
    }
    c.say(chat, "one too many").await;
    let got = c.recv_until(|m| m["type"] == "chat.error").await;
    assert_eq!(got.last().unwrap()["error_code"], "RUN_IN_PROGRESS");
    assert_eq!(
        got.iter().filter(|m| m["type"] == "chat.queued").count(),
        16
    );
    c.send(json!({"type": "chat.cancel", "chat_id": chat}))
        .await;
    let mut answers = Vec::new();
    for _ in 0..17 {
        answers.push(last_text(&c.until_complete(chat).await));
    }
    assert_eq!(
        answers[1..],
        (0..16)
            .map(|i| format!("You said: m{i}"))
            .collect::<Vec<_>>()
    );
}

/// The model of the run an interrupt starts sees the answer it cut off, as
/// far as it went, between the two questions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupted_answer_is_in_the_next_runs_history() {
    let w = OpenAiWire;
    let slow: Vec<String> = (1..=200).map(|i| format!("w{i} ")).collect();
    let slow: Vec<&str> = slow.iter().map(String::as_str).collect();
    let llm = MockServer::start(vec![
        w.text(&slow, (5, 200)).paced(Duration::from_millis(20)),
        w.text(&["Short, then."], (5, 5)),
    ])
    .await;
    let tool = MockServer::start(vec![]).await;
    let server = server_with(agent_yaml(&w, &llm, &tool, "")).await;
    let chat = Uuid::new_v4();
    let mut c = server.client().await;
    c.start_with(chat, "real", "Count to 200").await;
    let mut log = c.recv_until(|m| m["type"] == "chat.print").await;
    say_during(&mut c, chat, "Too long, stop", "interrupt").await;
    log.extend(c.until_complete(chat).await);
    log.extend(c.until_complete(chat).await);
    assert_gap_free(&seqs(&log));
    let partial = log
        .iter()
        .find(|m| m["type"] == "chat.text" && m["partial"] == true)
        .expect("the cut answer, marked");
    let cut = partial["content"].as_str().unwrap();
    assert!(
        cut.starts_with("w1 ") && cut.len() < slow.concat().len(),
        "{cut}"
    );
    let requests = llm.requests();
    let history: Vec<(Value, Value)> = requests[1].body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] != "system")
        .map(|m| (m["role"].clone(), m["content"].clone()))
        .collect();
    assert_eq!(
        history,
        vec![
            (json!("user"), json!("Count to 200")),
            (json!("assistant"), json!(cut)),
            (json!("user"), json!("Too long, stop")),
        ]
    );
    assert_eq!(log.last().unwrap()["reason"], "completed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_steer_reaches_the_model_before_its_next_turn() {
    let w = OpenAiWire;
    let llm = MockServer::start(vec![
        w.tools(
            None,
            &[("call_1", "get_weather", r#"{"city":"Oslo"}"#)],
            (5, 5),
        ),
        w.text(&["Oslo: 21 degrees."], (5, 5)),
    ])
    .await;
    // The tool takes a while: the user steers meanwhile.
    let tool = MockServer::start(vec![
        Reply::json(200, r#"{"temp":21}"#).paced(Duration::from_millis(600)),
    ])
    .await;
    let server = server_with(agent_yaml(&w, &llm, &tool, "")).await;
    let chat = Uuid::new_v4();
    let mut c = server.client().await;
    c.start_with(chat, "real", "Weather in Oslo?").await;
    let mut log = c.recv_until(|m| m["type"] == "chat.tool_call").await;
    say_during(&mut c, chat, "in celsius, please", "steer").await;
    log.extend(c.until_complete(chat).await);
    assert_gap_free(&seqs(&log));
    let second = &llm.requests()[1].body["messages"];
    let last = second.as_array().unwrap().last().unwrap();
    assert_eq!(
        (&last["role"], &last["content"]),
        (&json!("user"), &json!("in celsius, please"))
    );
    // In the log: the steer after the tool's result, before the next turn.
    let at = |pred: &dyn Fn(&Value) -> bool| log.iter().position(pred).unwrap();
    let steer = at(&|m| m["type"] == "chat.text" && m["content"] == "in celsius, please");
    assert!(at(&|m| m["type"] == "chat.tool_response") < steer);
    let queued = at(&|m| m["type"] == "chat.queued");
    assert_eq!(log[steer]["queued"], log[queued]["seq"]);
    let next_turn = log
        .iter()
        .rposition(|m| m["type"] == "chat.select_speaker")
        .unwrap();
    assert!(steer < next_turn);
    assert_eq!(
        llm.requests().len(),
        2,
        "steered within the run, no run of its own"
    );
}

/// A message queued during a run a SIGKILL cut off runs after that run's
/// end once the server is back: after the continued run, or after the run
/// is ended `interrupted`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queued_message_outlives_a_crash() {
    for continued in ["true", "false"] {
        let dir = tempfile::tempdir().unwrap();
        let agents = dir.path().join("agents");
        std::fs::create_dir_all(&agents).unwrap();
        let url = database_url(dir.path()).await;
        let flags = ["--continue-runs-after-restart", continued];
        let (mut child, addr) = spawn_agentwire(&url, &agents, &flags).await;
        let chat = Uuid::new_v4();
        let mut c = Client::connect(&format!("ws://{addr}/v1/ws")).await;
        c.start(chat, "slow: 120").await;
        c.recv_until(|m| m["type"] == "chat.print" && m["content"] == "w10 ")
            .await;
        say_during(&mut c, chat, "after the restart", "enqueue").await;
        c.recv_until(|m| m["type"] == "chat.queued").await;
        child.start_kill().unwrap();
        child.wait().await.unwrap();

        let (_child, addr) = spawn_agentwire(&url, &agents, &flags).await;
        let log = log_through(addr, chat, "You said: after the restart").await;
        let ends: Vec<&Value> = log
            .iter()
            .filter(|m| m["type"] == "chat.run_complete")
            .collect();
        let first_end = if continued == "true" {
            "completed"
        } else {
            "interrupted"
        };
        assert_eq!(ends[0]["reason"], first_end, "continue: {continued}");
        assert_eq!(ends.len(), 2, "continue: {continued}");
        let taken = log
            .iter()
            .filter(|m| m["type"] == "chat.text" && m["content"] == "after the restart")
            .count();
        assert_eq!(taken, 1, "run once, continue: {continued}");
    }
}

/// Two messages queued during one run; the server is killed during the
/// first one's run: the second, queued behind it in an earlier run's
/// stretch of the log, still runs once after the restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_queued_behind_another_outlives_a_crash_in_that_ones_run() {
    let dir = tempfile::tempdir().unwrap();
    let agents = dir.path().join("agents");
    std::fs::create_dir_all(&agents).unwrap();
    let url = database_url(dir.path()).await;
    let flags = ["--continue-runs-after-restart", "true"];
    let (mut child, addr) = spawn_agentwire(&url, &agents, &flags).await;
    let chat = Uuid::new_v4();
    let mut c = Client::connect(&format!("ws://{addr}/v1/ws")).await;
    c.start(chat, "slow: 40").await;
    c.recv_until(|m| m["type"] == "chat.print").await;
    say_during(&mut c, chat, "slow: 60", "enqueue").await;
    say_during(&mut c, chat, "last", "enqueue").await;
    // The first queued message's run is under way.
    c.recv_until(|m| m["type"] == "chat.text" && m["content"] == "slow: 60")
        .await;
    c.recv_until(|m| m["type"] == "chat.print" && m["content"] == "w10 ")
        .await;
    child.start_kill().unwrap();
    child.wait().await.unwrap();

    let (_child, addr) = spawn_agentwire(&url, &agents, &flags).await;
    let log = log_through(addr, chat, "You said: last").await;
    let taken = |text: &str| {
        log.iter()
            .filter(|m| m["type"] == "chat.text" && m["agent"] == "user" && m["content"] == text)
            .count()
    };
    assert_eq!((taken("slow: 60"), taken("last")), (1, 1));
}
