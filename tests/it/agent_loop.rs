//! The agentic loop over a real provider adapter (OpenAI-compatible wire):
//! schema checks, turn limits, cancel, concurrency, bearer forwarding,
//! approvals, context injection, result caps and the JSON text format.

use std::time::Duration;

use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use uuid::Uuid;

use crate::mock_llm::{MockServer, Reply};
use crate::providers::{agent_yaml, server_with};
use crate::support::*;
use crate::vendors::{OpenAiWire, Wire};

const W: OpenAiWire = OpenAiWire;

/// The `content` of the tool messages of a recorded OpenAI request.
pub(crate) fn tool_messages(body: &Value) -> Vec<String> {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap().to_owned())
        .collect()
}

async fn chat(server: &Server, text: &str) -> (Client, Uuid, Vec<Value>) {
    let mut c = server.client().await;
    let chat = Uuid::new_v4();
    c.start_with(chat, "real", text).await;
    let msgs = c.until_complete(chat).await;
    (c, chat, msgs)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_input_that_breaks_the_schema_never_reaches_the_tool() {
    let llm = MockServer::start(vec![
        W.tools(
            None,
            &[("call_1", "get_weather", r#"{"town":"Paris"}"#)],
            (5, 5),
        ),
        W.text(&["Sorry."], (5, 5)),
    ])
    .await;
    let tool = MockServer::start(vec![]).await;
    let server = server_with(agent_yaml(&W, &llm, &tool, "")).await;
    let (_, _, msgs) = chat(&server, "Weather?").await;
    assert!(tool.requests().is_empty(), "the tool was never called");
    let resp = msgs
        .iter()
        .find(|m| m["type"] == "chat.tool_response")
        .unwrap();
    assert_eq!(resp["success"], false);
    let to_model = tool_messages(&llm.requests()[1].body);
    assert!(
        to_model[0].contains("invalid input") && to_model[0].contains("city"),
        "{to_model:?}"
    );
    assert_eq!(
        msgs.last().unwrap()["reason"],
        "completed",
        "tool errors are not fatal"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_turns_ends_the_run() {
    let call = [("call_1", "get_weather", r#"{"city":"Paris"}"#)];
    let llm = MockServer::start(vec![
        W.tools(None, &call, (1, 1)),
        W.tools(None, &call, (1, 1)),
    ])
    .await;
    let tool = MockServer::start(vec![Reply::echo(), Reply::echo()]).await;
    let server = server_with(agent_yaml(&W, &llm, &tool, "max_turns: 2")).await;
    let (_, _, msgs) = chat(&server, "Loop").await;
    let err = msgs.iter().find(|m| m["type"] == "chat.error").unwrap();
    assert!(
        err["message"]
            .as_str()
            .unwrap()
            .contains("Maximum tool-call rounds exceeded")
    );
    assert_eq!(msgs.last().unwrap()["reason"], "max_turns");
    assert_eq!(llm.requests().len(), 2);
    assert_eq!(
        msgs[msgs.len() - 2]["total_tokens"],
        4,
        "usage summed over the run"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_stops_the_upstream_request() {
    let words: Vec<String> = (0..200).map(|i| format!("w{i} ")).collect();
    let refs: Vec<&str> = words.iter().map(String::as_str).collect();
    let llm = MockServer::start(vec![W.text(&refs, (1, 1)).paced(Duration::from_millis(50))]).await;
    let tool = MockServer::start(vec![]).await;
    let server = server_with(agent_yaml(&W, &llm, &tool, "")).await;
    let mut c = server.client().await;
    let chat = Uuid::new_v4();
    c.start_with(chat, "real", "Talk").await;
    c.recv_until(|m| m["type"] == "chat.print").await;
    c.send(json!({"type": "chat.cancel", "chat_id": chat}))
        .await;
    let msgs = c.until_complete(chat).await;
    assert_eq!(msgs.last().unwrap()["reason"], "cancelled");
    assert!(
        llm.abandoned_soon().await,
        "the upstream stream was dropped"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_calls_keep_the_models_order_and_forward_the_bearer() {
    let calls = [
        ("call_a", "get_weather", r#"{"city":"Paris"}"#),
        ("call_b", "get_weather", r#"{"city":"Rome"}"#),
    ];
    let llm = MockServer::start(vec![W.tools(None, &calls, (1, 1)), W.text(&["ok"], (1, 1))]).await;
    // Whichever call arrives first answers last.
    let tool = MockServer::start(vec![
        Reply::echo().paced(Duration::from_millis(300)),
        Reply::echo(),
    ])
    .await;
    let server = server_with(agent_yaml(&W, &llm, &tool, "")).await;
    let token = "opaque.caller-token.123";
    let mut req = server.ws_url().into_client_request().unwrap();
    req.headers_mut()
        .insert("authorization", format!("Bearer {token}").parse().unwrap());
    let (ws, _) = tokio_tungstenite::connect_async(req).await.unwrap();
    let mut c = Client::from_stream(ws);
    let chat = Uuid::new_v4();
    c.start_with(chat, "real", "Two cities").await;
    c.until_complete(chat).await;
    let results = tool_messages(&llm.requests()[1].body);
    assert!(
        results[0].contains("Paris") && results[1].contains("Rome"),
        "{results:?}"
    );
    for r in tool.requests() {
        assert_eq!(
            r.headers["authorization"],
            format!("Bearer {token}").as_str()
        );
    }
    assert_eq!(tool.requests().len(), 2);
}

pub(crate) fn approval_agent(llm: &MockServer, tool: &MockServer) -> String {
    agent_yaml(&W, llm, tool, "").replace("    http: {", "    requires_approval: true\n    http: {")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approval_granted_and_refused() {
    let call = [("call_1", "get_weather", r#"{"city":"Paris"}"#)];
    let llm = MockServer::start(vec![
        W.tools(None, &call, (1, 1)),
        W.text(&["Granted."], (1, 1)),
        W.tools(None, &call, (1, 1)),
        W.text(&["Refused."], (1, 1)),
    ])
    .await;
    let tool = MockServer::start(vec![Reply::json(200, r#"{"temp":21}"#)]).await;
    let server = server_with(approval_agent(&llm, &tool)).await;
    let mut c = server.client().await;
    let chat = Uuid::new_v4();
    c.start_with(chat, "real", "Weather?").await;

    for (answer, expect_call) in [
        (json!({"approved": true}), true),
        (json!({"approved": false, "reason": "not now"}), false),
    ] {
        let msgs = c.recv_until(|m| m["type"] == "chat.tool_call").await;
        let gate = msgs.last().unwrap();
        assert_eq!(gate["component_type"], "approval");
        assert_eq!(gate["awaiting_response"], true);
        assert_eq!(gate["payload"]["tool_name"], "get_weather");
        assert_eq!(gate["payload"]["input"], json!({"city": "Paris"}));
        let before = tool.requests().len();
        c.send(json!({"type": "inline_component.result", "chat_id": chat, "corr": gate["corr"], "data": answer}))
            .await;
        let rest = c.until_complete(chat).await;
        assert_eq!(tool.requests().len(), before + usize::from(expect_call));
        assert_eq!(rest.last().unwrap()["reason"], "completed");
        if !expect_call {
            let to_model = tool_messages(&llm.requests()[3].body);
            assert!(
                to_model.last().unwrap().contains("refused")
                    && to_model.last().unwrap().contains("not now")
            );
            c.say(chat, "").await; // rejected by schema (empty text): no run
            assert_eq!(
                c.expect("chat.error").await["error_code"],
                "SCHEMA_VALIDATION_FAILED"
            );
        } else {
            c.say(chat, "Again?").await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approvals_answered_in_one_batch() {
    let calls = [
        ("call_a", "get_weather", r#"{"city":"Paris"}"#),
        ("call_b", "get_weather", r#"{"city":"Rome"}"#),
    ];
    let llm = MockServer::start(vec![
        W.tools(None, &calls, (1, 1)),
        W.text(&["Both."], (1, 1)),
    ])
    .await;
    let tool = MockServer::start(vec![Reply::echo(), Reply::echo()]).await;
    let server = server_with(approval_agent(&llm, &tool)).await;
    let mut c = server.client().await;
    let chat = Uuid::new_v4();
    c.start_with(chat, "real", "Two cities").await;
    let mut gates = Vec::new();
    while gates.len() < 2 {
        let m = c.recv().await;
        if m["type"] == "chat.tool_call" && m["component_type"] == "approval" {
            gates.push(m);
        }
    }
    c.send(
        json!({"type": "inline_component.result", "chat_id": chat, "corr": gates[0]["corr"],
                  "data": {"approved": true, "all": true}}),
    )
    .await;
    let rest = c.until_complete(chat).await;
    assert_eq!(rest.last().unwrap()["reason"], "completed");
    assert_eq!(tool.requests().len(), 2, "one answer approved both");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn context_injection_and_result_caps() {
    let llm = MockServer::start(vec![
        // The model forgets `city` and gives `units` as a number.
        W.tools(None, &[("call_1", "get_weather", r#"{"units":1}"#)], (1, 1)),
        W.text(&["ok"], (1, 1)),
    ])
    .await;
    let tool = MockServer::start(vec![Reply::json(200, &format!("\"{}\"", "y".repeat(500)))]).await;
    let yaml = agent_yaml(&W, &llm, &tool, "max_tool_result_chars: 100").replace(
        "    http: {",
        "    inject: {city: context.place.city, units: context.units}\n    http: {",
    );
    let server = server_with(yaml).await;
    let mut c = server.client().await;
    let chat = Uuid::new_v4();
    c.send(
        json!({"type": "chat.start", "chat_id": chat, "agent": "real", "message": "Weather?",
                  "context": {"place": {"city": "Oslo"}, "units": "metric"}}),
    )
    .await;
    c.until_complete(chat).await;
    assert_eq!(
        tool.requests()[0].body,
        json!({"city": "Oslo", "units": "metric"})
    );
    let to_model = tool_messages(&llm.requests()[1].body);
    assert!(to_model[0].contains("[truncated: "), "{}", to_model[0]);
    assert!(to_model[0].chars().count() < 200);
    // The context reaches the model too.
    let system = llm.requests()[0].body["messages"][0]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(system.contains("Oslo"), "{system}");
}

fn json_agent(llm: &MockServer, tool: &MockServer) -> String {
    agent_yaml(&W, llm, tool, "tool_call_format: json")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_format_fenced_call_then_answer() {
    let llm = MockServer::start(vec![
        W.text(
            &[
                "Let me look.\n",
                "```json\n{\"tool\": \"get_weather\", ",
                "\"parameters\": {\"city\": \"Paris\"}, \"terminate\": false}\n```",
            ],
            (1, 1),
        ),
        W.text(&["It is sunny."], (1, 1)),
    ])
    .await;
    let tool = MockServer::start(vec![Reply::json(200, r#"{"sky":"sunny"}"#)]).await;
    let server = server_with(json_agent(&llm, &tool)).await;
    let (_, _, msgs) = chat(&server, "Weather?").await;
    let shown: String = msgs
        .iter()
        .filter(|m| m["type"] == "chat.print")
        .map(|m| m["content"].as_str().unwrap())
        .collect();
    assert_eq!(
        shown, "Let me look.\nIt is sunny.",
        "no tool JSON reaches the client"
    );
    assert_eq!(tool.requests()[0].body, json!({"city": "Paris"}));
    assert_eq!(last_text(&msgs), "It is sunny.");
    // No native tools are sent; the format instruction is in the system prompt.
    let first = &llm.requests()[0].body;
    assert!(first.get("tools").is_none());
    assert!(
        first["messages"][0]["content"]
            .as_str()
            .unwrap()
            .contains("\"terminate\"")
    );
    let second = llm.requests()[1].body["messages"]
        .as_array()
        .unwrap()
        .clone();
    assert!(
        second.last().unwrap()["content"]
            .as_str()
            .unwrap()
            .contains("sunny")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_format_terminate_ends_the_run() {
    let llm = MockServer::start(vec![W.text(
        &["{\"tool\": \"get_weather\", \"parameters\": {\"city\": \"Rome\"}, \"terminate\": true}"],
        (1, 1),
    )])
    .await;
    let tool = MockServer::start(vec![Reply::json(200, r#"{"sky":"grey"}"#)]).await;
    let server = server_with(json_agent(&llm, &tool)).await;
    let (_, _, msgs) = chat(&server, "Weather?").await;
    assert_eq!(msgs.last().unwrap()["reason"], "completed");
    assert_eq!(llm.requests().len(), 1);
    assert_eq!(tool.requests().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_format_bad_replies_go_back_then_fail() {
    let bad = "{\"tool\": \"get_weather\", \"parameters\": {\"city\": ";
    let llm = MockServer::start(vec![
        W.text(&[bad], (1, 1)),
        W.text(&[bad], (1, 1)),
        W.text(&[bad], (1, 1)),
        W.text(&[bad], (1, 1)),
    ])
    .await;
    let tool = MockServer::start(vec![]).await;
    let server = server_with(json_agent(&llm, &tool)).await;
    let (_, _, msgs) = chat(&server, "Weather?").await;
    assert_eq!(
        llm.requests().len(),
        4,
        "three errors went back to the model"
    );
    for r in &llm.requests()[1..] {
        let last = r.body["messages"]
            .as_array()
            .unwrap()
            .last()
            .unwrap()
            .clone();
        assert!(
            last["content"]
                .as_str()
                .unwrap()
                .contains("could not be parsed"),
            "{last}"
        );
    }
    let err = msgs.iter().find(|m| m["type"] == "chat.error").unwrap();
    assert!(
        err["message"]
            .as_str()
            .unwrap()
            .contains("could not be parsed")
    );
    assert_eq!(msgs.last().unwrap()["reason"], "error");
    assert!(tool.requests().is_empty());
    assert!(
        msgs.iter().all(|m| !m.to_string().contains("\\\"tool\\\"")),
        "no tool JSON shown"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_over_its_time_ends_with_timeout_and_usage_has_a_cost() {
    let words: Vec<String> = (0..100).map(|i| format!("w{i} ")).collect();
    let refs: Vec<&str> = words.iter().map(String::as_str).collect();
    let llm = MockServer::start(vec![
        W.text(&["quick"], (1000, 500)),
        W.text(&refs, (1, 1)).paced(Duration::from_millis(50)),
    ])
    .await;
    let tool = MockServer::start(vec![]).await;
    let yaml = agent_yaml(&W, &llm, &tool, "run_timeout_seconds: 1").replace(
        "  api_key_env: AGENTWIRE_TEST_KEY\n",
        "  api_key_env: AGENTWIRE_TEST_KEY\n  price: {prompt_per_million: 2.0, completion_per_million: 8.0}\n",
    );
    let server = server_with(yaml).await;
    let (mut c, chat, msgs) = chat(&server, "Quick one").await;
    let usage = &msgs[msgs.len() - 2];
    assert_eq!(usage["type"], "chat.usage_summary");
    // 1000 × 2 / 1e6 + 500 × 8 / 1e6
    assert_eq!(usage["cost"], 0.006);

    c.say(chat, "Slow one").await;
    let msgs = c.until_complete(chat).await;
    assert_eq!(msgs.last().unwrap()["reason"], "timeout");
    assert!(msgs.iter().filter(|m| m["type"] == "chat.print").count() < 100);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_later_run_sees_earlier_tool_calls_and_results() {
    let llm = MockServer::start(vec![
        W.tools(
            Some("Checking."),
            &[("call_1", "get_weather", r#"{"city":"Oslo"}"#)],
            (1, 1),
        ),
        W.text(&["3 degrees."], (1, 1)),
        W.text(&["Still 3."], (1, 1)),
    ])
    .await;
    let tool = MockServer::start(vec![Reply::json(200, r#"{"temp":3}"#)]).await;
    let server = server_with(agent_yaml(&W, &llm, &tool, "")).await;
    let (mut c, chat, _) = chat(&server, "Weather in Oslo?").await;
    c.say(chat, "And now?").await;
    c.until_complete(chat).await;
    let messages = llm.requests()[2].body["messages"].clone();
    let roles: Vec<&str> = messages
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(
        roles,
        ["system", "user", "assistant", "tool", "assistant", "user"]
    );
    assert_eq!(messages[2]["content"], "Checking.");
    assert_eq!(messages[2]["tool_calls"][0]["id"], "call_1");
    assert_eq!(
        messages[3],
        json!({"role": "tool", "tool_call_id": "call_1", "content": r#"{"temp":3}"#})
    );
    assert_eq!(messages[5]["content"], "And now?");
}
