use super::*;
use crate::llm::ToolCall;

fn user(t: &str) -> Message {
    Message::User { text: t.into() }
}

#[test]
fn the_budget_drops_the_oldest_turns_and_keeps_the_last() {
    let long = "x".repeat(400); // ~100 tokens
    let history = vec![
        user(&long),
        Message::Assistant {
            text: long.clone(),
            tool_calls: vec![],
        },
        user(&long),
        Message::Assistant {
            text: long.clone(),
            tool_calls: vec![ToolCall {
                id: "c1".into(),
                name: "t".into(),
                input: serde_json::json!({}),
            }],
        },
        Message::ToolResult {
            id: "c1".into(),
            name: "t".into(),
            content: long.clone(),
            is_error: false,
        },
        user("last"),
    ];
    assert_eq!(fit_budget(&history, 10_000, "sys").len(), 6);
    let cut = fit_budget(&history, 250, "sys");
    // Starts at a user message; the tool result never comes without its call.
    assert!(matches!(cut[0], Message::User { .. }));
    assert_eq!(cut.last(), history.last());
    assert!(cut.len() < history.len());
    assert_eq!(fit_budget(&history, 1, "sys"), vec![user("last")]);
}
