use serde_json::{Value, json};

use super::*;
use crate::wire::test_log::{call, env, response, turn};
use crate::wire::{EventId, Framer, Shows};

/// Each chunk of the envelopes, as JSON (`[DONE]` as a string).
fn chunks(enc: &mut AiSdk, log: &[Envelope]) -> Vec<Value> {
    let mut outs = Vec::new();
    for e in log {
        enc.encode(e, "", &mut outs);
    }
    outs.iter()
        .map(|o| serde_json::from_str(&o.data).unwrap_or_else(|_| json!(o.data)))
        .collect()
}

fn types(chunks: &[Value]) -> Vec<&str> {
    chunks
        .iter()
        .map(|c| c["type"].as_str().unwrap_or_else(|| c.as_str().unwrap()))
        .collect()
}

#[test]
fn a_turn_streams_its_words_and_ends_the_message() {
    let print = |c: &str| EventKind::Print {
        agent: "a".into(),
        content: c.into(),
        corr: None,
    };
    let log = [
        env(
            1,
            EventKind::Text {
                agent: "user".into(),
                content: "hi".into(),
            },
        ),
        env(2, turn()),
        env(3, print("Hel")),
        env(4, print("lo")),
        env(
            5,
            EventKind::Text {
                agent: "a".into(),
                content: "Hello".into(),
            },
        ),
        env(
            6,
            EventKind::RunComplete {
                reason: RunEndReason::Completed,
            },
        ),
    ];
    let mut enc = AiSdk::new(0);
    let out = chunks(&mut enc, &log);
    assert_eq!(
        types(&out),
        [
            "start-step",
            "text-start",
            "text-delta",
            "text-delta",
            "text-end",
            "finish-step",
            "message-metadata",
            "finish",
            "[DONE]"
        ]
    );
    assert_eq!(out[1]["id"], out[4]["id"]);
    assert_eq!(out[6]["messageMetadata"]["agentwire"]["seq"], 6);
    assert_eq!(out[7]["finishReason"], "stop");
    assert!(enc.ended());
}

#[test]
fn an_approval_ends_the_response_and_the_next_goes_on_from_it() {
    let gate = call(
        "c1.approval",
        Some(crate::tools::APPROVAL),
        json!({"tool_name": "guarded", "input": {"steps": 2}, "tool_call_id": "c1"}),
    );
    let mut enc = AiSdk::new(0);
    let out = chunks(&mut enc, &[env(2, turn()), env(3, gate)]);
    assert_eq!(
        types(&out),
        [
            "start-step",
            "tool-input-available",
            "tool-approval-request"
        ]
    );
    assert_eq!(out[1]["toolCallId"], "c1");
    assert_eq!(
        out[2],
        json!({"type": "tool-approval-request", "approvalId": "c1.approval", "toolCallId": "c1"})
    );
    assert!(enc.waiting());
    let mut closing = Vec::new();
    enc.close(&mut closing);
    let closing: Vec<Value> = closing
        .iter()
        .map(|o| serde_json::from_str(&o.data).unwrap_or_else(|_| json!(o.data)))
        .collect();
    assert_eq!(
        types(&closing),
        ["finish-step", "message-metadata", "finish", "[DONE]"]
    );
    assert_eq!(closing[1]["messageMetadata"]["agentwire"]["seq"], 3);
    assert_eq!(closing[2]["finishReason"], "tool-calls");

    // The next request goes on after seq 3, reading the run from its start
    // without sending it: the approved call adds no part.
    let gate = call(
        "c1.approval",
        Some(crate::tools::APPROVAL),
        json!({"tool_name": "guarded", "input": {"steps": 2}, "tool_call_id": "c1"}),
    );
    let before = [env(2, turn()), env(3, gate)];
    let go_on = |answer: Value, then: Vec<Envelope>| {
        let mut next = Framer::new(Box::new(AiSdk::new(0)), Shows::Response, 0)
            .holding(EventId::after(3))
            .expecting(["c1.approval".to_owned()]);
        let mut log = before.to_vec();
        log.push(env(4, response("c1.approval", answer)));
        log.extend(then);
        let mut events = Vec::new();
        for e in &log {
            next.envelope(e, "", &mut events);
        }
        let chunks: Vec<Value> = events
            .iter()
            .map(|e| serde_json::from_str(&e.out.data).unwrap_or_else(|_| json!(e.out.data)))
            .collect();
        (next, chunks)
    };
    let (mut next, out) = go_on(
        json!({"approved": true}),
        vec![
            env(5, call("c1", None, json!({"steps": 2}))),
            env(6, response("c1", json!("done"))),
        ],
    );
    assert_eq!(types(&out), ["tool-output-available"]);
    assert_eq!(out[0]["toolCallId"], "c1");
    assert!(!next.encoder().waiting());

    // Refused: the call's part is denied; the call and its refusal, logged
    // next, are not sent again.
    let (_, out) = go_on(
        json!({"approved": false}),
        vec![
            env(5, call("c1", None, json!({"steps": 2}))),
            env(6, response("c1", json!({"refused": true}))),
        ],
    );
    assert_eq!(types(&out), ["tool-output-denied"]);
}

#[test]
fn a_response_does_not_end_at_a_wait_while_a_backend_call_runs() {
    let mut enc = AiSdk::new(0);
    let log = [
        env(2, turn()),
        env(3, call("b1", None, json!({}))),
        env(4, call("u1", Some("picker"), json!({}))),
    ];
    chunks(&mut enc, &log);
    assert!(!enc.waiting(), "b1 has no result yet");
    chunks(&mut enc, &[env(5, response("b1", json!("ok")))]);
    assert!(enc.waiting());
}

