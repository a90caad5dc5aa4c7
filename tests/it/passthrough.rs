//! The OpenAI-compatible passthrough, CORS and the enhanced system prompt.

use serde_json::{Value, json};

use crate::mock_llm::{MockServer, Reply};
use crate::support::*;
use crate::vendors::{OpenAiWire, Wire};

async fn server_with_model(
    llm: &MockServer,
    extra_settings: agentwire::config::Settings,
) -> Server {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("agentwire.toml");
    std::fs::write(
        &config,
        format!(
            "[[models]]\nname = \"local\"\nprovider = \"openai\"\nmodel = \"vendor-model-7b\"\nbase_url = \"{}/v1\"\naliases = [\"l\"]\n",
            llm.url()
        ),
    )
    .unwrap();
    Server::start_in(
        dir,
        Opts {
            settings: agentwire::config::Settings {
                config: Some(config),
                ..extra_settings
            },
            ..Default::default()
        },
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_completions_are_forwarded_byte_for_byte() {
    let w = OpenAiWire;
    let plain = r#"{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"vendor-model-7b","choices":[{"index":0,"message":{"role":"assistant","content":"Hi!"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}"#;
    let streamed = w.text(&["Hel", "lo"], (3, 2));
    let expected_stream: String = streamed.chunks.iter().map(|(_, c)| c.as_str()).collect();
    let llm = MockServer::start(vec![
        Reply::json(200, plain),
        streamed,
        Reply::json(429, r#"{"error":{"message":"slow down"}}"#),
    ])
    .await;
    let server = server_with_model(&llm, Default::default()).await;

    let (status, models) = http_get(server.addr, "/v1/models", &[]).await;
    assert_eq!(status, 200);
    assert_eq!(
        serde_json::from_str::<Value>(&models).unwrap(),
        json!({"object": "list", "data": [{"id": "local", "object": "model", "created": 0, "owned_by": "openai"}]})
    );

    let ask = |stream: bool| {
        json!({"model": "l", "stream": stream, "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]})
            .to_string()
    };
    let ct = [("content-type", "application/json")];
    let (status, body) = http_request(
        server.addr,
        "POST",
        "/v1/chat/completions",
        &ct,
        &ask(false),
    )
    .await;
    assert_eq!((status, decode_chunked(&body).as_str()), (200, plain));
    let (status, body) =
        http_request(server.addr, "POST", "/v1/chat/completions", &ct, &ask(true)).await;
    assert_eq!(status, 200);
    assert_eq!(
        decode_chunked(&body),
        expected_stream,
        "the stream, byte for byte"
    );
    // The vendor's errors pass through too.
    let (status, body) = http_request(
        server.addr,
        "POST",
        "/v1/chat/completions",
        &ct,
        &ask(false),
    )
    .await;
    assert_eq!(
        (status, decode_chunked(&body).as_str()),
        (429, r#"{"error":{"message":"slow down"}}"#)
    );

    // Unchanged but for the model name: no prompt, no tools of ours.
    let sent = &llm.requests()[0].body;
    assert_eq!(sent["model"], "vendor-model-7b");
    assert_eq!(
        sent["messages"],
        json!([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}])
    );
    assert!(sent.get("tools").is_none());

    let (status, body) = http_request(
        server.addr,
        "POST",
        "/v1/chat/completions",
        &ct,
        r#"{"model": "nope", "messages": []}"#,
    )
    .await;
    assert_eq!(status, 422, "{body}");
}

/// The body of a chunked HTTP/1.1 response, de-chunked.
fn decode_chunked(raw: &str) -> String {
    let mut out = String::new();
    let mut rest = raw;
    while let Some((size, tail)) = rest.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 {
            break;
        }
        out.push_str(&tail[..n]);
        rest = &tail[n + 2..];
    }
    if out.is_empty() { raw.to_owned() } else { out }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cors_preflight_and_the_enhanced_prompt() {
    let llm = MockServer::start(vec![]).await;
    let server = server_with_model(
        &llm,
        agentwire::config::Settings {
            cors_origins: Some(vec!["https://app.example.com".into()]),
            ..Default::default()
        },
    )
    .await;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    let req = "OPTIONS /v1/agent/chat HTTP/1.1\r\nHost: x\r\nOrigin: https://app.example.com\r\nAccess-Control-Request-Method: POST\r\nAccess-Control-Request-Headers: content-type, authorization\r\nConnection: close\r\n\r\n";
    s.write_all(req.as_bytes()).await.unwrap();
    let mut resp = String::new();
    s.read_to_string(&mut resp).await.unwrap();
    let lower = resp.to_ascii_lowercase();
    assert!(lower.starts_with("http/1.1 200"), "{resp}");
    assert!(
        lower.contains("access-control-allow-origin: https://app.example.com"),
        "{resp}"
    );
    assert!(lower.contains("access-control-allow-methods"), "{resp}");

    let (status, body) = http_get(
        server.addr,
        "/healthz",
        &[("origin", "https://evil.example.com")],
    )
    .await;
    assert_eq!(status, 200, "{body}");

    let (status, body) = http_get(server.addr, "/v1/system-prompts/demo/enhanced", &[]).await;
    assert_eq!(status, 200);
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["base"], "You are the agentwire demo agent.");
    let enhanced = v["enhanced"].as_str().unwrap();
    assert!(enhanced.starts_with("You are the agentwire demo agent."));
    assert!(
        enhanced.contains("ask_user") && enhanced.contains("\"terminate\""),
        "{enhanced}"
    );
    let (status, _) = http_get(server.addr, "/v1/system-prompts/nobody/enhanced", &[]).await;
    assert_eq!(status, 422);
}
