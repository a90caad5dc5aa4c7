use super::*;
use crate::templates::WIDGET_TOOL;

fn frames(log: &[Value]) -> (Vec<Value>, Waiting, bool) {
    let (mut waiting, mut broken) = (Waiting::new(), false);
    let mut out = Vec::new();
    for e in log {
        out.extend(encode(&e.to_string(), &mut waiting, &mut broken));
    }
    (out, waiting, broken)
}

#[test]
fn a_turn_becomes_content_then_message_complete() {
    let (out, _, broken) = frames(&[
        json!({"type": "chat.text", "agent": "user", "content": "hi"}),
        json!({"type": "chat.print", "agent": "a", "content": "Hel"}),
        json!({"type": "chat.text", "agent": "a", "content": "Hello"}),
        json!({"type": "chat.select_speaker", "agent": "a"}),
        json!({"type": "chat.run_complete", "reason": "completed"}),
    ]);
    assert!(!broken);
    assert_eq!(
        out,
        vec![
            json!({"type": "content", "data": {"content": "Hel"}}),
            json!({"type": "content", "data": {"content": "Hello"}}),
            json!({"type": "message_complete", "data": {"content": "Hello"}}),
            json!({"type": "complete", "data": {"reason": "completed"}}),
        ]
    );
}

#[test]
fn a_widget_waits_until_its_response_is_logged() {
    let widget = json!({"widget_type": "free_text", "stem": "Why?"});
    let call = json!({"type": "chat.tool_call", "tool_name": WIDGET_TOOL, "awaiting_response": true,
        "payload": widget, "corr": "w1"});
    let (out, waiting, _) = frames(std::slice::from_ref(&call));
    assert_eq!(out, vec![json!({"type": "widget", "data": widget})]);
    assert_eq!(waiting.get("w1"), Some(&widget));

    let answered = json!({"type": "chat.tool_response", "tool_name": WIDGET_TOOL, "corr": "w1",
        "content": {}, "success": true});
    let (out, waiting, _) = frames(&[call.clone(), answered]);
    assert_eq!(out.len(), 1);
    assert!(waiting.is_empty());

    // The end of the run forgets every open widget.
    let end = json!({"type": "chat.run_complete", "reason": "timeout"});
    let (_, waiting, _) = frames(&[call, end]);
    assert!(waiting.is_empty());
}

#[test]
fn an_unreadable_envelope_is_an_error_that_breaks_the_stream() {
    let (mut waiting, mut broken) = (Waiting::new(), false);
    let out = encode("{not json", &mut waiting, &mut broken);
    assert!(broken);
    assert_eq!(out, vec![unreadable()]);
    assert_eq!(out[0]["data"]["error_code"], "PERSISTENCE_ERROR");
}

#[test]
fn a_message_answers_a_widget() {
    let single = json!({"widget_type": "multiple_choice"});
    assert_eq!(answer_of(&single, "b"), json!({"answer": "b"}));
    assert_eq!(answer_of(&single, ""), json!({"skip": true}));
    let multiple = json!({"widget_config": {"allow_multiple": true}});
    assert_eq!(
        answer_of(&multiple, r#"["a","c"]"#),
        json!({"answer": ["a", "c"]})
    );
    // Not a JSON list: the text itself.
    assert_eq!(answer_of(&multiple, "a"), json!({"answer": "a"}));
}
