//! Each provider against a local server replaying its vendor's stream format:
//! the exact envelopes in the log and the exact requests sent.

use serde_json::{Value, json};
use uuid::Uuid;

use crate::mock_llm::{MockServer, Reply};
use crate::support::*;
use crate::vendors::*;

const KEY: &str = "sk-test-not-a-real-key";
const SYSTEM: &str = "You help with the weather.";

pub fn set_key() {
    // SAFETY: every test sets the same value, so concurrent writers agree;
    // nothing in this process reads the variable while it is missing.
    unsafe { std::env::set_var("AGENTWIRE_TEST_KEY", KEY) };
}

/// An agent on `llm` with one HTTP tool on `tool`.
pub fn agent_yaml(wire: &dyn Wire, llm: &MockServer, tool: &MockServer, extra: &str) -> String {
    let base = match wire.provider() {
        "openai" => format!("{}/v1", llm.url()),
        _ => llm.url(),
    };
    format!(
        r#"id: real
model:
  provider: {provider}
  name: test-model
  base_url: {base}
  api_key_env: AGENTWIRE_TEST_KEY
system_prompt: {SYSTEM}
tools:
  - name: get_weather
    description: Current weather for a city
    input_schema: {{type: object, properties: {{city: {{type: string}}}}, required: [city]}}
    http: {{method: POST, url: "{tool}/weather"}}
{extra}"#,
        provider = wire.provider(),
        tool = tool.url(),
    )
}

pub async fn server_with(agent: String) -> Server {
    set_key();
    Server::start_with(Opts {
        agents: vec![("real.yaml".into(), agent)],
        ..Default::default()
    })
    .await
}

async fn run_chat(server: &Server, text: &str) -> Vec<Value> {
    let mut c = server.client().await;
    let chat = Uuid::new_v4();
    c.start_with(chat, "real", text).await;
    let msgs = c.until_complete(chat).await;
    assert_gap_free(&seqs(&msgs));
    msgs
}

fn check_key(wire: &dyn Wire, llm: &MockServer) {
    let req = &llm.requests()[0];
    assert_eq!(req.method, "POST");
    assert_eq!(req.uri, wire.path());
    let h = |n: &str| req.headers.get(n).map(|v| v.to_str().unwrap().to_owned());
    match wire.provider() {
        "anthropic" => {
            assert_eq!(h("x-api-key").as_deref(), Some(KEY));
            assert_eq!(h("anthropic-version").as_deref(), Some("2023-06-01"));
        }
        "gemini" => assert_eq!(h("x-goog-api-key").as_deref(), Some(KEY)),
        _ => assert_eq!(h("authorization"), Some(format!("Bearer {KEY}"))),
    }
}

async fn text_only(wire: &dyn Wire) {
    let llm = MockServer::start(vec![wire.text(&["Hello", " there", "!"], (12, 3))]).await;
    let tool = MockServer::start(vec![]).await;
    let server = server_with(agent_yaml(wire, &llm, &tool, "")).await;
    let msgs = run_chat(&server, "Hi").await;
    assert_eq!(
        types(&msgs),
        [
            "chat.text",
            "chat.select_speaker",
            "chat.print",
            "chat.print",
            "chat.print",
            "chat.text",
            "chat.usage_summary",
            "chat.run_complete"
        ]
    );
    assert_eq!(msgs[1]["agent"], "real");
    assert_eq!(msgs[5]["content"], "Hello there!");
    assert_eq!(
        (
            &msgs[6]["prompt_tokens"],
            &msgs[6]["completion_tokens"],
            &msgs[6]["total_tokens"]
        ),
        (&json!(12), &json!(3), &json!(15))
    );
    assert_eq!(msgs[7]["reason"], "completed");
    check_key(wire, &llm);
    wire.check_request(&llm.requests()[0].body, SYSTEM, "Hi", &["get_weather"]);
}

