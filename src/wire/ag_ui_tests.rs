use serde_json::{Value, json};

use super::*;
use crate::wire::test_log::{call, env, response, turn};
use crate::wire::{EventId, Framer, Shows};

/// The events of a response going on after `after`, whose run input
/// answers `answered` (the run read from its start, as the server does).
fn going_on(enc: AgUi, after: u64, answered: &[&str], log: &[Envelope]) -> Vec<Value> {
    let mut framer = Framer::new(Box::new(enc), Shows::Response, 0)
        .holding(EventId::after(after))
        .expecting(answered.iter().map(|a| (*a).to_owned()));
    let mut out = Vec::new();
    for e in log {
        framer.envelope(e, "", &mut out);
    }
    framer.caught_up(&mut out);
    out.iter()
        .map(|e| serde_json::from_str(&e.out.data).unwrap())
        .collect()
}

/// The events of the envelopes, then of the close when the run waits.
fn events(enc: &mut impl Encoder, log: &[Envelope]) -> Vec<Value> {
    let mut outs = Vec::new();
    for e in log {
        enc.encode(e, "", &mut outs);
    }
    if enc.waiting() {
        enc.close(&mut outs);
    }
    outs.iter()
        .map(|o| serde_json::from_str(&o.data).unwrap())
        .collect()
}

fn types(events: &[Value]) -> Vec<&str> {
    events.iter().map(|e| e["type"].as_str().unwrap()).collect()
}

fn print(text: &str) -> EventKind {
    EventKind::Print {
        agent: "a".into(),
        content: text.into(),
        corr: None,
    }
}

fn end(reason: RunEndReason) -> EventKind {
    EventKind::RunComplete { reason }
}

fn agui() -> AgUi {
    AgUi::new("t".into(), "r".into(), 0)
}

#[test]
fn a_turn_is_a_step_with_one_message_closed_before_the_run_finishes() {
    let log = [
        env(1, turn()),
        env(2, print("Hel")),
        env(3, print("lo")),
        env(
            4,
            EventKind::Text {
                agent: "a".into(),
                content: "Hello".into(),
            },
        ),
        env(5, end(RunEndReason::Completed)),
    ];
    let ev = events(&mut agui(), &log);
    assert_eq!(
        types(&ev),
        [
            "STEP_STARTED",
            "TEXT_MESSAGE_START",
            "TEXT_MESSAGE_CONTENT",
            "TEXT_MESSAGE_CONTENT",
            "TEXT_MESSAGE_END",
            "STEP_FINISHED",
            "RUN_FINISHED"
        ]
    );
    assert_eq!(ev[1]["messageId"], "msg-2");
    assert_eq!(ev[6]["result"]["agentwire"]["seq"], 5);
    assert!(ev[6].get("outcome").is_none());
}

#[test]
fn a_component_waiting_is_an_interrupt_naming_the_seq_it_stopped_at() {
    let log = [
        env(1, turn()),
        env(2, call("c1", Some("picker"), json!({"k": 1}))),
    ];
    let mut enc = agui();
    let ev = events(&mut enc, &log);
    assert_eq!(
        types(&ev),
        [
            "STEP_STARTED",
            "TOOL_CALL_START",
            "TOOL_CALL_ARGS",
            "TOOL_CALL_END",
            "STEP_FINISHED",
            "RUN_FINISHED"
        ]
    );
    let outcome = &ev[5]["outcome"];
    assert_eq!(outcome["type"], "interrupt");
    assert_eq!(outcome["interrupts"][0]["id"], "component:c1@2");
    assert_eq!(outcome["interrupts"][0]["toolCallId"], "c1");
    assert_eq!(AgUi::interrupt("c1@2"), Some(("c1", 2)));
    assert!(enc.ended());
}

