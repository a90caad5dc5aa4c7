use serde_json::{Value, json};

use super::*;
use crate::protocol::{Display, Envelope, ErrorCode, EventKind, RunEndReason};
use crate::wire::test_log::env;

fn run() -> Vec<Envelope> {
    vec![
        env(
            1,
            EventKind::Text {
                agent: "user".into(),
                content: "hi".into(),
            },
        ),
        env(
            2,
            EventKind::SelectSpeaker {
                agent: "a".into(),
                method: None,
                reason: None,
            },
        ),
        env(
            3,
            EventKind::Print {
                agent: "a".into(),
                content: "Let me".into(),
                corr: None,
            },
        ),
        env(
            4,
            EventKind::Text {
                agent: "a".into(),
                content: "Let me".into(),
            },
        ),
        env(
            5,
            EventKind::ToolCall {
                tool_name: "t".into(),
                component_type: None,
                awaiting_response: false,
                payload: json!({"x": 1}),
                corr: "c1".into(),
                display: Display::Inline,
                agent: None,
            },
        ),
        env(
            6,
            EventKind::ToolResponse {
                tool_name: "t".into(),
                content: json!("ok"),
                success: false,
                corr: "c1".into(),
                agent: None,
            },
        ),
        env(
            7,
            EventKind::SelectSpeaker {
                agent: "a".into(),
                method: None,
                reason: None,
            },
        ),
        env(
            8,
            EventKind::Print {
                agent: "a".into(),
                content: "Done".into(),
                corr: None,
            },
        ),
        env(
            9,
            EventKind::Error {
                message: "boom".into(),
                error_code: ErrorCode::ToolExecutionError,
                details: None,
                recoverable: true,
            },
        ),
        env(
            10,
            EventKind::RunComplete {
                reason: RunEndReason::Error,
            },
        ),
    ]
}

fn encode(dialect: Dialect) -> Vec<(Option<&'static str>, Value)> {
    encode_log(dialect.encoder(Some("conv-1".into())), run())
}

fn encode_log(mut enc: Box<dyn Encoder>, log: Vec<Envelope>) -> Vec<(Option<&'static str>, Value)> {
    let mut outs = Vec::new();
    for e in log {
        enc.encode(&e, &e.to_json(), &mut outs);
    }
    outs.into_iter()
        .map(|o| (o.event, serde_json::from_str(&o.data).unwrap()))
        .collect()
}

#[test]
fn agent_chat_follows_seed_000() {
    assert_eq!(
        encode(Dialect::AgentChat),
        vec![
            (
                Some("message_start"),
                json!({"turn": 0, "conversation_id": "conv-1"})
            ),
            (Some("content_chunk"), json!({"chunk": "Let me"})),
            (
                Some("tool_call_start"),
                json!({"tool_use_id": "c1", "name": "t"})
            ),
            (
                Some("tool_call_result"),
                json!({"tool_use_id": "c1", "name": "t", "is_error": true})
            ),
            (Some("message_start"), json!({"turn": 1})),
            (Some("content_chunk"), json!({"chunk": "Done"})),
            (Some("error"), json!({"message": "boom"})),
            (Some("message_complete"), json!({})),
        ]
    );
}

#[test]
fn agent_host_follows_seed_004() {
    let events = encode(Dialect::AgentHost);
    let names: Vec<_> = events.iter().map(|(n, _)| n.unwrap()).collect();
    assert_eq!(
        names,
        [
            "message_added",
            "content_chunk",
            "message_complete",
            "tool_call",
            "tool_result",
            "content_chunk",
            "error",
            "stream_complete"
        ]
    );
    assert_eq!(
        events[0].1,
        json!({"message_id": format!("{}:1", uuid::Uuid::nil()), "role": "user", "content": "hi"})
    );
    assert_eq!(
        events[3].1,
        json!({"call_id": "c1", "tool_name": "t", "arguments": {"x": 1}})
    );
    assert_eq!(
        events[4].1,
        json!({"call_id": "c1", "success": false, "result": "ok"})
    );
    assert_eq!(
        events[6].1,
        json!({"error": "boom", "error_code": "tool_execution_error", "is_retryable": true})
    );
}

