//! The SSE dialects, read by a real SSE client (eventsource-stream).

use std::time::Duration;

use eventsource_stream::Eventsource;
use futures_util::{Stream, StreamExt};
use serde_json::{Value, json};
use uuid::Uuid;

use crate::support::*;

/// One parsed SSE event.
#[derive(Debug, Clone)]
pub(crate) struct Ev {
    pub id: String,
    pub event: String,
    pub data: Value,
}

pub(crate) struct Opened {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    pub events: std::pin::Pin<Box<dyn Stream<Item = Ev> + Send>>,
}

pub(crate) async fn open(
    server: &Server,
    method: &str,
    path: &str,
    body: Option<Value>,
    last_event_id: Option<&str>,
) -> Opened {
    let client = agentwire::llm::http_client();
    let url = format!("http://{}{path}", server.addr);
    let mut req = match method {
        "POST" => client.post(&url),
        _ => client.get(&url),
    };
    if let Some(b) = body {
        req = req.json(&b);
    }
    if let Some(id) = last_event_id {
        req = req.header("last-event-id", id);
    }
    let resp = req.send().await.unwrap();
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    let events = resp
        .bytes_stream()
        .eventsource()
        .filter_map(|e| async move {
            let e = e.ok()?;
            Some(Ev {
                id: e.id,
                event: e.event,
                data: serde_json::from_str(&e.data).unwrap_or(Value::String(e.data)),
            })
        })
        .boxed();
    Opened {
        status,
        headers,
        events,
    }
}

/// Every event until the stream ends.
pub(crate) async fn all(mut events: std::pin::Pin<Box<dyn Stream<Item = Ev> + Send>>) -> Vec<Ev> {
    let mut out = Vec::new();
    while let Some(e) = tokio::time::timeout(WAIT, events.next())
        .await
        .expect("an event in time")
    {
        out.push(e);
    }
    out
}

fn names(evs: &[Ev]) -> Vec<&str> {
    evs.iter().map(|e| e.event.as_str()).collect()
}

