//! Every SSE wire resumes exactly after any of its events (issue 33): a run
//! with reasoning, words, a backend tool call, an approval and a UI tool is
//! streamed whole over each wire; then, for every event, a client that was
//! cut right after it rejoins with that event's id, and what it had plus the
//! rejoin is the uninterrupted stream, event for event, ids included.

use std::time::Duration;

use serde_json::{Value, json};

use crate::hitl::{DIALECTS, start, until_waiting, waiting};
use crate::mock_llm::{MockServer, Reply};
use crate::sse::{Ev, all, open};
use crate::support::*;
use crate::vendors::{OpenAiWire, Wire};

const W: OpenAiWire = OpenAiWire;

fn agent(llm: &MockServer, tool: &MockServer) -> String {
    format!(
        r#"id: real
model: {{provider: openai, name: test-model, base_url: "{llm}/v1", api_key_env: AGENTWIRE_TEST_KEY}}
system_prompt: You help.
tools:
  - name: list_rules
    http: {{method: POST, url: "{tool}/rules"}}
  - name: get_weather
    input_schema: {{type: object, properties: {{city: {{type: string}}}}, required: [city]}}
    requires_approval: true
    http: {{method: POST, url: "{tool}/weather"}}
  - name: pick_city
    input_schema: {{type: object, properties: {{options: {{type: array}}}}}}
    ui: {{component_type: multiple_choice}}
"#,
        llm = llm.url(),
        tool = tool.url(),
    )
}

