//! Every step that waits for a person, finished over one SSE dialect and
//! HTTP only: a model on a local OpenAI-compatible server calls a tool that
//! needs approval (granted, refused), asks the user, shows a UI component,
//! and previews a workflow (seed 000); each dialect shows the request, the
//! answer goes to the route it names, the run finishes on the same stream,
//! and a rejoin from the start shows the same events. Double answers, other
//! users, unknown ids and late answers change nothing.

use futures_util::StreamExt;
use serde_json::{Value, json};

use crate::agent_loop::tool_messages;
use crate::mock_llm::{MockServer, Reply};
use crate::sse::{Ev, all, open};
use crate::support::*;
use crate::vendors::{OpenAiWire, Wire};

const W: OpenAiWire = OpenAiWire;

/// The agent: one tool of each waiting kind, a preview and a summary.
fn agent(llm: &MockServer, tool: &MockServer) -> String {
    format!(
        r#"id: real
model: {{provider: openai, name: test-model, base_url: "{llm}/v1", api_key_env: AGENTWIRE_TEST_KEY}}
system_prompt: You help.
context_prompts:
  tables: You are the tables assistant.
tools:
  - name: get_weather
    input_schema: {{type: object, properties: {{city: {{type: string}}}}, required: [city]}}
    requires_approval: true
    http: {{method: POST, url: "{tool}/weather"}}
  - name: pick_city
    input_schema: {{type: object, properties: {{options: {{type: array}}}}}}
    ui: {{component_type: multiple_choice}}
  - name: ask
    builtin: ask_user
  - name: preview_workflow
    input_schema:
      type: object
      properties: {{description: {{type: string}}, workflow: {{type: object}}, workflow_id: {{type: string}}}}
      required: [description, workflow]
    http: {{method: POST, url: "{tool}/validate"}}
    preview:
      component_type: workflow_preview
      fields: {{description: /input/description, workflow: /input/workflow, workflow_id: /input/workflow_id, valid: /result/valid}}
  - name: list_rules
    http: {{method: POST, url: "{tool}/rules"}}
    summary: {{items: /rules, keep: [id, name], first_sentence: [name]}}
"#,
        llm = llm.url(),
        tool = tool.url(),
    )
}

/// How a dialect starts a turn, and where it shows a waiting step.
pub(crate) struct Dialect {
    pub(crate) name: &'static str,
    /// The rejoin route's `dialect=`.
    pub(crate) rejoin: &'static str,
    end: &'static str,
}

pub(crate) const DIALECTS: [Dialect; 3] = [
    Dialect {
        name: "agent-chat",
        rejoin: "agent-chat",
        end: "message_complete",
    },
    Dialect {
        name: "agent-host",
        rejoin: "agent-host",
        end: "stream_complete",
    },
    Dialect {
        name: "threads",
        rejoin: "threads",
        end: "end",
    },
];

/// The event's kind: its name, or for data-only events its `type`.
fn kind(e: &Ev) -> String {
    match e.data["type"].as_str() {
        Some(t) if e.event == "message" => t.to_owned(),
        _ => e.event.clone(),
    }
}

/// A waiting step the event shows: `(action, its fields)`, in any dialect.
pub(crate) fn waiting(e: &Ev) -> Option<(String, Value)> {
    let d = &e.data;
    match e.event.as_str() {
        "input_request" => Some(("input".into(), d.clone())),
        "approval_request" => Some(("approval".into(), d.clone())),
        "component_request" => Some(("component".into(), d.clone())),
        "workflow_preview" => Some(("preview".into(), d.clone())),
        "client_action" => Some((d["action"].as_str()?.to_owned(), d.clone())),
        "message" if d["type"] == "tool_result" => {
            let c = &d["content"];
            let t = c["type"].as_str()?;
            let action = t.strip_suffix("_request").unwrap_or(t);
            matches!(action, "input" | "approval" | "component" | "preview")
                .then(|| (action.to_owned(), c.clone()))
        }
        _ => None,
    }
}

