//! Models per chat: list with availability, switch by name or alias, persisted.

use serde_json::{Value, json};
use uuid::Uuid;

use crate::mock_llm::MockServer;
use crate::providers::agent_yaml;
use crate::support::*;
use crate::vendors::{OpenAiWire, Wire};

async fn model_server(dir: tempfile::TempDir, agent: &str, qwen: &MockServer) -> Server {
    let config = dir.path().join("agentwire.toml");
    std::fs::write(
        &config,
        format!(
            r#"
[[models]]
name = "qwen3-8b"
provider = "openai"
base_url = "{}/v1"
aliases = ["qwen"]
price = {{prompt_per_million = 1000000.0, completion_per_million = 2000000.0}}

[[models]]
name = "offline"
provider = "openai"
base_url = "http://127.0.0.1:9/v1"
"#,
            qwen.url()
        ),
    )
    .unwrap();
    Server::start_in(
        dir,
        Opts {
            settings: agentwire::config::Settings {
                config: Some(config),
                ..Default::default()
            },
            agents: vec![("real.yaml".into(), agent.to_owned())],
        },
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chat_switches_models_and_keeps_the_choice() {
    let w = OpenAiWire;
    let agent_llm = MockServer::start(vec![w.text(&["from the agent's model"], (1, 1))]).await;
    let qwen = MockServer::start(vec![
        w.text(&["from qwen"], (1, 1)),
        w.text(&["qwen again"], (1, 1)),
    ])
    .await;
    let tool = MockServer::start(vec![]).await;
    let agent = agent_yaml(&w, &agent_llm, &tool, "");
    crate::providers::set_key();
    let server = model_server(tempfile::tempdir().unwrap(), &agent, &qwen).await;

    let mut c = server.client().await;
    let chat = Uuid::new_v4();
    c.start_with(chat, "real", "first").await;
    assert_eq!(
        last_text(&c.until_complete(chat).await),
        "from the agent's model"
    );

    let path = format!("/v1/chats/{chat}/model");
    let (status, listed) = http_json(&server, "GET", &path, "").await;
    assert_eq!(status, 200, "{listed}");
    assert_eq!(listed["model"], Value::Null);
    assert_eq!(
        listed["models"][0],
        json!({"name": "qwen3-8b", "provider": "openai", "aliases": ["qwen"], "available": true})
    );
    assert_eq!(listed["models"][1]["available"], false);

    let (status, set) = http_json(&server, "POST", &path, r#"{"name": "qwen"}"#).await;
    assert_eq!((status, &set["model"]), (200, &json!("qwen3-8b")));
    c.say(chat, "second").await;
    let second = c.until_complete(chat).await;
    assert_eq!(last_text(&second), "from qwen");
    assert_eq!(qwen.requests()[0].body["model"], "qwen3-8b");
    // Its run is the switched model's, at that model's price (1 + 1 tokens),
    // and the usage ledger counts each run under its own model.
    let used = second
        .iter()
        .find(|m| m["type"] == "chat.usage_summary")
        .unwrap();
    assert_eq!(
        (&used["model"], &used["cost"]),
        (&json!("qwen3-8b"), &json!(3.0))
    );
    let (_, usage) = http_json(&server, "GET", "/v1/usage", "").await;
    let rows: Vec<(&str, u64, f64)> = usage["days"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let model = r["model"].as_str().unwrap();
            (
                model,
                r["runs"].as_u64().unwrap(),
                r["cost"].as_f64().unwrap(),
            )
        })
        .collect();
    assert!(rows.contains(&("qwen3-8b", 1, 3.0)), "{usage}");
    assert_eq!(rows.len(), 2, "the agent's model and qwen: {usage}");
    let first = rows.iter().find(|r| r.0 != "qwen3-8b").unwrap();
    assert_eq!(first.1, 1, "{usage}");
    assert!(
        !first.0.is_empty(),
        "the agent's own model is named: {usage}"
    );
    // The history travels with the chat to the new model.
    let history = qwen.requests()[0].body["messages"]
        .as_array()
        .unwrap()
        .clone();
    assert!(
        history
            .iter()
            .any(|m| m["content"] == "from the agent's model")
    );

    // Errors.
    let (status, err) = http_json(&server, "POST", &path, r#"{"name": "nope"}"#).await;
    assert_eq!(
        (status, &err["error"]["code"]),
        (422, &json!("WORKFLOW_NOT_FOUND"))
    );
    let (status, err) = http_json(&server, "POST", &path, r#"{"model": "qwen"}"#).await;
    assert_eq!(
        (status, &err["error"]["code"]),
        (400, &json!("SCHEMA_VALIDATION_FAILED"))
    );
    let (status, _) = http_json(
        &server,
        "GET",
        &format!("/v1/chats/{}/model", Uuid::new_v4()),
        "",
    )
    .await;
    assert_eq!(status, 404);
    let (status, _) = http_json(&server, "GET", "/v1/chats/not-a-uuid/model", "").await;
    assert_eq!(status, 400);

    // Persisted across a restart.
    c.close().await;
    let dir = server.stop().await;
    let server = model_server(dir, &agent, &qwen).await;
    let (_, listed) = http_json(&server, "GET", &path, "").await;
    assert_eq!(listed["model"], "qwen3-8b");
    let mut c = server.client().await;
    c.resume(chat, 0).await;
    c.recv_until(|m| m["type"] == "chat.resume_boundary").await;
    c.say(chat, "third").await;
    assert_eq!(last_text(&c.until_complete(chat).await), "qwen again");
}
