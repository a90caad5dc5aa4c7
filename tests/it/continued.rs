//! Runs that outlive the process (issue 19): the real binary, SIGKILLed in
//! the middle of a run, then started again; the run goes on from the log
//! instead of ending `interrupted` (`continue_runs_after_restart`, on by
//! default, is set explicitly here).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::State;
use axum::http::Uri;
use serde_json::{Value, json};
use tokio::process::Child;
use uuid::Uuid;

use crate::support::*;

const CONTINUE: [&str; 2] = ["--continue-runs-after-restart", "true"];

pub(crate) async fn spawn_server(dir: &Path) -> (Child, SocketAddr) {
    spawn_agentwire(&database_url(dir).await, &dir.join("agents"), &CONTINUE).await
}

pub(crate) async fn kill(mut child: Child) {
    child.start_kill().unwrap(); // SIGKILL
    child.wait().await.unwrap();
}

/// The whole log of `chat` once its run has ended: replayed from seq 1,
/// then live until `chat.run_complete` (the boundary left out).
pub(crate) async fn log_until_complete(addr: SocketAddr, chat: Uuid) -> Vec<Value> {
    let mut c = Client::connect(&format!("ws://{addr}/v1/ws")).await;
    c.resume(chat, 0).await;
    let mut log = Vec::new();
    let mut live = false;
    loop {
        let m = c.recv().await;
        if m["type"] == "chat.resume_boundary" {
            // Replayed to the end of the log: over if its run was (a
            // template's conversation state follows its end).
            if log
                .iter()
                .rfind(|m: &&Value| m["type"] != "chat.state")
                .is_some_and(|m| m["type"] == "chat.run_complete")
            {
                return log;
            }
            live = true;
            continue;
        }
        let ends = live && m["type"] == "chat.run_complete";
        log.push(without_replay(&m));
        if ends {
            return log;
        }
    }
}

/// A data folder whose agents folder holds `file` with `yaml`.
pub(crate) fn with_agent(file: &str, yaml: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let agents = dir.path().join("agents");
    std::fs::create_dir_all(&agents).unwrap();
    std::fs::write(agents.join(file), yaml).unwrap();
    dir
}

/// Resumes `chat` on `addr` after `seq`, sends `answer`, and reads the run
/// to its end.
pub(crate) async fn answer_after(
    addr: SocketAddr,
    chat: Uuid,
    seq: &Value,
    answer: Value,
) -> Vec<Value> {
    let mut c = Client::connect(&format!("ws://{addr}/v1/ws")).await;
    c.resume(chat, seq.as_u64().unwrap()).await;
    c.recv_until(|m| m["type"] == "chat.resume_boundary").await;
    c.send(answer).await;
    c.until_complete(chat).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_cut_mid_stream_goes_on_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("agents")).unwrap();
    let (child, addr) = spawn_server(dir.path()).await;
    let chat = Uuid::new_v4();
    let mut c = Client::connect(&format!("ws://{addr}/v1/ws")).await;
    c.start(chat, "slow: 120").await;
    let mut seen = Vec::new();
    while seen.len() < 30 {
        seen.push(c.recv().await);
    }
    kill(child).await;
    while let Ok(m) = c.next().await {
        seen.push(m);
    }

    let (_child, addr) = spawn_server(dir.path()).await;
    let log = log_until_complete(addr, chat).await;
    assert_gap_free(&seqs(&log));
    for m in &seen {
        let seq = m["seq"].as_u64().unwrap() as usize;
        assert_eq!(log[seq - 1], *m, "seq {seq} changed after the crash");
    }
    // The cut turn is dropped, naming where it began, and asked again.
    let cut_turn = log
        .iter()
        .find(|m| m["type"] == "chat.select_speaker")
        .unwrap();
    let discarded: Vec<&Value> = log
        .iter()
        .filter(|m| m["type"] == "chat.turn_discarded")
        .collect();
    assert_eq!(discarded.len(), 1, "one turn dropped");
    assert_eq!(discarded[0]["from_seq"], cut_turn["seq"]);
    assert_eq!(discarded[0]["agent"], "demo");
    assert_eq!(discarded[0]["reason"], "restart");
    let after: Vec<Value> = log
        .iter()
        .skip_while(|m| m["type"] != "chat.turn_discarded")
        .skip(1)
        .cloned()
        .collect();
    assert_eq!(after[0]["type"], "chat.select_speaker");
    let words: Vec<String> = (1..=120).map(|i| format!("w{i}")).collect();
    assert_eq!(last_text(&after), words.join(" "), "the whole answer");
    let prints = after.iter().filter(|m| m["type"] == "chat.print").count();
    assert_eq!(prints, 120, "every word once after the drop");
    let end = log.last().unwrap();
    assert_eq!(end["reason"], "completed");
    assert_eq!(log[log.len() - 2]["type"], "chat.usage_summary");
    assert!(!log.iter().any(|m| m["reason"] == "interrupted"));

    // The chat carries on.
    let mut c = Client::connect(&format!("ws://{addr}/v1/ws")).await;
    c.resume(chat, log.len() as u64).await;
    c.recv_until(|m| m["type"] == "chat.resume_boundary").await;
    c.say(chat, "after").await;
    let more = c.until_complete(chat).await;
    assert_eq!(seqs(&more)[0], log.len() as u64 + 1);
}