/// Starts a turn of agent `real` in `d`; the stream and the chat id.
pub(crate) async fn start(
    server: &Server,
    d: &Dialect,
    message: &str,
) -> (crate::sse::Opened, String) {
    let (path, body) = match d.name {
        "agent-chat" => (
            "/v1/agent/chat".to_owned(),
            json!({"message": message, "context_type": "workflow", "agent": "real"}),
        ),
        "agent-host" => (
            "/api/chat/send".to_owned(),
            json!({"message": message, "agent": "real"}),
        ),
        _ => {
            let (_, t) = http_json(server, "POST", "/chat", r#"{"agent":"real"}"#).await;
            let id = t["thread_id"].as_str().unwrap().to_owned();
            (format!("/chat/{id}/message"), json!({"message": message}))
        }
    };
    let o = open(server, "POST", &path, Some(body), None).await;
    assert_eq!(o.status, 200, "{}", d.name);
    let chat = match o.headers.get("x-conversation-id") {
        Some(id) => id.to_str().unwrap().to_owned(),
        None => path.split('/').nth(2).unwrap().to_owned(),
    };
    (o, chat)
}

/// Reads events until one shows a waiting step.
pub(crate) async fn until_waiting(
    events: &mut std::pin::Pin<Box<dyn futures_util::Stream<Item = Ev> + Send>>,
    seen: &mut Vec<Ev>,
) -> (String, Value) {
    loop {
        let e = tokio::time::timeout(WAIT, events.next())
            .await
            .expect("an event in time")
            .expect("the stream goes on until the step");
        seen.push(e.clone());
        if let Some(w) = waiting(&e) {
            return w;
        }
    }
}

async fn post(server: &Server, path: &str, body: Value) -> (u16, Value) {
    http_json(server, "POST", path, &body.to_string()).await
}

async fn last_seq(server: &Server, chat: &str) -> u64 {
    let (status, v) = http_json(server, "GET", &format!("/v1/chats/{chat}"), "").await;
    assert_eq!(status, 200, "{v}");
    v["last_seq"].as_u64().unwrap()
}

/// The events of the log (not seed 004's `stream_started`, which is the
/// POST's own), less what only the first stream of a turn names.
fn comparable(evs: &[Ev]) -> Vec<(String, Value)> {
    evs.iter()
        .filter(|e| e.event != "stream_started")
        .map(|e| {
            let mut data = e.data.clone();
            if let Some(d) = data.as_object_mut() {
                d.remove("conversation_id");
            }
            (e.event.clone(), data)
        })
        .collect()
}

struct Case {
    name: &'static str,
    call: (&'static str, &'static str),
    action: &'static str,
}

const CASES: [Case; 5] = [
    Case {
        name: "approval granted",
        call: ("get_weather", r#"{"city":"Paris"}"#),
        action: "approval",
    },
    Case {
        name: "approval refused",
        call: ("get_weather", r#"{"city":"Rome"}"#),
        action: "approval",
    },
    Case {
        name: "input request",
        call: ("ask", r#"{"prompt":"Which city?"}"#),
        action: "input",
    },
    Case {
        name: "ui component",
        call: ("pick_city", r#"{"options":["Oslo","Bergen"]}"#),
        action: "component",
    },
    Case {
        name: "preview",
        call: (
            "preview_workflow",
            r#"{"description":"Low stock alert","workflow":{"name":"Low Stock"}}"#,
        ),
        action: "preview",
    },
];

/// The answer's body (`None`: a preview, nothing to answer).
fn answer_of(case: &Case) -> Option<Value> {
    match case.name {
        "approval granted" => Some(json!({"approved": true})),
        "approval refused" => Some(json!({"approved": false, "reason": "not now"})),
        "input request" => Some(json!({"text": "Oslo"})),
        "ui component" => Some(json!({"data": {"city": "Oslo"}})),
        _ => None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_waiting_step_finishes_over_each_sse_dialect_and_http() {
    // Per dialect and case: the model calls the tool, then answers "Done.".
    let mut replies = Vec::new();
    let mut tool_replies = Vec::new();
    for _ in &DIALECTS {
        for (i, case) in CASES.iter().enumerate() {
            replies.push(W.tools(
                None,
                &[(&format!("call_{i}"), case.call.0, case.call.1)],
                (1, 1),
            ));
            replies.push(W.text(&["Done."], (1, 1)));
            if case.name == "approval granted" {
                tool_replies.push(Reply::json(200, r#"{"temp":21}"#));
            }
            if case.name == "preview" {
                tool_replies.push(Reply::json(200, r#"{"valid":true}"#));
            }
        }
    }
    let llm = MockServer::start(replies).await;
    let tool = MockServer::start(tool_replies).await;
    let server = crate::providers::server_with(agent(&llm, &tool)).await;

    let mut model_turns = 0;
    for d in &DIALECTS {
        for case in &CASES {
            let what = format!("{} / {}", d.name, case.name);
            let tool_calls_before = tool.requests().len();
            let (mut o, chat) = start(&server, d, "go").await;
            let mut live = Vec::new();
            let (action, fields) = until_waiting(&mut o.events, &mut live).await;
            assert_eq!(action, case.action, "{what}");
            let answer = answer_of(case);
            let mut answer_url = None;
            if let Some(answer) = &answer {
                let url = fields["answer_url"]
                    .as_str()
                    .expect("an answer_url")
                    .to_owned();
                assert!(
                    url.starts_with(&format!("/v1/chats/{chat}/")),
                    "{what}: {url}"
                );
                let (status, body) = post(&server, &url, answer.clone()).await;
                assert_eq!(status, 200, "{what}: {body}");
                assert_eq!(body["accepted"], true, "{what}");
                answer_url = Some(url);
            } else {
                assert_eq!(
                    fields["answer_url"],
                    Value::Null,
                    "{what}: a preview is not answered"
                );
            }
            live.extend(all(o.events).await);
            assert_eq!(
                kind(live.last().unwrap()),
                d.end,
                "{what}: finished on the same stream"
            );
            // A second answer has no second effect.
            if let (Some(url), Some(answer)) = (answer_url, answer) {
                let before = last_seq(&server, &chat).await;
                let (status, body) = post(&server, &url, answer).await;
                assert_eq!(status, 404, "{what}: {body}");
                assert_eq!(body["error"]["code"], "INPUT_REQUEST_NOT_FOUND", "{what}");
                assert_eq!(last_seq(&server, &chat).await, before, "{what}");
            }

            // What reached the tool and the model.
            model_turns += 2;
            let to_model = tool_messages(&llm.requests()[model_turns - 1].body);
            let result = to_model.last().unwrap();
            let called = tool.requests().len() - tool_calls_before;
            match case.name {
                "approval granted" => {
                    assert_eq!(called, 1, "{what}");
                    assert!(result.contains("21"), "{what}: {result}");
                }
                "approval refused" => {
                    assert_eq!(called, 0, "{what}");
                    assert!(
                        result.contains("refused") && result.contains("not now"),
                        "{what}"
                    );
                }
                "input request" => assert_eq!(result, "Oslo", "{what}"),
                "ui component" => assert!(result.contains("Oslo"), "{what}: {result}"),
                _ => {
                    assert_eq!(called, 1, "{what}: the preview tool validates first");
                    assert!(result.contains("preview_sent"), "{what}: {result}");
                    let shown = if d.name == "agent-chat" {
                        fields.clone()
                    } else {
                        fields["payload"].clone()
                    };
                    assert_eq!(shown["description"], "Low stock alert", "{what}");
                    assert_eq!(shown["workflow"], json!({"name": "Low Stock"}), "{what}");
                    assert_eq!(shown["valid"], true, "{what}");
                    if d.name == "agent-chat" {
                        assert_eq!(shown["is_update"], false, "{what}");
                    }
                }
            }

            // A rejoin from the start shows the same events, the step once.
            let path = format!("/v1/chats/{chat}/events?dialect={}", d.rejoin);
            let again = all(open(&server, "GET", &path, None, Some("0")).await.events).await;
            assert_eq!(comparable(&again), comparable(&live), "{what}");
            assert_eq!(
                again.iter().filter(|e| waiting(e).is_some()).count(),
                1,
                "{what}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn summaries_and_context_prompts_shape_what_the_model_sees() {
    let llm = MockServer::start(vec![
        W.tools(None, &[("call_1", "list_rules", "{}")], (1, 1)),
        W.text(&["Two rules."], (1, 1)),
    ])
    .await;
    let rules = json!({"total": 2, "rules": [
        {"id": "r1", "name": "Low stock. Fires daily.", "actions": ["a", "b"]},
        {"id": "r2", "name": "Late order", "edges": [1, 2, 3]},
    ]});
    let tool = MockServer::start(vec![Reply::json(200, &rules.to_string())]).await;
    let server = crate::providers::server_with(agent(&llm, &tool)).await;
    let body = json!({"message": "rules?", "context_type": "tables", "agent": "real"});
    let o = open(&server, "POST", "/v1/agent/chat", Some(body), None).await;
    let chat = o.headers["x-conversation-id"].to_str().unwrap().to_owned();
    all(o.events).await;

    let to_model = tool_messages(&llm.requests()[1].body);
    assert_eq!(
        serde_json::from_str::<Value>(&to_model[0]).unwrap(),
        json!({"total": 2, "rules": [{"id": "r1", "name": "Low stock."}, {"id": "r2", "name": "Late order"}]})
    );
    // The log keeps the whole result for the UI.
    let (_, page) = http_json(
        &server,
        "GET",
        &format!("/v1/chats/{chat}/events?limit=100"),
        "",
    )
    .await;
    let response = page["events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["type"] == "chat.tool_response")
        .unwrap()
        .clone();
    assert_eq!(response["content"], rules);
    // `tables` has its own prompt in place of the agent's.
    let system = llm.requests()[0].body["messages"][0]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        system.starts_with("You are the tables assistant."),
        "{system}"
    );
    assert!(!system.contains("You help."), "{system}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_answers_get_their_error_and_change_nothing() {
    use crate::auth::{SECRET, token};
    let server = Server::start_with(Opts {
        settings: agentwire::config::Settings {
            auth: Some(agentwire::config::AuthMode::Jwt),
            jwt_secret: Some(SECRET.into()),
            input_timeout_seconds: Some(1),
            ..Default::default()
        },
        ..Default::default()
    })
    .await;
    let client = agentwire::llm::http_client();
    let url = |path: &str| format!("http://{}{path}", server.addr);
    let (alice, bob) = (token("alice", 600, SECRET), token("bob", 600, SECRET));
    let send = |who: &str, path: &str, body: Value| {
        client.post(url(path)).bearer_auth(who).json(&body).send()
    };

    // Alice asks; the demo's `ask:` waits for her.
    let resp = send(
        &alice,
        "/v1/agent/chat",
        json!({"message": "ask: Which city?", "context_type": "x"}),
    )
    .await
    .unwrap();
    let chat = resp.headers()["x-conversation-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let mut events = eventsource_stream::Eventsource::eventsource(resp.bytes_stream());
    let request = loop {
        let e = events.next().await.unwrap().unwrap();
        if e.event == "input_request" {
            break serde_json::from_str::<Value>(&e.data).unwrap();
        }
    };
    let answer_url = request["answer_url"].as_str().unwrap().to_owned();
    let seq = |who: &str| {
        let req = client
            .get(url(&format!("/v1/chats/{chat}")))
            .bearer_auth(who);
        async move { req.send().await.unwrap().json::<Value>().await.unwrap()["last_seq"].clone() }
    };
    let before = seq(&alice).await;

    let code = |r: reqwest::Response| async move {
        let status = r.status().as_u16();
        let v: Value = r.json().await.unwrap();
        (
            status,
            v["error"]["code"].as_str().unwrap_or_default().to_owned(),
        )
    };
    // Bob may not answer Alice's request: her chat does not exist for him.
    let r = send(&bob, &answer_url, json!({"text": "Rome"}))
        .await
        .unwrap();
    assert_eq!(code(r).await, (404, "RESUME_FAILED".to_owned()));
    // Unknown ids, an approval that is not open, a bad body, no token.
    let other = format!("/v1/chats/{chat}/inputs/nope");
    let r = send(&alice, &other, json!({"text": "x"})).await.unwrap();
    assert_eq!(code(r).await, (404, "INPUT_REQUEST_NOT_FOUND".to_owned()));
    // The input answered as a component: pending, but answered elsewhere,
    // and the error says where.
    let request_id = answer_url.rsplit('/').next().unwrap();
    let r = send(
        &alice,
        &format!("/v1/chats/{chat}/components/{request_id}"),
        json!({"data": {"text": "Rome"}}),
    )
    .await
    .unwrap();
    assert_eq!(r.status(), 409);
    let err: Value = r.json().await.unwrap();
    assert_eq!(err["error"]["code"], "REQUEST_KIND_MISMATCH", "{err}");
    let message = err["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("input request") && message.contains(&format!("POST {answer_url}")),
        "{message}"
    );
    let r = send(
        &alice,
        &format!("/v1/chats/{chat}/approvals/nope"),
        json!({"approved": true}),
    )
    .await
    .unwrap();
    assert_eq!(code(r).await, (404, "INPUT_REQUEST_NOT_FOUND".to_owned()));
    let r = send(
        &alice,
        &format!("/v1/chats/{chat}/approvals"),
        json!({"decisions": [{"tool_call_id": "nope", "approved": true}]}),
    )
    .await
    .unwrap();
    assert_eq!(r.status(), 200);
    let batch: Value = r.json().await.unwrap();
    assert_eq!(batch["results"][0]["accepted"], false);
    assert_eq!(
        batch["results"][0]["error"]["code"],
        "INPUT_REQUEST_NOT_FOUND"
    );
    let r = send(&alice, &answer_url, json!({"txt": "x"}))
        .await
        .unwrap();
    assert_eq!(code(r).await, (400, "SCHEMA_VALIDATION_FAILED".to_owned()));
    let r = client
        .post(url(&answer_url))
        .json(&json!({"text": "x"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    assert_eq!(seq(&alice).await, before, "nothing was logged");

    // Past the timeout the request is closed: a late answer is refused.
    let timeout = loop {
        let e = events.next().await.unwrap().unwrap();
        if e.event == "input_timeout" {
            break e;
        }
    };
    assert!(timeout.data.contains("timeout_seconds"));
    while events.next().await.is_some() {}
    let after = seq(&alice).await;
    let r = send(&alice, &answer_url, json!({"text": "Oslo"}))
        .await
        .unwrap();
    assert_eq!(code(r).await, (404, "INPUT_REQUEST_NOT_FOUND".to_owned()));
    assert_eq!(seq(&alice).await, after);
}