#[test]
fn threads_and_chat() {
    let events = encode(Dialect::Threads);
    assert!(events.iter().all(|(n, _)| n.is_none()));
    assert_eq!(
        events.last().unwrap().1,
        json!({"type": "end", "full_response": "Let meDone"})
    );
    assert_eq!(events[1].1, json!({"type": "tool_result", "content": "ok"}));
    let chat = encode(Dialect::Chat);
    assert_eq!(chat.len(), 10);
    assert_eq!(chat[0].0, Some("chat.text"));
    assert_eq!(chat[0].1["seq"], 1);
}

/// A run whose first model turn a restart cut off, asked again.
fn a_cut_turn() -> Vec<Envelope> {
    let speaker = || EventKind::SelectSpeaker {
        agent: "a".into(),
        method: None,
        reason: None,
    };
    let print = |c: &str| EventKind::Print {
        agent: "a".into(),
        content: c.into(),
        corr: None,
    };
    let log = vec![
        env(
            1,
            EventKind::Text {
                agent: "user".into(),
                content: "hi".into(),
            },
        ),
        env(2, speaker()),
        env(3, print("w1 ")),
        env(
            4,
            EventKind::TurnDiscarded {
                agent: "a".into(),
                from_seq: 2,
                reason: "restart".into(),
            },
        ),
        env(5, speaker()),
        env(6, print("w1 w2")),
        env(
            7,
            EventKind::RunComplete {
                reason: RunEndReason::Completed,
            },
        ),
    ];
    log
}

#[test]
fn a_discarded_turn_is_said_in_every_dialect() {
    // `threads`: its words are not in the full response.
    let events = encode_log(Dialect::Threads.encoder(None), a_cut_turn());
    assert_eq!(
        events.last().unwrap().1,
        json!({"type": "end", "full_response": "w1 w2"})
    );
    // `agent-chat`: the turn is void and starts over under its number.
    let events = encode_log(Dialect::AgentChat.encoder(None), a_cut_turn());
    let names: Vec<_> = events.iter().map(|(e, _)| e.unwrap()).collect();
    assert_eq!(
        names,
        [
            "message_start",
            "content_chunk",
            "turn_discarded",
            "message_start",
            "content_chunk",
            "message_complete"
        ]
    );
    assert_eq!(events[2].1, json!({"turn": 0, "reason": "restart"}));
    assert_eq!(events[3].1["turn"], 0);
    // `agent-host`: its chunks are void.
    let events = encode_log(Dialect::AgentHost.encoder(None), a_cut_turn());
    let at = events
        .iter()
        .position(|(e, _)| *e == Some("message_discarded"))
        .unwrap();
    assert_eq!(events[at - 1].0, Some("content_chunk"));
    assert_eq!(events[at].1, json!({"reason": "restart"}));
    assert_eq!(events[at + 1].0, Some("content_chunk"));
}

/// A run that waits for a person four ways: an input request (answered), an
/// approval (refused), a UI component (answered, then patched: logged again)
/// and a preview.
fn waiting_run() -> Vec<Envelope> {
    let call = |corr: &str, component: Option<&str>, awaiting: bool, payload: Value, display| {
        EventKind::ToolCall {
            tool_name: "t".into(),
            component_type: component.map(str::to_owned),
            awaiting_response: awaiting,
            payload,
            corr: corr.into(),
            display,
            agent: None,
        }
    };
    let response = |corr: &str, content: Value| EventKind::ToolResponse {
        tool_name: "t".into(),
        content,
        success: true,
        corr: corr.into(),
        agent: None,
    };
    let kinds = vec![
        EventKind::InputRequest {
            request_id: "r1".into(),
            prompt: "Name?".into(),
            corr: "r1".into(),
            password: false,
            timeout_seconds: Some(300),
            options: None,
            tool_name: None,
        },
        EventKind::InputAck {
            request_id: "r1".into(),
            corr: "r1".into(),
        },
        call(
            "c1.approval",
            Some("approval"),
            true,
            json!({"tool_name": "t", "input": {"x": 1}, "tool_call_id": "c1"}),
            Display::Inline,
        ),
        response("c1.approval", json!({"approved": false, "reason": "no"})),
        call(
            "c2",
            Some("picker"),
            true,
            json!({"options": ["a"]}),
            Display::Inline,
        ),
        response("c2", json!({"picked": "a"})),
        call(
            "c2",
            Some("picker"),
            false,
            json!({"options": ["b"]}),
            Display::Inline,
        ),
        call(
            "c3.preview",
            Some("workflow_preview"),
            false,
            json!({"description": "d", "workflow": {"name": "W"}}),
            Display::Artifact,
        ),
    ];
    kinds
        .into_iter()
        .enumerate()
        .map(|(i, k)| env(i as u64 + 1, k))
        .collect()
}

