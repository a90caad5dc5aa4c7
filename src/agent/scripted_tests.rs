use super::*;
use crate::agent::definition::Script;

fn script() -> Script {
    serde_saphyr::from_str(
        r#"
rules:
  - prefix: "ask: "
    call: {tool: ask_user, input: {prompt: "{arg}"}}
    then: "You answered: {result} ({result_chars})"
  - prefix: "think: "
    think: "Pondering {arg} carefully"
    reply: "It is {arg}."
  - prefix: "n: "
    arg: count
    max: 5
    stream: {delay_ms: 0}
  - reply: "You said: {text}"
"#,
    )
    .unwrap()
}

async fn collect(p: &ScriptedProvider, messages: Vec<Message>) -> Vec<StreamEvent> {
    p.stream_chat(ChatRequest {
        messages,
        ..ChatRequest::default()
    })
    .await
    .unwrap()
    .collect()
    .await
}

fn text_of(events: &[StreamEvent]) -> String {
    events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::ContentDelta(t) => Some(t.as_str()),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn answers_by_rule() {
    let p = ScriptedProvider::new(script());
    let user = |t: &str| vec![Message::user(t)];

    let events = collect(&p, user("hello there")).await;
    assert_eq!(text_of(&events), "You said: hello there");
    assert!(
        events
            .iter()
            .filter(|e| matches!(e, StreamEvent::ContentDelta(_)))
            .count()
            > 1
    );
    assert!(matches!(
        events.last(),
        Some(StreamEvent::MessageComplete { stop: StopReason::EndTurn, usage }) if usage.completion_tokens == 4
    ));

    let events = collect(&p, user("n: 3")).await;
    assert_eq!(text_of(&events), "w1 w2 w3");
    // Beyond `max`, or not a number: the rule does not match.
    assert_eq!(text_of(&collect(&p, user("n: 6")).await), "You said: n: 6");
    assert_eq!(text_of(&collect(&p, user("n: x")).await), "You said: n: x");

    let events = collect(&p, user("ask: Your name?")).await;
    let StreamEvent::ToolUseStart { id, name, .. } = &events[1] else {
        panic!("{events:?}")
    };
    assert_eq!(name, "ask_user");
    assert_eq!(
        events[2],
        StreamEvent::ToolInputDelta {
            index: 0,
            json: r#"{"prompt":"Your name?"}"#.into()
        }
    );

    let mut history = user("ask: Your name?");
    history.push(Message::ToolResult {
        id: id.clone(),
        name: name.clone(),
        content: "Ada".into(),
        is_error: false,
    });
    assert_eq!(
        text_of(&collect(&p, history).await),
        "You answered: Ada (3)"
    );
}

#[tokio::test]
async fn a_rule_may_think_before_it_answers() {
    let p = ScriptedProvider::new(script());
    let events = collect(&p, vec![Message::user("think: 42")]).await;
    let thinking: String = events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::ThinkingDelta(t) => Some(t.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(thinking, "Pondering 42 carefully");
    // All of it before the answer, which it does not change.
    let first_text = events
        .iter()
        .position(|e| matches!(e, StreamEvent::ContentDelta(_)))
        .unwrap();
    assert!(
        events[first_text..]
            .iter()
            .all(|e| !matches!(e, StreamEvent::ThinkingDelta(_)))
    );
    assert_eq!(text_of(&events), "It is 42.");
    assert!(matches!(
        events.last(),
        Some(StreamEvent::MessageComplete { usage, .. }) if usage.completion_tokens == 6
    ));
}