async fn one_tool_call(wire: &dyn Wire) {
    let calls = [("call_1", "get_weather", r#"{"city":"Paris"}"#)];
    let llm = MockServer::start(vec![
        wire.tools(Some("Checking."), &calls, (20, 5)),
        wire.text(&["It is 21 degrees."], (40, 6)),
    ])
    .await;
    let tool = MockServer::start(vec![Reply::json(200, r#"{"temp":21}"#)]).await;
    let server = server_with(agent_yaml(wire, &llm, &tool, "")).await;
    let msgs = run_chat(&server, "Weather in Paris?").await;
    assert_eq!(
        types(&msgs),
        [
            "chat.text",
            "chat.select_speaker",
            "chat.print",
            "chat.text",
            "chat.tool_call",
            "chat.tool_response",
            "chat.select_speaker",
            "chat.print",
            "chat.text",
            "chat.usage_summary",
            "chat.run_complete"
        ]
    );
    let (call, resp) = (&msgs[4], &msgs[5]);
    assert_eq!(call["tool_name"], "get_weather");
    assert!(call["component_type"].is_null());
    assert_eq!(call["awaiting_response"], false);
    assert_eq!(call["payload"], json!({"city": "Paris"}));
    assert_eq!(resp["corr"], call["corr"]);
    assert_eq!(resp["success"], true);
    assert_eq!(resp["content"], json!({"temp": 21}));
    assert_eq!(msgs[8]["content"], "It is 21 degrees.");
    assert_eq!(
        (&msgs[9]["prompt_tokens"], &msgs[9]["completion_tokens"]),
        (&json!(60), &json!(11))
    );
    assert_eq!(tool.requests()[0].body, json!({"city": "Paris"}));
    let corr = call["corr"].as_str().unwrap();
    let sent = [(corr, "get_weather", r#"{"city":"Paris"}"#)];
    wire.check_results(&llm.requests()[1].body, &sent, &["21"]);
}

async fn two_tool_calls(wire: &dyn Wire) {
    let calls = [
        ("call_a", "get_weather", r#"{"city":"Paris"}"#),
        ("call_b", "get_weather", r#"{"city":"Rome"}"#),
    ];
    let llm = MockServer::start(vec![
        wire.tools(None, &calls, (20, 5)),
        wire.text(&["Done."], (40, 2)),
    ])
    .await;
    // The tool answers with what it was sent, so each result names its city.
    let tool = MockServer::start(vec![Reply::echo(), Reply::echo()]).await;
    let server = server_with(agent_yaml(wire, &llm, &tool, "")).await;
    let msgs = run_chat(&server, "Paris and Rome?").await;
    let tool_calls: Vec<&Value> = msgs
        .iter()
        .filter(|m| m["type"] == "chat.tool_call")
        .collect();
    assert_eq!(tool_calls.len(), 2);
    assert_eq!(
        msgs.iter()
            .filter(|m| m["type"] == "chat.tool_response" && m["success"] == true)
            .count(),
        2
    );
    let corr: Vec<String> = tool_calls
        .iter()
        .map(|c| c["corr"].as_str().unwrap().to_owned())
        .collect();
    assert_ne!(corr[0], corr[1]);
    let sent = [
        (corr[0].as_str(), "get_weather", r#"{"city":"Paris"}"#),
        (corr[1].as_str(), "get_weather", r#"{"city":"Rome"}"#),
    ];
    wire.check_results(&llm.requests()[1].body, &sent, &["Paris", "Rome"]);
    assert_eq!(msgs.last().unwrap()["reason"], "completed");
}

async fn error_mid_stream(wire: &dyn Wire) {
    let llm = MockServer::start(vec![wire.error_mid_stream("Part", "Overloaded right now")]).await;
    let tool = MockServer::start(vec![]).await;
    let server = server_with(agent_yaml(wire, &llm, &tool, "")).await;
    let msgs = run_chat(&server, "Hi").await;
    let err = msgs
        .iter()
        .find(|m| m["type"] == "chat.error")
        .expect("a logged error");
    assert!(
        err["message"]
            .as_str()
            .unwrap()
            .contains("Overloaded right now"),
        "{err}"
    );
    assert!(
        err["message"].as_str().unwrap().contains(wire.provider()),
        "{err}"
    );
    assert!(err["seq"].is_u64());
    assert_eq!(last_text(&msgs), "Part");
    assert_eq!(msgs.last().unwrap()["reason"], "error");
    assert_eq!(llm.requests().len(), 1, "a mid-stream error is not retried");
}

async fn retry_after_429(wire: &dyn Wire) {
    let llm = MockServer::start(vec![
        Reply::json(429, r#"{"error":{"message":"slow down"}}"#).header("retry-after", "0"),
        wire.text(&["ok"], (1, 1)),
    ])
    .await;
    let tool = MockServer::start(vec![]).await;
    let server = server_with(agent_yaml(wire, &llm, &tool, "")).await;
    let msgs = run_chat(&server, "Hi").await;
    assert_eq!(last_text(&msgs), "ok");
    assert_eq!(msgs.last().unwrap()["reason"], "completed");
    assert!(msgs.iter().all(|m| m["type"] != "chat.error"));
    assert_eq!(llm.requests().len(), 2);
    assert_eq!(llm.requests()[0].body, llm.requests()[1].body);
}

async fn stream_cut(wire: &dyn Wire) {
    let llm = MockServer::start(vec![wire.cut("Par")]).await;
    let tool = MockServer::start(vec![]).await;
    let server = server_with(agent_yaml(wire, &llm, &tool, "")).await;
    let msgs = run_chat(&server, "Hi").await;
    let err = msgs
        .iter()
        .find(|m| m["type"] == "chat.error")
        .expect("a logged error");
    assert!(
        err["message"].as_str().unwrap().contains("ended before"),
        "{err}"
    );
    assert_eq!(err["error_code"], "TRANSPORT_ERROR");
    assert_eq!(msgs.last().unwrap()["reason"], "error");
}

/// The reasoning a model streams is logged as `chat.reasoning` before its
/// answer, and never sent back to it; an agent with `show_reasoning: false`
/// drops it.
async fn reasoning(wire: &dyn Wire) {
    let thought = "The user greets me; a greeting back.";
    let llm = MockServer::start(vec![
        wire.thinking(thought, "Hello!", (12, 9)),
        wire.text(&["Again."], (20, 1)),
        wire.thinking(thought, "Hello!", (12, 9)),
    ])
    .await;
    let tool = MockServer::start(vec![]).await;
    let server = server_with(agent_yaml(wire, &llm, &tool, "")).await;
    let mut c = server.client().await;
    let chat = Uuid::new_v4();
    c.start_with(chat, "real", "Hi").await;
    let msgs = c.until_complete(chat).await;
    assert_eq!(
        types(&msgs),
        [
            "chat.text",
            "chat.select_speaker",
            "chat.reasoning",
            "chat.reasoning",
            "chat.print",
            "chat.text",
            "chat.usage_summary",
            "chat.run_complete"
        ]
    );
    let reasoning: String = msgs[2..4]
        .iter()
        .map(|m| m["content"].as_str().unwrap())
        .collect();
    assert_eq!(reasoning, thought);
    assert_eq!(msgs[2]["agent"], "real");
    assert_eq!(msgs[5]["content"], "Hello!");
    assert_eq!(msgs[6]["completion_tokens"], 9);
    // The next turn's request has the answer, not the reasoning.
    c.send(json!({"type": "user.message", "chat_id": chat, "text": "More"}))
        .await;
    c.until_complete(chat).await;
    let sent = llm.requests()[1].body.to_string();
    assert!(
        sent.contains("Hello!") && !sent.contains("greeting back"),
        "{sent}"
    );

    // An agent that does not show it: the same stream, no reasoning logged.
    let hidden = agent_yaml(wire, &llm, &tool, "show_reasoning: false\n");
    let server = server_with(hidden).await;
    let msgs = run_chat(&server, "Hi").await;
    assert!(!types(&msgs).contains(&"chat.reasoning"), "{msgs:?}");
    assert_eq!(
        msgs.iter()
            .find(|m| m["type"] == "chat.text" && m["agent"] == "real")
            .unwrap()["content"],
        "Hello!"
    );
}

macro_rules! vendor_tests {
    ($module:ident, $wire:expr) => {
        mod $module {
            use super::*;

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn text_only() {
                super::text_only(&$wire).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn one_tool_call() {
                super::one_tool_call(&$wire).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn two_tool_calls() {
                super::two_tool_calls(&$wire).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn error_mid_stream() {
                super::error_mid_stream(&$wire).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn retry_after_429() {
                super::retry_after_429(&$wire).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn stream_cut() {
                super::stream_cut(&$wire).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn reasoning() {
                super::reasoning(&$wire).await;
            }
        }
    };
}

vendor_tests!(openai, OpenAiWire);
vendor_tests!(anthropic, AnthropicWire);
vendor_tests!(gemini, GeminiWire);
vendor_tests!(ollama, OllamaWire);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_key_is_one_clear_error_without_the_key() {
    let wire = OpenAiWire;
    let llm = MockServer::start(vec![Reply::json(
        401,
        r#"{"error":{"message":"Incorrect API key provided","type":"invalid_request_error","code":"invalid_api_key"}}"#,
    )])
    .await;
    let tool = MockServer::start(vec![]).await;
    let server = server_with(agent_yaml(&wire, &llm, &tool, "")).await;
    let msgs = run_chat(&server, "Hi").await;
    let err = msgs.iter().find(|m| m["type"] == "chat.error").unwrap();
    let text = err["message"].as_str().unwrap();
    assert!(
        text.contains("401") && text.contains("Incorrect API key provided"),
        "{text}"
    );
    assert!(!err.to_string().contains(KEY));
    assert_eq!(err["error_code"], "AGENT_INITIALIZATION_FAILED");
    assert_eq!(err["recoverable"], false);
    assert_eq!(msgs.last().unwrap()["reason"], "error");
    assert_eq!(llm.requests().len(), 1, "a 401 is not retried");
}