fn encode_waiting(dialect: Dialect) -> Vec<(Option<&'static str>, Value)> {
    encode_log(dialect.encoder(None), waiting_run())
}

#[test]
fn agent_chat_shows_what_waits_in_seed_000s_style() {
    let chat = uuid::Uuid::nil();
    assert_eq!(
        encode_waiting(Dialect::AgentChat),
        vec![
            (
                Some("input_request"),
                json!({"request_id": "r1", "prompt": "Name?", "password": false, "timeout_seconds": 300,
                       "answer_url": format!("/v1/chats/{chat}/inputs/r1")})
            ),
            (Some("input_received"), json!({"request_id": "r1"})),
            (
                Some("approval_request"),
                json!({"tool_use_id": "c1", "name": "t", "input": {"x": 1}, "corr": "c1.approval",
                       "answer_url": format!("/v1/chats/{chat}/approvals/c1")})
            ),
            (
                Some("approval_result"),
                json!({"tool_use_id": "c1", "approved": false, "reason": "no"})
            ),
            (
                Some("tool_call_start"),
                json!({"tool_use_id": "c2", "name": "t"})
            ),
            (
                Some("component_request"),
                json!({"tool_use_id": "c2", "name": "t", "component_type": "picker",
                       "payload": {"options": ["a"]}, "display": "inline",
                       "answer_url": format!("/v1/chats/{chat}/components/c2")})
            ),
            (
                Some("tool_call_result"),
                json!({"tool_use_id": "c2", "name": "t", "is_error": false})
            ),
            (
                Some("workflow_preview"),
                json!({"description": "d", "workflow": {"name": "W"}, "is_update": false})
            ),
        ]
    );
}

