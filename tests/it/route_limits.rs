//! The routes this wave added or moved (workflows' invocation too; the AI
//! SDK's and AG-UI's HTTP routes and socket), each held to what the older ones
//! have: a body over `max_message_bytes` is 413 and logs nothing; another
//! user's token finds nothing (404); a burst past the user's rate is 429.
//! `/`, `/healthz` and `/metrics` take no body, belong to nobody and are not
//! rate limited (operators' probes); they are checked to ignore a body.

use serde_json::{Value, json};

use crate::auth::{SECRET, token};
use crate::support::*;

const MAX: usize = 16 * 1024;

async fn jwt_server(rate: Option<u32>) -> (Server, tempfile::TempDir) {
    let files = tempfile::tempdir().unwrap();
    std::fs::write(files.path().join("shop.db"), b"").unwrap();
    let server = Server::start_with(Opts {
        settings: agentwire::config::Settings {
            auth: Some(agentwire::config::AuthMode::Jwt),
            jwt_secret: Some(SECRET.into()),
            max_message_bytes: Some(MAX),
            rate_messages_per_minute: rate,
            rate_chats_per_minute: rate,
            connection_files_dir: Some(files.path().to_owned()),
            ..Default::default()
        },
        agents: vec![
            (
                "workflows/hello.yaml".into(),
                "id: hello\nparameters: {type: object, properties: {who: {type: string}}}\nprompt: \"Hello {who}\"\n".into(),
            ),
            (
                "workflows/secret.yaml".into(),
                "id: secret\ncategory: Admin\nallow: {users: [alice]}\nprompt: hush\n".into(),
            ),
        ],
    })
    .await;
    (server, files)
}

struct Caller {
    client: reqwest::Client,
    base: String,
    bearer: String,
}

impl Caller {
    fn new(server: &Server, user: &str) -> Self {
        Self {
            client: agentwire::llm::http_client(),
            base: format!("http://{}", server.addr),
            bearer: token(user, 600, SECRET),
        }
    }

    async fn send(&self, method: &str, path: &str, body: Option<String>) -> (u16, Value) {
        let url = format!("{}{path}", self.base);
        let mut req = match method {
            "GET" => self.client.get(url),
            "PATCH" => self.client.patch(url),
            "DELETE" => self.client.delete(url),
            _ => self.client.post(url),
        }
        .bearer_auth(&self.bearer);
        if let Some(b) = body {
            req = req.header("content-type", "application/json").body(b);
        }
        let r = req.send().await.unwrap();
        let status = r.status().as_u16();
        let text = r.text().await.unwrap_or_default();
        (status, serde_json::from_str(&text).unwrap_or(Value::Null))
    }

    async fn post(&self, path: &str, body: Value) -> (u16, Value) {
        self.send("POST", path, Some(body.to_string())).await
    }
}

