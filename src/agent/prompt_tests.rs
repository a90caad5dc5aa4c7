use super::*;
use crate::llm::ToolCall;

fn user(t: &str) -> Message {
    Message::user(t)
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

#[test]
fn seed_002s_tool_block_groups_tools_by_category() {
    let yaml = "id: a\nmodel: {provider: scripted, script: {rules: []}}\nsystem_prompt: Base.\ntools:\n  \
                - {name: query, description: Runs SQL., category: Data, builtin: progress}\n  \
                - {name: chart, description: Draws., category: Data, builtin: progress}\n  \
                - {name: ping, description: Pings., builtin: progress}\n";
    let agent = crate::agent::Agent::from_yaml(yaml, &crate::llm::http_client()).unwrap();
    let prompt = system_prompt(&agent, None, None, true, &definitions(&agent.tools, None));
    let data = prompt.find("## Data\n- query: Runs SQL.").expect(&prompt);
    let chart = prompt.find("- chart: Draws.").unwrap();
    let general = prompt.find("## General\n- ping: Pings.").expect(&prompt);
    assert!(data < chart && chart < general, "{prompt}");
    // Without categories, the flat list of before.
    let plain = crate::agent::Agent::from_yaml(
        "id: b\nmodel: {provider: scripted, script: {rules: []}}\ntools: [{name: ping, description: Pings., builtin: progress}]\n",
        &crate::llm::http_client(),
    )
    .unwrap();
    let prompt = system_prompt(&plain, None, None, true, &definitions(&plain.tools, None));
    assert!(prompt.contains("You can use these tools:\n- ping: Pings.") && !prompt.contains("##"));
}