#[test]
fn agent_host_and_threads_show_what_waits() {
    let host = encode_waiting(Dialect::AgentHost);
    let names: Vec<_> = host.iter().map(|(n, _)| n.unwrap()).collect();
    assert_eq!(
        names,
        [
            "client_action",
            "tool_result",
            "client_action",
            "tool_result",
            "tool_call",
            "client_action",
            "tool_result",
            "client_action"
        ]
    );
    let actions: Vec<_> = host
        .iter()
        .filter(|(n, _)| *n == Some("client_action"))
        .map(|(_, d)| {
            (
                d["action"].as_str().unwrap(),
                d["call_id"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        actions,
        [
            ("input", "r1"),
            ("approval", "c1.approval"),
            ("component", "c2"),
            ("preview", "c3.preview")
        ]
    );
    assert_eq!(host[1].1["result"], json!({"answered": true}));

    let threads = encode_waiting(Dialect::Threads);
    let kinds: Vec<_> = threads
        .iter()
        .map(|(_, d)| {
            let c = &d["content"];
            c["type"].as_str().unwrap_or("(result)").to_owned()
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "input_request",
            "approval_request",
            "(result)",
            "component_request",
            "(result)",
            "preview"
        ]
    );
    assert!(threads.iter().all(|(_, d)| d["type"] == "tool_result"));
}

/// A group run: two members, the second calls a tool (stamped with its name).
fn group_run() -> Vec<Envelope> {
    let speaker = |agent: &str, method: &str| EventKind::SelectSpeaker {
        agent: agent.into(),
        method: Some(method.into()),
        reason: None,
    };
    let said = |agent: &str, content: &str| {
        [
            EventKind::Print {
                agent: agent.into(),
                content: content.into(),
                corr: None,
            },
            EventKind::Text {
                agent: agent.into(),
                content: content.into(),
            },
        ]
    };
    let mut kinds = vec![EventKind::Text {
        agent: "user".into(),
        content: "go".into(),
    }];
    kinds.push(speaker("planner", "round_robin"));
    kinds.extend(said("planner", "Plan."));
    kinds.push(speaker("writer", "handoff"));
    kinds.push(EventKind::ToolCall {
        tool_name: "t".into(),
        component_type: None,
        awaiting_response: false,
        payload: json!({}),
        corr: "c1".into(),
        display: Display::Inline,
        agent: Some("writer".into()),
    });
    kinds.push(speaker("writer", "continue"));
    kinds.extend(said("writer", "Done."));
    kinds.push(EventKind::RunComplete {
        reason: crate::protocol::RunEndReason::Completed,
    });
    kinds
        .into_iter()
        .enumerate()
        .map(|(i, k)| env(i as u64 + 1, k))
        .collect()
}

#[test]
fn every_dialect_names_a_groups_speakers() {
    let log = group_run;
    let chat = encode_log(Dialect::AgentChat.encoder(None), log());
    let starts: Vec<&Value> = chat
        .iter()
        .filter(|(n, _)| *n == Some("message_start"))
        .map(|(_, d)| d)
        .collect();
    assert_eq!(
        starts,
        [
            &json!({"turn": 0, "agent": "planner"}),
            &json!({"turn": 1, "agent": "writer"}),
            &json!({"turn": 2, "agent": "writer"})
        ]
    );

    let host = encode_log(Dialect::AgentHost.encoder(None), log());
    let named: Vec<(&str, &Value)> = host
        .iter()
        .filter(|(n, _)| matches!(n, Some("message_added" | "message_complete")))
        .map(|(n, d)| (n.unwrap(), &d["name"]))
        .collect();
    assert_eq!(
        named,
        [
            ("message_added", &json!(null)), // the user's, as before
            ("message_added", &json!("planner")),
            ("message_complete", &json!("planner")),
            ("message_added", &json!("writer")),
            ("message_added", &json!("writer")),
            ("message_complete", &json!("writer")),
        ]
    );
    assert_eq!(host[1].1["role"], "assistant");

    let threads = encode_log(Dialect::Threads.encoder(None), log());
    let chunks: Vec<&Value> = threads
        .iter()
        .filter(|(_, d)| d["type"] == "chunk")
        .map(|(_, d)| &d["agent"])
        .collect();
    assert_eq!(chunks, [&json!("planner"), &json!("writer")]);

    // A plain run's events are as they always were.
    let plain = encode_log(Dialect::Threads.encoder(None), run());
    assert!(plain.iter().all(|(_, d)| d.get("agent").is_none()));
}

#[test]
fn a_rejoin_inside_a_members_turn_still_names_it() {
    // Joined after the planner's select_speaker: the run is read from its
    // start, so its speaker is known.
    let join = |dialect: Dialect| {
        let log = group_run();
        let mut framer =
            crate::wire::Framer::new(dialect.encoder(None), crate::wire::Shows::Response, 0)
                .joining(log[1].seq);
        let mut out = Vec::new();
        for e in &log {
            framer.envelope(e, "", &mut out);
        }
        out.into_iter()
            .map(|e| {
                (
                    e.out.event,
                    serde_json::from_str::<Value>(&e.out.data).unwrap(),
                )
            })
            .collect::<Vec<_>>()
    };
    let threads = join(Dialect::Threads);
    assert_eq!(
        threads[0].1,
        json!({"type": "chunk", "content": "Plan.", "agent": "planner"})
    );
    let host = join(Dialect::AgentHost);
    // The turn it landed in is named first, then its words.
    assert_eq!(host[0].0, Some("message_added"));
    assert_eq!(host[0].1["name"], "planner");
    assert_eq!(host[2].0, Some("message_complete"));
    assert_eq!(host[2].1["name"], "planner");
}

#[test]
fn a_choice_shows_its_options_on_every_dialect() {
    let choice = env(
        1,
        EventKind::InputRequest {
            request_id: "speaker_1".into(),
            prompt: "Who speaks next? planner, writer".into(),
            corr: "speaker_1".into(),
            password: false,
            timeout_seconds: Some(300),
            options: Some(vec!["planner".into(), "writer".into()]),
            tool_name: None,
        },
    );
    for dialect in [Dialect::AgentChat, Dialect::AgentHost, Dialect::Threads] {
        let out = encode_log(dialect.encoder(None), vec![choice.clone()]);
        let data = &out[0].1;
        let options = data
            .get("options")
            .or_else(|| data["content"].get("options"));
        assert_eq!(options, Some(&json!(["planner", "writer"])), "{data}");
    }
}
