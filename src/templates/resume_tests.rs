use std::collections::HashMap;
use std::time::Duration;

use serde_json::{Value, json};

use super::*;
use crate::protocol::{ErrorCode, EventKind};
use crate::templates::{Template, TemplateSpec};

/// Two items: a message and a static question, then a generated question
/// and a free text; feedback on.
const WALK: &str = r#"
provide_feedback: true
skills:
  - id: capital
    stem: "Ask for a capital"
items:
  - id: one
    contents:
      - id: hello
        widget_type: message
        stem: "Hello."
      - id: france
        widget_type: multiple_choice
        stem: "Capital of France?"
        options: [London, Paris]
        correct_answer: Paris
  - id: two
    contents:
      - id: gen
        widget_type: multiple_choice
        is_templated: true
        skill: capital
      - id: why
        widget_type: free_text
        stem: "Why?"
        required: false
        skippable: true
"#;

fn template() -> Template {
    let spec: TemplateSpec = serde_saphyr::from_str(WALK).unwrap();
    Template::from_spec(spec).unwrap()
}

fn progress(i: u32, id: &str) -> EventKind {
    EventKind::Progress {
        current_item: i,
        total_items: 2,
        item_id: id.into(),
        item_title: id.into(),
        enable_chat_input: false,
    }
}

fn text(s: &str) -> EventKind {
    EventKind::Text {
        agent: "quiz".into(),
        content: s.into(),
    }
}

fn shown(corr: &str, content_id: &str, extra: Value) -> EventKind {
    let mut payload = json!({"content_id": content_id, "stem": "?"});
    payload
        .as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    EventKind::ToolCall {
        tool_name: WIDGET_TOOL.into(),
        component_type: Some("multiple_choice".into()),
        awaiting_response: true,
        payload,
        corr: corr.into(),
        display: crate::protocol::Display::Inline,
        agent: None,
    }
}

fn answered(corr: &str, data: Value) -> EventKind {
    EventKind::ToolResponse {
        tool_name: WIDGET_TOOL.into(),
        content: data,
        success: true,
        corr: corr.into(),
        agent: None,
    }
}

fn error(kind: &str, content_id: &str) -> EventKind {
    EventKind::Error {
        message: "no".into(),
        error_code: ErrorCode::ToolExecutionError,
        details: Some(json!({"kind": kind, "content_id": content_id})),
        recoverable: true,
    }
}

fn trail(events: &[EventKind]) -> Trail {
    let mut t = Trail::default();
    for e in events {
        t.push(e, "2026-11-25T10:00:00Z");
    }
    t
}

fn keys() -> HashMap<String, Answer> {
    HashMap::from([
        ("france-1".to_owned(), Answer::One("Paris".into())),
        ("gen-1".to_owned(), Answer::One("Rome".into())),
    ])
}

fn place(events: &[EventKind]) -> Result<Place, String> {
    trail(events).place(&template(), &keys(), |_| Duration::from_secs(7))
}

#[test]
fn nothing_logged_starts_at_the_first_item_with_its_progress() {
    let p = place(&[]).unwrap();
    assert_eq!((p.item, p.progress_logged, p.content), (0, false, 0));
    assert!(p.waiting.is_none());
}

#[test]
fn a_message_said_is_not_said_again() {
    let p = place(&[progress(0, "one")]).unwrap();
    assert_eq!((p.item, p.progress_logged, p.content), (0, true, 0));
    let p = place(&[progress(0, "one"), text("Hello.")]).unwrap();
    assert_eq!(p.content, 1);
}

#[test]
fn a_waiting_widget_waits_again_as_it_was_shown() {
    let events = [
        progress(0, "one"),
        text("Hello."),
        shown(
            "france-1",
            "france",
            json!({"options": ["Paris", "London"]}),
        ),
    ];
    let p = place(&events).unwrap();
    assert_eq!(p.content, 1);
    let w = p.waiting.unwrap();
    assert_eq!(w.corr, "france-1");
    assert_eq!(w.content.id, "france");
    assert_eq!(w.payload["options"], json!(["Paris", "London"]));
    assert_eq!(w.waited, Duration::from_secs(7));
}

