//! Generated input against every inbound decoder: thousands of messages,
//! valid-looking and not, on both WebSocket endpoints and every HTTP route
//! that reads a body. The server must answer each with a contract error or
//! a result: never a panic, never a 5xx, never memory that keeps growing.

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, TestRunner};
use serde_json::{Map, Value, json};
use tokio_tungstenite::tungstenite::Message;
use uuid::Uuid;

use crate::support::*;

/// Any JSON value, nested up to 8 levels.
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        (-1e300f64..1e300).prop_map(|f| json!(f)),
        ".{0,40}".prop_map(Value::from),
        "[a-z: ]{0,12}".prop_map(Value::from),
    ];
    leaf.prop_recursive(8, 64, 8, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map("[a-z_]{1,10}", inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// `[[[…1…]]]`, `depth` levels.
fn nested(depth: usize) -> Value {
    (0..depth).fold(json!(1), |v, _| json!([v]))
}

/// The fields of every inbound type, with plausible values (a few chats, the
/// demo agent, short texts, a patch) or anything at all.
fn field(name: &'static str, chats: Vec<Uuid>) -> impl Strategy<Value = Value> {
    let plausible: BoxedStrategy<Value> = match name {
        "chat_id" => prop::sample::select(chats).prop_map(|c| json!(c)).boxed(),
        "agent" | "definition_id" | "name" | "model" | "model_id" => {
            prop::sample::select(vec!["demo", "nope", ""])
            .prop_map(Value::from)
            .boxed()
        }
        "conversation_id" => prop_oneof![
            prop::sample::select(chats.clone()).prop_map(|c| json!(c)),
            "[a-z0-9-]{1,20}".prop_map(Value::from),
        ]
        .boxed(),
        "context_type" => prop::sample::select(vec!["workflow", "", "x"])
            .prop_map(Value::from)
            .boxed(),
        "text" | "message" | "content" => {
            prop::sample::select(vec!["hello", "", "progress: 2", "fail", "ui: pick"])
                .prop_map(Value::from)
                .boxed()
        }
        "patch" => prop::collection::vec(
            (prop::sample::select(vec!["add", "copy", "move", "remove", "test", "x"]), "/[a-z]{0,3}", json_value())
                .prop_map(|(op, path, value)| json!({"op": op, "path": path, "from": "/a", "value": value})),
            0..6,
        )
        .prop_map(Value::Array)
        .boxed(),
        "lastClientIndex" | "last_client_seq" => (0u64..50).prop_map(Value::from).boxed(),
        _ => json_value().boxed(),
    };
    prop_oneof![
        6 => plausible,
        2 => json_value(),
        1 => (60usize..140).prop_map(nested),
        1 => "x{0,20000}".prop_map(Value::from),
    ]
}

const FIELDS: &[&str] = &[
    // The WebSocket messages' fields, then the HTTP bodies' own.
    "chat_id",
    "agent",
    "message",
    "context",
    "text",
    "client_msg_id",
    "request_id",
    "data",
    "corr",
    "patch",
    "lastClientIndex",
    "last_client_seq",
    "content",
    "context_type",
    "conversation_id",
    "model_id",
    "name",
    "model",
    "messages",
    "id",
    "trigger",
    "requestId",
    "threadId",
    "runId",
    "resume",
];

const TYPES: &[&str] = &[
    "chat.start",
    "user.message",
    "user.input.submit",
    "inline_component.result",
    "artifact_patch",
    "client.resume",
    "chat.cancel",
    "client.unsubscribe",
    "chat.pause",
    "chat.resume_run",
    "ping",
    "start",
    "message",
    "send",
    "resume",
    "abort",
    "no.such",
];

/// One inbound message: an object of a known or unknown type with some of
/// the known fields, or any JSON, or text that is not JSON.
fn message(chats: Vec<Uuid>) -> impl Strategy<Value = String> {
    let fields: Vec<_> = FIELDS
        .iter()
        .map(|&f| prop::option::weighted(0.5, field(f, chats.clone())).prop_map(move |v| (f, v)))
        .collect();
    let object = (prop::sample::select(TYPES.to_vec()), fields).prop_map(|(ty, fields)| {
        let mut map = Map::new();
        map.insert("type".into(), json!(ty));
        for (name, value) in fields {
            if let Some(v) = value {
                map.insert(name.into(), v);
            }
        }
        Value::Object(map).to_string()
    });
    prop_oneof![
        8 => object,
        1 => json_value().prop_map(|v| v.to_string()),
        1 => ".{0,200}",
    ]
}

/// Draws `n` values of a strategy (a deterministic runner: a failure repeats).
fn draw<T: std::fmt::Debug>(strategy: impl Strategy<Value = T>, n: usize) -> Vec<T> {
    let mut runner = TestRunner::deterministic();
    (0..n)
        .map(|_| strategy.new_tree(&mut runner).unwrap().current())
        .collect()
}

proptest! {
    #![proptest_config(Config { cases: 4000, ..Config::default() })]

    /// The native decoder: any text gives a frame or a clear refusal.
    #[test]
    fn the_native_decoder_never_panics(text in message(vec![Uuid::nil()])) {
        match agentwire::protocol::parse_client_frame(&text) {
            Ok(_) => {}
            Err(e) => prop_assert!(!e.message.is_empty()),
        }
    }

    /// Depth is bounded on the way in, whatever the message.
    #[test]
    fn nothing_deeper_than_the_limit_gets_through(depth in 0usize..200, ty in prop::sample::select(TYPES.to_vec())) {
        let text = json!({"type": ty, "chat_id": Uuid::nil(), "corr": "c", "data": nested(depth)}).to_string();
        let accepted = agentwire::protocol::parse_client_frame(&text).is_ok();
        prop_assert!(!accepted || depth < agentwire::protocol::limits::MAX_JSON_DEPTH);
    }
}

/// The resident memory of a process, in bytes.
fn rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap()
        * 1024
}

/// Sends every message on one connection while a reader drains and checks
/// the answers; returns how many answers came. The connection must stay up.
async fn blast(url: String, messages: Vec<String>) -> usize {
    let (ws, _) = tokio::time::timeout(WAIT, tokio_tungstenite::connect_async(&url))
        .await
        .expect("the upgrade answered in time")
        .unwrap();
    let (mut sink, mut stream) = ws.split();
    let native = url.ends_with("/v1/ws");
    let reader = tokio::spawn(async move {
        let mut answers = 0;
        while let Some(msg) = stream.next().await {
            match msg.expect("the connection stays up") {
                Message::Text(t) => {
                    let v: Value = serde_json::from_str(&t).expect("server sends JSON");
                    if native {
                        assert_outbound_valid(&v);
                    }
                    answers += 1;
                }
                // Only the answer to our own close at the end.
                Message::Close(frame) => {
                    let code = frame.map(|f| u16::from(f.code));
                    assert!(
                        matches!(code, None | Some(1000)),
                        "closed by the server: {code:?}"
                    );
                    break;
                }
                _ => {}
            }
        }
        answers
    });
    // Every wait is bounded: a server that stops reading (a message whose
    // handling never ends) fails here, naming the message, not at CI's timeout.
    for (i, m) in messages.into_iter().enumerate() {
        let sent = tokio::time::timeout(WAIT, sink.send(Message::text(m.clone()))).await;
        assert!(
            sent.is_ok(),
            "the server stopped reading {url} at message {i}: {m}"
        );
        sent.unwrap().unwrap();
    }
    // Let the answers (and any runs they started) arrive, then leave.
    tokio::time::sleep(Duration::from_secs(2)).await;
    tokio::time::timeout(WAIT, sink.send(Message::Close(None)))
        .await
        .expect("the close is read in time")
        .unwrap();
    tokio::time::timeout(WAIT, reader)
        .await
        .expect("the reader ends")
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thousands_of_generated_messages_on_every_route() {
    let dir = tempfile::tempdir().unwrap();
    let url = database_url(dir.path()).await;
    // Rate limits off and a deep queue: this test wants every message
    // decoded, not refused, and its reader validates every answer (slowly).
    std::fs::create_dir_all(dir.path().join("agents")).unwrap();
    let (child, addr) = spawn_agentwire(
        &url,
        &dir.path().join("agents"),
        &[
            "--rate-frames-per-second",
            "0",
            "--rate-chats-per-minute",
            "0",
            "--rate-messages-per-minute",
            "0",
            "--ui-timeout-seconds",
            "1",
            "--input-timeout-seconds",
            "1",
            "--outbound-queue",
            "1048576",
            "--outbound-queue-bytes",
            "1073741824",
        ],
    )
    .await;
    let pid = child.id().unwrap();
    let chats: Vec<Uuid> = (0..4).map(|_| Uuid::new_v4()).collect();
    let before = rss(pid);

    // The native WebSocket.
    let answers = blast(
        format!("ws://{addr}/v1/ws"),
        draw(message(chats.clone()), 2500),
    )
    .await;
    assert!(answers > 1000, "{answers} answers");
    // Seed 004's WebSocket, on a conversation that exists.
    let body = json!({"agent": "demo", "chat_id": chats[0]}).to_string();
    let headers = [("content-type", "application/json")];
    let (status, _) = tokio::time::timeout(
        WAIT,
        http_request(addr, "POST", "/v1/chats", &headers, &body),
    )
    .await
    .expect("POST /v1/chats answered in time");
    assert!(status == 201 || status == 409, "{status}");
    let url = format!(
        "ws://{addr}/api/chat/ws?definition_id=demo&conversation_id={}",
        chats[0]
    );
    blast(url, draw(message(chats.clone()), 500)).await;

    // The AI SDK's WebSocket transport.
    blast(
        format!("ws://{addr}/v1/ai-sdk/ws"),
        draw(message(chats.clone()), 500),
    )
    .await;

    // Every HTTP route that reads a body.
    let chat = chats[1];
    let routes = [
        "/v1/chats".to_owned(),
        format!("/v1/chats/{chat}/messages"),
        format!("/v1/chats/{chat}/model"),
        format!("/v1/chats/{chat}/cancel"),
        "/v1/agent/chat".to_owned(),
        "/api/chat/send".to_owned(),
        "/chat".to_owned(),
        format!("/chat/{chat}/message"),
        format!("/chat/{chat}/model"),
        "/v1/chat/completions".to_owned(),
        "/v1/ai-sdk/chat".to_owned(),
        "/v1/ag-ui".to_owned(),
    ];
    let bodies = draw(message(chats.clone()), 2000);
    for (i, body) in bodies.iter().enumerate() {
        let path = &routes[i % routes.len()];
        let headers = [("content-type", "application/json")];
        let (status, text) =
            tokio::time::timeout(WAIT, http_request(addr, "POST", path, &headers, body))
                .await
                .unwrap_or_else(|_| panic!("POST {path} answered in time: {body}"));
        assert!(status < 500, "POST {path} → {status}: {text}\nbody: {body}");
    }

    // Every input of the GET routes: queries, path ids, Last-Event-ID.
    let junk = draw(".{0,30}|[0-9]{1,25}|-1", 600);
    for (i, j) in junk.iter().enumerate() {
        let enc: String = j.bytes().map(|b| format!("%{b:02X}")).collect();
        let path = match i % 6 {
            0 => format!("/v1/chats/{chat}/events?after={enc}&limit=5"),
            1 => format!("/v1/chats/{chat}/events?limit={enc}"),
            2 => format!("/v1/chats/{chat}/events?dialect={enc}&after=999999"),
            3 => format!("/v1/chats?limit={enc}&cursor={enc}"),
            4 => format!("/v1/chats/{enc}"),
            _ => format!("/v1/chats/{chat}/events?after=999999"),
        };
        let event_id = if i % 6 == 5 { j.as_str() } else { "" };
        let headers = [("last-event-id", event_id), ("accept", "application/json")];
        let (status, text) = tokio::time::timeout(WAIT, http_get(addr, &path, &headers))
            .await
            .unwrap_or_else(|_| panic!("GET {path} answered in time"));
        assert!(status < 500, "GET {path} → {status}: {text}");
    }

    // Still serving, with bounded memory.
    let (status, _) = tokio::time::timeout(WAIT, http_get(addr, "/healthz", &[]))
        .await
        .expect("/healthz answered in time");
    assert_eq!(status, 200);
    let mut c = Client::connect(&format!("ws://{addr}/v1/ws")).await;
    c.send(json!({"type": "ping"})).await;
    assert_eq!(c.recv().await["type"], "pong");
    let grown = rss(pid).saturating_sub(before);
    assert!(grown < 150 << 20, "the server grew by {} MB", grown >> 20);
    drop(child);
}