/// The tool endpoints: the first call of each path never answers (the server
/// is killed while it waits); later ones answer `{"n": <calls so far>}`.
#[derive(Clone, Default)]
struct Tools {
    calls: Arc<Mutex<HashMap<String, u32>>>,
}

impl Tools {
    async fn start(&self) -> SocketAddr {
        async fn answer(State(tools): State<Tools>, uri: Uri) -> axum::Json<Value> {
            let n = {
                let mut calls = tools.calls.lock().unwrap();
                let n = calls.entry(uri.path().to_owned()).or_default();
                *n += 1;
                *n
            };
            if n == 1 {
                std::future::pending::<()>().await;
            }
            axum::Json(json!({ "n": n }))
        }
        let app = Router::new().fallback(answer).with_state(self.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        addr
    }

    fn count(&self, path: &str) -> u32 {
        self.calls.lock().unwrap().get(path).copied().unwrap_or(0)
    }
}

fn agent(tools: SocketAddr) -> String {
    format!(
        r#"id: tools
model:
  provider: scripted
  script:
    rules:
      - prefix: "lookup: "
        call: {{tool: lookup, input: {{q: "{{arg}}"}}}}
        then: "Looked up: {{result}}"
      - prefix: "charge: "
        call: {{tool: charge, input: {{q: "{{arg}}"}}}}
        then: "Charged: {{result}}"
system_prompt: Test.
tools:
  - name: lookup
    idempotent: true
    input_schema: {{type: object, properties: {{q: {{type: string}}}}, required: [q]}}
    http: {{method: POST, url: "http://{tools}/lookup"}}
  - name: charge
    input_schema: {{type: object, properties: {{q: {{type: string}}}}, required: [q]}}
    http: {{method: POST, url: "http://{tools}/charge"}}
"#
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_tool_call_runs_again_only_if_idempotent() {
    let tools = Tools::default();
    let tools_addr = tools.start().await;
    let dir = tempfile::tempdir().unwrap();
    let agents = dir.path().join("agents");
    std::fs::create_dir_all(&agents).unwrap();
    std::fs::write(agents.join("tools.yaml"), agent(tools_addr)).unwrap();
    let (child, addr) = spawn_server(dir.path()).await;
    let (lookup, charge) = (Uuid::new_v4(), Uuid::new_v4());
    let mut c = Client::connect(&format!("ws://{addr}/v1/ws")).await;
    c.start_with(lookup, "tools", "lookup: a").await;
    c.start_with(charge, "tools", "charge: b").await;
    // Both calls are logged and waiting on their endpoints.
    let mut calls = 0;
    while calls < 2 {
        if c.recv().await["type"] == "chat.tool_call" {
            calls += 1;
        }
    }
    for _ in 0..200 {
        if tools.count("/lookup") == 1 && tools.count("/charge") == 1 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    kill(child).await;

    let (_child, addr) = spawn_server(dir.path()).await;
    let log = log_until_complete(addr, lookup).await;
    assert_gap_free(&seqs(&log));
    // The idempotent call ran again: the same corr, logged again, answered.
    let corr = log.iter().find(|m| m["type"] == "chat.tool_call").unwrap()["corr"].clone();
    let of_call: Vec<&Value> = log.iter().filter(|m| m["corr"] == corr).collect();
    let kinds: Vec<&str> = of_call
        .iter()
        .map(|m| m["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        ["chat.tool_call", "chat.tool_call", "chat.tool_response"]
    );
    assert_eq!(of_call[2]["success"], true);
    assert_eq!(last_text(&log), r#"Looked up: {"n":2}"#);
    assert_eq!(log.last().unwrap()["reason"], "completed");
    assert_eq!(tools.count("/lookup"), 2);

    // The other was not: its result says the outcome is unknown, the model
    // sees that, and the endpoint was called once.
    let log = log_until_complete(addr, charge).await;
    assert_gap_free(&seqs(&log));
    let response = log
        .iter()
        .find(|m| m["type"] == "chat.tool_response")
        .unwrap();
    assert_eq!(response["success"], false);
    assert!(
        response["content"].as_str().unwrap().contains("unknown"),
        "{response}"
    );
    assert!(
        last_text(&log).starts_with("The tool charge failed: the outcome of this call is unknown")
    );
    assert_eq!(log.last().unwrap()["reason"], "completed");
    assert_eq!(tools.count("/charge"), 1, "never a second side effect");
}

/// Starts a run that asks a person, kills the server once the request is
/// logged, starts it again; returns the new address and the request.
async fn cut_while_asking(
    dir: &Path,
    agent: &str,
    text: &str,
    waits_on: &str,
    extra: &[&str],
) -> (Child, SocketAddr, Uuid, Value) {
    let url = database_url(dir).await;
    let flags: Vec<&str> = CONTINUE.iter().chain(extra).copied().collect();
    let (child, addr) = spawn_agentwire(&url, &dir.join("agents"), &flags).await;
    let chat = Uuid::new_v4();
    let mut c = Client::connect(&format!("ws://{addr}/v1/ws")).await;
    c.start_with(chat, agent, text).await;
    let asked = c.recv_until(|m| m["type"] == waits_on).await.pop().unwrap();
    kill(child).await;
    let (child, addr) = spawn_agentwire(&url, &dir.join("agents"), &flags).await;
    (child, addr, chat, asked)
}

/// [`cut_while_asking`] for the demo agent's `ask:` in a fresh data folder
/// (kept alive by the returned guard).
async fn cut_while_demo_asks(
    extra: &[&str],
) -> (tempfile::TempDir, Child, SocketAddr, Uuid, Value) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("agents")).unwrap();
    let text = "ask: Your name?";
    let (child, addr, chat, asked) =
        cut_while_asking(dir.path(), "demo", text, "chat.input_request", extra).await;
    (dir, child, addr, chat, asked)
}

/// Every envelope of `log` of this type.
fn of_type<'a>(log: &'a [Value], ty: &str) -> Vec<&'a Value> {
    log.iter().filter(|m| m["type"] == ty).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ask_keeps_waiting_and_an_answer_after_the_restart_finishes_the_run() {
    let (_dir, _child, addr, chat, asked) = cut_while_demo_asks(&[]).await;
    assert_eq!(asked["tool_name"], "ask_user");
    let rest = answer_after(addr, chat, &asked["seq"], json!({"type": "user.input.submit", "chat_id": chat, "request_id": asked["request_id"], "text": "Ada"})).await;
    // The answer is logged as the user's words, then acknowledged.
    assert_eq!(types(&rest)[..2], ["chat.text", "chat.input_ack"]);
    assert_eq!(rest[0]["content"], "Ada");
    assert_eq!(last_text(&rest), "You answered: Ada");
    assert_eq!(rest.last().unwrap()["reason"], "completed");

    let log = log_until_complete(addr, chat).await;
    assert_gap_free(&seqs(&log));
    assert_eq!(of_type(&log, "chat.input_request").len(), 1, "asked once");
    assert!(of_type(&log, "chat.error").is_empty());
    assert_eq!(of_type(&log, "chat.run_complete").len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ui_tool_keeps_waiting_for_its_result() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("agents")).unwrap();
    let (_child, addr, chat, shown) =
        cut_while_asking(dir.path(), "demo", "ui: board", "chat.tool_call", &[]).await;
    let rest = answer_after(addr, chat, &shown["seq"], json!({"type": "inline_component.result", "chat_id": chat, "corr": shown["corr"], "data": {"x": 1}})).await;
    assert_eq!(last_text(&rest), r#"Component returned: {"x":1}"#);
    let log = log_until_complete(addr, chat).await;
    assert_gap_free(&seqs(&log));
    assert_eq!(of_type(&log, "chat.tool_call").len(), 1, "shown once");
    assert_eq!(log.last().unwrap()["reason"], "completed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_keeps_waiting_and_the_approved_call_runs() {
    let dir = with_agent(
        "gated.yaml",
        r#"id: gated
model:
  provider: scripted
  script:
    rules:
      - prefix: "go: "
        arg: count
        max: 5
        call: {tool: guarded, input: {steps: "{arg}"}}
        then: "Tool said: {result}"
system_prompt: Test.
tools:
  - name: guarded
    input_schema: {type: object, properties: {steps: {type: integer, minimum: 1}}, required: [steps]}
    builtin: progress
    requires_approval: true
"#,
    );
    let (_child, addr, chat, gate) =
        cut_while_asking(dir.path(), "gated", "go: 2", "chat.tool_call", &[]).await;
    assert_eq!(gate["component_type"], "approval");
    let rest = answer_after(addr, chat, &gate["seq"], json!({"type": "inline_component.result", "chat_id": chat, "corr": gate["corr"], "data": {"approved": true}})).await;
    assert!(last_text(&rest).starts_with("Tool said:"), "{rest:?}");
    assert_eq!(rest.last().unwrap()["reason"], "completed");
    let log = log_until_complete(addr, chat).await;
    assert_gap_free(&seqs(&log));
    let gates = log
        .iter()
        .filter(|m| m["component_type"] == "approval")
        .count();
    assert_eq!(gates, 1, "asked once");
}

/// A request's timeout counts from when it was logged, not from the restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_times_out_from_when_it_was_asked() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("agents")).unwrap();
    let url = database_url(dir.path()).await;
    let flags = [CONTINUE[0], CONTINUE[1], "--input-timeout-seconds", "3"];
    let agents = dir.path().join("agents");
    let (child, addr) = spawn_agentwire(&url, &agents, &flags).await;
    let chat = Uuid::new_v4();
    let mut c = Client::connect(&format!("ws://{addr}/v1/ws")).await;
    c.start(chat, "ask: Your name?").await;
    c.recv_until(|m| m["type"] == "chat.input_request").await;
    kill(child).await;
    // Past the request's deadline while the server is down.
    tokio::time::sleep(std::time::Duration::from_millis(3_500)).await;
    let (_child, addr) = spawn_agentwire(&url, &agents, &flags).await;
    let log = log_until_complete(addr, chat).await;
    assert_gap_free(&seqs(&log));
    assert_eq!(log.last().unwrap()["reason"], "timeout");
    let ts = |ty: &str| {
        let m = of_type(&log, ty)[0];
        chrono::DateTime::parse_from_rfc3339(m["ts"].as_str().unwrap()).unwrap()
    };
    let waited = ts("chat.input_timeout") - ts("chat.input_request");
    // The first server was killed before the deadline; the next one timed
    // the request out at once (~4 s after it), not a whole timeout later.
    assert_eq!(of_type(&log, "chat.input_timeout").len(), 1);
    assert!(
        waited.num_milliseconds() < 6_000,
        "timed out after {waited}"
    );
}

/// An in-process server on `dir` that continues runs (its shutdown graceful).
async fn graceful(dir: tempfile::TempDir) -> Server {
    let settings = agentwire::config::Settings {
        continue_runs_after_restart: Some(true),
        ..Default::default()
    };
    Server::start_in(
        dir,
        Opts {
            settings,
            ..Default::default()
        },
    )
    .await
}

/// The whole log of a chat on `server`, as far as it goes now.
async fn log_now(server: &Server, chat: Uuid) -> Vec<Value> {
    let mut c = server.client().await;
    c.resume(chat, 0).await;
    let mut log = c.recv_until(|m| m["type"] == "chat.resume_boundary").await;
    log.pop();
    log.iter().map(without_replay).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_graceful_restart_lets_the_turn_in_flight_finish() {
    let server = graceful(tempfile::tempdir().unwrap()).await;
    let chat = Uuid::new_v4();
    let mut c = server.client().await;
    c.start(chat, "slow: 40").await;
    c.recv_until(|m| m["type"] == "chat.print").await;
    let server = graceful(server.stop().await).await;
    let log = log_now(&server, chat).await;
    assert_gap_free(&seqs(&log));
    assert_eq!(log.last().unwrap()["reason"], "completed");
    assert!(of_type(&log, "chat.turn_discarded").is_empty());
    assert_eq!(of_type(&log, "chat.print").len(), 40);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_graceful_restart_leaves_the_next_turn_to_the_next_start() {
    let server = graceful(tempfile::tempdir().unwrap()).await;
    let chat = Uuid::new_v4();
    let mut c = server.client().await;
    // A tool of 20 steps (25 ms each), then a second model turn.
    c.start(chat, "progress: 20").await;
    c.recv_until(|m| m["type"] == "chat.tool_progress").await;
    let dir = server.stop().await;
    // What the stop left, read by a server that does not continue runs (it
    // ends the cut run `interrupted`): the tool finished within the grace
    // period, the second turn was not begun.
    let settings = agentwire::config::Settings {
        continue_runs_after_restart: Some(false),
        ..Default::default()
    };
    let opts = Opts {
        settings,
        ..Default::default()
    };
    let server = Server::start_in(dir, opts).await;
    let log = log_now(&server, chat).await;
    let kinds = types(&log);
    assert_eq!(of_type(&log, "chat.select_speaker").len(), 1, "{kinds:?}");
    let n = log.len();
    assert_eq!(kinds[n - 2..], ["chat.tool_response", "chat.run_complete"]);
    assert_eq!(log[n - 1]["reason"], "interrupted");
    assert_eq!(log[n - 2]["success"], true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_graceful_restart_leaves_a_waiting_run_waiting() {
    let server = graceful(tempfile::tempdir().unwrap()).await;
    let chat = Uuid::new_v4();
    let mut c = server.client().await;
    c.start(chat, "ask: Your name?").await;
    let asked = c.recv_until(|m| m["type"] == "chat.input_request").await;
    let request = asked.last().unwrap()["request_id"].clone();
    let server = graceful(server.stop().await).await;
    let mut c = server.client().await;
    c.resume(chat, 0).await;
    c.recv_until(|m| m["type"] == "chat.resume_boundary").await;
    c.send(
        json!({"type": "user.input.submit", "chat_id": chat, "request_id": request, "text": "Ada"}),
    )
    .await;
    let rest = c.until_complete(chat).await;
    assert_eq!(last_text(&rest), "You answered: Ada");
    let log = log_now(&server, chat).await;
    assert_gap_free(&seqs(&log));
    assert_eq!(of_type(&log, "chat.input_request").len(), 1);
    assert!(!log.iter().any(|m| m["reason"] == "interrupted"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_given_before_the_restart_is_not_asked_again() {
    let dir = with_agent(
        "gated_ui.yaml",
        r#"id: gated_ui
model:
  provider: scripted
  script:
    rules:
      - prefix: "pick: "
        call: {tool: pick, input: {q: "{arg}"}}
        then: "Picked: {result}"
system_prompt: Test.
tools:
  - name: pick
    input_schema: {type: object, properties: {q: {type: string}}, required: [q]}
    ui: {component_type: picker}
    requires_approval: true
"#,
    );
    let agents = dir.path().join("agents");
    let url = database_url(dir.path()).await;
    let (child, addr) = spawn_agentwire(&url, &agents, &CONTINUE).await;
    let chat = Uuid::new_v4();
    let mut c = Client::connect(&format!("ws://{addr}/v1/ws")).await;
    c.start_with(chat, "gated_ui", "pick: a").await;
    let gate = c
        .recv_until(|m| m["type"] == "chat.tool_call")
        .await
        .pop()
        .unwrap();
    c.send(json!({"type": "inline_component.result", "chat_id": chat, "corr": gate["corr"], "data": {"approved": true}}))
        .await;
    let shown = c
        .recv_until(|m| m["type"] == "chat.tool_call" && m["component_type"] == "picker")
        .await
        .pop()
        .unwrap();
    kill(child).await;

    let (_child, addr) = spawn_agentwire(&url, &agents, &CONTINUE).await;
    let rest = answer_after(addr, chat, &shown["seq"], json!({"type": "inline_component.result", "chat_id": chat, "corr": shown["corr"], "data": {"x": 2}})).await;
    assert_eq!(last_text(&rest), r#"Picked: {"x":2}"#);
    let log = log_until_complete(addr, chat).await;
    assert_gap_free(&seqs(&log));
    let gates = log
        .iter()
        .filter(|m| m["component_type"] == "approval")
        .count();
    assert_eq!(gates, 1, "approved once, never asked again");
    assert_eq!(log.last().unwrap()["reason"], "completed");
}

/// Two members, round robin: `a` streams slowly, `b` answers, then the
/// conversation goes back to the user.
const GROUP: &str = r#"id: pair
group:
  speaker_selection: round_robin
  max_rounds: 5
  handoffs:
    after: {b: user}
  members:
    - name: a
      model:
        provider: scripted
        script:
          rules:
            - prefix: "slow: "
              arg: count
              stream: {delay_ms: 20}
            - reply: "a here"
    - name: b
      model:
        provider: scripted
        script:
          rules:
            - reply: "b done"
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_run_cut_mid_turn_goes_on_with_the_same_member() {
    let dir = with_agent("pair.yaml", GROUP);
    let url = database_url(dir.path()).await;
    let agents = dir.path().join("agents");
    let (child, addr) = spawn_agentwire(&url, &agents, &CONTINUE).await;
    let chat = Uuid::new_v4();
    let mut c = Client::connect(&format!("ws://{addr}/v1/ws")).await;
    c.start_with(chat, "pair", "slow: 60").await;
    let mut seen = 0;
    while seen < 20 {
        if c.recv().await["type"] == "chat.print" {
            seen += 1;
        }
    }
    kill(child).await;

    let (_child, addr) = spawn_agentwire(&url, &agents, &CONTINUE).await;
    let log = log_until_complete(addr, chat).await;
    assert_gap_free(&seqs(&log));
    let speakers: Vec<(String, String)> = of_type(&log, "chat.select_speaker")
        .iter()
        .map(|m| (own(&m["agent"]), own(&m["method"])))
        .collect();
    // `a` began (round robin), was cut, went on (`continue`), then `b`.
    assert_eq!(
        speakers,
        [
            ("a".into(), "round_robin".into()),
            ("a".into(), "continue".into()),
            ("b".into(), "round_robin".into())
        ]
    );
    assert_eq!(of_type(&log, "chat.turn_discarded").len(), 1);
    let texts: Vec<String> = of_type(&log, "chat.text")
        .iter()
        .map(|m| own(&m["content"]))
        .collect();
    let words: Vec<String> = (1..=60).map(|i| format!("w{i}")).collect();
    assert_eq!(texts[1..], [words.join(" "), "b done".to_owned()]);
    assert_eq!(log.last().unwrap()["reason"], "completed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_groups_question_of_who_speaks_next_keeps_waiting() {
    let manual = GROUP.replace("round_robin", "manual");
    let dir = with_agent("pair.yaml", &manual);
    let (_child, addr, chat, asked) =
        cut_while_asking(dir.path(), "pair", "hi", "chat.input_request", &[]).await;
    assert_eq!(asked["options"], json!(["a", "b"]));
    let rest = answer_after(addr, chat, &asked["seq"], json!({"type": "user.input.submit", "chat_id": chat, "request_id": asked["request_id"], "text": "b"})).await;
    assert_eq!(last_text(&rest), "b done");
    assert_eq!(rest.last().unwrap()["reason"], "completed");
    let log = log_until_complete(addr, chat).await;
    assert_gap_free(&seqs(&log));
    assert_eq!(of_type(&log, "chat.input_request").len(), 1, "asked once");
    let chosen = of_type(&log, "chat.select_speaker");
    assert_eq!(
        (own(&chosen[0]["agent"]), own(&chosen[0]["method"])),
        ("b".into(), "manual".into())
    );
    assert!(of_type(&log, "chat.error").is_empty());
}

fn own(v: &Value) -> String {
    v.as_str().unwrap_or_default().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workflow_cut_mid_call_is_not_run_again() {
    let tools = Tools::default();
    let tools_addr = tools.start().await;
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("agents").join("workflows");
    std::fs::create_dir_all(&folder).unwrap();
    std::fs::write(
        folder.join("ship.yaml"),
        format!(
            "id: ship\ntitle: Ship\ncategory: Ops\nhttp: {{url: \"http://{tools_addr}/ship\"}}\n"
        ),
    )
    .unwrap();
    let url = database_url(dir.path()).await;
    let agents = dir.path().join("agents");
    let (child, addr) = spawn_agentwire(&url, &agents, &CONTINUE).await;
    let chat = Uuid::new_v4();
    let mut c = Client::connect(&format!("ws://{addr}/v1/ws")).await;
    c.start(chat, "hi").await;
    c.until_complete(chat).await;
    c.send(
        json!({"type": "workflow.invoke", "chat_id": chat, "workflow": "ship", "parameters": {}}),
    )
    .await;
    c.recv_until(|m| m["component_type"] == "workflow").await;
    for _ in 0..200 {
        if tools.count("/ship") == 1 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    kill(child).await;

    let (_child, addr) = spawn_agentwire(&url, &agents, &CONTINUE).await;
    let log = log_until_complete(addr, chat).await;
    assert_gap_free(&seqs(&log));
    let invocation = of_type(&log, "chat.tool_call")
        .into_iter()
        .find(|m| m["component_type"] == "workflow")
        .unwrap();
    let response = of_type(&log, "chat.tool_response")
        .into_iter()
        .find(|m| m["corr"] == invocation["corr"])
        .unwrap();
    assert_eq!(response["success"], false);
    assert!(response["content"].as_str().unwrap().contains("unknown"));
    assert_eq!(log[log.len() - 3]["type"], "chat.error");
    assert_eq!(log.last().unwrap()["reason"], "error");
    assert_eq!(tools.count("/ship"), 1, "never run twice");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workflow_waiting_for_its_approval_keeps_waiting() {
    let tools = Tools::default();
    let tools_addr = tools.start().await;
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("agents").join("workflows");
    std::fs::create_dir_all(&folder).unwrap();
    std::fs::write(
        folder.join("ship.yaml"),
        format!(
            "id: ship\ntitle: Ship\ncategory: Ops\nrequires_approval: true\n\
             parameters: {{type: object, properties: {{to: {{type: string}}}}}}\n\
             http: {{url: \"http://{tools_addr}/ship\"}}\n"
        ),
    )
    .unwrap();
    // The first call of the path never answers: take it out of the way.
    let warm = tokio::spawn(use_up_first_call(tools_addr, "/ship"));
    let url = database_url(dir.path()).await;
    let agents = dir.path().join("agents");
    let (child, addr) = spawn_agentwire(&url, &agents, &CONTINUE).await;
    let chat = Uuid::new_v4();
    let mut c = Client::connect(&format!("ws://{addr}/v1/ws")).await;
    c.start(chat, "hi").await;
    c.until_complete(chat).await;
    c.send(json!({"type": "workflow.invoke", "chat_id": chat, "workflow": "ship", "parameters": {"to": "prod"}}))
        .await;
    let gate = c
        .recv_until(|m| m["component_type"] == "approval")
        .await
        .pop()
        .unwrap();
    kill(child).await;

    let (_child, addr) = spawn_agentwire(&url, &agents, &CONTINUE).await;
    let approve = json!({"type": "inline_component.result", "chat_id": chat, "corr": gate["corr"], "data": {"approved": true}});
    let rest = answer_after(addr, chat, &gate["seq"], approve).await;
    assert_eq!(rest.last().unwrap()["reason"], "completed");
    let log = log_until_complete(addr, chat).await;
    assert_gap_free(&seqs(&log));
    let invocations: Vec<&Value> = of_type(&log, "chat.tool_call")
        .into_iter()
        .filter(|m| m["component_type"] == "workflow")
        .collect();
    assert_eq!(invocations.len(), 1, "invoked once in the log");
    assert_eq!(
        of_type(&log, "chat.tool_call")
            .iter()
            .filter(|m| m["component_type"] == "approval")
            .count(),
        1,
        "asked once"
    );
    let response = of_type(&log, "chat.tool_response")
        .into_iter()
        .find(|m| m["corr"] == invocations[0]["corr"])
        .unwrap();
    assert_eq!(response["success"], true, "{response}");
    assert_eq!(response["content"], json!({"n": 2}));
    assert_eq!(tools.count("/ship"), 2, "run once, after the approval");
    assert!(of_type(&log, "chat.error").is_empty());
    warm.abort();
}

/// A GET that takes the tools' first call of a path (the one never answered).
async fn use_up_first_call(addr: SocketAddr, path: &'static str) {
    let _ = http_get(addr, path, &[]).await;
}

const QUIZ: &str = include_str!("../../examples/agents/capitals-quiz.yaml");

/// Reads `c` up to the next widget waiting for the user.
async fn widget(c: &mut Client) -> Value {
    c.recv_until(|m| m["type"] == "chat.tool_call" && m["awaiting_response"] == true)
        .await
        .pop()
        .unwrap()
}

fn result(chat: Uuid, widget: &Value, data: Value) -> Value {
    json!({"type": "inline_component.result", "chat_id": chat, "corr": widget["corr"], "data": data})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quiz_cut_while_a_widget_waits_goes_on_at_that_widget() {
    let dir = with_agent("quiz.yaml", QUIZ);
    let (child, addr) = spawn_server(dir.path()).await;
    let chat = Uuid::new_v4();
    let mut c = Client::connect(&format!("ws://{addr}/v1/ws")).await;
    c.send(json!({"type": "chat.start", "chat_id": chat, "agent": "capitals-quiz"}))
        .await;
    let france = widget(&mut c).await;
    c.send(result(chat, &france, json!({"answer": "Paris"})))
        .await;
    let nordics = widget(&mut c).await;
    kill(child).await;

    let (_child, addr) = spawn_server(dir.path()).await;
    let mut c = Client::connect(&format!("ws://{addr}/v1/ws")).await;
    c.resume(chat, nordics["seq"].as_u64().unwrap()).await;
    let since = c.recv_until(|m| m["type"] == "chat.resume_boundary").await;
    assert!(
        since
            .iter()
            .all(|m| ["chat.state", "chat.resume_boundary"].contains(&m["type"].as_str().unwrap())),
        "nothing shown again while the widget waits: {since:?}"
    );
    // Answered by the corr shown before the restart; the walk goes on.
    c.send(result(
        chat,
        &nordics,
        json!({"answer": ["Oslo", "Helsinki"]}),
    ))
    .await;
    let why = widget(&mut c).await;
    assert_eq!(why["payload"]["item_id"], "why");
    c.send(result(chat, &why, json!({"skip": true}))).await;
    let rest = c.until_complete(chat).await;
    // The score counts the answer given before the restart.
    assert_eq!(last_text(&rest), "You scored 2 of 2.");

    let log = log_until_complete(addr, chat).await;
    assert_gap_free(&seqs(&log));
    let items: Vec<&Value> = of_type(&log, "chat.progress")
        .iter()
        .map(|m| &m["current_item"])
        .collect();
    assert_eq!(items, [0, 1, 2, 3, 4], "each item shown once");
    assert_eq!(of_type(&log, "chat.tool_call").len(), 3, "each widget once");
    assert_eq!(of_type(&log, "chat.tool_response").len(), 3);
    assert!(of_type(&log, "chat.error").is_empty());
    assert!(of_type(&log, "chat.turn_discarded").is_empty());
    assert_eq!(of_type(&log, "chat.run_complete").len(), 1);
    let end = of_type(&log, "chat.run_complete")[0];
    assert_eq!(end["reason"], "completed");
    let states: Vec<&Value> = of_type(&log, "chat.state")
        .iter()
        .map(|m| &m["state"])
        .collect();
    assert_eq!(states.last().unwrap().as_str(), Some("completed"));
}

/// An answer that comes the moment a restarted server serves, before its
/// continued run has waited on the request again (the run's start is held
/// back by a test-only delay, so the answer always wins), is held and taken
/// once the run waits: never refused for a request the log shows open. An
/// answer to a request nobody asked is refused at once, and a second answer
/// to the same request has no second effect.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_that_beats_the_continued_run_is_held_not_refused() {
    let delay = ["--test-continue-delay-ms", "3000"];
    let (_dir, _child, addr, chat, asked) = cut_while_demo_asks(&delay).await;
    let mut c = Client::connect(&format!("ws://{addr}/v1/ws")).await;
    let submit = |id: &Value, text: &str| json!({"type": "user.input.submit", "chat_id": chat, "request_id": id, "text": text});
    c.send(submit(&json!("nobody-asked"), "x")).await;
    let refused = c.recv().await;
    assert_eq!(
        refused["error_code"], "INPUT_REQUEST_NOT_FOUND",
        "{refused}"
    );
    c.send(submit(&asked["request_id"], "Ada")).await;
    c.send(submit(&asked["request_id"], "Bob")).await;
    c.resume(chat, asked["seq"].as_u64().unwrap()).await;
    let rest = c.until_complete(chat).await;
    let errors: Vec<&Value> = of_type(&rest, "chat.error");
    assert_eq!(
        errors.len(),
        1,
        "only the second answer is refused: {rest:?}"
    );
    assert_eq!(errors[0]["error_code"], "INPUT_REQUEST_NOT_FOUND");
    assert!(errors[0].get("seq").is_none(), "not logged: {}", errors[0]);
    assert_eq!(last_text(&rest), "You answered: Ada");
    assert_eq!(rest.last().unwrap()["reason"], "completed");

    let log = log_until_complete(addr, chat).await;
    assert_gap_free(&seqs(&log));
    assert_eq!(of_type(&log, "chat.input_request").len(), 1, "asked once");
    assert_eq!(of_type(&log, "chat.input_ack").len(), 1, "answered once");
    let said: Vec<&Value> = of_type(&log, "chat.text")
        .into_iter()
        .filter(|m| m["agent"] == "user")
        .map(|m| &m["content"])
        .collect();
    assert_eq!(said, ["ask: Your name?", "Ada"]);
}

/// An agent whose tool is offered only for one `context_type`.
const OPS: &str = r#"id: ops
model:
  provider: scripted
  script:
    rules:
      - prefix: "ask: "
        call: {tool: ask_ops, input: {prompt: "{arg}"}}
        then: "Ops answered: {result}"
system_prompt: Test.
context_prompts:
  ops: You help the operations team.
tools:
  - name: ask_ops
    description: Ask the operator on duty
    input_schema: {type: object, properties: {prompt: {type: string}}, required: [prompt]}
    input_request: {prompt_field: prompt}
    context_types: [ops]
"#;

/// The run's `context_type` is in the log (on the user's message that
/// started it), so the run continued after a SIGKILL is offered the same
/// tools: its call of a tool only that context offers waits again and its
/// answer finishes the run (before, the continued run had the default
/// context, the call was refused as not offered and the answer found
/// nothing waiting).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_continued_run_keeps_its_context_type() {
    let dir = with_agent("ops.yaml", OPS);
    let (child, addr) = spawn_server(dir.path()).await;
    let chat = Uuid::new_v4();
    let body = json!({"message": "ask: Which host?", "context_type": "ops", "agent": "ops", "conversation_id": chat});
    // The turn's stream stays open while the run waits; the log is read
    // over a socket.
    let stream = agentwire::llm::http_client()
        .post(format!("http://{addr}/v1/agent/chat"))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status(), 200);
    let mut c = Client::connect(&format!("ws://{addr}/v1/ws")).await;
    c.resume(chat, 0).await;
    let seen = c.recv_until(|m| m["type"] == "chat.input_request").await;
    assert_eq!(seen[0]["context_type"], "ops", "{:?}", seen[0]);
    let asked = seen.last().unwrap().clone();
    kill(child).await;
    drop(stream);

    let (_child, addr) = spawn_server(dir.path()).await;
    let answer = json!({"type": "user.input.submit", "chat_id": chat, "request_id": asked["request_id"], "text": "web-1"});
    let rest = answer_after(addr, chat, &asked["seq"], answer).await;
    assert!(of_type(&rest, "chat.error").is_empty(), "{rest:?}");
    assert_eq!(last_text(&rest), "Ops answered: web-1");
    assert_eq!(rest.last().unwrap()["reason"], "completed");
    let log = log_until_complete(addr, chat).await;
    assert_gap_free(&seqs(&log));
    assert_eq!(of_type(&log, "chat.input_request").len(), 1, "asked once");
}

/// The usage summary of a run continued after a SIGKILL counts what the
/// run used before it (logged with the run's envelopes as `run_usage`): the
/// same as the same conversation's without a restart (before, only the
/// turns after the restart).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_continued_runs_usage_counts_what_it_used_before_the_restart() {
    let (_dir, _child, addr, chat, asked) = cut_while_demo_asks(&[]).await;
    // The model turn that asked is in the log with what it used.
    let before = asked["run_usage"]["demo"]["total_tokens"].as_u64().unwrap();
    assert!(before > 0, "{asked}");
    let answer = |chat: Uuid, id: &Value| json!({"type": "user.input.submit", "chat_id": chat, "request_id": id, "text": "Ada"});
    let rest = answer_after(
        addr,
        chat,
        &asked["seq"],
        answer(chat, &asked["request_id"]),
    )
    .await;
    let cut = of_type(&rest, "chat.usage_summary")[0].clone();

    // The same conversation, not cut.
    let whole = Uuid::new_v4();
    let mut c = Client::connect(&format!("ws://{addr}/v1/ws")).await;
    c.start(whole, "ask: Your name?").await;
    let asked = c.recv_until(|m| m["type"] == "chat.input_request").await;
    c.send(answer(whole, &asked.last().unwrap()["request_id"]))
        .await;
    let uncut = c.until_complete(whole).await;
    let uncut = of_type(&uncut, "chat.usage_summary")[0].clone();
    for field in ["total_tokens", "prompt_tokens", "completion_tokens"] {
        assert_eq!(cut[field], uncut[field], "{field}: {cut} vs {uncut}");
    }
    assert!(cut["total_tokens"].as_u64().unwrap() > before);
}