#[test]
fn a_generated_widget_is_rebuilt_from_its_payload_and_kept_key() {
    let events = [
        progress(1, "two"),
        shown(
            "gen-1",
            "gen",
            json!({"stem": "Capital of Italy?", "options": ["Rome", "Milan"]}),
        ),
    ];
    let w = place(&events).unwrap().waiting.unwrap();
    assert!(!w.content.spec.is_templated);
    assert_eq!(w.content.spec.stem.as_deref(), Some("Capital of Italy?"));
    assert_eq!(w.content.spec.options, ["Rome", "Milan"]);
    assert_eq!(
        w.content.spec.correct_answer,
        Some(Answer::One("Rome".into()))
    );
}

#[test]
fn answers_count_in_the_score_and_their_feedback_is_owed() {
    let mut events = vec![
        progress(0, "one"),
        text("Hello."),
        shown("france-1", "france", json!({})),
        answered("france-1", json!({"answer": "Paris"})),
    ];
    let p = place(&events).unwrap();
    assert_eq!((p.graded, p.correct), (1, 1));
    assert_eq!(p.content, 2, "the item's contents are done");
    let owed = p.feedback.unwrap();
    assert_eq!(owed.verdict, Some(true));
    assert_eq!(owed.data["answer"], "Paris");
    // The feedback logged: nothing owed, and the next item begins.
    events.push(text("Well done."));
    let p = place(&events).unwrap();
    assert!(p.feedback.is_none());
    assert_eq!(p.content, 2);
    // In the next item, a wrong answer to the generated question.
    events.extend([
        progress(1, "two"),
        shown("gen-1", "gen", json!({"options": ["Rome", "Milan"]})),
        answered("gen-1", json!({"answer": "Milan"})),
        error("feedback_error", "gen"),
    ]);
    let p = place(&events).unwrap();
    assert_eq!((p.item, p.content), (1, 1));
    assert_eq!((p.graded, p.correct), (2, 1));
    assert!(p.feedback.is_none(), "a feedback error is the feedback");
}

#[test]
fn a_skip_owes_no_feedback_and_a_render_error_skips_its_content() {
    let events = [
        progress(1, "two"),
        error("template_render_error", "gen"),
        shown("why-1", "why", json!({})),
        answered("why-1", json!({"skip": true})),
    ];
    let p = place(&events).unwrap();
    assert_eq!(p.content, 2);
    assert!(p.feedback.is_none());
    assert_eq!(p.graded, 0);
    let p = place(&events[..2]).unwrap();
    assert_eq!(p.content, 1, "the content after the one not generated");
}

#[test]
fn after_the_last_item_only_the_score_is_left_and_a_logged_score_ends_it() {
    let t = template();
    let events = [progress(2, "two")];
    let p = place(&events).unwrap();
    assert_eq!((p.item, p.progress_logged), (2, true));
    assert!(!trail(&events).scored(&t));
    assert!(trail(&[progress(2, "two"), text("You scored 1 of 2.")]).scored(&t));
}

#[test]
fn a_template_that_changed_under_the_walk_cannot_go_on() {
    let err = place(&[progress(0, "renamed")]).unwrap_err();
    assert!(err.contains("the template changed"), "{err}");
    let err = place(&[progress(0, "one"), shown("x-1", "gone", json!({}))]).unwrap_err();
    assert!(err.contains("no content `gone`"), "{err}");
}

#[test]
fn a_render_error_stops_the_walk_only_when_the_template_says_so() {
    let events = [progress(1, "two"), error("template_render_error", "gen")];
    let mut t = template();
    assert!(!trail(&events).stopped(&t));
    t.on_render_error = crate::templates::OnRenderError::Stop;
    assert!(trail(&events).stopped(&t));
}
