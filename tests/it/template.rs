//! A static conversation template (seed 004) over `/v1/ws`: the agent starts,
//! widgets come in order with progress, answers are checked before anything is
//! logged, a waiting widget survives a reconnect, and the score ends it.

use serde_json::{Value, json};
use uuid::Uuid;

use crate::support::*;

const QUIZ: &str = include_str!("../../examples/agents/capitals-quiz.yaml");

async fn quiz_server() -> Server {
    Server::start_with(Opts {
        agents: vec![("quiz.yaml".into(), QUIZ.into())],
        ..Default::default()
    })
    .await
}

/// Reads up to the next widget (a `chat.tool_call` awaiting the user); what
/// came before it, without the `chat.state`s (their own test is below).
async fn next_widget(c: &mut Client) -> (Vec<Value>, Value) {
    let mut got = c
        .recv_until(|m| m["type"] == "chat.tool_call" && m["awaiting_response"] == true)
        .await;
    let widget = got.pop().unwrap();
    (no_state(&got), widget)
}

/// The messages without `chat.state`s.
fn no_state(msgs: &[Value]) -> Vec<Value> {
    msgs.iter()
        .filter(|m| m["type"] != "chat.state")
        .cloned()
        .collect()
}

/// The `state`s of the `chat.state`s among the messages.
fn states(msgs: &[Value]) -> Vec<&str> {
    msgs.iter()
        .filter(|m| m["type"] == "chat.state")
        .map(|m| m["state"].as_str().unwrap())
        .collect()
}

async fn answer(c: &mut Client, chat: Uuid, widget: &Value, data: Value) {
    c.send(json!({"type": "inline_component.result", "chat_id": chat, "corr": widget["corr"], "data": data}))
        .await;
}