fn chunks(evs: &[Ev], field: &str) -> String {
    evs.iter()
        .filter(|e| e.event == "content_chunk")
        .map(|e| e.data[field].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_chat_plain_answer_with_headers() {
    let server = Server::start().await;
    let o = open(
        &server,
        "POST",
        "/v1/agent/chat",
        Some(json!({"message": "hello", "context_type": "workflow"})),
        None,
    )
    .await;
    assert_eq!(o.status, 200);
    assert_eq!(o.headers["content-type"], "text/event-stream");
    assert_eq!(o.headers["cache-control"], "no-cache");
    assert_eq!(o.headers["x-accel-buffering"], "no");
    let chat = o.headers["x-conversation-id"].to_str().unwrap().to_owned();
    let evs = all(o.events).await;
    assert_eq!(evs[0].event, "message_start");
    assert_eq!(evs[0].data, json!({"turn": 0, "conversation_id": chat}));
    assert_eq!(evs.last().unwrap().event, "message_complete");
    assert_eq!(evs.last().unwrap().data, json!({}));
    assert_eq!(chunks(&evs, "chunk"), "You said: hello");
    // Every event carries the seq of its envelope, increasing.
    let ids: Vec<u64> = evs.iter().map(|e| e.id.parse().unwrap()).collect();
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "{ids:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_chat_tool_call_error_and_max_turns() {
    let looping = r#"id: looper
model:
  provider: scripted
  script:
    rules:
      - call: {tool: progress, input: {steps: 1}}
max_turns: 1
tools:
  - name: progress
    builtin: progress
"#;
    let server = Server::start_with(Opts {
        agents: vec![("looper.yaml".into(), looping.into())],
        ..Default::default()
    })
    .await;
    let o = open(
        &server,
        "POST",
        "/v1/agent/chat",
        Some(json!({"message": "progress: 2", "context_type": "tables"})),
        None,
    )
    .await;
    let evs = all(o.events).await;
    assert_eq!(
        names(&evs),
        [
            "message_start",
            "tool_call_start",
            "tool_call_result",
            "message_start",
            "content_chunk",
            "message_complete"
        ]
    );
    assert_eq!(evs[1].data["name"], "progress");
    assert_eq!(evs[2].data["tool_use_id"], evs[1].data["tool_use_id"]);
    assert_eq!(evs[2].data["is_error"], false);
    assert_eq!(evs[3].data, json!({"turn": 1}));

    let o = open(
        &server,
        "POST",
        "/v1/agent/chat",
        Some(json!({"message": "fail", "context_type": "workflow"})),
        None,
    )
    .await;
    let evs = all(o.events).await;
    assert_eq!(names(&evs), ["message_start", "error", "message_complete"]);
    assert_eq!(
        evs[1].data,
        json!({"message": "The demo tool failed, as asked."})
    );

    let o = open(
        &server,
        "POST",
        "/v1/agent/chat",
        Some(json!({"message": "go", "context_type": "workflow", "agent": "looper"})),
        None,
    )
    .await;
    let evs = all(o.events).await;
    let err = evs.iter().find(|e| e.event == "error").expect("an error");
    assert!(
        err.data["message"]
            .as_str()
            .unwrap()
            .contains("Maximum tool-call rounds exceeded")
    );
    assert_eq!(evs.last().unwrap().event, "message_complete");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_host_answer_and_cancel() {
    let server = Server::start().await;
    let o = open(
        &server,
        "POST",
        "/api/chat/send",
        Some(json!({"message": "hi there"})),
        None,
    )
    .await;
    let chat = o.headers["x-conversation-id"].to_str().unwrap().to_owned();
    let evs = all(o.events).await;
    assert_eq!(evs[0].event, "stream_started");
    assert_eq!(evs[0].data["conversation_id"], chat.as_str());
    assert!(evs[0].data["request_id"].is_string());
    assert_eq!(evs[1].event, "message_added");
    assert_eq!(
        (&evs[1].data["role"], &evs[1].data["content"]),
        (&json!("user"), &json!("hi there"))
    );
    assert_eq!(chunks(&evs, "content"), "You said: hi there");
    let n = evs.len();
    assert_eq!(evs[n - 2].event, "message_complete");
    assert_eq!(
        evs[n - 2].data,
        json!({"role": "assistant", "content": "You said: hi there"})
    );
    assert_eq!(evs[n - 1].event, "stream_complete");

    // The same conversation, then a cancel from outside.
    let mut o = open(
        &server,
        "POST",
        "/api/chat/send",
        Some(json!({"message": "slow: 300", "conversation_id": chat})),
        None,
    )
    .await;
    assert_eq!(o.headers["x-conversation-id"].to_str().unwrap(), chat);
    while let Some(e) = o.events.next().await {
        if e.event == "content_chunk" {
            break;
        }
    }
    let (status, body) = http_request(
        server.addr,
        "POST",
        &format!("/v1/chats/{chat}/cancel"),
        &[],
        "",
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let rest = all(o.events).await;
    assert_eq!(rest.last().unwrap().event, "cancelled");
    assert!(rest.iter().filter(|e| e.event == "content_chunk").count() < 299);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rejoin_with_last_event_id_gives_exactly_the_missing_events() {
    let server = Server::start().await;
    let mut o = open(
        &server,
        "POST",
        "/v1/agent/chat",
        Some(json!({"message": "slow: 40", "context_type": "workflow"})),
        None,
    )
    .await;
    let chat = o.headers["x-conversation-id"].to_str().unwrap().to_owned();
    let mut first = Vec::new();
    while first.len() < 10 {
        first.push(o.events.next().await.unwrap());
    }
    drop(o); // the client goes away; the run goes on
    let last = first.last().unwrap().id.clone();
    let o = open(
        &server,
        "GET",
        &format!("/v1/chats/{chat}/events?dialect=agent-chat"),
        None,
        Some(&last),
    )
    .await;
    assert_eq!(o.status, 200);
    let rest = all(o.events).await;
    let mut every = first.clone();
    every.extend(rest);
    let words: Vec<String> = (1..=40).map(|i| format!("w{i}")).collect();
    assert_eq!(
        chunks(&every, "chunk"),
        words.join(" "),
        "nothing lost, nothing twice"
    );
    assert_eq!(every.last().unwrap().event, "message_complete");

    // `?after=` works the same; a rejoin after the end replays nothing but ends.
    let end = every.last().unwrap().id.clone();
    let o = open(
        &server,
        "GET",
        &format!("/v1/chats/{chat}/events?dialect=agent-chat&after={end}"),
        None,
        None,
    )
    .await;
    let tail = tokio::time::timeout(Duration::from_secs(2), async {
        let mut events = o.events;
        events.next().await
    })
    .await;
    // Nothing after the end: the stream stays open for the chat's next run.
    assert!(tail.is_err(), "no event after the end: {tail:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_post_still_completes_and_rejoins_whole() {
    let server = Server::start().await;
    let mut o = open(
        &server,
        "POST",
        "/api/chat/send",
        Some(json!({"message": "slow: 30"})),
        None,
    )
    .await;
    let chat = o.headers["x-conversation-id"].to_str().unwrap().to_owned();
    while let Some(e) = o.events.next().await {
        if e.event == "content_chunk" {
            break;
        }
    }
    drop(o);
    tokio::time::sleep(Duration::from_millis(900)).await;
    let o = open(
        &server,
        "GET",
        &format!("/v1/chats/{chat}/events?dialect=agent-host"),
        None,
        None,
    )
    .await;
    let evs = all(o.events).await;
    let words: Vec<String> = (1..=30).map(|i| format!("w{i}")).collect();
    assert_eq!(chunks(&evs, "content"), words.join(" "));
    assert_eq!(evs.last().unwrap().event, "stream_complete");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn threads_dialect_and_models() {
    let server = Server::start().await;
    let (status, body) = http_request(server.addr, "POST", "/chat", &[], "").await;
    assert_eq!(status, 200, "{body}");
    let thread: Value = serde_json::from_str(&body).unwrap();
    let id = thread["thread_id"].as_str().unwrap().to_owned();
    let o = open(
        &server,
        "POST",
        &format!("/chat/{id}/message"),
        Some(json!({"message": "hey"})),
        None,
    )
    .await;
    let evs = all(o.events).await;
    assert!(evs.iter().all(|e| e.event == "message"), "data-only events");
    assert_eq!(
        evs.last().unwrap().data,
        json!({"type": "end", "full_response": "You said: hey"})
    );
    let text: String = evs
        .iter()
        .filter(|e| e.data["type"] == "chunk")
        .map(|e| e.data["content"].as_str().unwrap())
        .collect();
    assert_eq!(text, "You said: hey");
    let (status, body) =
        http_request(server.addr, "GET", &format!("/chat/{id}/model"), &[], "").await;
    assert_eq!(status, 200);
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap(),
        json!({"thread_id": id, "model": null, "models": {}})
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_dialect_replays_then_stays_live() {
    let server = Server::start().await;
    let mut c = server.client().await;
    let chat = Uuid::new_v4();
    c.start(chat, "hello").await;
    let log = c.until_complete(chat).await;
    let mut o = open(
        &server,
        "GET",
        &format!("/v1/chats/{chat}/events"),
        None,
        None,
    )
    .await;
    for env in &log {
        let e = o.events.next().await.unwrap();
        assert_eq!(e.event, env["type"].as_str().unwrap());
        assert_eq!(e.id, env["seq"].to_string());
        assert_eq!(without_replay(&e.data), *env);
    }
    // Live: the next turn arrives on the same stream.
    c.say(chat, "again").await;
    let e = o.events.next().await.unwrap();
    assert_eq!(
        (e.event.as_str(), &e.data["content"]),
        ("chat.text", &json!("again"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_get_the_error_shape() {
    let server = Server::start().await;
    for (method, path, body, status, code) in [
        (
            "POST",
            "/v1/agent/chat",
            r#"{"context_type": "x"}"#,
            400,
            "SCHEMA_VALIDATION_FAILED",
        ),
        (
            "POST",
            "/v1/agent/chat",
            "not json",
            400,
            "SCHEMA_VALIDATION_FAILED",
        ),
        (
            "POST",
            "/api/chat/send",
            r#"{"message": ""}"#,
            400,
            "SCHEMA_VALIDATION_FAILED",
        ),
        (
            "POST",
            "/api/chat/send",
            r#"{"message": "x", "agent": "nobody"}"#,
            422,
            "WORKFLOW_NOT_FOUND",
        ),
        (
            "GET",
            "/v1/chats/not-a-uuid/events",
            "",
            400,
            "SCHEMA_VALIDATION_FAILED",
        ),
        (
            "GET",
            &format!("/v1/chats/{}/events?dialect=klingon", Uuid::new_v4()),
            "",
            400,
            "SCHEMA_VALIDATION_FAILED",
        ),
        (
            "GET",
            &format!("/v1/chats/{}/events", Uuid::new_v4()),
            "",
            404,
            "RESUME_FAILED",
        ),
        (
            "POST",
            &format!("/v1/chats/{}/cancel", Uuid::new_v4()),
            "",
            404,
            "RESUME_FAILED",
        ),
    ] {
        let (got, text) = http_request(
            server.addr,
            method,
            path,
            &[("content-type", "application/json")],
            body,
        )
        .await;
        let v: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        assert_eq!(
            (got, v["error"]["code"].as_str()),
            (status, Some(code)),
            "{method} {path}: {text}"
        );
        assert!(v["error"]["message"].is_string());
    }
    // A turn while a run is active.
    let mut o = open(
        &server,
        "POST",
        "/api/chat/send",
        Some(json!({"message": "slow: 50"})),
        None,
    )
    .await;
    let chat = o.headers["x-conversation-id"].to_str().unwrap().to_owned();
    o.events.next().await.unwrap();
    let body = json!({"message": "again", "conversation_id": chat}).to_string();
    let (got, text) = http_request(
        server.addr,
        "POST",
        "/api/chat/send",
        &[("content-type", "application/json")],
        &body,
    )
    .await;
    assert_eq!(got, 409, "{text}");
}

/// How each POST dialect starts a turn and what its events mean.
struct PostDialect {
    name: &'static str,
    /// The route and body for a message (threads need a thread first).
    start: fn(&str, Option<&str>) -> (String, Value),
    /// The event kind of an item (the `type` field for data-only dialects).
    kind: fn(&Ev) -> String,
    text: &'static str,
    tool_start: &'static str,
    tool_end: &'static str,
    error: &'static str,
    last: &'static str,
    cancelled: &'static str,
}

fn named(e: &Ev) -> String {
    e.event.clone()
}

fn typed(e: &Ev) -> String {
    e.data["type"].as_str().unwrap_or_default().to_owned()
}

const DIALECTS: [PostDialect; 3] = [
    PostDialect {
        name: "agent-chat",
        start: |m, agent| {
            let mut b = json!({"message": m, "context_type": "workflow"});
            if let Some(a) = agent {
                b["agent"] = json!(a);
            }
            ("/v1/agent/chat".into(), b)
        },
        kind: named,
        text: "content_chunk",
        tool_start: "tool_call_start",
        tool_end: "tool_call_result",
        error: "error",
        last: "message_complete",
        cancelled: "message_complete",
    },
    PostDialect {
        name: "agent-host",
        start: |m, agent| {
            let mut b = json!({"message": m});
            if let Some(a) = agent {
                b["agent"] = json!(a);
            }
            ("/api/chat/send".into(), b)
        },
        kind: named,
        text: "content_chunk",
        tool_start: "tool_call",
        tool_end: "tool_result",
        error: "error",
        last: "stream_complete",
        cancelled: "cancelled",
    },
    PostDialect {
        name: "threads",
        start: |m, _| (String::new(), json!({"message": m})),
        kind: typed,
        text: "chunk",
        tool_start: "",
        tool_end: "tool_result",
        error: "error",
        last: "end",
        cancelled: "end",
    },
];

/// Opens a turn in dialect `d` (for threads, in a new thread of `agent`).
async fn post_turn(server: &Server, d: &PostDialect, message: &str, agent: Option<&str>) -> Opened {
    let (mut path, body) = (d.start)(message, agent);
    if d.name == "threads" {
        let create = match agent {
            Some(a) => json!({"agent": a}).to_string(),
            None => String::new(),
        };
        let (_, t) = http_request(
            server.addr,
            "POST",
            "/chat",
            &[("content-type", "application/json")],
            &create,
        )
        .await;
        let t: Value = serde_json::from_str(&t).unwrap();
        path = format!("/chat/{}/message", t["thread_id"].as_str().unwrap());
    }
    open(server, "POST", &path, Some(body), None).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_post_dialect_through_answer_tool_error_max_turns_and_cancel() {
    let looping = "id: looper\nmodel:\n  provider: scripted\n  script:\n    rules:\n      - call: {tool: progress, input: {steps: 1}}\nmax_turns: 1\ntools:\n  - name: progress\n    builtin: progress\n";
    let server = Server::start_with(Opts {
        agents: vec![("looper.yaml".into(), looping.into())],
        ..Default::default()
    })
    .await;
    for d in &DIALECTS {
        let kinds = |evs: &[Ev]| evs.iter().map(|e| (d.kind)(e)).collect::<Vec<_>>();
        // A plain answer.
        let evs = all(post_turn(&server, d, "hello", None).await.events).await;
        let k = kinds(&evs);
        assert!(k.contains(&d.text.to_owned()), "{}: {k:?}", d.name);
        assert_eq!(k.last().unwrap(), d.last, "{}", d.name);
        // One tool call.
        let k = kinds(&all(post_turn(&server, d, "progress: 2", None).await.events).await);
        if !d.tool_start.is_empty() {
            assert!(k.contains(&d.tool_start.to_owned()), "{}: {k:?}", d.name);
        }
        assert!(k.contains(&d.tool_end.to_owned()), "{}: {k:?}", d.name);
        assert_eq!(k.last().unwrap(), d.last, "{}", d.name);
        // An error.
        let k = kinds(&all(post_turn(&server, d, "fail", None).await.events).await);
        assert!(k.contains(&d.error.to_owned()), "{}: {k:?}", d.name);
        assert_eq!(k.last().unwrap(), d.last, "{}", d.name);
        // max_turns.
        let evs = all(post_turn(&server, d, "go", Some("looper")).await.events).await;
        let err = evs
            .iter()
            .find(|e| (d.kind)(e) == d.error)
            .expect("an error event");
        assert!(
            err.data
                .to_string()
                .contains("Maximum tool-call rounds exceeded"),
            "{}",
            d.name
        );
        // Cancel.
        let mut o = post_turn(&server, d, "slow: 300", None).await;
        let chat = o.headers["x-conversation-id"].to_str().unwrap().to_owned();
        o.events.next().await.unwrap();
        let (status, _) = http_request(
            server.addr,
            "POST",
            &format!("/v1/chats/{chat}/cancel"),
            &[],
            "",
        )
        .await;
        assert_eq!(status, 200);
        let k = kinds(&all(o.events).await);
        assert_eq!(k.last().unwrap(), d.cancelled, "{}", d.name);
        assert!(
            k.iter().filter(|x| *x == d.text).count() < 300,
            "{}",
            d.name
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn event_lines_come_before_data_lines() {
    // Seed 004's client reads line by line and applies each `data:` to the last
    // `event:` it saw: the name must come first in every block.
    let server = Server::start().await;
    let body = json!({"message": "hello"}).to_string();
    let (status, raw) = http_request(
        server.addr,
        "POST",
        "/api/chat/send",
        &[("content-type", "application/json")],
        &body,
    )
    .await;
    assert_eq!(status, 200);
    let mut blocks = 0;
    let mut current_event: Option<String> = None;
    for line in raw.lines() {
        if let Some(name) = line.strip_prefix("event: ") {
            current_event = Some(name.to_owned());
        } else if line.starts_with("data: ") {
            assert!(current_event.is_some(), "data before its event in:\n{raw}");
            blocks += 1;
        } else if line.is_empty() {
            current_event = None;
        }
    }
    assert!(blocks >= 5, "{raw}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn context_type_selects_tools_and_context_goes_into_the_prompt() {
    use crate::mock_llm::MockServer;
    use crate::vendors::{OpenAiWire, Wire};
    let llm = MockServer::start(vec![OpenAiWire.text(&["ok"], (1, 1))]).await;
    let agent = format!(
        r#"id: scoped
model: {{provider: openai, name: m, base_url: "{}/v1"}}
system_prompt: You help with workflows and tables.
tools:
  - name: get_workflow_rule
    context_types: [workflow]
    http: {{url: "http://127.0.0.1:9/rule"}}
  - name: list_tables
    context_types: [tables]
    http: {{url: "http://127.0.0.1:9/tables"}}
  - name: everywhere
    http: {{url: "http://127.0.0.1:9/any"}}
"#,
        llm.url()
    );
    let server = Server::start_with(Opts {
        agents: vec![("scoped.yaml".into(), agent)],
        ..Default::default()
    })
    .await;
    let body = json!({
        "message": "What does this do?",
        "context_type": "workflow",
        "agent": "scoped",
        "context": {"workflow_id": "550e8400-e29b-41d4-a716-446655440000", "rule_name": "Low Stock Alert"},
    });
    let o = open(&server, "POST", "/v1/agent/chat", Some(body), None).await;
    all(o.events).await;
    let sent = &llm.requests()[0].body;
    let tools: Vec<&str> = sent["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        tools,
        ["get_workflow_rule", "everywhere"],
        "only the workflow tools"
    );
    let system = sent["messages"][0]["content"].as_str().unwrap();
    assert!(
        system.starts_with("You help with workflows and tables."),
        "{system}"
    );
    assert!(
        system.contains("**Current workflow ID: `550e8400-e29b-41d4-a716-446655440000`**"),
        "{system}"
    );
    assert!(
        system.contains(r#""rule_name":"Low Stock Alert""#),
        "{system}"
    );
}