/// One run's model turns: reasoning, words and a backend call; a call that
/// needs approval; a UI tool; the answer.
fn turns() -> Vec<Reply> {
    let mut first = W.tools(
        Some("Let me look."),
        &[("call_1", "list_rules", "{}")],
        (3, 2),
    );
    let reasoning = |text: &str| {
        let chunk = json!({"id": "chatcmpl-7", "object": "chat.completion.chunk", "created": 1,
                           "model": "test-model", "choices": [{"index": 0,
                           "delta": {"reasoning_content": text}, "finish_reason": null}]});
        (Duration::ZERO, format!("data: {chunk}\n\n"))
    };
    first.chunks.insert(1, reasoning("Weighing the "));
    first.chunks.insert(2, reasoning("rules first."));
    vec![
        first,
        W.tools(
            None,
            &[("call_2", "get_weather", r#"{"city":"Oslo"}"#)],
            (4, 2),
        ),
        W.tools(
            None,
            &[("call_3", "pick_city", r#"{"options":["a","b"]}"#)],
            (5, 2),
        ),
        W.text(&["All ", "done."], (6, 2)),
    ]
}

fn tool_replies() -> Vec<Reply> {
    vec![
        Reply::json(200, r#"{"rules":[{"id":1}]}"#),
        Reply::json(200, r#"{"temp":21}"#),
    ]
}

/// An event as compared: its name, data and id.
fn seen(e: &Ev) -> (String, Value, String) {
    (e.event.clone(), e.data.clone(), e.id.clone())
}

/// For every event of `original` (the first `cuts`), a rejoin
/// (`rejoin(id)` opens it) after it goes on exactly as `original` did.
pub(crate) async fn resumes_after_each<F, Fut>(what: &str, original: &[Ev], cuts: usize, rejoin: F)
where
    F: Fn(String) -> Fut,
    Fut: std::future::Future<Output = Vec<Ev>>,
{
    assert!(original.len() > 5, "{what}: a short stream");
    let ids: std::collections::HashSet<&str> = original.iter().map(|e| e.id.as_str()).collect();
    assert_eq!(ids.len(), original.len(), "{what}: every event its own id");
    let whole: Vec<_> = original.iter().map(seen).collect();
    for (i, e) in original.iter().enumerate().take(cuts) {
        assert!(!e.id.is_empty(), "{what}: event {i} has no id");
        let mut joined = whole[..=i].to_vec();
        joined.extend(rejoin(e.id.clone()).await.iter().map(seen));
        assert_eq!(joined, whole, "{what}: cut after event {i} (id {})", e.id);
    }
}

/// Reads a stream until `end` says it is done (the `chat` dialect never
/// ends by itself).
pub(crate) async fn until(
    mut events: std::pin::Pin<Box<dyn futures_util::Stream<Item = Ev> + Send>>,
    end: impl Fn(&Ev) -> bool,
) -> Vec<Ev> {
    use futures_util::StreamExt;
    let mut out = Vec::new();
    while let Some(e) = tokio::time::timeout(WAIT, events.next())
        .await
        .expect("an event in time")
    {
        let last = end(&e);
        out.push(e);
        if last {
            break;
        }
    }
    out
}

/// A rejoin of the stream at `path` after event `last` (`Last-Event-ID`):
/// its events, none when it answers 204 (nothing after it).
pub(crate) async fn rejoined(server: &Server, path: String, last: String) -> Vec<Ev> {
    let o = open(server, "GET", &path, None, Some(&last)).await;
    match o.status {
        204 => Vec::new(),
        _ => all(o.events).await,
    }
}

async fn post(server: &Server, path: &str, body: Value) -> (u16, Value) {
    http_json(server, "POST", path, &body.to_string()).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_sse_wire_resumes_exactly_after_any_of_its_events() {
    let wires = DIALECTS.len() + 2;
    let llm = MockServer::start((0..wires).flat_map(|_| turns()).collect()).await;
    let tool = MockServer::start((0..wires).flat_map(|_| tool_replies()).collect()).await;
    // Titled as chats are by default (the first words, in the commit of the
    // run's end): a rejoin after the run's last event is not shown the title
    // as part of the run, and the `chat` dialect's shows it next.
    crate::providers::set_key();
    let server = Server::start_with(Opts {
        agents: vec![("real.yaml".into(), agent(&llm, &tool))],
        settings: agentwire::config::Settings {
            auto_titles: Some(true),
            ..Default::default()
        },
    })
    .await;

    // The dialects: one stream, the steps answered where they say.
    let mut a_chat = None;
    for d in &DIALECTS {
        let (mut o, chat) = start(&server, d, "go").await;
        let mut live = Vec::new();
        for answer in [json!({"approved": true}), json!({"data": {"city": "Oslo"}})] {
            let (_, fields) = until_waiting(&mut o.events, &mut live).await;
            let url = fields["answer_url"].as_str().expect("an answer_url");
            let (status, body) = post(&server, url, answer).await;
            assert_eq!(status, 200, "{}: {body}", d.name);
        }
        live.extend(all(o.events).await);
        assert_eq!(live.iter().filter(|e| waiting(e).is_some()).count(), 2);
        let path = format!("/v1/chats/{chat}/events?dialect={}", d.rejoin);
        resumes_after_each(d.name, &live, live.len(), |id| {
            let path = path.clone();
            let server = &server;
            async move { all(open(server, "GET", &path, None, Some(&id)).await.events).await }
        })
        .await;
        a_chat = Some(chat);
    }

    ai_sdk(&server).await;
    ag_ui(&server).await;

    // The `chat` dialect: the log itself, one event per envelope; its
    // stream stays open after the run, so each rejoin is read to the run's
    // end, and the one after the last event is shown to send next the
    // first envelope logged after it.
    let chat = a_chat.unwrap();
    let path = format!("/v1/chats/{chat}/events");
    let is_end = |e: &Ev| e.event == "chat.run_complete";
    let log = until(open(&server, "GET", &path, None, None).await.events, is_end).await;
    let last = log.last().unwrap();
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
    let o = open(&server, "GET", &path, None, Some(&last.id)).await;
    let (status, _) = post(
        &server,
        &format!("/v1/chats/{chat}/messages"),
        json!({"text": "again"}),
    )
    .await;
    assert_eq!(status, 202);
    let next = until(o.events, |_| true).await;
    let seq = last.data["seq"].as_u64().unwrap();
    assert_eq!(next[0].data["seq"], seq + 1, "{:?}", next[0]);
    assert_eq!(next[0].id, (seq + 1).to_string());
}

/// The AI SDK's responses: the turn (to the approval), the approval's
/// answer (to the UI tool), the UI tool's answer (to the end); each
/// rejoined by the transport's resume route with `Last-Event-ID`.
async fn ai_sdk(server: &Server) {
    let id = "rejoin-ai-sdk";
    // The turn attaches a file (kept once, by the first request; the later
    // ones send the same message, which is not read again).
    let user = json!({"id": "u1", "role": "user", "parts": [
        {"type": "file", "mediaType": "text/plain", "filename": "notes.txt", "url": "data:text/plain;base64,dGlkZXM="},
        {"type": "text", "text": "go"}]});
    let respond = |messages: Vec<Value>| async move {
        let body =
            json!({"id": id, "messages": messages, "trigger": "submit-message", "agent": "real"});
        let o = open(server, "POST", "/v1/ai-sdk/chat", Some(body), None).await;
        assert_eq!(o.status, 200);
        all(o.events).await
    };
    let chunk = |evs: &[Ev], ty: &str| -> Value {
        evs.iter()
            .find(|e| e.data["type"] == ty)
            .map(|e| e.data.clone())
            .unwrap_or_else(|| panic!("no {ty} chunk"))
    };
    let stopped = |evs: &[Ev]| {
        evs.iter()
            .rev()
            .find_map(|e| e.data["messageMetadata"]["agentwire"]["seq"].as_u64())
            .expect("where the response stopped")
    };
    let first = respond(vec![user.clone()]).await;
    let approval = chunk(&first, "tool-approval-request");
    let assistant = |seq: u64, part: Value| json!({"id": "a1", "role": "assistant", "metadata": {"agentwire": {"seq": seq}}, "parts": [part]});
    let second = respond(vec![
        user.clone(),
        assistant(
            stopped(&first),
            json!({"type": "dynamic-tool", "toolName": "get_weather", "toolCallId": approval["toolCallId"],
                   "state": "approval-responded", "input": {"city": "Oslo"},
                   "approval": {"id": approval["approvalId"], "approved": true}}),
        ),
    ])
    .await;
    let ui = second
        .iter()
        .find(|e| e.data["toolMetadata"]["component_type"].is_string())
        .map(|e| e.data.clone())
        .expect("the UI tool's part");
    let third = respond(vec![
        user,
        assistant(
            stopped(&second),
            json!({"type": "dynamic-tool", "toolName": "pick_city", "toolCallId": ui["toolCallId"],
                   "state": "output-available", "input": ui["input"], "output": {"city": "Oslo"},
                   "toolMetadata": ui["toolMetadata"]}),
        ),
    ])
    .await;
    assert_eq!(chunk(&third, "finish")["finishReason"], "stop");
    // The turn's file is in the log, once: loaded back as a file part.
    let started = first[0].data["messageId"].as_str().unwrap();
    let chat = started.split(':').next().unwrap();
    let loaded = http_json(
        server,
        "GET",
        &format!("/v1/ai-sdk/chat/{chat}/messages"),
        "",
    )
    .await
    .1;
    let files: Vec<&Value> = loaded[0]["parts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["type"] == "file")
        .collect();
    assert_eq!(files.len(), 1, "{loaded}");
    assert_eq!(files[0]["filename"], "notes.txt");
    for response in [&first, &second, &third] {
        assert_eq!(response[0].data["type"], "start");
    }
    let path = format!("/v1/ai-sdk/chat/{id}/stream");
    for (n, response) in [first, second, third].iter().enumerate() {
        resumes_after_each(
            &format!("AI SDK response {n}"),
            response,
            response.len(),
            |last| rejoined(server, path.clone(), last),
        )
        .await;
    }
}

/// AG-UI's responses, each its own AG-UI run (runId), rejoined by the
/// thread's stream route with `Last-Event-ID` and the run's id.
async fn ag_ui(server: &Server) {
    let thread = "rejoin-ag-ui";
    // The turn attaches a file, as AG-UI's binary content.
    let user = json!({"id": "u1", "role": "user", "content": [{"type": "text", "text": "go"},
        {"type": "binary", "mimeType": "text/plain", "filename": "notes.txt", "data": "dGlkZXM="}]});
    let run = |run_id: &'static str, resume: Vec<Value>| {
        let user = user.clone();
        async move {
            let body = json!({"threadId": thread, "runId": run_id, "messages": [user],
                              "resume": resume, "tools": [], "context": [], "state": {},
                              "forwardedProps": {"agent": "real"}});
            let o = open(server, "POST", "/v1/ag-ui", Some(body), None).await;
            assert_eq!(o.status, 200);
            all(o.events).await
        }
    };
    let interrupt = |evs: &[Ev]| -> String {
        let end = evs.last().expect("RUN_FINISHED").data.clone();
        assert_eq!(end["type"], "RUN_FINISHED");
        end["outcome"]["interrupts"][0]["id"]
            .as_str()
            .expect("an interrupt")
            .to_owned()
    };
    let first = run("r1", Vec::new()).await;
    let resolved = |id: String, payload: Value| {
        vec![json!({"interruptId": id, "status": "resolved", "payload": payload})]
    };
    let second = run("r2", resolved(interrupt(&first), json!({"approved": true}))).await;
    let third = run("r3", resolved(interrupt(&second), json!({"city": "Oslo"}))).await;
    for response in [&first, &second, &third] {
        assert_eq!(response[0].data["type"], "RUN_STARTED");
    }
    assert_eq!(third.last().unwrap().data["type"], "RUN_FINISHED");
    // The turn's file is in the log, once: loaded back as a media part.
    let loaded = http_json(server, "GET", &format!("/v1/ag-ui/{thread}/messages"), "")
        .await
        .1;
    let files: Vec<&Value> = loaded[0]["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["type"] == "document")
        .collect();
    assert_eq!(files.len(), 1, "{loaded}");
    assert_eq!(files[0]["metadata"]["filename"], "notes.txt");
    for (n, (response, run_id)) in [(first, "r1"), (second, "r2"), (third, "r3")]
        .iter()
        .enumerate()
    {
        let path = format!("/v1/ag-ui/{thread}/stream?runId={run_id}");
        resumes_after_each(
            &format!("AG-UI response {n}"),
            response,
            response.len(),
            |last| rejoined(server, path.clone(), last),
        )
        .await;
    }
}