/// A thread of `c`'s with a database bound.
async fn thread(c: &Caller) -> (String, String) {
    let (_, t) = c.post("/chat", json!({})).await;
    let thread = t["thread_id"].as_str().unwrap().to_owned();
    let (_, conn) = c
        .post(
            "/connections",
            json!({"name": "shop", "driver": "sqlite", "path": "shop.db"}),
        )
        .await;
    let conn = conn["id"].as_str().unwrap().to_owned();
    (thread, conn)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversize_bodies_and_other_users_are_refused_on_every_new_route() {
    let (server, _files) = jwt_server(None).await;
    let (alice, bob) = (Caller::new(&server, "alice"), Caller::new(&server, "bob"));
    let (t, conn) = thread(&alice).await;
    let big = json!({"message": "x".repeat(MAX + 1), "connection_id": conn,
                     "decisions": [{"tool_call_id": "c", "approved": true}]})
    .to_string();
    let before = alice.send("GET", &format!("/v1/chats/{t}"), None).await.1["last_seq"].clone();

    // Every route that reads a body: over the limit, 413, nothing logged.
    for path in [
        "/chat".to_owned(),
        format!("/chat/{t}/connection"),
        format!("/chat/{t}/message"),
        format!("/v1/chats/{t}/approvals"),
        format!("/v1/chats/{t}/workflows/hello"),
        format!("/v1/chats/{t}/messages/1/edit"),
        format!("/v1/chats/{t}/regenerate"),
        format!("/v1/chats/{t}/switch"),
        format!("/v1/chats/{t}/fork"),
    ] {
        let (status, err) = alice.send("POST", &path, Some(big.clone())).await;
        assert_eq!(status, 413, "{path}: {err}");
        assert_eq!(err["error"]["code"], "SCHEMA_VALIDATION_FAILED", "{path}");
    }
    let after = alice.send("GET", &format!("/v1/chats/{t}"), None).await.1["last_seq"].clone();
    assert_eq!(before, after, "nothing was logged");

    // Another user's token: Alice's thread does not exist for Bob.
    let bind = json!({"connection_id": conn});
    for (method, path, body) in [
        ("POST", format!("/chat/{t}/connection"), Some(bind.clone())),
        (
            "POST",
            format!("/chat/{t}/message"),
            Some(json!({"message": "hi"})),
        ),
        ("GET", format!("/chat/{t}/state"), None),
        (
            "POST",
            format!("/v1/chats/{t}/approvals"),
            Some(json!({"decisions": [{"tool_call_id": "c", "approved": true}]})),
        ),
        (
            "POST",
            format!("/v1/chats/{t}/workflows/hello"),
            Some(json!({"parameters": {"who": "Bob"}})),
        ),
        // The tree's routes (issue 34).
        (
            "POST",
            format!("/v1/chats/{t}/messages/1/edit"),
            Some(json!({"text": "mine now"})),
        ),
        ("POST", format!("/v1/chats/{t}/regenerate"), Some(json!({}))),
        (
            "POST",
            format!("/v1/chats/{t}/switch"),
            Some(json!({"to": 1})),
        ),
        ("POST", format!("/v1/chats/{t}/fork"), Some(json!({}))),
        ("GET", format!("/v1/chats/{t}/branches"), None),
        ("GET", format!("/v1/chats/{t}/path"), None),
    ] {
        let (status, err) = bob.send(method, &path, body.map(|b| b.to_string())).await;
        assert_eq!(status, 404, "{method} {path}: {err}");
        assert_eq!(err["error"]["code"], "RESUME_FAILED", "{path}");
    }
    // Nor may Bob bind Alice's connection to a thread of his own.
    let (_, his) = bob.post("/chat", json!({})).await;
    let his = his["thread_id"].as_str().unwrap();
    let (status, err) = bob.post(&format!("/chat/{his}/connection"), bind).await;
    assert_eq!(
        (status, err["error"]["code"].clone()),
        (404, json!("CONNECTION_NOT_FOUND"))
    );
    // `/chat` belongs to its caller: Bob's new thread is his, not Alice's.
    let (status, _) = alice.send("GET", &format!("/chat/{his}/state"), None).await;
    assert_eq!(status, 404);

    // The body-less routes ignore a body, whoever sends it.
    for path in ["/", "/healthz", "/metrics"] {
        let (status, _) = bob.send("GET", path, Some(big.clone())).await;
        assert_eq!(status, 200, "{path}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_past_the_rate_is_refused_on_every_new_route() {
    let (server, _files) = jwt_server(Some(2)).await;
    let alice = Caller::new(&server, "alice");
    let (t, conn) = thread(&alice).await;
    let limited = |(status, err): (u16, Value)| {
        assert_eq!(status, 429, "{err}");
        assert_eq!(err["error"]["code"], "RATE_LIMIT_EXCEEDED", "{err}");
    };
    // New threads: `rate_chats_per_minute` (one made above).
    let _ = alice.post("/chat", json!({})).await;
    limited(alice.post("/chat", json!({})).await);
    // Bindings count as turns: two, then refused.
    for _ in 0..2 {
        let (status, err) = alice
            .post(
                &format!("/chat/{t}/connection"),
                json!({"connection_id": conn}),
            )
            .await;
        assert_eq!(status, 200, "{err}");
    }
    let bind = json!({"connection_id": conn});
    limited(alice.post(&format!("/chat/{t}/connection"), bind).await);
    // Turns and approvals share that rate, now spent.
    limited(
        alice
            .post(&format!("/chat/{t}/message"), json!({"message": "hi"}))
            .await,
    );
    limited(
        alice
            .post(
                &format!("/v1/chats/{t}/approvals"),
                json!({"decisions": [{"tool_call_id": "c", "approved": true}]}),
            )
            .await,
    );
    limited(
        alice
            .post(
                &format!("/v1/chats/{t}/workflows/hello"),
                json!({"parameters": {"who": "me"}}),
            )
            .await,
    );
    // So do the tree's writes (issue 34): edits, regenerates, switches, forks.
    for (path, body) in [
        (
            format!("/v1/chats/{t}/messages/1/edit"),
            json!({"text": "again"}),
        ),
        (format!("/v1/chats/{t}/regenerate"), json!({})),
        (format!("/v1/chats/{t}/switch"), json!({"to": 1})),
        (format!("/v1/chats/{t}/fork"), json!({})),
    ] {
        limited(alice.post(&path, body).await);
    }
    // Reads are not rate limited: the state, the tree and a path still answer.
    let (status, state) = alice.send("GET", &format!("/chat/{t}/state"), None).await;
    assert_eq!(status, 200, "{state}");
    for path in [
        format!("/v1/chats/{t}/branches"),
        format!("/v1/chats/{t}/path"),
    ] {
        let (status, body) = alice.send("GET", &path, None).await;
        assert_eq!(status, 200, "{path}: {body}");
    }
}

/// The workflow registry's reads: a body is ignored, a workflow another user
/// may not run is not there for them (the reads' "wrong owner"), no token is
/// 401, and, as every GET here, they are not rate limited.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_workflow_reads_ignore_bodies_hide_what_is_not_yours_and_are_not_rate_limited() {
    let (server, _files) = jwt_server(Some(2)).await;
    let (alice, bob) = (Caller::new(&server, "alice"), Caller::new(&server, "bob"));
    let big = "x".repeat(MAX + 1);
    let reads = [
        "/v1/workflows",
        "/v1/workflows/categories",
        "/workflows/categories",
        "/v1/workflows/secret",
    ];
    for path in reads {
        // Alice may run `secret`; a body past the limit is not read.
        let (status, body) = alice.send("GET", path, Some(big.clone())).await;
        assert_eq!(status, 200, "{path}: {body}");
        let text = body.to_string();
        assert!(
            text.contains("secret") || text.contains("Admin"),
            "{path}: {body}"
        );
        // Bob may not: it is not there for him.
        let (status, body) = bob.send("GET", path, None).await;
        let text = body.to_string();
        if path.ends_with("/secret") {
            assert_eq!(
                (status, &body["error"]["code"]),
                (404, &json!("WORKFLOW_NOT_FOUND"))
            );
        } else {
            assert_eq!(status, 200, "{path}");
            assert!(
                !text.contains("secret") && !text.contains("Admin"),
                "{path}: {body}"
            );
        }
        // No token: 401.
        let (status, _) = http_get(server.addr, path, &[]).await;
        assert_eq!(status, 401, "{path}");
    }
    // Reads past the turn rate (2 a minute here) still answer.
    for _ in 0..5 {
        for path in reads {
            assert_eq!(alice.send("GET", path, None).await.0, 200, "{path}");
        }
    }
    // Bob cannot run it either, in a chat of his own.
    let (_, his) = bob.post("/chat", json!({})).await;
    let his = his["thread_id"].as_str().unwrap();
    let (status, err) = bob
        .post(&format!("/v1/chats/{his}/workflows/secret"), json!({}))
        .await;
    assert_eq!(
        (status, &err["error"]["code"]),
        (404, &json!("WORKFLOW_NOT_FOUND"))
    );
}

// ----- the wires of React's protocols (issue 20) ---------------------------

/// A user message of the AI SDK's transport for chat `id`.
fn ai_sdk_turn(id: &str, text: &str) -> Value {
    json!({"id": id, "trigger": "submit-message",
           "messages": [{"id": "m1", "role": "user", "parts": [{"type": "text", "text": text}]}]})
}

/// An AG-UI run input on thread `id`.
fn ag_ui_turn(id: &str, text: &str) -> Value {
    json!({"threadId": id, "runId": "r1", "messages": [{"id": "m1", "role": "user", "content": text}]})
}

/// `/v1/ai-sdk/ws` as `user`.
async fn ai_sdk_socket(server: &Server, user: &str) -> Client {
    let url = format!(
        "ws://{}/v1/ai-sdk/ws?access_token={}",
        server.addr,
        token(user, 600, SECRET)
    );
    Client::connect(&url).await
}

/// Sends a frame; the first server frame for `request_id`.
async fn ask_socket(ws: &mut Client, frame: Value) -> Value {
    let id = frame["requestId"].clone();
    ws.send_raw(tokio_tungstenite::tungstenite::Message::text(
        frame.to_string(),
    ))
    .await;
    loop {
        let msg = ws.next_json().await.expect("the socket stays open");
        if msg["requestId"] == id {
            return msg;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ai_sdk_and_ag_ui_routes_refuse_oversize_bodies_and_other_users() {
    let (server, _files) = jwt_server(None).await;
    let (alice, bob) = (Caller::new(&server, "alice"), Caller::new(&server, "bob"));
    let chat = uuid::Uuid::new_v4().to_string();
    let (status, _) = alice
        .post("/v1/ai-sdk/chat", ai_sdk_turn(&chat, "hello"))
        .await;
    assert_eq!(status, 200);
    let before = alice
        .send("GET", &format!("/v1/chats/{chat}"), None)
        .await
        .1["last_seq"]
        .clone();

    // Over `max_message_bytes`: 413 on both POST routes, 1009 on the socket.
    let big = "x".repeat(MAX + 1);
    for (path, body) in [
        ("/v1/ai-sdk/chat", ai_sdk_turn(&chat, &big)),
        ("/v1/ag-ui", ag_ui_turn(&chat, &big)),
    ] {
        let (status, err) = alice.post(path, body).await;
        assert_eq!(status, 413, "{path}: {err}");
        assert_eq!(err["error"]["code"], "SCHEMA_VALIDATION_FAILED", "{path}");
    }
    let mut ws = ai_sdk_socket(&server, "alice").await;
    let mut frame = ai_sdk_turn(&chat, &big);
    frame["type"] = json!("send");
    frame["requestId"] = json!("r1");
    ws.send_raw(tokio_tungstenite::tungstenite::Message::text(
        frame.to_string(),
    ))
    .await;
    assert_eq!(ws.next_json().await, Err(Ended::Closed(Some(1009))));
    // The resumes are GETs: a body sent anyway is not read (nothing in
    // flight: 204 either way).
    for path in [
        format!("/v1/ai-sdk/chat/{chat}/stream"),
        format!("/v1/ag-ui/{chat}/stream"),
    ] {
        let (status, _) = alice.send("GET", &path, Some(big.clone())).await;
        assert_eq!(status, 204, "{path}");
    }
    let after = alice
        .send("GET", &format!("/v1/chats/{chat}"), None)
        .await
        .1["last_seq"]
        .clone();
    assert_eq!(before, after, "nothing was logged");

    // Bob's token: Alice's chat is not there for him.
    let answer = json!({"id": chat, "messages": [{"id": "a1", "role": "assistant",
        "metadata": {"agentwire": {"seq": 1}}, "parts": []}]});
    let resume = json!({"threadId": chat, "runId": "r2", "messages": [],
        "resume": [{"interruptId": "input:req_1@3", "status": "resolved", "payload": "x"}]});
    let tool_result = json!({"threadId": chat, "runId": "r3", "messages": [
        {"id": "t1", "role": "tool", "toolCallId": "call_1", "content": "x"}]});
    for (path, body) in [
        ("/v1/ai-sdk/chat", ai_sdk_turn(&chat, "mine?")),
        ("/v1/ai-sdk/chat", answer),
        ("/v1/ag-ui", ag_ui_turn(&chat, "mine?")),
        ("/v1/ag-ui", resume),
        ("/v1/ag-ui", tool_result),
    ] {
        let (status, err) = bob.post(path, body).await;
        assert_eq!(status, 404, "{path}: {err}");
        assert_eq!(err["error"]["code"], "RESUME_FAILED", "{path}");
    }
    let (status, err) = bob
        .send("GET", &format!("/v1/ag-ui/{chat}/stream"), None)
        .await;
    assert_eq!(
        (status, &err["error"]["code"]),
        (404, &json!("RESUME_FAILED"))
    );
    // The AI SDK's resume answers a chat that is not yours as one that does
    // not exist yet: nothing in flight.
    let (status, _) = bob
        .send("GET", &format!("/v1/ai-sdk/chat/{chat}/stream"), None)
        .await;
    assert_eq!(status, 204);
    let mut ws = ai_sdk_socket(&server, "bob").await;
    let mut send = ai_sdk_turn(&chat, "mine?");
    send["type"] = json!("send");
    send["requestId"] = json!("s1");
    let refused = ask_socket(&mut ws, send).await;
    assert_eq!(refused["type"], "error", "{refused}");
    let resumed = ask_socket(
        &mut ws,
        json!({"type": "resume", "requestId": "s2", "id": chat}),
    )
    .await;
    assert_eq!(resumed["type"], "no-active", "{resumed}");
    // Nor can he cancel it, by its id or the conversation id it came from.
    let (status, err) = bob
        .send("POST", &format!("/v1/chats/{chat}/cancel"), None)
        .await;
    assert_eq!(
        (status, &err["error"]["code"]),
        (404, &json!("RESUME_FAILED"))
    );
    let (status, _) = bob.send("POST", "/v1/chats/page-1/cancel", None).await;
    assert_eq!(
        status, 404,
        "his own conversation id names no chat of his yet"
    );
    let after = alice
        .send("GET", &format!("/v1/chats/{chat}"), None)
        .await
        .1["last_seq"]
        .clone();
    assert_eq!(before, after, "Bob changed nothing");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_past_the_rate_is_refused_on_the_ai_sdk_and_ag_ui_routes() {
    let (server, _files) = jwt_server(Some(2)).await;
    let alice = Caller::new(&server, "alice");
    let chat = uuid::Uuid::new_v4().to_string();
    let limited = |(status, err): (u16, Value)| {
        assert_eq!(status, 429, "{err}");
        assert_eq!(err["error"]["code"], "RATE_LIMIT_EXCEEDED", "{err}");
    };
    // Two turns, then refused on every wire: the rate is the user's.
    for text in ["one", "two"] {
        let (status, _) = alice
            .post("/v1/ai-sdk/chat", ai_sdk_turn(&chat, text))
            .await;
        assert_eq!(status, 200);
    }
    limited(
        alice
            .post("/v1/ai-sdk/chat", ai_sdk_turn(&chat, "three"))
            .await,
    );
    limited(alice.post("/v1/ag-ui", ag_ui_turn(&chat, "three")).await);
    let mut ws = ai_sdk_socket(&server, "alice").await;
    let mut send = ai_sdk_turn(&chat, "three");
    send["type"] = json!("send");
    send["requestId"] = json!("s1");
    let refused = ask_socket(&mut ws, send).await;
    assert_eq!(refused["type"], "error", "{refused}");
    assert!(
        refused["errorText"]
            .as_str()
            .unwrap()
            .contains("rate limit"),
        "{refused}"
    );
    // The resumes are reads: not rate limited.
    for _ in 0..5 {
        for path in [
            format!("/v1/ai-sdk/chat/{chat}/stream"),
            format!("/v1/ag-ui/{chat}/stream"),
        ] {
            assert_eq!(alice.send("GET", &path, None).await.0, 204, "{path}");
        }
    }
}

/// The chat list's routes (issue 35): the list and its search, a chat's
/// rename/pin/archive, its export, and the conversation as the AI SDK and
/// AG-UI load it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_chat_lists_routes_refuse_oversize_bodies_other_users_and_bursts() {
    let (server, _files) = jwt_server(Some(3)).await;
    let (alice, bob) = (Caller::new(&server, "alice"), Caller::new(&server, "bob"));
    let chat = uuid::Uuid::new_v4();
    let (status, _) = alice
        .post(
            "/v1/chats",
            json!({"agent": "demo", "chat_id": chat, "message": "pancakes"}),
        )
        .await;
    assert_eq!(status, 201);
    let big = json!({"title": "x".repeat(MAX + 1)}).to_string();
    // The demo's answer is still streaming: wait for the run to end, so the
    // comparison below sees only what the refused PATCH could have changed.
    let mut before = Value::Null;
    for _ in 0..500 {
        before = alice
            .send("GET", &format!("/v1/chats/{chat}"), None)
            .await
            .1;
        if before["state"] == "idle" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(before["state"], "idle", "{before}");

    // The one route that reads a body: over the limit, 413, nothing logged
    // nor changed; the reads ignore a body.
    let (status, err) = alice
        .send("PATCH", &format!("/v1/chats/{chat}"), Some(big.clone()))
        .await;
    assert_eq!(
        (status, &err["error"]["code"]),
        (413, &json!("SCHEMA_VALIDATION_FAILED")),
        "{err}"
    );
    let after = alice
        .send("GET", &format!("/v1/chats/{chat}"), None)
        .await
        .1;
    assert_eq!(
        (&before["last_seq"], &before["title"]),
        (&after["last_seq"], &after["title"])
    );
    let reads = [
        "/v1/chats".to_owned(),
        format!("/v1/chats/{chat}/export?format=json"),
        format!("/v1/ai-sdk/chat/{chat}/messages"),
        format!("/v1/ag-ui/{chat}/messages"),
    ];
    for path in &reads {
        let (status, body) = alice.send("GET", path, Some(big.clone())).await;
        assert_eq!(status, 200, "{path}: {body}");
    }

    // Another user's token: Alice's chat is not Bob's to list, find, change,
    // export or load.
    let (_, listed) = bob.send("GET", "/v1/chats", None).await;
    assert_eq!(listed["chats"], json!([]));
    let (_, found) = bob.send("GET", "/v1/chats?q=pancakes", None).await;
    assert_eq!(found["chats"], json!([]));
    for (method, path, body) in [
        (
            "PATCH",
            format!("/v1/chats/{chat}"),
            Some(json!({"title": "mine"}).to_string()),
        ),
        ("GET", format!("/v1/chats/{chat}/export"), None),
        ("DELETE", format!("/v1/chats/{chat}?purge=true"), None),
    ] {
        let (status, err) = bob.send(method, &path, body).await;
        assert_eq!(
            (status, &err["error"]["code"]),
            (404, &json!("RESUME_FAILED")),
            "{method} {path}: {err}"
        );
    }
    for path in [
        format!("/v1/ai-sdk/chat/{chat}/messages"),
        format!("/v1/ag-ui/{chat}/messages"),
    ] {
        assert_eq!(
            bob.send("GET", &path, None).await,
            (200, json!([])),
            "{path}"
        );
    }
    let (_, mine) = alice.send("GET", "/v1/chats?q=pancakes", None).await;
    assert_eq!(mine["chats"][0]["id"], chat.to_string(), "{mine}");

    // A burst past the rate: renames and searches count as turns (the chat's
    // first message and the search above took two of three).
    let (status, err) = alice
        .send(
            "PATCH",
            &format!("/v1/chats/{chat}"),
            Some(json!({"title": "Pancakes"}).to_string()),
        )
        .await;
    assert_eq!(status, 200, "{err}");
    let limited = |(status, err): (u16, Value)| {
        assert_eq!(
            (status, &err["error"]["code"]),
            (429, &json!("RATE_LIMIT_EXCEEDED")),
            "{err}"
        );
    };
    limited(
        alice
            .send(
                "PATCH",
                &format!("/v1/chats/{chat}"),
                Some(json!({"pinned": true}).to_string()),
            )
            .await,
    );
    limited(alice.send("GET", "/v1/chats?q=pancakes", None).await);
    // The other reads are not rate limited.
    for path in &reads {
        let (status, body) = alice.send("GET", path, None).await;
        assert_eq!(status, 200, "{path}: {body}");
    }
}

/// Issue 38's and 39's reads (a user's schedules, one schedule, usage): a
/// body past the limit is not read, another user's is not there, no token
/// is 401, and reads past the turn rate still answer. (Their writes are held
/// to the limits in `server_api::the_new_routes_refuse_…`.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_schedule_and_usage_reads_ignore_bodies_hide_what_is_not_yours_and_are_not_rate_limited()
 {
    let (server, _files) = jwt_server(Some(2)).await;
    let (alice, bob) = (Caller::new(&server, "alice"), Caller::new(&server, "bob"));
    let made = json!({"agent": "demo", "cron": "0 8 * * *"}).to_string();
    let (status, schedule) = alice.send("POST", "/v1/schedules", Some(made)).await;
    assert_eq!(status, 201, "{schedule}");
    let one = format!("/v1/schedules/{}", schedule["id"].as_str().unwrap());
    let big = "x".repeat(MAX + 1);
    let reads = [
        "/v1/schedules".to_owned(),
        one.clone(),
        "/v1/usage".to_owned(),
    ];
    for path in &reads {
        let (status, body) = alice.send("GET", path, Some(big.clone())).await;
        assert_eq!(status, 200, "{path}: {body}");
        let (status, _) = http_get(server.addr, path, &[]).await;
        assert_eq!(status, 401, "{path}");
    }
    // Bob's view: not alice's schedule, none of his own, his own usage.
    let (status, body) = bob.send("GET", &one, None).await;
    assert_eq!(status, 404, "{body}");
    let (_, list) = bob.send("GET", "/v1/schedules", None).await;
    assert_eq!(list["schedules"], json!([]));
    let (status, body) = bob.send("GET", "/v1/usage?user=alice", None).await;
    assert_eq!(status, 403, "{body}");
    // Past the turn rate (2 a minute here), reads still answer.
    for _ in 0..4 {
        for path in &reads {
            assert_eq!(alice.send("GET", path, None).await.0, 200, "{path}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operators_routes_refuse_oversize_bodies_non_operators_and_bursts() {
    let (server, _files) = jwt_server(Some(2)).await;
    let now = chrono::Utc::now().timestamp();
    let root = jsonwebtoken::encode(
        &jsonwebtoken::Header::default(),
        &json!({"sub": "root", "admin": true, "exp": now + 600, "iat": now}),
        &jsonwebtoken::EncodingKey::from_secret(SECRET.as_bytes()),
    )
    .unwrap();
    let operator = Caller {
        bearer: root,
        ..Caller::new(&server, "root")
    };
    let alice = Caller::new(&server, "alice");
    // Alice's run waits for her answer.
    let mut ws = crate::server_api::connect_as(&server, "alice").await;
    let chat = uuid::Uuid::new_v4();
    ws.start(chat, "ask: Your name?").await;
    let asked = ws.recv_until(|m| m["type"] == "chat.input_request").await;
    let request = asked.last().unwrap()["request_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let reads = [
        "/v1/admin/overview".to_owned(),
        format!("/v1/admin/chats/{chat}/log"),
    ];
    let acts = [
        format!("/v1/admin/chats/{chat}/waits/{request}/end"),
        format!("/v1/admin/chats/{chat}/cancel"),
    ];
    let big = "x".repeat(MAX + 1);
    // A body over the limit: 413, and nothing is done or recorded.
    for path in &acts {
        let (status, body) = operator.send("POST", path, Some(big.clone())).await;
        assert_eq!(status, 413, "{path}: {body}");
    }
    let (_, overview) = operator.send("GET", &reads[0], None).await;
    assert_eq!(overview["acts"], json!([]), "{overview}");
    assert_eq!(overview["runs"][0]["waiting"][0]["id"], request.as_str());
    // Reads ignore a body; nobody but an operator gets anything.
    for path in &reads {
        let (status, body) = operator.send("GET", path, Some(big.clone())).await;
        assert_eq!(status, 200, "{path}: {body}");
        assert_eq!(http_get(server.addr, path, &[]).await.0, 401, "{path}");
    }
    for path in reads.iter().chain(&acts) {
        let method = if path.ends_with("log") || path.ends_with("overview") {
            "GET"
        } else {
            "POST"
        };
        let (status, body) = alice.send(method, path, None).await;
        assert_eq!(status, 403, "{path}: {body}");
        assert_eq!(body["error"]["code"], "UNAUTHORIZED");
    }
    // An operator's acts are its turns (2 a minute here): past them, 429
    // and nothing done; reads still answer.
    let unknown = format!("/v1/admin/chats/{chat}/waits/nope/end");
    assert_eq!(operator.send("POST", &unknown, None).await.0, 404);
    assert_eq!(operator.send("POST", &acts[0], None).await.0, 200);
    let (status, body) = operator.send("POST", &acts[1], None).await;
    assert_eq!(status, 429, "{body}");
    assert_eq!(body["error"]["code"], "RATE_LIMIT_EXCEEDED");
    for _ in 0..4 {
        for path in &reads {
            assert_eq!(operator.send("GET", path, None).await.0, 200, "{path}");
        }
    }
    let (_, overview) = operator.send("GET", &reads[0], None).await;
    let acts: Vec<&str> = overview["acts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["action"].as_str().unwrap())
        .collect();
    assert_eq!(acts, ["end_wait"], "{overview}");
    // The operator's page and its scripts: no body, nobody's, no rate.
    for path in [
        "/admin",
        "/assets/admin.js",
        "/assets/admin.css",
        "/assets/chart-frame.js",
    ] {
        for _ in 0..4 {
            let (status, _) = alice.send("GET", path, Some(big.clone())).await;
            assert_eq!(status, 200, "{path}");
        }
    }
}
