//! Agents served over AG-UI by another framework (issue 37), against a
//! local server that streams AG-UI events scripted here byte for byte (the
//! real frameworks' servers are `upstream_peers.rs`'s): what a run sends,
//! how its events are logged, interrupts and approvals answered through
//! agentwire, each way an upstream fails, cancel, the caller's token, and
//! runs cut by a restart.

use std::time::Duration;

use serde_json::{Value, json};
use uuid::Uuid;

use crate::mock_llm::{MockServer, Reply};
use crate::support::*;

/// An SSE reply carrying `events`, each its own `data:` event.
pub fn ag_ui(events: &[Value]) -> Reply {
    Reply::sse(events.iter().map(|e| format!("data: {e}\n\n")).collect())
}

pub fn started() -> Value {
    json!({"type": "RUN_STARTED", "threadId": "t", "runId": "r"})
}

pub fn finished() -> Value {
    json!({"type": "RUN_FINISHED", "threadId": "t", "runId": "r"})
}

/// A text message of `words`, streamed one per event.
pub fn said(id: &str, words: &[&str]) -> Vec<Value> {
    let mut out = vec![json!({"type": "TEXT_MESSAGE_START", "messageId": id, "role": "assistant"})];
    out.extend(
        words
            .iter()
            .map(|w| json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": id, "delta": w})),
    );
    out.push(json!({"type": "TEXT_MESSAGE_END", "messageId": id}));
    out
}

fn run_of(parts: Vec<Vec<Value>>) -> Reply {
    let mut events = vec![started()];
    events.extend(parts.into_iter().flatten());
    events.push(finished());
    ag_ui(&events)
}

pub fn agent_file(id: &str, url: &str, extra: &str) -> String {
    format!("id: {id}\nag_ui:\n  url: {url}/agent\n{extra}")
}

async fn server(mock: &MockServer, extra: &str) -> Server {
    Server::start_with(Opts {
        agents: vec![("byo.yaml".into(), agent_file("byo", &mock.url(), extra))],
        ..Default::default()
    })
    .await
}

fn of<'a>(msgs: &'a [Value], ty: &str) -> Vec<&'a Value> {
    msgs.iter().filter(|m| m["type"] == ty).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_run_is_logged_as_a_model_turn_would_be() {
    let call = vec![
        json!({"type": "TOOL_CALL_START", "toolCallId": "c1", "toolCallName": "get_weather"}),
        json!({"type": "TOOL_CALL_ARGS", "toolCallId": "c1", "delta": "{\"city\":"}),
        json!({"type": "TOOL_CALL_ARGS", "toolCallId": "c1", "delta": "\"Oslo\"}"}),
        json!({"type": "TOOL_CALL_END", "toolCallId": "c1"}),
        json!({"type": "TOOL_CALL_RESULT", "toolCallId": "c1", "messageId": "r1", "content": "{\"temp\":21}"}),
    ];
    let steps = vec![
        json!({"type": "STEP_STARTED", "stepName": "think"}),
        json!({"type": "REASONING_MESSAGE_START", "messageId": "z", "role": "reasoning"}),
        json!({"type": "REASONING_MESSAGE_CONTENT", "messageId": "z", "delta": "hmm"}),
        json!({"type": "REASONING_MESSAGE_END", "messageId": "z"}),
        json!({"type": "STEP_FINISHED", "stepName": "think"}),
        json!({"type": "STATE_SNAPSHOT", "snapshot": {"n": 1}}),
        json!({"type": "STATE_DELTA", "delta": [{"op": "replace", "path": "/n", "value": 2}]}),
        json!({"type": "CUSTOM", "name": "x", "value": {}}),
    ];
    let mock = MockServer::start(vec![
        run_of(vec![
            steps,
            said("m1", &["Let me ", "look."]),
            call,
            said("m2", &["It is ", "21."]),
        ]),
        ag_ui(
            &[
                vec![started()],
                said("m3", &["Again: 21."]),
                vec![json!({"type": "RUN_FINISHED", "threadId": "t", "runId": "r",
                    "usage": [{"inputTokens": 7, "outputTokens": 3}, {"inputTokens": 1, "outputTokens": 1}]})],
            ]
            .concat(),
        ),
    ])
    .await;
    let server = server(&mock, "  headers: {X-Team: blue}\n").await;
    let mut c = server.client().await;
    let chat = Uuid::new_v4();
    c.start_with(chat, "byo", "Weather in Oslo?").await;
    let msgs = c.until_complete(chat).await;
    assert_eq!(
        turns(&msgs),
        [
            "user: Weather in Oslo?",
            "byo: Let me look.",
            "byo: It is 21."
        ],
        "{msgs:#?}"
    );
    let prints: Vec<&str> = of(&msgs, "chat.print")
        .iter()
        .map(|m| m["content"].as_str().unwrap())
        .collect();
    assert_eq!(prints, ["Let me ", "look.", "It is ", "21."]);
    assert_eq!(of(&msgs, "chat.reasoning")[0]["content"], "hmm");
    let call = of(&msgs, "chat.tool_call")[0];
    assert_eq!(call["tool_name"], "get_weather");
    assert_eq!(call["payload"], json!({"city": "Oslo"}));
    assert_eq!(call["component_type"], Value::Null);
    let result = of(&msgs, "chat.tool_response")[0];
    assert_eq!(
        (&result["corr"], &result["content"]),
        (&json!("c1"), &json!({"temp": 21}))
    );
    assert_eq!(msgs.last().unwrap()["reason"], "completed");
    assert_gap_free(&seqs(&msgs));
    let state = of(&msgs, "chat.agent_state");
    assert_eq!(state[0]["snapshot"], json!({"n": 1}));
    assert_eq!(
        state[1]["delta"],
        json!([{"op": "replace", "path": "/n", "value": 2}])
    );
    assert_eq!(state[0]["agent"], "byo");

    let sent = &mock.requests()[0];
    assert_eq!(sent.uri, "/agent");
    assert_eq!(sent.headers["x-team"], "blue");
    assert_eq!(sent.headers["accept"], "text/event-stream");
    assert!(sent.headers.get("authorization").is_none());
    let body = &sent.body;
    assert_eq!(body["threadId"], chat.to_string());
    assert!(Uuid::parse_str(body["runId"].as_str().unwrap()).is_ok());
    assert_eq!(body["messages"][0]["role"], "user");
    assert_eq!(body["messages"][0]["content"], "Weather in Oslo?");
    assert_eq!(body["tools"], json!([]));

    // The next run's history holds the first one's words, call and result.
    c.say(chat, "And now?").await;
    let msgs = c.until_complete(chat).await;
    let usage = of(&msgs, "chat.usage_summary")[0];
    assert_eq!(
        (&usage["prompt_tokens"], &usage["total_tokens"]),
        (&json!(8), &json!(12))
    );
    let body = &mock.requests()[1].body;
    // The state the agent shared, folded from the log.
    assert_eq!(body["state"], json!({"n": 2}));
    assert_eq!(mock.requests()[0].body["state"], json!({}));
    let roles: Vec<&str> = body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(
        roles,
        ["user", "assistant", "tool", "assistant", "user"],
        "{body:#}"
    );
    assert_eq!(body["messages"][1]["toolCalls"][0]["id"], "c1");
    assert_eq!(
        body["messages"][1]["toolCalls"][0]["function"]["arguments"],
        "{\"city\":\"Oslo\"}"
    );
    assert_eq!(body["messages"][2]["toolCallId"], "c1");
    assert_ne!(body["runId"], mock.requests()[0].body["runId"]);
    assert_eq!(body["threadId"], chat.to_string());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_upstream_failure_ends_the_run_with_an_error_naming_the_agent() {
    let partial = vec![
        started(),
        json!({"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"}),
        json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "half a sen"}),
    ];
    let big = "x".repeat(3000);
    let cases: Vec<(Reply, &str)> = vec![
        (
            Reply::json(503, r#"{"detail":"overloaded"}"#),
            "HTTP 503 Service Unavailable: {\"detail\":\"overloaded\"}",
        ),
        (Reply::json(401, r#"{"detail":"who?"}"#), "HTTP 401"),
        (ag_ui(&partial), "the stream ended before RUN_FINISHED"),
        (
            Reply::sse(vec![
                format!("data: {}\n\n", started()),
                "data: {not json\n\n".into(),
            ]),
            "an event that is not JSON",
        ),
        (
            ag_ui(&[
                started(),
                json!({"type": "CUSTOM", "name": "big", "value": big}),
            ]),
            "an event over 2048 bytes",
        ),
        (
            ag_ui(&[
                started(),
                json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "x"}),
            ]),
            "against AG-UI's rules: Cannot send 'TEXT_MESSAGE_CONTENT' event: no active text message",
        ),
        (
            ag_ui(&[
                started(),
                json!({"type": "RUN_ERROR", "message": "the graph broke", "code": "E42"}),
            ]),
            "RUN_ERROR: the graph broke (E42)",
        ),
        (
            Reply::ok("application/json", vec!["{}".into()]),
            "not an event stream",
        ),
    ];
    let n = cases.len();
    let (replies, expect): (Vec<Reply>, Vec<&str>) = cases.into_iter().unzip();
    let mock = MockServer::start(replies).await;
    let (_held, closed) = refused_addr();
    let server = Server::start_with(Opts {
        settings: agentwire::config::Settings {
            max_message_bytes: Some(2048),
            ..Default::default()
        },
        agents: vec![
            ("byo.yaml".into(), agent_file("byo", &mock.url(), "")),
            (
                "gone.yaml".into(),
                agent_file("gone", &format!("http://{closed}"), ""),
            ),
        ],
    })
    .await;
    let mut c = server.client().await;
    for (i, expect) in expect.iter().enumerate() {
        let chat = Uuid::new_v4();
        c.start_with(chat, "byo", "hi").await;
        let msgs = c.until_complete(chat).await;
        let err = of(&msgs, "chat.error");
        assert_eq!(err.len(), 1, "case {i}: {msgs:#?}");
        let message = err[0]["message"].as_str().unwrap();
        assert!(
            message.starts_with(&format!("agent `byo` (AG-UI at {}):", mock.addr)),
            "case {i}: {message}"
        );
        assert!(
            message.contains(expect),
            "case {i}: {message} should say {expect}"
        );
        assert_eq!(msgs.last().unwrap()["reason"], "error", "case {i}");
        // Nothing half-written is shown as complete: words the agent
        // streamed before the failure are logged `partial`.
        for text in of(&msgs, "chat.text")
            .iter()
            .filter(|m| m["agent"] == "byo")
        {
            assert_eq!(text["partial"], true, "case {i}: {text}");
        }
    }
    assert_eq!(mock.requests().len(), n, "no failure is retried");
    let chat = Uuid::new_v4();
    c.start_with(chat, "gone", "hi").await;
    let msgs = c.until_complete(chat).await;
    let err = of(&msgs, "chat.error")[0];
    assert_eq!(err["error_code"], "TRANSPORT_ERROR");
    assert!(
        err["message"]
            .as_str()
            .unwrap()
            .contains(&format!("agent `gone` (AG-UI at {closed}): cannot connect")),
        "{err}"
    );
    let (_, metrics) = http_get(server.addr, "/metrics", &[]).await;
    assert!(
        metrics.contains("agentwire_upstream_errors_total{agent=\"byo\",code=\"TRANSPORT_ERROR\"}"),
        "{metrics}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interrupts_are_asked_on_the_wire_and_their_answers_resume_the_upstream_run() {
    let ask = json!({"type": "RUN_FINISHED", "threadId": "t", "runId": "r",
        "outcome": {"type": "interrupt", "interrupts": [
            {"id": "int-1", "reason": "input", "message": "Which date?"}]}});
    let gate = json!({"type": "RUN_FINISHED", "threadId": "t", "runId": "r",
        "outcome": {"type": "interrupt", "interrupts": [
            {"id": "int-2", "reason": "tool_approval", "toolCallId": "c9"}]}});
    let booking = vec![
        json!({"type": "TOOL_CALL_START", "toolCallId": "c9", "toolCallName": "book"}),
        json!({"type": "TOOL_CALL_ARGS", "toolCallId": "c9", "delta": "{\"date\":\"Friday\"}"}),
        json!({"type": "TOOL_CALL_END", "toolCallId": "c9"}),
    ];
    let mut second = vec![started()];
    second.extend(booking);
    second.push(gate);
    let mock = MockServer::start(vec![
        ag_ui(&[started(), ask]),
        ag_ui(&second),
        // The approved call's result comes in the run its approval resumes.
        run_of(vec![
            vec![json!({"type": "TOOL_CALL_RESULT", "toolCallId": "c9", "messageId": "r9", "content": "booked"})],
            said("m", &["Booked."]),
        ]),
    ])
    .await;
    let server = server(&mock, "").await;
    let mut c = server.client().await;
    let chat = Uuid::new_v4();
    c.start_with(chat, "byo", "Book a table").await;
    let request = c
        .recv_until(|m| m["type"] == "chat.input_request")
        .await
        .pop()
        .unwrap();
    assert_eq!(request["prompt"], "Which date?");
    assert_eq!(request["request_id"], "int-1");
    c.send(json!({"type": "user.input.submit", "chat_id": chat,
        "request_id": "int-1", "text": "Friday"}))
        .await;
    let approval = c
        .recv_until(|m| m["type"] == "chat.tool_call" && m["component_type"] == "approval")
        .await
        .pop()
        .unwrap();
    assert_eq!(approval["payload"]["tool_name"], "book");
    assert_eq!(approval["corr"], "c9.approval", "the call's own gate");
    assert_eq!(approval["payload"]["interrupt_id"], "int-2");
    assert_eq!(approval["payload"]["input"], json!({"date": "Friday"}));
    c.send(json!({"type": "inline_component.result", "chat_id": chat,
        "corr": approval["corr"], "data": {"approved": true}}))
        .await;
    let msgs = c.until_complete(chat).await;
    assert_eq!(last_text(&msgs), "Booked.");
    let result = of(&msgs, "chat.tool_response")
        .into_iter()
        .find(|m| m["corr"] == "c9")
        .expect("the approved call's result is logged");
    assert_eq!(result["content"], "booked");
    assert_eq!(msgs.last().unwrap()["reason"], "completed");
    let requests = mock.requests();
    assert_eq!(
        requests[1].body["resume"],
        json!([{"interruptId": "int-1", "status": "resolved", "payload": "Friday"}])
    );
    assert_eq!(
        requests[2].body["resume"],
        json!([{"interruptId": "int-2", "status": "resolved", "payload": {"approved": true}}])
    );
    assert!(requests[0].body.get("resume").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_aborts_the_upstream_request() {
    let words: Vec<String> = (0..200).map(|i| format!("w{i} ")).collect();
    let refs: Vec<&str> = words.iter().map(String::as_str).collect();
    let mut events = vec![started()];
    events.extend(said("m", &refs));
    events.push(finished());
    let mock = MockServer::start(vec![ag_ui(&events).paced(Duration::from_millis(30))]).await;
    let server = server(&mock, "").await;
    let mut c = server.client().await;
    let chat = Uuid::new_v4();
    c.start_with(chat, "byo", "Talk").await;
    c.recv_until(|m| m["type"] == "chat.print").await;
    c.send(json!({"type": "chat.cancel", "chat_id": chat}))
        .await;
    let msgs = c.until_complete(chat).await;
    assert_eq!(msgs.last().unwrap()["reason"], "cancelled");
    assert!(
        mock.abandoned_soon().await,
        "the upstream request was dropped"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forward_bearer_sends_the_callers_token_and_never_the_services() {
    use crate::auth::{SECRET, token};
    let mock = MockServer::start(vec![
        run_of(vec![said("m", &["one"])]),
        run_of(vec![said("m", &["two"])]),
    ])
    .await;
    unsafe { std::env::set_var("AGENTWIRE_TEST_UPSTREAM_KEY", "team-key") };
    let server = Server::start_with(Opts {
        settings: agentwire::config::Settings {
            auth: Some(agentwire::config::AuthMode::Jwt),
            jwt_secret: Some(SECRET.into()),
            ..Default::default()
        },
        agents: vec![
            (
                "fwd.yaml".into(),
                agent_file(
                    "fwd",
                    &mock.url(),
                    "  forward_bearer: true\n  headers: {X-Key: \"${env:AGENTWIRE_TEST_UPSTREAM_KEY}\"}\n",
                ),
            ),
            ("own.yaml".into(), agent_file("own", &mock.url(), "")),
        ],
    })
    .await;
    let ann = token("ann", 600, SECRET);
    let http = agentwire::llm::http_client();
    for agent in ["fwd", "own"] {
        let r = http
            .post(format!("http://{}/v1/chats", server.addr))
            .bearer_auth(&ann)
            .json(&json!({"agent": agent, "message": "hi"}))
            .send()
            .await
            .unwrap();
        assert!(r.status().is_success(), "{}", r.text().await.unwrap());
    }
    for _ in 0..200 {
        if mock.requests().len() == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let requests = mock.requests();
    assert_eq!(
        requests[0].headers["authorization"],
        format!("Bearer {ann}")
    );
    assert_eq!(requests[0].headers["x-key"], "team-key");
    assert!(requests[1].headers.get("authorization").is_none());
}

#[tokio::test]
async fn an_ag_ui_agent_file_is_checked() {
    let cases = [
        (
            "ag_ui: {url: \"ftp://x\"}",
            "ag_ui.url: must be an http:// or https:// address",
        ),
        (
            "ag_ui: {url: \"http://x\"}\nmodel: {provider: scripted, script: {rules: []}}",
            "model: an agent served over AG-UI",
        ),
        (
            "ag_ui: {url: \"http://x\"}\ntools: [{name: t, builtin: echo}]",
            "tools: an agent served",
        ),
        (
            "ag_ui: {url: \"http://x\", timeout_seconds: 0}",
            "ag_ui.timeout_seconds",
        ),
        (
            "ag_ui: {url: \"http://x\", headers: {X: \"${env:AGENTWIRE_NOT_SET_9}\"}}",
            "AGENTWIRE_NOT_SET_9",
        ),
        (
            "ag_ui: {url: \"http://x\", forward_bearer: true, headers: {Authorization: k}}",
            "forward_bearer",
        ),
        (
            "idempotent: true\nmodel: {provider: scripted, script: {rules: []}}",
            "idempotent:",
        ),
    ];
    // The examples' files load.
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/ag-ui/agents");
    for name in ["pydantic.yaml", "langgraph.yaml"] {
        let text = std::fs::read_to_string(dir.join(name)).unwrap();
        let agent = agentwire::agent::Agent::from_yaml(&text, &agentwire::llm::http_client())
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(agent.upstream.is_some(), "{name}");
    }
    for (yaml, expect) in cases {
        let text = format!("id: a\n{yaml}\n");
        let err = agentwire::agent::Agent::from_yaml(&text, &agentwire::llm::http_client())
            .expect_err(yaml);
        assert!(err.contains(expect), "{yaml}: {err}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_member_and_a_workflows_prompt_may_be_an_upstream_agent() {
    let mock = MockServer::start(vec![
        run_of(vec![said("m", &["upstream ", "here"])]),
        run_of(vec![said("w", &["Tides ", "rise."])]),
    ])
    .await;
    let server = Server::start_with(Opts {
        agents: vec![
            ("byo.yaml".into(), agent_file("byo", &mock.url(), "")),
            (
                "helper.yaml".into(),
                "id: helper\nmodel: {provider: scripted, script: {rules: [{reply: helper here}]}}\n"
                    .into(),
            ),
            (
                "team.yaml".into(),
                "id: team\ngroup:\n  speaker_selection: round_robin\n  max_rounds: 3\n  members:\n    - agent: byo\n    - agent: helper\n"
                    .into(),
            ),
            (
                "workflows/summarize.yaml".into(),
                "id: summarize\ntitle: Summarize\ncategory: Writing\nparameters: {type: object, properties: {topic: {type: string}}, required: [topic]}\nprompt: \"Summarize {topic}.\"\n"
                    .into(),
            ),
        ],
        ..Default::default()
    })
    .await;
    let mut c = server.client().await;
    let chat = Uuid::new_v4();
    c.start_with(chat, "team", "Hello team").await;
    let msgs = c.until_complete(chat).await;
    assert_eq!(
        turns(&msgs),
        [
            "user: Hello team",
            "byo: upstream here",
            "helper: helper here"
        ],
        "{msgs:#?}"
    );
    let picked = of(&msgs, "chat.select_speaker")[0];
    assert_eq!(
        (&picked["agent"], &picked["method"]),
        (&json!("byo"), &json!("round_robin"))
    );
    assert_eq!(mock.requests()[0].body["threadId"], chat.to_string());

    // A prompt workflow run in a chat of the upstream agent: it answers.
    let chat = Uuid::new_v4();
    let (status, _) = http_json(
        &server,
        "POST",
        "/v1/chats",
        &json!({"agent": "byo", "chat_id": chat}).to_string(),
    )
    .await;
    assert_eq!(status, 201);
    c.resume(chat, 0).await;
    let path = format!("/v1/chats/{chat}/workflows/summarize");
    let (status, text) = http_request(
        server.addr,
        "POST",
        &path,
        &[("content-type", "application/json")],
        &json!({"parameters": {"topic": "tides"}}).to_string(),
    )
    .await;
    assert_eq!(status, 202, "{text}");
    let msgs = c.until_complete(chat).await;
    assert_eq!(last_text(&msgs), "Tides rise.");
    let sent = &mock.requests()[1].body["messages"];
    assert_eq!(
        sent[sent.as_array().unwrap().len() - 1]["content"],
        "Summarize tides.",
        "{sent:#}"
    );
}

/// One upstream run with state events around text and a tool call.
fn stateful_turn() -> Reply {
    run_of(vec![
        vec![json!({"type": "STATE_SNAPSHOT", "snapshot": {"step": 1}})],
        said("m1", &["Looking ", "it up."]),
        vec![
            json!({"type": "TOOL_CALL_START", "toolCallId": "c1", "toolCallName": "lookup"}),
            json!({"type": "TOOL_CALL_ARGS", "toolCallId": "c1", "delta": "{}"}),
            json!({"type": "TOOL_CALL_END", "toolCallId": "c1"}),
            json!({"type": "TOOL_CALL_RESULT", "toolCallId": "c1", "messageId": "r", "content": "42"}),
            json!({"type": "STATE_DELTA", "delta": [{"op": "replace", "path": "/step", "value": 2}]}),
        ],
        said("m2", &["It is ", "42."]),
    ])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_agents_turn_resumes_after_any_of_its_events_on_every_sse_wire() {
    use crate::hitl::{DIALECTS, start};
    use crate::rejoin::{rejoined, resumes_after_each, until};
    use crate::sse::{all, open};
    // The wires' turns: each dialect's, the AI SDK's and AG-UI's.
    let mock = MockServer::start((0..DIALECTS.len() + 2).map(|_| stateful_turn()).collect()).await;
    // `real`: the agent the dialects' helpers start.
    let server = Server::start_with(Opts {
        agents: vec![("real.yaml".into(), agent_file("real", &mock.url(), ""))],
        ..Default::default()
    })
    .await;
    let mut a_chat = None;
    for d in &DIALECTS {
        let (o, chat) = start(&server, d, "go").await;
        let live = all(o.events).await;
        let path = format!("/v1/chats/{chat}/events?dialect={}", d.rejoin);
        resumes_after_each(d.name, &live, live.len(), |id| {
            rejoined(&server, path.clone(), id)
        })
        .await;
        a_chat = Some(chat);
    }

    // The `chat` dialect is the log itself: the state envelopes are events.
    let chat = a_chat.unwrap();
    let path = format!("/v1/chats/{chat}/events");
    let is_end = |e: &crate::sse::Ev| e.event == "chat.run_complete";
    let log = until(open(&server, "GET", &path, None, None).await.events, is_end).await;
    let kinds: Vec<&str> = log.iter().map(|e| e.event.as_str()).collect();
    assert_eq!(
        kinds.iter().filter(|k| **k == "chat.agent_state").count(),
        2,
        "{kinds:?}"
    );
    // (Its stream stays open after the run: each rejoin is read to the end.)
    resumes_after_each("chat", &log, log.len() - 1, |id| {
        let path = path.clone();
        let server = &server;
        async move {
            until(
                open(server, "GET", &path, None, Some(&id)).await.events,
                is_end,
            )
            .await
        }
    })
    .await;

    // The AI SDK's response.
    let body = json!({"id": "rejoin-upstream-ai", "trigger": "submit-message", "agent": "real",
        "messages": [{"id": "u1", "role": "user", "parts": [{"type": "text", "text": "go"}]}]});
    let o = open(&server, "POST", "/v1/ai-sdk/chat", Some(body), None).await;
    assert_eq!(o.status, 200);
    let response = all(o.events).await;
    let path = "/v1/ai-sdk/chat/rejoin-upstream-ai/stream".to_owned();
    resumes_after_each("AI SDK", &response, response.len(), |id| {
        rejoined(&server, path.clone(), id)
    })
    .await;

    // AG-UI's, which relays the state as STATE_SNAPSHOT and STATE_DELTA.
    let thread = "rejoin-upstream";
    let body = json!({"threadId": thread, "runId": "r1", "tools": [], "context": [], "state": {},
        "messages": [{"id": "u1", "role": "user", "content": "go"}],
        "forwardedProps": {"agent": "real"}});
    let o = open(&server, "POST", "/v1/ag-ui", Some(body), None).await;
    assert_eq!(o.status, 200);
    let events = all(o.events).await;
    let types: Vec<&str> = events
        .iter()
        .filter_map(|e| e.data["type"].as_str())
        .collect();
    for t in [
        "STATE_SNAPSHOT",
        "STATE_DELTA",
        "TOOL_CALL_RESULT",
        "TEXT_MESSAGE_CONTENT",
    ] {
        assert!(types.contains(&t), "{t}: {types:?}");
    }
    let snapshot = events
        .iter()
        .find(|e| e.data["type"] == "STATE_SNAPSHOT")
        .unwrap();
    assert_eq!(snapshot.data["snapshot"], json!({"step": 1}));
    let path = format!("/v1/ag-ui/{thread}/stream?runId=r1");
    resumes_after_each("AG-UI", &events, events.len(), |id| {
        rejoined(&server, path.clone(), id)
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attached_files_go_up_as_ag_ui_parts() {
    use crate::attachments::{pdf, png, upload};
    use base64::Engine as _;
    let mock = MockServer::start(vec![run_of(vec![said("m", &["Seen."])])]).await;
    let server = server(&mock, "").await;
    let chat = Uuid::new_v4();
    let image = upload(server.addr, chat, "cat.png", "image/png", png()).await;
    let doc = upload(server.addr, chat, "scan.pdf", "application/pdf", pdf()).await;
    let notes = upload(
        server.addr,
        chat,
        "notes.txt",
        "text/plain",
        b"tides".to_vec(),
    )
    .await;
    let mut c = server.client().await;
    c.send(
        json!({"type": "chat.start", "chat_id": chat, "agent": "byo", "message": "look",
        "attachments": [{"file_id": image}, {"file_id": doc}, {"file_id": notes}]}),
    )
    .await;
    let msgs = c.until_complete(chat).await;
    assert_eq!(last_text(&msgs), "Seen.");
    let b64 = |b: Vec<u8>| base64::engine::general_purpose::STANDARD.encode(b);
    let content = &mock.requests()[0].body["messages"][0]["content"];
    assert_eq!(
        content[0],
        json!({"type": "image", "source": {"type": "data", "value": b64(png()), "mimeType": "image/png"}})
    );
    assert_eq!(
        content[1],
        json!({"type": "document", "source": {"type": "data", "value": b64(pdf()), "mimeType": "application/pdf"}})
    );
    assert_eq!(content[2]["type"], "text");
    assert!(
        content[2]["text"].as_str().unwrap().contains("notes.txt"),
        "{content}"
    );
    assert!(
        content[2]["text"].as_str().unwrap().ends_with("tides"),
        "{content}"
    );
    assert_eq!(content[3], json!({"type": "text", "text": "look"}));
}