#[test]
fn a_discarded_turn_resets_its_step() {
    let print = EventKind::Print {
        agent: "a".into(),
        content: "w1 ".into(),
        corr: None,
    };
    let discarded = EventKind::TurnDiscarded {
        agent: "a".into(),
        from_seq: 2,
        reason: "restart".into(),
    };
    let mut enc = AiSdk::new(0);
    let out = chunks(
        &mut enc,
        &[
            env(2, turn()),
            env(3, print),
            env(4, discarded),
            env(5, turn()),
        ],
    );
    assert_eq!(
        types(&out),
        [
            "start-step",
            "text-start",
            "text-delta",
            "reset-step",
            "finish-step",
            "start-step"
        ]
    );
}

#[test]
fn reasoning_is_a_reasoning_part_before_the_text() {
    let think = |t: &str| EventKind::Reasoning {
        agent: "a".into(),
        content: t.into(),
    };
    let log = [
        env(1, turn()),
        env(2, think("Let me ")),
        env(3, think("see.")),
        env(
            4,
            EventKind::Print {
                agent: "a".into(),
                content: "Yes.".into(),
                corr: None,
            },
        ),
        env(
            5,
            EventKind::RunComplete {
                reason: RunEndReason::Completed,
            },
        ),
    ];
    let c = chunks(&mut AiSdk::new(0), &log);
    assert_eq!(
        types(&c)[..7],
        [
            "start-step",
            "reasoning-start",
            "reasoning-delta",
            "reasoning-delta",
            "reasoning-end",
            "text-start",
            "text-delta"
        ]
    );
    assert_eq!(c[1]["id"], "reasoning-2");
    assert_eq!(c[3]["delta"], "see.");
}

#[test]
fn a_failed_run_ends_with_the_protocols_error_chunk() {
    let failed = EventKind::Error {
        message: "the model is down".into(),
        error_code: crate::protocol::ErrorCode::AgentInitializationFailed,
        details: None,
        recoverable: false,
    };
    let end = EventKind::RunComplete {
        reason: RunEndReason::Error,
    };
    let out = chunks(
        &mut AiSdk::new(0),
        &[env(2, turn()), env(3, failed), env(4, end)],
    );
    // The error after the message's metadata (kept), before `finish`
    // (which a client that saw the error no longer reads).
    assert_eq!(
        types(&out),
        [
            "start-step",
            "data-error",
            "finish-step",
            "message-metadata",
            "error",
            "finish",
            "[DONE]"
        ]
    );
    assert_eq!(out[4]["errorText"], "the model is down");
    // A timeout says so too.
    let timeout = EventKind::RunComplete {
        reason: RunEndReason::Timeout,
    };
    let out = chunks(&mut AiSdk::new(0), &[env(2, turn()), env(3, timeout)]);
    let error = out.iter().find(|c| c["type"] == "error").expect("an error");
    assert_eq!(error["errorText"], "the run timed out");
    // A completed run has none.
    let done = EventKind::RunComplete {
        reason: RunEndReason::Completed,
    };
    let out = chunks(&mut AiSdk::new(0), &[env(2, turn()), env(3, done)]);
    assert!(out.iter().all(|c| c["type"] != "error"));
}

#[test]
fn declared_tools_are_named_parts_and_others_dynamic() {
    let mut enc = AiSdk::new(0).declaring(["guarded".to_owned()].into());
    let mcp = EventKind::ToolCall {
        tool_name: "files_read".into(),
        component_type: None,
        awaiting_response: false,
        payload: json!({}),
        corr: "m1".into(),
        display: crate::protocol::Display::Inline,
        agent: None,
    };
    let out = chunks(
        &mut enc,
        &[
            env(2, turn()),
            env(3, call("c1", None, json!({"steps": 1}))),
            env(4, response("c1", json!("ok"))),
            env(5, mcp),
            env(6, response("m1", json!("text"))),
        ],
    );
    let by_call = |id: &str, ty: &str| {
        out.iter()
            .find(|c| c["toolCallId"] == id && c["type"] == ty)
            .cloned()
            .unwrap_or_else(|| panic!("{ty} of {id}"))
    };
    // `guarded` is the agent file's: a `tool-guarded` part.
    assert_eq!(by_call("c1", "tool-input-available").get("dynamic"), None);
    assert_eq!(by_call("c1", "tool-output-available").get("dynamic"), None);
    // An MCP server's tool is known only when called.
    assert_eq!(by_call("m1", "tool-input-available")["dynamic"], true);
    assert_eq!(by_call("m1", "tool-output-available")["dynamic"], true);
}

#[test]
fn a_component_shown_not_waited_on_is_a_data_part_and_its_result_no_chunk() {
    // (A backend's post logs a widget so: the call, then its result.)
    let shown = EventKind::ToolCall {
        tool_name: "show_card".into(),
        component_type: Some("card".into()),
        awaiting_response: false,
        payload: json!({"rows": 3}),
        corr: "p1".into(),
        display: crate::protocol::Display::Inline,
        agent: None,
    };
    let log = [
        env(1, turn()),
        env(2, shown),
        env(3, response("p1", json!("shown to the user"))),
        env(4, call("c2", None, json!({}))),
        env(5, response("c2", json!("done"))),
    ];
    let out = chunks(&mut AiSdk::new(0), &log);
    assert_eq!(
        types(&out),
        [
            "start-step",
            "data-component",
            "tool-input-available",
            "tool-output-available"
        ]
    );
    assert_eq!(out[3]["toolCallId"], "c2");
}
