//! The holes an outside probe found (issue 12), each reproduced against the
//! real server: one message must never cost more than its size, no web page
//! may drive a local server, every limit holds on every route.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use agentwire::config::Settings;
use agentwire::store::{AppendBatch, NewEnvelope, PgStore, SqliteStore, Store};
use futures_util::{SinkExt, StreamExt};
use jsonwebtoken::{EncodingKey, Header, encode};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::protocol::frame::Frame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::{Data, OpCode};
use uuid::Uuid;

use crate::auth::{SECRET, jwt_server, token};
use crate::support::*;

fn nested(depth: usize) -> Value {
    let mut v = json!(1);
    for _ in 0..depth {
        v = json!([v]);
    }
    v
}

/// A raw HTTP/1.1 request with exactly these headers (no Host unless given);
/// the status and the whole answer, headers included.
async fn raw_request(addr: SocketAddr, head: &str, body: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let req = format!(
        "{head}\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(req.as_bytes()).await.unwrap();
    let mut out = String::new();
    stream.read_to_string(&mut out).await.unwrap();
    let status = out.split(' ').nth(1).unwrap().parse().unwrap();
    (status, out)
}

/// The status of a WebSocket upgrade with these extra headers.
async fn upgrade_status(url: &str, headers: &[(&'static str, &str)]) -> u16 {
    let mut req = url.into_client_request().unwrap();
    for (k, v) in headers {
        req.headers_mut().insert(*k, v.parse().unwrap());
    }
    match tokio_tungstenite::connect_async(req).await {
        Ok(_) => 101,
        Err(tokio_tungstenite::tungstenite::Error::Http(resp)) => resp.status().as_u16(),
        Err(e) => panic!("unexpected error {e}"),
    }
}

async fn events(server: &Server, chat: Uuid) -> Vec<Value> {
    let (status, page) = http_json(
        server,
        "GET",
        &format!("/v1/chats/{chat}/events?after=0&limit=1000"),
        "",
    )
    .await;
    assert_eq!(status, 200, "{page}");
    page["events"].as_array().unwrap().clone()
}

// ----- 1. artifact_patch amplification ---------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_doubling_patch_is_refused_and_logs_nothing() {
    let server = Server::start().await;
    let mut c = server.client().await;
    let chat = Uuid::new_v4();
    c.start(chat, "ui: board").await;
    let call = c.recv_until(|v| v["type"] == "chat.tool_call").await;
    let corr = call.last().unwrap()["corr"].as_str().unwrap().to_owned();
    let before = events(&server, chat).await.len();

    // The probe's message: 831 bytes, 16 copies, 68 MB before the bound.
    let mut ops = vec![
        json!({"op": "add", "path": "/a", "value": "x".repeat(512)}),
        json!({"op": "add", "path": "/b", "value": []}),
    ];
    for i in 0..16 {
        ops.push(json!({"op": "copy", "from": "/a", "path": "/b/-"}));
        ops.push(json!({"op": "copy", "from": "/b", "path": format!("/c{i}")}));
        ops.push(json!({"op": "move", "from": format!("/c{i}"), "path": "/a"}));
    }
    ops.truncate(50);
    c.send(json!({"type": "artifact_patch", "chat_id": chat, "corr": corr, "patch": ops}))
        .await;
    let err = c.expect("chat.error").await;
    assert_eq!(err["error_code"], "SCHEMA_VALIDATION_FAILED", "{err}");
    assert!(err.get("seq").is_none());
    assert_eq!(events(&server, chat).await.len(), before, "nothing logged");
}

// ----- 2. every WebSocket endpoint has the same limits -----------------------

/// Seed 004's socket speaks its own messages (no outbound schema): read raw.
struct Raw(tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<TcpStream>>);

impl Raw {
    async fn connect(url: &str) -> Self {
        let mut raw = Self(tokio_tungstenite::connect_async(url).await.unwrap().0);
        if url.contains("/api/chat/ws") {
            assert_eq!(raw.next().await.unwrap()["type"], "connected");
        }
        raw
    }

    async fn send(&mut self, msg: Message) {
        self.0.send(msg).await.unwrap();
    }

    /// The next text message as JSON, or the close code.
    async fn next(&mut self) -> Result<Value, Option<u16>> {
        loop {
            match tokio::time::timeout(WAIT, self.0.next())
                .await
                .expect("in time")
            {
                Some(Ok(Message::Text(t))) => return Ok(serde_json::from_str(&t).unwrap()),
                Some(Ok(Message::Close(f))) => return Err(f.map(|f| u16::from(f.code))),
                Some(Ok(_)) => continue,
                Some(Err(_)) | None => return Err(None),
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_template_socket_has_the_native_limits_and_close_codes() {
    let server = Server::start().await;
    let url = format!("ws://{}/api/chat/ws?definition_id=demo", server.addr);

    // A message over max_message_bytes (1 MiB): 1009, never logged or echoed.
    let mut c = Raw::connect(&url).await;
    let big = json!({"type": "message", "content": "x".repeat(2 << 20)});
    c.send(Message::text(big.to_string())).await;
    assert_eq!(c.next().await, Err(Some(1009)));

    // A binary frame: an error, and the connection stays.
    let mut c = Raw::connect(&url).await;
    c.send(Message::binary(vec![1u8, 2, 3])).await;
    let err = c.next().await.unwrap();
    assert_eq!(err["type"], "error");
    assert_eq!(err["data"]["error_code"], "SCHEMA_VALIDATION_FAILED");
    c.send(Message::text(r#"{"type":"ping"}"#)).await;
    assert_eq!(c.next().await.unwrap()["type"], "pong");

    // A text frame that is not UTF-8: 1007, on both sockets.
    for url in [url.clone(), server.ws_url()] {
        let mut c = Raw::connect(&url).await;
        let frame = Frame::message(vec![b'{', 0xff, 0xfe, b'}'], OpCode::Data(Data::Text), true);
        c.send(Message::Frame(frame)).await;
        assert_eq!(c.next().await, Err(Some(1007)), "{url}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_routes_refuse_texts_over_256_kib_and_log_nothing() {
    let server = Server::start().await;
    let chat = Uuid::new_v4();
    let body = json!({"agent": "demo", "chat_id": chat}).to_string();
    assert_eq!(http_json(&server, "POST", "/v1/chats", &body).await.0, 201);
    let big = "x".repeat(300 << 10);

    let routes = [
        (format!("/v1/chats/{chat}/messages"), json!({"text": big})),
        (
            "/v1/chats".to_owned(),
            json!({"agent": "demo", "message": big}),
        ),
        (
            "/v1/agent/chat".to_owned(),
            json!({"message": big, "context_type": "workflow", "conversation_id": chat}),
        ),
        (
            "/api/chat/send".to_owned(),
            json!({"message": big, "conversation_id": chat}),
        ),
        (format!("/chat/{chat}/message"), json!({"message": big})),
        (
            "/v1/ag-ui".to_owned(),
            json!({"threadId": chat, "runId": "r1", "messages": [{"id": "m1", "role": "user", "content": big}]}),
        ),
        (
            "/v1/ai-sdk/chat".to_owned(),
            json!({"id": chat, "messages": [{"id": "m1", "role": "user", "parts": [{"type": "text", "text": big}]}]}),
        ),
    ];
    for (path, body) in routes {
        let (status, err) = http_json(&server, "POST", &path, &body.to_string()).await;
        assert_eq!(status, 413, "{path}: {err}");
        assert_eq!(err["error"]["code"], "SCHEMA_VALIDATION_FAILED", "{path}");
    }
    assert!(events(&server, chat).await.is_empty(), "nothing was logged");
}

// ----- 3. no web page drives a local server ----------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_auth_none_foreign_pages_and_hosts_are_refused() {
    let server = Server::start_with(Opts {
        settings: Settings {
            cors_origins: Some(vec!["https://app.example.com".into()]),
            allowed_hosts: Some(vec!["chat.internal".into()]),
            ..Default::default()
        },
        ..Default::default()
    })
    .await;
    let addr = server.addr;
    let body = json!({"agent": "demo", "message": "hi"}).to_string();

    // A JSON body sent as text/plain (no CORS preflight): 415.
    let head = format!("POST /v1/chats HTTP/1.1\r\nHost: {addr}\r\nContent-Type: text/plain");
    assert_eq!(raw_request(addr, &head, &body).await.0, 415);

    // A page of another origin: 403 for state changes and upgrades.
    let head = format!(
        "POST /v1/chats HTTP/1.1\r\nHost: {addr}\r\nOrigin: http://evil.example\r\nContent-Type: application/json"
    );
    assert_eq!(raw_request(addr, &head, &body).await.0, 403);
    let url = server.ws_url();
    assert_eq!(
        upgrade_status(&url, &[("origin", "http://evil.example")]).await,
        403
    );
    assert_eq!(upgrade_status(&url, &[("origin", "null")]).await, 403);
    // Its own pages, configured origins and programs without Origin pass.
    let own = format!("http://{addr}");
    assert_eq!(upgrade_status(&url, &[("origin", &own)]).await, 101);
    assert_eq!(
        upgrade_status(&url, &[("origin", "https://app.example.com")]).await,
        101
    );
    assert_eq!(upgrade_status(&url, &[]).await, 101);
    let head = format!(
        "POST /v1/chats HTTP/1.1\r\nHost: {addr}\r\nOrigin: {own}\r\nContent-Type: application/json"
    );
    assert_eq!(raw_request(addr, &head, &body).await.0, 201);

    // DNS rebinding: a foreign Host is not served (health checks are).
    let head = "GET /v1/chats HTTP/1.1\r\nHost: evil.example:8080";
    assert_eq!(raw_request(addr, head, "").await.0, 403);
    let head = "GET /v1/chats HTTP/1.1\r\nHost: chat.internal:8080";
    assert_eq!(raw_request(addr, head, "").await.0, 200);
    let head = "GET /healthz HTTP/1.1\r\nHost: agentwire-1:8080";
    assert_eq!(raw_request(addr, head, "").await.0, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_jwt_mode_origins_are_left_to_the_token() {
    let server = jwt_server().await;
    let t = token("alice", 600, SECRET);
    let bearer = format!("Bearer {t}");
    let headers = [
        ("origin", "http://elsewhere.example"),
        ("authorization", bearer.as_str()),
    ];
    assert_eq!(upgrade_status(&server.ws_url(), &headers).await, 101);
}

// ----- 4. nothing unreadable is logged; readers never skip a seq -------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn values_deeper_than_the_limit_are_refused_on_the_way_in() {
    let server = Server::start().await;
    let mut c = server.client().await;
    let chat = Uuid::new_v4();
    c.start(chat, "ui: board").await;
    let call = c.recv_until(|v| v["type"] == "chat.tool_call").await;
    let corr = call.last().unwrap()["corr"].as_str().unwrap().to_owned();
    c.send(json!({"type": "inline_component.result", "chat_id": chat, "corr": corr, "data": nested(100)}))
        .await;
    let err = c.expect("chat.error").await;
    assert_eq!(err["error_code"], "SCHEMA_VALIDATION_FAILED");
    assert!(err["message"].as_str().unwrap().contains("deep"), "{err}");
    // The component still waits, and a sound answer completes it.
    c.send(json!({"type": "inline_component.result", "chat_id": chat, "corr": corr, "data": nested(10)}))
        .await;
    assert_eq!(
        c.until_complete(chat).await.last().unwrap()["reason"],
        "completed"
    );

    // Over HTTP, at any depth, in any field.
    for depth in [100, 200] {
        let body = json!({"agent": "demo", "context": {"deep": nested(depth)}}).to_string();
        let (status, err) = http_json(&server, "POST", "/v1/chats", &body).await;
        assert_eq!(status, 413, "{depth}: {err}");
        let body = json!({"message": "hi", "context_type": nested(depth)}).to_string();
        let (status, err) = http_json(&server, "POST", "/v1/agent/chat", &body).await;
        assert_eq!(status, 413, "{depth}: {err}");
    }
    // Texts over 256 KiB on the WebSocket too.
    c.say(chat, &"t".repeat(300 << 10)).await;
    let err = c.expect("chat.error").await;
    assert_eq!(err["error_code"], "SCHEMA_VALIDATION_FAILED", "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreadable_envelope_stops_every_reader_loudly() {
    let server = Server::start().await;
    let mut c = server.client().await;
    let chat = Uuid::new_v4();
    c.start(chat, "hello").await;
    let first = c.until_complete(chat).await;
    let n = first.len() as u64;
    c.close().await;
    let dir = server.stop().await;

    // An envelope the JSON reader cannot take (nested past its 128 levels),
    // written behind the server's back, then one more after it.
    let url = database_url(dir.path()).await;
    let store: Arc<dyn Store> = match url.strip_prefix("sqlite://") {
        Some(path) => Arc::new(SqliteStore::open(std::path::Path::new(path)).await.unwrap()),
        None => Arc::new(PgStore::open(&url, 2).await.unwrap()),
    };
    let deep = format!(
        r#"{{"type":"chat.text","agent":"demo","content":{},"chat_id":"{chat}","seq":{},"ts":"2026-01-01T00:00:00.000Z"}}"#,
        serde_json::to_string(&nested(200)).unwrap(),
        n + 1
    );
    let fine = format!(
        r#"{{"type":"chat.text","agent":"demo","content":"after","chat_id":"{chat}","seq":{},"ts":"2026-01-01T00:00:00.000Z"}}"#,
        n + 2
    );
    let envelope = |seq: u64, json: String| NewEnvelope {
        seq,
        kind: "chat.text",
        ts_ms: 0,
        corr: None,
        client_msg_id: None,
        json: json.into(),
    };
    store
        .append(&[AppendBatch {
            chat_id: chat,
            envelopes: vec![envelope(n + 1, deep), envelope(n + 2, fine)],
            state: None,
            conversation_state: None,
            fence: None,
        }])
        .await
        .unwrap();
    drop(store);
    let server = Server::start_in(dir, Opts::default()).await;

    // REST: the page fails as a whole (500), it does not skip the seq.
    let path = format!("/v1/chats/{chat}/events?after={n}&limit=10");
    let (status, err) = http_json(&server, "GET", &path, "").await;
    assert_eq!(status, 500, "{err}");
    assert_eq!(err["error"]["code"], "PERSISTENCE_ERROR");
    // SSE: the envelopes before it, an error event without an id, and
    // nothing after it (all three in one page of the replay).
    let path = format!("/v1/chats/{chat}/events");
    let from = (n - 1).to_string();
    let (status, text) = http_get(server.addr, &path, &[("last-event-id", &from)]).await;
    assert_eq!(status, 200);
    assert!(text.contains(&format!("id: {n}")), "{text}");
    assert!(text.contains("PERSISTENCE_ERROR"), "{text}");
    assert!(
        !text.contains("after"),
        "nothing past the unreadable seq: {text}"
    );
    assert!(!text.contains(&format!("id: {}", n + 1)), "{text}");
    // Seed 004's socket: the same error, then 1011.
    let url = format!(
        "ws://{}/api/chat/ws?definition_id=demo&conversation_id={chat}&last_seq={}",
        server.addr,
        n - 1
    );
    let mut raw = Raw::connect(&url).await;
    loop {
        match raw.next().await {
            Ok(m) if m["type"] == "error" => {
                assert_eq!(m["data"]["error_code"], "PERSISTENCE_ERROR");
                break;
            }
            Ok(m) => assert_ne!(m["data"]["content"], "after", "{m}"),
            Err(code) => panic!("closed before the error: {code:?}"),
        }
    }
    assert_eq!(raw.next().await, Err(Some(1011)));
}

// ----- 5. conversation ids no other user can occupy --------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conversation_id_cannot_be_taken_by_another_user() {
    let server = jwt_server().await;
    let alice = token("alice", 600, SECRET);
    let bob = token("bob", 600, SECRET);
    let derived = agentwire::session::conversation_chat("alice", "support-42");

    // Bob tries to occupy Alice's chat first.
    let mut req = server.ws_url().into_client_request().unwrap();
    req.headers_mut()
        .insert("authorization", format!("Bearer {bob}").parse().unwrap());
    let mut c = Client::from_stream(tokio_tungstenite::connect_async(req).await.unwrap().0);
    c.start(derived, "mine now").await;
    let err = c.expect("chat.error").await;
    assert_eq!(err["error_code"], "SCHEMA_VALIDATION_FAILED", "{err}");

    // Alice's conversation is hers, at the id the server derives.
    let auth = format!("Bearer {alice}");
    let body =
        json!({"message": "hi", "context_type": "workflow", "conversation_id": "support-42"});
    let (status, text) = http_request(
        server.addr,
        "POST",
        "/v1/agent/chat",
        &[
            ("content-type", "application/json"),
            ("authorization", &auth),
        ],
        &body.to_string(),
    )
    .await;
    assert_eq!(status, 200, "{text}");
    assert!(text.contains(&derived.to_string()), "{text}");
    // Bob's same words name another chat of his own.
    assert_ne!(
        agentwire::session::conversation_chat("bob", "support-42"),
        derived
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_with_crit_headers_or_control_characters_are_refused() {
    let server = jwt_server().await;
    let forged = token("alice\nINFO agentwire: forged line", 600, SECRET);
    let header = Header {
        crit: Some(vec!["b64".into()]),
        ..Header::default()
    };
    let crit = encode(
        &header,
        &json!({"sub": "alice", "exp": chrono::Utc::now().timestamp() + 600}),
        &EncodingKey::from_secret(SECRET.as_bytes()),
    )
    .unwrap();
    for t in [forged, crit] {
        let auth = format!("Bearer {t}");
        let (status, _) = http_get(server.addr, "/v1/chats", &[("authorization", &auth)]).await;
        assert_eq!(status, 401);
    }
}

// ----- 6. rate limits and quotas ----------------------------------------------

async fn limited(settings: Settings) -> Server {
    Server::start_with(Opts {
        settings,
        ..Default::default()
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn new_chats_are_rate_limited_per_user_on_every_wire() {
    let server = limited(Settings {
        rate_chats_per_minute: Some(3),
        ..Default::default()
    })
    .await;
    let mut c = server.client().await;
    for _ in 0..3 {
        c.send(json!({"type": "chat.start", "chat_id": Uuid::new_v4(), "agent": "demo"}))
            .await;
    }
    c.send(json!({"type": "chat.start", "chat_id": Uuid::new_v4(), "agent": "demo"}))
        .await;
    let err = c.expect("chat.error").await;
    assert_eq!(err["error_code"], "RATE_LIMIT_EXCEEDED", "{err}");
    assert!(err["details"]["retry_after_ms"].as_u64().unwrap() > 0);
    assert_eq!(err["recoverable"], true);

    let (status, text) = raw_request(
        server.addr,
        &format!(
            "POST /v1/chats HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json",
            server.addr
        ),
        &json!({"agent": "demo"}).to_string(),
    )
    .await;
    assert_eq!(status, 429, "{text}");
    assert!(text.contains("RATE_LIMIT_EXCEEDED"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn turns_and_answers_are_rate_limited_per_user_with_retry_after() {
    let server = limited(Settings {
        rate_messages_per_minute: Some(2),
        ..Default::default()
    })
    .await;
    let mut c = server.client().await;
    let chat = Uuid::new_v4();
    c.start(chat, "one").await;
    c.until_complete(chat).await;
    c.say(chat, "two").await;
    c.until_complete(chat).await;
    c.say(chat, "three").await;
    let err = c.expect("chat.error").await;
    assert_eq!(err["error_code"], "RATE_LIMIT_EXCEEDED", "{err}");
    let body = json!({"text": "four"}).to_string();
    let head = format!(
        "POST /v1/chats/{chat}/messages HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json"
    );
    let (status, answer) = raw_request(server.addr, &head, &body).await;
    assert_eq!(status, 429, "{answer}");
    let retry: u64 = answer
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("retry-after: ")
                .map(str::to_owned)
        })
        .expect("a Retry-After header")
        .trim()
        .parse()
        .unwrap();
    assert!((1..=60).contains(&retry), "{retry}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_on_one_connection_is_refused_and_others_carry_on() {
    let server = limited(Settings {
        rate_frames_per_second: Some(5),
        ..Default::default()
    })
    .await;
    let mut flood = server.client().await;
    for _ in 0..40 {
        flood.send(json!({"type": "ping"})).await;
    }
    let mut limited = 0;
    for _ in 0..40 {
        let m = flood.recv().await;
        if m["type"] == "chat.error" {
            assert_eq!(m["error_code"], "RATE_LIMIT_EXCEEDED");
            limited += 1;
        }
    }
    assert!(limited >= 25, "{limited} of 40 refused");
    let mut other = server.client().await;
    other.send(json!({"type": "ping"})).await;
    assert_eq!(other.recv().await["type"], "pong");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_in_flight_and_open_streams_are_capped_per_user() {
    let server = limited(Settings {
        max_runs_per_user: Some(1),
        max_streams_per_user: Some(1),
        ..Default::default()
    })
    .await;
    let mut c = server.client().await;
    let (a, b) = (Uuid::new_v4(), Uuid::new_v4());
    c.start(a, "slow: 40").await;
    c.recv_until(|v| v["type"] == "chat.print").await;
    c.start(b, "hello").await;
    let err = c
        .recv_until(|v| v["type"] == "chat.error" && v["chat_id"] == b.to_string())
        .await;
    assert_eq!(err.last().unwrap()["error_code"], "RATE_LIMIT_EXCEEDED");
    c.until_complete(a).await;
    // The refused start left no chat; the slot came back with the run's end.
    c.start(b, "hello again").await;
    assert_eq!(
        last_text(&c.until_complete(b).await),
        "You said: hello again"
    );

    // One SSE stream open (a follower of chat a), a second one refused.
    let mut open = TcpStream::connect(server.addr).await.unwrap();
    let head = format!(
        "GET /v1/chats/{a}/events HTTP/1.1\r\nHost: {}\r\n\r\n",
        server.addr
    );
    open.write_all(head.as_bytes()).await.unwrap();
    let mut buf = [0u8; 256];
    let n = open.read(&mut buf).await.unwrap();
    assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"));
    let (status, text) = http_get(server.addr, &format!("/v1/chats/{a}/events"), &[]).await;
    assert_eq!(status, 429, "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_websockets_are_capped_per_user_on_both_endpoints() {
    let server = limited(Settings {
        max_sockets_per_user: Some(2),
        ..Default::default()
    })
    .await;
    let first = server.client().await;
    let second = Raw::connect(&format!(
        "ws://{}/api/chat/ws?definition_id=demo",
        server.addr
    ))
    .await;
    assert_eq!(upgrade_status(&server.ws_url(), &[]).await, 429);
    drop(second);
    // The slot comes back when a connection ends.
    let mut again = None;
    for _ in 0..50 {
        tokio::time::sleep(Duration::from_millis(20)).await;
        if upgrade_status(&server.ws_url(), &[]).await == 101 {
            again = Some(());
            break;
        }
    }
    assert!(again.is_some(), "a closed socket gives its slot back");
    drop(first);
}

// ----- 7. timeouts and byte bounds ----------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_headers_slow_bodies_and_idle_connections_are_closed() {
    let server = limited(Settings {
        http_header_timeout_seconds: Some(1),
        http_body_timeout_seconds: Some(1),
        ..Default::default()
    })
    .await;
    // Headers a byte at a time, never finished (slowloris).
    let mut slow = TcpStream::connect(server.addr).await.unwrap();
    slow.write_all(b"GET /healthz HTTP/1.1\r\nHost: x")
        .await
        .unwrap();
    // An idle keep-alive connection after one request.
    let mut idle = TcpStream::connect(server.addr).await.unwrap();
    idle.write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .await
        .unwrap();
    let mut buf = vec![0u8; 4096];
    assert!(idle.read(&mut buf).await.unwrap() > 0);
    // A body that trickles in: 408 once the body timeout is over.
    let mut trickle = TcpStream::connect(server.addr).await.unwrap();
    let head = "POST /v1/chats HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"agent\"";
    trickle.write_all(head.as_bytes()).await.unwrap();
    let mut answer = String::new();
    tokio::time::timeout(Duration::from_secs(5), trickle.read_to_string(&mut answer))
        .await
        .expect("answered in time")
        .unwrap();
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    for mut conn in [slow, idle] {
        let closed = tokio::time::timeout(Duration::from_secs(5), async {
            loop {
                match conn.read(&mut buf).await {
                    Ok(0) | Err(_) => return,
                    Ok(_) => continue,
                }
            }
        })
        .await;
        assert!(closed.is_ok(), "the server closed the connection");
    }
}

/// The resident memory of a process, in bytes.
fn rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap();
    kb * 1024
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_that_resume_and_never_read_pin_little_memory() {
    let dir = tempfile::tempdir().unwrap();
    let url = database_url(dir.path()).await;
    std::fs::create_dir_all(dir.path().join("agents")).unwrap();
    let (child, addr) = spawn_agentwire(&url, &dir.path().join("agents"), &[]).await;
    let pid = child.id().unwrap();
    // A chat of large envelopes: 24 turns of 250 KB, each logged three times
    // (the user's text, the streamed reply, the whole reply): ~18 MB.
    let mut c = Client::connect(&format!("ws://{addr}/v1/ws")).await;
    let chat = Uuid::new_v4();
    c.send(json!({"type": "chat.start", "chat_id": chat, "agent": "demo"}))
        .await;
    for _ in 0..24 {
        c.say(chat, &"z".repeat(250_000)).await;
        c.until_complete(chat).await;
    }
    c.close().await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let before = rss(pid);

    // 20 clients resume from the start and never read a byte.
    let mut stalled = Vec::new();
    for _ in 0..20 {
        let mut s = Client::connect_small_buffer(addr).await;
        s.resume(chat, 0).await;
        stalled.push(s);
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    let grown = rss(pid).saturating_sub(before);
    // Each holds at most about one replay page (~1 MB) and its socket buffers;
    // before the bound each read 500 envelopes (the whole 18 MB log) at once.
    assert!(
        grown < 120 << 20,
        "20 stalled resumes grew the server by {} MB",
        grown >> 20
    );
    let (status, _) = http_get(addr, "/healthz", &[]).await;
    assert_eq!(status, 200);
    drop(stalled);
    drop(child);
}