#[test]
fn a_frontend_tool_ends_the_response_pending_with_the_models_arguments() {
    let log = [
        env(1, turn()),
        env(
            2,
            call("tc1", Some(crate::tools::FRONTEND), json!({"city": "Oslo"})),
        ),
    ];
    let ev = events(&mut agui(), &log);
    assert_eq!(ev[1]["toolCallName"], "guarded");
    assert_eq!(ev[2]["delta"], r#"{"city":"Oslo"}"#);
    let finished = ev.last().unwrap();
    assert_eq!(
        finished["outcome"],
        json!({"type": "success", "pendingToolCallIds": ["tc1"]})
    );
}

#[test]
fn the_response_to_a_tool_message_goes_on_without_echoing_it() {
    let log = [
        env(1, turn()),
        env(2, call("tc1", Some(crate::tools::FRONTEND), json!({}))),
        env(3, response("tc1", json!("sunny"))),
        env(4, turn()),
        env(5, print("Weather: sunny")),
        env(6, end(RunEndReason::Completed)),
    ];
    // The client that sent the result: from where its response stopped.
    let enc = agui().knowing(["tc1".to_owned()], ["tc1".to_owned()]);
    let ev = going_on(enc, 2, &["tc1"], &log);
    assert_eq!(
        types(&ev),
        [
            "STEP_STARTED",
            "TEXT_MESSAGE_START",
            "TEXT_MESSAGE_CONTENT",
            "TEXT_MESSAGE_END",
            "STEP_FINISHED",
            "RUN_FINISHED"
        ]
    );
    // Another client (a rejoin) is told the result.
    let ev = events(&mut agui(), &log);
    let result = ev.iter().find(|e| e["type"] == "TOOL_CALL_RESULT").unwrap();
    assert_eq!(result["content"], "sunny");
    assert_eq!(result["toolCallId"], "tc1");
}

#[test]
fn an_interrupt_outweighs_a_pending_frontend_tool() {
    let log = [
        env(1, turn()),
        env(2, call("tc1", Some(crate::tools::FRONTEND), json!({}))),
        env(3, call("c2", Some("picker"), json!({}))),
    ];
    let ev = events(&mut agui(), &log);
    let outcome = &ev.last().unwrap()["outcome"];
    assert_eq!(outcome["type"], "interrupt");
    assert_eq!(outcome["interrupts"].as_array().unwrap().len(), 1);
}

#[test]
fn a_failed_run_is_a_run_error_with_its_message() {
    let log = [
        env(1, turn()),
        env(2, print("par")),
        env(
            3,
            EventKind::Error {
                message: "the model failed".into(),
                error_code: crate::protocol::ErrorCode::ToolExecutionError,
                details: None,
                recoverable: true,
            },
        ),
        env(4, end(RunEndReason::Error)),
    ];
    let ev = events(&mut agui(), &log);
    let last = ev.last().unwrap();
    assert_eq!(last["type"], "RUN_ERROR");
    assert_eq!(last["message"], "the model failed");
    assert_eq!(last["code"], "error");
}

fn think(text: &str) -> EventKind {
    EventKind::Reasoning {
        agent: "a".into(),
        content: text.into(),
    }
}

#[test]
fn reasoning_is_a_reasoning_message_closed_before_the_answer() {
    let log = [
        env(1, turn()),
        env(2, think("Let me ")),
        env(3, think("see.")),
        env(4, print("Yes.")),
        env(5, end(RunEndReason::Completed)),
    ];
    let ev = events(&mut agui(), &log);
    assert_eq!(
        types(&ev),
        [
            "STEP_STARTED",
            "REASONING_START",
            "REASONING_MESSAGE_START",
            "REASONING_MESSAGE_CONTENT",
            "REASONING_MESSAGE_CONTENT",
            "REASONING_MESSAGE_END",
            "REASONING_END",
            "TEXT_MESSAGE_START",
            "TEXT_MESSAGE_CONTENT",
            "TEXT_MESSAGE_END",
            "STEP_FINISHED",
            "RUN_FINISHED"
        ]
    );
    assert_eq!(ev[2]["role"], "reasoning");
    assert_eq!(ev[3]["messageId"], "reasoning-2");
    // Reasoning that is all a turn said is closed with the step.
    let log = [env(1, turn()), env(2, think("hmm")), env(3, turn())];
    let ev = events(&mut agui(), &log);
    assert_eq!(
        types(&ev)[4..7],
        ["REASONING_MESSAGE_END", "REASONING_END", "STEP_FINISHED"]
    );
}

#[test]
fn a_response_does_not_end_at_a_frontend_tool_while_a_server_tool_runs() {
    let mut enc = agui();
    let mut o = Vec::new();
    for e in [
        env(1, turn()),
        env(2, call("tc1", Some(crate::tools::FRONTEND), json!({}))),
        env(3, call("s1", None, json!({}))),
    ] {
        enc.encode(&e, "", &mut o);
    }
    assert!(!enc.waiting(), "the server tool's result is still to come");
    enc.encode(&env(4, response("s1", json!("done"))), "", &mut o);
    assert!(enc.waiting());
}

#[test]
fn what_the_run_input_holds_is_not_sent_again() {
    // The client answered tc1 and holds both calls (and s1's result); the
    // response goes on after tc1's call.
    let log = [
        env(1, turn()),
        env(2, call("tc1", Some(crate::tools::FRONTEND), json!({}))),
        env(3, call("s1", None, json!({}))),
        env(4, response("s1", json!("done"))),
        env(5, response("tc1", json!("sunny"))),
        env(6, end(RunEndReason::Completed)),
    ];
    let held = || ["tc1".to_owned(), "s1".to_owned()];
    let ev = going_on(agui().knowing(held(), held()), 2, &["tc1"], &log);
    assert_eq!(types(&ev), ["RUN_FINISHED"]);
}
