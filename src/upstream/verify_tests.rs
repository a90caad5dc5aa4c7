use serde_json::{Value, json};

use super::super::event::Event;
use super::Verifier;

fn run(events: &[Value]) -> Result<Vec<Event>, String> {
    let mut v = Verifier::default();
    let mut out = Vec::new();
    for e in events {
        out.extend(v.take(Event::parse(e)?)?);
    }
    Ok(out)
}

fn started() -> Value {
    json!({"type": "RUN_STARTED", "threadId": "t", "runId": "r"})
}

fn finished() -> Value {
    json!({"type": "RUN_FINISHED", "threadId": "t", "runId": "r"})
}

#[test]
fn a_well_formed_run_passes_whole() {
    let events = [
        started(),
        json!({"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"}),
        json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "Hi"}),
        json!({"type": "TEXT_MESSAGE_END", "messageId": "m"}),
        json!({"type": "TOOL_CALL_START", "toolCallId": "c", "toolCallName": "f"}),
        json!({"type": "TOOL_CALL_ARGS", "toolCallId": "c", "delta": "{}"}),
        json!({"type": "TOOL_CALL_END", "toolCallId": "c"}),
        json!({"type": "TOOL_CALL_RESULT", "toolCallId": "c", "messageId": "x", "content": "ok"}),
        json!({"type": "STEP_STARTED", "stepName": "s"}),
        json!({"type": "STEP_FINISHED", "stepName": "s"}),
        json!({"type": "MESSAGES_SNAPSHOT", "messages": []}),
        finished(),
    ];
    let out = run(&events).unwrap();
    assert_eq!(out.len(), events.len());
    assert_eq!(out[10], Event::Other("MESSAGES_SNAPSHOT".into()));
}

#[test]
fn chunks_expand_into_start_content_and_end() {
    let out = run(&[
        started(),
        json!({"type": "TEXT_MESSAGE_CHUNK", "messageId": "m", "delta": "a"}),
        json!({"type": "TEXT_MESSAGE_CHUNK", "delta": "b"}),
        json!({"type": "TOOL_CALL_CHUNK", "toolCallId": "c", "toolCallName": "f", "delta": "{"}),
        json!({"type": "TOOL_CALL_CHUNK", "delta": "}"}),
        finished(),
    ])
    .unwrap();
    let kinds: Vec<&str> = out.iter().map(Event::kind).collect();
    assert_eq!(
        kinds,
        [
            "RUN_STARTED",
            "TEXT_MESSAGE_START",
            "TEXT_MESSAGE_CONTENT",
            "TEXT_MESSAGE_CONTENT",
            "TEXT_MESSAGE_END",
            "TOOL_CALL_START",
            "TOOL_CALL_ARGS",
            "TOOL_CALL_ARGS",
            "TOOL_CALL_END",
            "RUN_FINISHED"
        ]
    );
}

#[test]
fn each_broken_rule_is_named() {
    let text = |t: &str| json!({"type": t, "messageId": "m", "delta": "x"});
    let cases: Vec<(Vec<Value>, &str)> = vec![
        (
            vec![text("TEXT_MESSAGE_START")],
            "First event must be 'RUN_STARTED'",
        ),
        (
            vec![started(), text("TEXT_MESSAGE_CONTENT")],
            "no active text message found with ID 'm'",
        ),
        (
            vec![
                started(),
                text("TEXT_MESSAGE_START"),
                text("TEXT_MESSAGE_START"),
            ],
            "already in progress",
        ),
        (
            vec![started(), text("TEXT_MESSAGE_START"), finished()],
            "while text messages are still active: m",
        ),
        (
            vec![
                started(),
                json!({"type": "TOOL_CALL_ARGS", "toolCallId": "c", "delta": "{}"}),
            ],
            "no active tool call found with ID 'c'",
        ),
        (
            vec![started(), json!({"type": "STEP_FINISHED", "stepName": "s"})],
            "no active step found with ID 's'",
        ),
        (
            vec![
                started(),
                json!({"type": "STEP_STARTED", "stepName": "s"}),
                finished(),
            ],
            "while steps are still active",
        ),
        (vec![started(), started()], "while a run is still active"),
        (
            vec![started(), finished(), text("TEXT_MESSAGE_START")],
            "already ended",
        ),
        (
            vec![
                started(),
                json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m"}),
            ],
            "without a string `delta`",
        ),
        (
            vec![
                started(),
                json!({"type": "RUN_FINISHED", "outcome": {"type": "interrupt", "interrupts": []}}),
            ],
            "no `interrupts`",
        ),
        (
            vec![started(), json!({"type": "TOOL_CALL_CHUNK", "delta": "{"})],
            "must name its `toolCallId`",
        ),
        (
            vec![
                started(),
                json!({"type": "TEXT_MESSAGE_CHUNK", "delta": "a"}),
            ],
            "must name its `messageId`",
        ),
    ];
    for (events, expect) in cases {
        let err = run(&events).expect_err(expect);
        assert!(err.contains(expect), "{err:?} should say {expect:?}");
    }
}

#[test]
fn an_event_that_ends_nothing_leaves_a_chunked_message_open() {
    let out = run(&[
        started(),
        json!({"type": "TEXT_MESSAGE_CHUNK", "messageId": "m", "delta": "a"}),
        json!({"type": "RAW", "event": {}}),
        json!({"type": "REASONING_MESSAGE_CHUNK", "messageId": "z", "delta": "hm"}),
        json!({"type": "TEXT_MESSAGE_CHUNK", "delta": "b"}),
        finished(),
    ])
    .unwrap();
    let ends = out
        .iter()
        .filter(|e| e.kind() == "TEXT_MESSAGE_END")
        .count();
    assert_eq!(ends, 1, "{out:?}");
}

#[test]
fn open_items_are_bounded() {
    let mut events = vec![started()];
    events.extend(
        (0..300).map(|i| json!({"type": "TEXT_MESSAGE_START", "messageId": format!("m{i}")})),
    );
    let err = run(&events).unwrap_err();
    assert!(
        err.contains("256 text messages are in progress already"),
        "{err}"
    );
}

#[test]
fn an_interrupt_outcome_and_usage_are_read() {
    let out = run(&[
        started(),
        json!({"type": "RUN_FINISHED", "threadId": "t", "runId": "r",
            "result": {"usage": {"inputTokens": 12, "outputTokens": 5}},
            "outcome": {"type": "interrupt", "interrupts": [
                {"id": "i1", "reason": "tool_approval", "toolCallId": "c", "message": "OK?"}]}}),
    ])
    .unwrap();
    let Event::RunFinished(done) = &out[1] else {
        panic!("{out:?}")
    };
    assert_eq!(done.interrupts[0].id, "i1");
    assert_eq!(done.interrupts[0].tool_call_id.as_deref(), Some("c"));
    assert_eq!(done.usage.unwrap().prompt_tokens, 12);
    assert_eq!(done.usage.unwrap().completion_tokens, 5);
}
