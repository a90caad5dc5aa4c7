//! Bad input gets a clear error and loses nothing.

use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;
use uuid::Uuid;

use crate::support::*;

async fn expect_schema_error(c: &mut Client) -> Value {
    let err = c.expect("chat.error").await;
    assert_eq!(err["error_code"], "SCHEMA_VALIDATION_FAILED", "{err}");
    assert!(err.get("seq").is_none(), "not persisted: {err}");
    assert_eq!(err["recoverable"], true);
    err
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_bad_message_gets_its_error_and_the_connection_stays() {
    let server = Server::start().await;
    let mut c = server.client().await;
    let chat = Uuid::new_v4();

    for raw in [
        "{not json",
        "[1,2,3]",
        "42",
        r#"{"type":"no.such"}"#,
        r#"{"chat_id":"x"}"#,
    ] {
        c.send_raw(Message::text(raw)).await;
        let err = expect_schema_error(&mut c).await;
        assert!(err["chat_id"].is_null(), "{raw}: {err}");
    }

    // Missing field: the readable chat id is echoed.
    c.send(json!({"type": "user.message", "chat_id": chat}))
        .await;
    let err = expect_schema_error(&mut c).await;
    assert_eq!(err["chat_id"], chat.to_string());
    assert!(err["message"].as_str().unwrap().contains("text"), "{err}");

    // Mistyped field.
    c.send(json!({"type": "client.resume", "chat_id": chat, "lastClientIndex": "seven"}))
        .await;
    let err = expect_schema_error(&mut c).await;
    assert_eq!(err["details"]["errors"][0]["path"], "/lastClientIndex");

    // Not a UUID.
    c.send(json!({"type": "chat.start", "chat_id": "chat-1", "agent": "demo"}))
        .await;
    let err = expect_schema_error(&mut c).await;
    assert!(err["chat_id"].is_null());

    // A binary frame.
    c.send_raw(Message::binary(vec![1u8, 2, 3])).await;
    expect_schema_error(&mut c).await;

    // Still serving.
    c.start(chat, "still here?").await;
    assert_eq!(
        last_text(&c.until_complete(chat).await),
        "You said: still here?"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversized_message_closes_with_1009_and_others_carry_on() {
    let server = Server::start().await;
    let mut other = server.client().await;
    let chat = Uuid::new_v4();
    other.start(chat, "slow: 20").await;

    let mut big = server.client().await;
    let text = "x".repeat(10 << 20);
    big.send(json!({"type": "user.message", "chat_id": chat, "text": text}))
        .await;
    assert_eq!(big.next().await, Err(Ended::Closed(Some(1009))));

    let msgs = other.until_complete(chat).await;
    assert_eq!(msgs.last().unwrap()["reason"], "completed");
    assert_gap_free(&seqs(&msgs));
    let (status, body) = http_get(server.addr, "/healthz", &[]).await;
    assert_eq!((status, body.as_str()), (200, r#"{"status":"ok"}"#));
}