async fn refused(c: &mut Client, chat: Uuid, widget: &Value, data: Value, why: &str) {
    answer(c, chat, widget, data).await;
    let mut got = c.recv_until(|m| m["type"] == "chat.error").await;
    let err = got.pop().unwrap();
    assert!(got.iter().all(|m| m["type"] == "chat.state"), "{got:?}");
    assert_eq!(err["error_code"], "SCHEMA_VALIDATION_FAILED");
    assert!(err.get("seq").is_none(), "a refusal is not logged");
    assert!(err["message"].as_str().unwrap().contains(why), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_static_quiz_runs_end_to_end() {
    let server = quiz_server().await;
    let mut c = server.client().await;
    let chat = Uuid::new_v4();
    // The agent starts first: no message.
    c.send(json!({"type": "chat.start", "chat_id": chat, "agent": "capitals-quiz"}))
        .await;
    let (before, w1) = next_widget(&mut c).await;
    assert_eq!(
        types(&before),
        ["chat.progress", "chat.text", "chat.progress"]
    );
    let progress: Vec<&Value> = before
        .iter()
        .filter(|m| m["type"] == "chat.progress")
        .collect();
    assert_eq!(progress[0]["current_item"], 0);
    assert_eq!(progress[0]["total_items"], 4);
    assert_eq!(progress[0]["item_title"], "Welcome");
    assert_eq!(progress[1]["current_item"], 1);
    assert_eq!(progress[1]["item_id"], "france");
    assert_eq!(w1["component_type"], "multiple_choice");
    assert_eq!(w1["payload"]["stem"], "What is the capital of France?");
    let mut offered: Vec<&str> = w1["payload"]["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o.as_str().unwrap())
        .collect();
    offered.sort_unstable();
    assert_eq!(offered, ["Berlin", "London", "Madrid", "Paris"]);

    // Refused before anything is logged: an option not offered, a skip of a
    // required question, two answers where one is asked.
    refused(
        &mut c,
        chat,
        &w1,
        json!({"answer": "Rome"}),
        "was not offered",
    )
    .await;
    refused(
        &mut c,
        chat,
        &w1,
        json!({"skip": true}),
        "cannot be skipped",
    )
    .await;
    refused(
        &mut c,
        chat,
        &w1,
        json!({"answer": ["Paris", "Berlin"]}),
        "one of the options",
    )
    .await;
    answer(&mut c, chat, &w1, json!({"answer": "Paris"})).await;
    let (between, w2) = next_widget(&mut c).await;
    assert_eq!(types(&between), ["chat.tool_response", "chat.progress"]);
    assert_eq!(between[0]["content"], json!({"answer": "Paris"}));
    assert_eq!(between[0]["corr"], w1["corr"]);
    assert_eq!(
        w2["seq"].as_u64().unwrap(),
        w1["seq"].as_u64().unwrap() + 5,
        "nothing logged for the refusals"
    );
    assert_eq!(w2["payload"]["widget_config"]["allow_multiple"], true);
    answer(&mut c, chat, &w2, json!({"answer": ["Helsinki", "Oslo"]})).await;
    let (_, w3) = next_widget(&mut c).await;
    assert_eq!(w3["component_type"], "free_text");
    assert_eq!(w3["payload"]["skippable"], true);

    // The connection drops while the widget waits; a new one (another tab,
    // or the same page reconnected) replays it once and can answer it.
    c.close().await;
    let mut d = server.client().await;
    d.resume(chat, 0).await;
    let replay = d.recv_until(|m| m["type"] == "chat.resume_boundary").await;
    let shown: Vec<&Value> = replay.iter().filter(|m| m["corr"] == w3["corr"]).collect();
    assert_eq!(shown.len(), 1, "the waiting widget is shown again, once");
    refused(
        &mut d,
        chat,
        &w3,
        json!({"answer": "Rome"}),
        "at least 10 characters",
    )
    .await;
    answer(&mut d, chat, &w3, json!({"skip": true})).await;
    let rest = no_state(&d.until_complete(chat).await);
    assert_eq!(
        types(&rest),
        [
            "chat.tool_response",
            "chat.progress",
            "chat.text",
            "chat.usage_summary",
            "chat.run_complete"
        ]
    );
    assert_eq!(
        rest[1]["current_item"], 4,
        "the last progress: all items done"
    );
    assert_eq!(last_text(&rest), "You scored 2 of 2.");
    assert_eq!(rest.last().unwrap()["reason"], "completed");

    // The whole log: gap-free, and the answers' key never in it.
    let mut e = server.client().await;
    e.resume(chat, 0).await;
    let log = e.recv_until(|m| m["type"] == "chat.resume_boundary").await;
    let log = &log[..log.len() - 1];
    assert_gap_free(&seqs(log));
    for m in log {
        let text = m.to_string();
        assert!(!text.contains("correct_answer"), "{text}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_answer_scores_and_two_tabs_see_the_same() {
    let server = quiz_server().await;
    let (mut a, mut b) = (server.client().await, server.client().await);
    let chat = Uuid::new_v4();
    a.send(json!({"type": "chat.start", "chat_id": chat, "agent": "capitals-quiz"}))
        .await;
    let (seen_a, w1) = next_widget(&mut a).await;
    b.resume(chat, 0).await;
    let replay = b.recv_until(|m| m["type"] == "chat.resume_boundary").await;
    let replayed: Vec<Value> = replay[..replay.len() - 1]
        .iter()
        .map(without_replay)
        .collect();
    assert_eq!(no_state(&replayed), [seen_a, vec![w1.clone()]].concat());
    // Answers from either tab move the one conversation.
    answer(&mut b, chat, &w1, json!({"answer": "Berlin"})).await;
    let (_, w2) = next_widget(&mut a).await;
    answer(&mut a, chat, &w2, json!({"answer": "Oslo"})).await;
    // Tab b sees the same widgets (the second one was answered in tab a).
    let (_, w2_on_b) = next_widget(&mut b).await;
    assert_eq!(w2_on_b, w2);
    let (_, w3) = next_widget(&mut b).await;
    answer(
        &mut b,
        chat,
        &w3,
        json!({"answer": "Oslo, for the fjords."}),
    )
    .await;
    let on_a = a.until_complete(chat).await;
    assert_eq!(last_text(&on_a), "You scored 0 of 2.");
    let on_b = b.until_complete(chat).await;
    assert_eq!(on_a.last(), on_b.last());
}

// ----- generated contents --------------------------------------------------

use crate::mock_llm::MockServer;
use crate::providers::server_with;
use crate::vendors::{OpenAiWire, Wire};

/// The answer key the test server keeps for `corr`, read from its database
/// beside it (SQLite: read-only, the server owns the file).
async fn kept_answer(server: &Server, chat: Uuid, corr: &str) -> Option<String> {
    use agentwire::store::Store as _;
    if on_postgres() {
        let url = std::fs::read_to_string(server.dir.path().join("postgres_url")).unwrap();
        let store = agentwire::store::PgStore::open(&url, 2).await.unwrap();
        return store.answer(chat, corr).await.unwrap();
    }
    let file = server.data_dir().join("agentwire.db");
    let options = sqlx::sqlite::SqliteConnectOptions::new()
        .filename(file)
        .read_only(true);
    let pool = sqlx::SqlitePool::connect_with(options).await.unwrap();
    sqlx::query_scalar("SELECT answer FROM template_answers WHERE chat_id = ? AND corr = ?")
        .bind(chat.to_string())
        .bind(corr)
        .fetch_optional(&pool)
        .await
        .unwrap()
}

/// A quiz of one generated question, over an OpenAI-compatible test server.
fn generated_quiz(llm: &MockServer, on_error: &str) -> String {
    generated_quiz_with(llm, on_error, false)
}

fn generated_quiz_with(llm: &MockServer, on_error: &str, feedback: bool) -> String {
    format!(
        r#"id: real
agent_starts_first: true
model:
  provider: openai
  name: test-model
  base_url: {}/v1
  api_key_env: AGENTWIRE_TEST_KEY
template:
  on_render_error: {on_error}
  provide_feedback: {feedback}
  skills:
    - id: sums
      stem: "Write an addition of two numbers under ${{max}}"
      options: "4 plausible sums"
      variables: {{max: "10"}}
  items:
    - id: gen
      contents:
        - {{widget_type: multiple_choice, is_templated: true, skill: sums}}
    - id: bye
      contents:
        - {{widget_type: message, stem: "Thanks!"}}
"#,
        llm.url()
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_generated_question_survives_two_bad_replies() {
    let w = OpenAiWire;
    let llm = MockServer::start(vec![
        w.text(&["Here you go: 2+2=4"], (10, 5)),
        w.text(
            &[r#"{"stem": "2 + 2?", "options": ["3", "4"], "correct_answer": "4"}"#],
            (10, 5),
        ),
        w.text(
            &[
                r#"{"stem": "2 + 2?", "options": ["3", "4", "5"], "#,
                r#""correct_answer": "4"}"#,
            ],
            (10, 5),
        ),
    ])
    .await;
    let server = server_with(generated_quiz(&llm, "continue")).await;
    let mut c = server.client().await;
    let chat = Uuid::new_v4();
    c.send(json!({"type": "chat.start", "chat_id": chat, "agent": "real"}))
        .await;
    let (before, widget) = next_widget(&mut c).await;
    assert_eq!(types(&before), ["chat.progress"]);
    assert_eq!(widget["payload"]["stem"], "2 + 2?");
    assert_eq!(widget["payload"]["options"].as_array().unwrap().len(), 3);
    assert!(!widget.to_string().contains("correct_answer"));
    // The answer key is kept on the server, never in the log.
    let kept = kept_answer(&server, chat, widget["corr"].as_str().unwrap()).await;
    assert_eq!(kept.as_deref(), Some(r#""4""#));
    answer(&mut c, chat, &widget, json!({"answer": "4"})).await;
    let rest = c.until_complete(chat).await;
    assert_eq!(last_text(&rest), "You scored 1 of 1.");
    let usage = rest
        .iter()
        .find(|m| m["type"] == "chat.usage_summary")
        .unwrap();
    assert_eq!(usage["total_tokens"], 45, "three model calls counted");

    // The model was told what was wrong, and saw the skill's prompt.
    let requests = llm.requests();
    assert_eq!(requests.len(), 3);
    let first = &requests[0].body;
    let prompt = first["messages"].as_array().unwrap().last().unwrap()["content"].to_string();
    assert!(
        prompt.contains("Write an addition of two numbers under 10"),
        "{prompt}"
    );
    let third = &requests[2].body;
    let told = third["messages"].as_array().unwrap().last().unwrap()["content"].to_string();
    assert!(told.contains("not 3 to 5"), "{told}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_question_the_model_cannot_write_fails_visibly_and_the_quiz_goes_on() {
    let w = OpenAiWire;
    let bad = || w.text(&["no idea"], (1, 1));
    let llm = MockServer::start(vec![bad(), bad(), bad()]).await;
    let server = server_with(generated_quiz(&llm, "continue")).await;
    let mut c = server.client().await;
    let chat = Uuid::new_v4();
    c.send(json!({"type": "chat.start", "chat_id": chat, "agent": "real"}))
        .await;
    let msgs = c.until_complete(chat).await;
    let err = msgs.iter().find(|m| m["type"] == "chat.error").unwrap();
    assert_eq!(err["details"]["kind"], "template_render_error");
    assert_eq!(err["details"]["content_id"], "gen-1");
    assert!(
        err["seq"].is_u64(),
        "in the log: a rejoining client sees it too"
    );
    assert_eq!(last_text(&msgs), "All done.");
    assert!(types(&msgs).contains(&"chat.text"), "the next item ran");
    assert_eq!(msgs.last().unwrap()["reason"], "completed");
    assert_eq!(llm.requests().len(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_feedback_the_model_comments_on_each_answer() {
    let w = OpenAiWire;
    let llm = MockServer::start(vec![
        w.text(
            &[r#"{"stem": "2 + 2?", "options": ["3", "4", "5"], "correct_answer": "4"}"#],
            (1, 1),
        ),
        w.text(&["Not quite: ", "2 + 2 is 4."], (1, 1)),
    ])
    .await;
    let server = server_with(generated_quiz_with(&llm, "stop", true)).await;
    let mut c = server.client().await;
    let chat = Uuid::new_v4();
    c.send(json!({"type": "chat.start", "chat_id": chat, "agent": "real"}))
        .await;
    let (_, widget) = next_widget(&mut c).await;
    answer(&mut c, chat, &widget, json!({"answer": "5"})).await;
    let rest = no_state(&c.until_complete(chat).await);
    assert_eq!(types(&rest)[..2], ["chat.tool_response", "chat.text"]);
    assert_eq!(rest[1]["content"], "Not quite: 2 + 2 is 4.");
    assert_eq!(last_text(&rest), "You scored 0 of 1.");
    let asked = llm.requests()[1].body["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()["content"]
        .to_string();
    assert!(asked.contains("The user answered: 5"), "{asked}");
    assert!(asked.contains("The answer is not correct."), "{asked}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_generated_question_waits_again_as_shown_after_a_restart() {
    let w = OpenAiWire;
    let llm = MockServer::start(vec![
        w.text(
            &[r#"{"stem": "2 + 2?", "options": ["3", "4", "5"], "correct_answer": "4"}"#],
            (1, 1),
        ),
        w.text(&["Not quite: 2 + 2 is 4."], (1, 1)),
    ])
    .await;
    let quiz = generated_quiz_with(&llm, "stop", true);
    let server = server_with(quiz.clone()).await;
    let mut c = server.client().await;
    let chat = Uuid::new_v4();
    c.send(json!({"type": "chat.start", "chat_id": chat, "agent": "real"}))
        .await;
    let (_, widget) = next_widget(&mut c).await;
    let dir = server.stop().await;
    let server = Server::start_in(
        dir,
        Opts {
            agents: vec![("real.yaml".into(), quiz)],
            ..Default::default()
        },
    )
    .await;
    let mut r = server.client().await;
    r.resume(chat, widget["seq"].as_u64().unwrap()).await;
    r.recv_until(|m| m["type"] == "chat.resume_boundary").await;
    // The question is not written again: its options and key are the ones
    // shown and kept before the restart.
    refused(
        &mut r,
        chat,
        &widget,
        json!({"answer": "7"}),
        "was not offered",
    )
    .await;
    answer(&mut r, chat, &widget, json!({"answer": "5"})).await;
    let rest = no_state(&r.until_complete(chat).await);
    assert_eq!(types(&rest)[..2], ["chat.tool_response", "chat.text"]);
    assert_eq!(rest[1]["content"], "Not quite: 2 + 2 is 4.");
    assert_eq!(last_text(&rest), "You scored 0 of 1.");
    assert_eq!(llm.requests().len(), 2, "generated once, then the feedback");
    let asked = llm.requests()[1].body["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()["content"]
        .to_string();
    assert!(asked.contains("The answer is not correct."), "{asked}");
}

// ----- seed 004's WebSocket dialect -------------------------------------------

use futures_util::{SinkExt, StreamExt};
use tokio_tungstenite::tungstenite::Message;

/// A client of `/api/chat/ws` (its messages are not envelopes, so they are not
/// checked against `protocol/outbound/`).
struct Seed {
    ws: tokio_tungstenite::WebSocketStream<
        tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>,
    >,
}

impl Seed {
    async fn connect(server: &Server, query: &str) -> Self {
        let url = format!("ws://{}/api/chat/ws?{query}", server.addr);
        let (ws, _) = tokio_tungstenite::connect_async(url).await.unwrap();
        Self { ws }
    }

    async fn send(&mut self, v: Value) {
        self.ws.send(Message::text(v.to_string())).await.unwrap();
    }

    async fn recv(&mut self) -> Value {
        loop {
            let msg = tokio::time::timeout(std::time::Duration::from_secs(10), self.ws.next())
                .await
                .expect("a message in time")
                .expect("open")
                .unwrap();
            if let Message::Text(t) = msg {
                let v: Value = serde_json::from_str(&t).unwrap();
                assert!(!t.contains("correct_answer"), "{t}");
                return v;
            }
        }
    }

    async fn until(&mut self, ty: &str) -> Vec<Value> {
        let mut got = Vec::new();
        loop {
            let v = self.recv().await;
            let done = v["type"] == ty;
            got.push(v);
            if done {
                return got;
            }
        }
    }
}

fn seed_types(msgs: &[Value]) -> Vec<&str> {
    msgs.iter().map(|m| m["type"].as_str().unwrap()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seed_004s_dialect_drives_the_quiz_and_rejoins_across_dialects() {
    let server = quiz_server().await;
    let mut s = Seed::connect(&server, "definition_id=capitals-quiz").await;
    let hello = s.recv().await;
    assert_eq!(hello["type"], "connected");
    assert_eq!(hello["definition_id"], "capitals-quiz");
    let chat: Uuid = hello["conversation_id"].as_str().unwrap().parse().unwrap();
    s.send(json!({"type": "ping"})).await;
    assert_eq!(s.recv().await["type"], "pong");

    s.send(json!({"type": "start"})).await;
    let first = s.until("widget").await;
    assert_eq!(
        seed_types(&first),
        [
            "progress",
            "content",
            "message_complete",
            "progress",
            "widget"
        ]
    );
    assert_eq!(first[0]["data"]["total_items"], 4);
    assert_eq!(
        first[1]["data"]["content"],
        "Three questions about capitals. Take your time."
    );
    let widget = &first[4]["data"];
    assert_eq!(widget["widget_type"], "multiple_choice");
    assert_eq!(widget["item_id"], "france");
    assert_eq!(widget["required"], true);

    // A `message` answers the waiting widget, checked the same way.
    s.send(json!({"type": "message", "content": "Rome"})).await;
    let err = s.recv().await;
    assert_eq!(err["type"], "error");
    assert_eq!(err["data"]["error_code"], "SCHEMA_VALIDATION_FAILED");
    s.send(json!({"type": "message", "content": "Paris"})).await;
    let next = s.until("widget").await;
    assert_eq!(seed_types(&next), ["progress", "widget"]);
    s.send(json!({"type": "message", "content": "[\"Oslo\", \"Helsinki\"]"}))
        .await;
    let next = s.until("widget").await;
    assert_eq!(next.last().unwrap()["data"]["widget_type"], "free_text");
    drop(s); // gone while the widget waits

    // Rejoined on the native protocol: the widget once, and it still answers.
    let mut c = server.client().await;
    c.resume(chat, 0).await;
    let replay = c.recv_until(|m| m["type"] == "chat.resume_boundary").await;
    let widgets: Vec<&Value> = replay
        .iter()
        .filter(|m| m["type"] == "chat.tool_call" && m["payload"]["widget_type"] == "free_text")
        .collect();
    assert_eq!(widgets.len(), 1);
    let corr = widgets[0]["corr"].clone();

    // And on seed 004's dialect again, after what it had seen.
    let mut again = Seed::connect(
        &server,
        &format!("definition_id=capitals-quiz&conversation_id={chat}"),
    )
    .await;
    assert_eq!(again.recv().await["conversation_id"], chat.to_string());
    let replayed = again.until("widget").await;
    assert_eq!(
        replayed.last().unwrap()["data"]["item_id"],
        "france",
        "a rejoin without last_seq replays all"
    );
    let rest = again.until("widget").await;
    let rest2 = again.until("widget").await;
    assert_eq!(rest.last().unwrap()["data"]["item_id"], "nordics");
    assert_eq!(rest2.last().unwrap()["data"]["item_id"], "why");

    // The native client answers; both see the end.
    c.send(json!({"type": "inline_component.result", "chat_id": chat, "corr": corr, "data": {"answer": "Helsinki, for the sea."}}))
        .await;
    let end = c.until_complete(chat).await;
    assert_eq!(last_text(&end), "You scored 2 of 2.");
    let tail = again.until("complete").await;
    assert_eq!(
        seed_types(&tail),
        ["progress", "content", "message_complete", "complete"]
    );
    assert_eq!(tail[1]["data"]["content"], "You scored 2 of 2.");
    assert_eq!(tail[3]["data"]["reason"], "completed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seed_004s_dialect_refuses_an_unknown_definition() {
    let server = quiz_server().await;
    let url = format!("ws://{}/api/chat/ws?definition_id=nope", server.addr);
    match tokio_tungstenite::connect_async(url).await {
        Err(tokio_tungstenite::tungstenite::Error::Http(response)) => {
            assert_eq!(
                response.status(),
                422,
                "an unknown agent, before the upgrade"
            );
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
}

// ----- the conversation state machine (seed 004 §4) ---------------------------

async fn send(c: &mut Client, ty: &str, chat: Uuid) {
    c.send(json!({"type": ty, "chat_id": chat})).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_transition_is_logged_and_an_illegal_one_is_refused() {
    let server = quiz_server().await;
    let mut c = server.client().await;
    let chat = Uuid::new_v4();
    c.send(json!({"type": "chat.start", "chat_id": chat, "agent": "capitals-quiz"}))
        .await;
    let got = c
        .recv_until(|m| m["type"] == "chat.state" && m["state"] == "awaiting_widget")
        .await;
    assert_eq!(states(&got), ["pending", "active", "awaiting_widget"]);
    let first = got.iter().find(|m| m["type"] == "chat.state").unwrap();
    assert!(first["previous"].is_null());
    let w1 = got
        .iter()
        .find(|m| m["type"] == "chat.tool_call")
        .unwrap()
        .clone();
    let (_, view) = http_json(&server, "GET", &format!("/v1/chats/{chat}"), "").await;
    assert_eq!(view["conversation_state"], "awaiting_widget");

    // Illegal: resuming what is not paused; archiving what has not ended.
    send(&mut c, "chat.resume_run", chat).await;
    let err = c.expect("chat.error").await;
    assert_eq!(err["error_code"], "SCHEMA_VALIDATION_FAILED");
    assert!(
        err["message"]
            .as_str()
            .unwrap()
            .contains("only a paused one resumes"),
        "{err}"
    );
    let (status, body) = http_json(&server, "DELETE", &format!("/v1/chats/{chat}"), "").await;
    assert_eq!(status, 409, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("cannot become archived"),
        "{body}"
    );

    // Pause: the widget waits, answers wait too; resume goes back to it.
    send(&mut c, "chat.pause", chat).await;
    let paused = c.expect("chat.state").await;
    assert_eq!(
        (paused["state"].as_str(), paused["previous"].as_str()),
        (Some("paused"), Some("awaiting_widget"))
    );
    answer(&mut c, chat, &w1, json!({"answer": "Paris"})).await;
    let err = c.expect("chat.error").await;
    assert!(err["message"].as_str().unwrap().contains("paused"), "{err}");
    let (_, view) = http_json(&server, "GET", &format!("/v1/chats/{chat}"), "").await;
    assert_eq!(view["conversation_state"], "paused");
    send(&mut c, "chat.resume_run", chat).await;
    let resumed = c.expect("chat.state").await;
    assert_eq!(resumed["state"], "awaiting_widget");
    assert_eq!(resumed["previous"], "paused");

    // Answer everything: active and awaiting_widget in turn, then completed.
    answer(&mut c, chat, &w1, json!({"answer": "Paris"})).await;
    let (_, w2) = next_widget(&mut c).await;
    answer(&mut c, chat, &w2, json!({"answer": ["Oslo"]})).await;
    let (_, w3) = next_widget(&mut c).await;
    answer(&mut c, chat, &w3, json!({"skip": true})).await;
    c.until_complete(chat).await;
    let done = c.expect("chat.state").await;
    assert_eq!(done["state"], "completed");
    // A completed conversation takes no new run, and is archived.
    c.say(chat, "again?").await;
    let err = c.expect("chat.error").await;
    assert!(
        err["message"].as_str().unwrap().contains("completed"),
        "{err}"
    );
    let (status, _) = http_json(&server, "DELETE", &format!("/v1/chats/{chat}"), "").await;
    assert!(status < 300);
    let archived = c.expect("chat.state").await;
    assert_eq!(
        (archived["state"].as_str(), archived["previous"].as_str()),
        (Some("archived"), Some("completed"))
    );

    // The whole walk, in the log.
    let mut r = server.client().await;
    r.resume(chat, 0).await;
    let log = r.recv_until(|m| m["type"] == "chat.resume_boundary").await;
    assert_eq!(
        states(&log),
        [
            "pending",
            "active",
            "awaiting_widget",
            "paused",
            "awaiting_widget",
            "active",
            "awaiting_widget",
            "active",
            "awaiting_widget",
            "active",
            "completed",
            "archived"
        ]
    );

    // Cancelled: terminated. And a chat without a template does not pause.
    let other = Uuid::new_v4();
    c.send(json!({"type": "chat.start", "chat_id": other, "agent": "capitals-quiz"}))
        .await;
    c.recv_until(|m| {
        m["type"] == "chat.state"
            && m["state"] == "awaiting_widget"
            && m["chat_id"] == other.to_string()
    })
    .await;
    send(&mut c, "chat.cancel", other).await;
    let end = c
        .recv_until(|m| m["type"] == "chat.state" && m["chat_id"] == other.to_string())
        .await;
    assert_eq!(end.last().unwrap()["state"], "terminated");
    let plain = Uuid::new_v4();
    c.start(plain, "hello").await;
    c.until_complete(plain).await;
    send(&mut c, "chat.pause", plain).await;
    let err = c.expect("chat.error").await;
    assert!(
        err["message"]
            .as_str()
            .unwrap()
            .contains("only template conversations pause"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_quiz_stays_paused_across_a_graceful_restart() {
    let server = quiz_server().await;
    let mut c = server.client().await;
    let chat = Uuid::new_v4();
    c.send(json!({"type": "chat.start", "chat_id": chat, "agent": "capitals-quiz"}))
        .await;
    let (_, w1) = next_widget(&mut c).await;
    send(&mut c, "chat.pause", chat).await;
    c.recv_until(|m| m["type"] == "chat.state" && m["state"] == "paused")
        .await;
    // A graceful stop leaves the walk where it is, for the next start.
    let dir = server.stop().await;
    let server = Server::start_in(
        dir,
        Opts {
            agents: vec![("quiz.yaml".into(), QUIZ.into())],
            ..Default::default()
        },
    )
    .await;
    let mut r = server.client().await;
    r.resume(chat, 0).await;
    let log = r.recv_until(|m| m["type"] == "chat.resume_boundary").await;
    assert!(
        !log.iter().any(|m| m["type"] == "chat.run_complete"),
        "{log:?}"
    );
    assert_eq!(states(&log).last(), Some(&"paused"));
    let (_, view) = http_json(&server, "GET", &format!("/v1/chats/{chat}"), "").await;
    assert_eq!(view["conversation_state"], "paused");
    // Still paused: the answer waits for the resume.
    answer(&mut r, chat, &w1, json!({"answer": "Paris"})).await;
    let err = r.expect("chat.error").await;
    assert!(err["message"].as_str().unwrap().contains("paused"), "{err}");
    send(&mut r, "chat.resume_run", chat).await;
    let resumed = r.expect("chat.state").await;
    assert_eq!(
        (resumed["state"].as_str(), resumed["previous"].as_str()),
        (Some("awaiting_widget"), Some("paused"))
    );
    // The widget shown before the restart is the one answered.
    answer(&mut r, chat, &w1, json!({"answer": "Paris"})).await;
    let (_, w2) = next_widget(&mut r).await;
    answer(&mut r, chat, &w2, json!({"answer": ["Oslo", "Helsinki"]})).await;
    let (_, w3) = next_widget(&mut r).await;
    answer(&mut r, chat, &w3, json!({"skip": true})).await;
    let rest = r.until_complete(chat).await;
    assert_eq!(last_text(&rest), "You scored 2 of 2.");
    assert_eq!(rest.last().unwrap()["reason"], "completed");

    let mut all = server.client().await;
    all.resume(chat, 0).await;
    let log = all
        .recv_until(|m| m["type"] == "chat.resume_boundary")
        .await;
    assert_gap_free(&seqs(&log));
    let widgets = log.iter().filter(|m| m["type"] == "chat.tool_call").count();
    assert_eq!(widgets, 3, "each widget shown once");
    assert_eq!(
        states(&log),
        [
            "pending",
            "active",
            "awaiting_widget",
            "paused",
            "awaiting_widget",
            "active",
            "awaiting_widget",
            "active",
            "awaiting_widget",
            "active",
            "completed"
        ]
    );
}
