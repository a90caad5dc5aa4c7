//! How each vendor's request carries another group member's turn
//! ([`Message::Peer`]): a `name: ` prefix everywhere (OpenAI-compatible
//! local servers drop the `name` field OpenAI also gets), merged into the
//! user turn before it where roles must alternate.

use serde_json::{Value, json};

use super::*;

fn endpoint() -> Endpoint {
    Endpoint {
        client: http_client(),
        base_url: "http://127.0.0.1:9".into(),
        model: "m".into(),
        api_key_env: None,
        inputs: Inputs::default(),
    }
}

fn request() -> ChatRequest {
    ChatRequest {
        system_prompt: String::new(),
        messages: vec![
            Message::user("Go"),
            Message::Peer {
                name: "planner".into(),
                text: "Plan A".into(),
            },
        ],
        tools: Vec::new(),
        max_tokens: 16,
    }
}

fn messages(body: &Value, key: &str) -> Value {
    body[key].clone()
}

#[test]
fn every_vendor_says_who_spoke() {
    let r = request();
    assert_eq!(
        messages(&OpenAi::new(endpoint()).body(&r), "messages"),
        json!([{"role": "user", "content": "Go"}, {"role": "user", "name": "planner", "content": "planner: Plan A"}])
    );
    assert_eq!(
        messages(&Ollama::new(endpoint()).body(&r), "messages"),
        json!([{"role": "user", "content": "Go"}, {"role": "user", "content": "planner: Plan A"}])
    );
    assert_eq!(
        messages(&Anthropic::new(endpoint()).body(&r), "messages"),
        json!([{"role": "user", "content": [{"type": "text", "text": "Go"}, {"type": "text", "text": "planner: Plan A"}]}])
    );
    assert_eq!(
        messages(&Gemini::new(endpoint()).body(&r), "contents"),
        json!([{"role": "user", "parts": [{"text": "Go"}, {"text": "planner: Plan A"}]}])
    );
}

#[test]
fn a_peer_after_tool_results_keeps_them_first() {
    let r = ChatRequest {
        messages: vec![
            Message::user("Go"),
            Message::Assistant {
                text: String::new(),
                tool_calls: vec![ToolCall {
                    id: "c1".into(),
                    name: "t".into(),
                    input: json!({}),
                }],
            },
            Message::ToolResult {
                id: "c1".into(),
                name: "t".into(),
                content: "ok".into(),
                is_error: false,
            },
            Message::Peer {
                name: "writer".into(),
                text: "Done".into(),
            },
        ],
        ..request()
    };
    let anthropic = Anthropic::new(endpoint()).body(&r);
    assert_eq!(
        anthropic["messages"][2]["content"],
        json!([{"type": "tool_result", "tool_use_id": "c1", "content": "ok", "is_error": false},
               {"type": "text", "text": "writer: Done"}])
    );
    // Gemini keeps function responses in a turn of their own.
    let gemini = Gemini::new(endpoint()).body(&r);
    assert_eq!(gemini["contents"].as_array().unwrap().len(), 4);
    assert_eq!(
        gemini["contents"][3],
        json!({"role": "user", "parts": [{"text": "writer: Done"}]})
    );
}
