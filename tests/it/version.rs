//! The wire protocol's version: named on every response, and a client of
//! another version refused before anything is done (protocol/README.md,
//! *Versions*).

use serde_json::Value;

use crate::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_answer_names_the_version_and_another_is_refused_at_connect() {
    let server = Server::start().await;
    let base = format!("http://{}", server.addr);
    let http = reqwest::Client::new();
    // Named on every answer: a health check, the API, an error, the page.
    for path in ["/healthz", "/v1/agents", "/v1/no-such-route", "/"] {
        let r = http.get(format!("{base}{path}")).send().await.unwrap();
        assert_eq!(r.headers()["agentwire-protocol"], "1", "{path}");
    }
    // The version spoken is taken; another is refused, with both named.
    let ok = http
        .get(format!("{base}/v1/agents"))
        .header("agentwire-protocol", "1")
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status(), 200);
    for (header, query) in [(Some("2"), ""), (None, "?protocol=0"), (Some("one"), "")] {
        let mut request = http.post(format!("{base}/v1/agent/chat{query}"));
        if let Some(v) = header {
            request = request.header("agentwire-protocol", v);
        }
        let r = request
            .header("content-type", "application/json")
            .body(r#"{"message": "hello"}"#)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 400);
        assert_eq!(r.headers()["agentwire-protocol"], "1");
        let body: Value = r.json().await.unwrap();
        assert_eq!(body["error"]["code"], "SCHEMA_VALIDATION_FAILED");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.contains("speaks agentwire protocol 1"), "{message}");
    }
    // Nothing ran: no chat was made by the refused requests.
    let (_, list) = http_json(&server, "GET", "/v1/chats", "").await;
    assert_eq!(list["chats"].as_array().map(Vec::len), Some(0), "{list}");

    // The WebSocket: refused before the upgrade, or upgraded and named.
    let ws = format!("ws://{}/v1/ws", server.addr);
    match tokio_tungstenite::connect_async(format!("{ws}?protocol=2")).await {
        Err(tokio_tungstenite::tungstenite::Error::Http(response)) => {
            assert_eq!(response.status(), 400);
            assert_eq!(response.headers()["agentwire-protocol"], "1");
        }
        other => panic!(
            "a version-2 client was not refused: {:?}",
            other.map(|_| ())
        ),
    }
    let (_, response) = tokio_tungstenite::connect_async(format!("{ws}?protocol=1"))
        .await
        .unwrap();
    assert_eq!(response.headers()["agentwire-protocol"], "1");
}
