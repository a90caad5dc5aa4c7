//! A group's context variables and conditional handoffs (AG2's
//! `ContextVariables`, `OnCondition`, `OnContextCondition`): read in the
//! members' prompts, written by `update_context`, logged as the group's
//! `chat.agent_state`, and kept for the chat's next runs.

use std::collections::BTreeSet;

use serde_json::{Value, json};
use uuid::Uuid;

use crate::group::{offered, pairs, picks, reason, server};
use crate::mock_llm::MockServer;
use crate::providers::set_key;
use crate::support::*;
use crate::vendors::{OpenAiWire, Wire};

fn of_type<'a>(msgs: &'a [Value], kind: &str) -> Vec<&'a Value> {
    msgs.iter().filter(|m| m["type"] == kind).collect()
}

fn tool_names(body: &Value) -> BTreeSet<String> {
    offered(body).into_iter().collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn context_variables_fill_prompts_are_written_logged_and_kept_for_the_next_run() {
    set_key();
    let w = OpenAiWire;
    let llm = MockServer::start(vec![
        w.tools(
            None,
            &[(
                "c1",
                "update_context",
                r#"{"values": {"verified": true, "order_id": "A-17"}}"#,
            )],
            (5, 2),
        ),
        w.tools(
            None,
            &[("c2", "update_context", r#"{"values": {"bad name": 1}}"#)],
            (5, 2),
        ),
        w.text(&["Checked."], (5, 1)),
        w.text(&["Paid. TERMINATE"], (5, 2)),
        w.tools(None, &[("c3", "transfer_to_billing_1", "{}")], (5, 2)),
        w.text(&["Sent. TERMINATE"], (5, 2)),
    ])
    .await;
    let yaml = format!(
        "id: desk\nmodel: {{provider: openai, name: m, base_url: \"{}/v1\", api_key_env: AGENTWIRE_TEST_KEY}}\n\
         system_prompt: \"Customer verified: {{verified}}.\"\n\
         group:\n  max_rounds: 4\n  termination: {{marker: TERMINATE}}\n  \
         context_variables: {{verified: false, order_id: null}}\n  \
         handoffs:\n    conditions:\n      triage: [{{to: billing, condition: When the customer asks about an invoice, available: '${{verified}}'}}]\n  \
         members:\n    \
         - {{name: triage, system_prompt: \"Order {{order_id}}; {{unknown}} stays.\"}}\n    \
         - {{name: billing, system_prompt: \"Billing for order {{order_id}}.\"}}\n",
        llm.url()
    );
    let server = server(&[("desk", yaml)]).await;
    let mut c = server.client().await;
    let chat = Uuid::new_v4();
    c.start_with(chat, "desk", "Where is my order?").await;
    let first = c.until_complete(chat).await;
    assert_eq!(reason(&first), "completed");
    assert_gap_free(&seqs(&first));

    // The prompts read the context as it is at each turn; a placeholder of
    // no variable stays as written.
    let requests = llm.requests();
    let system = |i: usize| {
        requests[i].body["messages"][0]["content"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    assert!(
        system(0).contains("Customer verified: false.")
            && system(0).contains("Order null; {unknown} stays."),
        "{}",
        system(0)
    );
    assert!(
        system(3).contains("Customer verified: true.")
            && system(3).contains("Billing for order A-17."),
        "{}",
        system(3)
    );
    // `update_context` is offered; the `OnCondition` only while available.
    assert!(tool_names(&requests[0].body).contains("update_context"));
    assert!(!tool_names(&requests[0].body).contains("transfer_to_billing_1"));

    // Logged: the starting values once, then each write as a delta; a write
    // past the rules fails and changes nothing.
    let states = of_type(&first, "chat.agent_state");
    assert_eq!(states.len(), 2, "{states:?}");
    assert_eq!(states[0]["agent"], "desk");
    assert_eq!(
        states[0]["snapshot"],
        json!({"verified": false, "order_id": null})
    );
    let ops: BTreeSet<String> = states[1]["delta"]
        .as_array()
        .unwrap()
        .iter()
        .map(|op| op.to_string())
        .collect();
    assert_eq!(
        ops,
        BTreeSet::from([
            json!({"op": "add", "path": "/verified", "value": true}).to_string(),
            json!({"op": "add", "path": "/order_id", "value": "A-17"}).to_string(),
        ])
    );
    let refused = of_type(&first, "chat.tool_response")
        .into_iter()
        .find(|r| r["corr"] == "c2")
        .unwrap();
    assert_eq!(refused["success"], false, "{refused}");

    // The next run starts from the logged context (no new snapshot): the
    // condition is available now and hands over.
    c.say(chat, "And my invoice?").await;
    let second = c.until_complete(chat).await;
    assert_eq!(reason(&second), "completed");
    assert!(of_type(&second, "chat.agent_state").is_empty());
    assert!(tool_names(&llm.requests()[4].body).contains("transfer_to_billing_1"));
    assert_eq!(
        picks(&second),
        pairs(&[("triage", "round_robin"), ("billing", "handoff")])
    );
    let handed = of_type(&second, "chat.tool_response")
        .into_iter()
        .find(|r| r["corr"] == "c3")
        .unwrap();
    assert_eq!(handed["content"], json!({"handoff_to": "billing"}));

    // A client that rejoins from the start folds the same state.
    let mut late = server.client().await;
    late.resume(chat, 0).await;
    let replay = late
        .recv_until(|m| m["type"] == "chat.resume_boundary")
        .await;
    assert_eq!(of_type(&replay, "chat.agent_state").len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_condition_and_on_context_condition_hand_the_turn_over() {
    // `examples/agents/triage-desk.yaml` as shipped.
    let yaml = include_str!("../../examples/agents/triage-desk.yaml").to_owned();
    let server = server(&[("desk", yaml.replace("id: triage-desk", "id: desk"))]).await;

    // The model's choice: its `transfer_to_…` call hands to billing, whose
    // after-work target is the user.
    let mut c = server.client().await;
    let chat = Uuid::new_v4();
    c.start_with(chat, "desk", "invoice 42 please").await;
    let msgs = c.until_complete(chat).await;
    assert_eq!(reason(&msgs), "completed");
    assert_eq!(
        picks(&msgs),
        pairs(&[("triage", "round_robin"), ("billing", "handoff")])
    );
    let call = of_type(&msgs, "chat.tool_call")[0];
    assert_eq!(
        (&call["tool_name"], &call["agent"]),
        (&json!("transfer_to_billing_1"), &json!("triage"))
    );

    // A condition to `terminate` ends the conversation there.
    let bye = Uuid::new_v4();
    c.start_with(bye, "desk", "bye now").await;
    let msgs = c.until_complete(bye).await;
    assert_eq!(reason(&msgs), "completed");
    assert_eq!(picks(&msgs), pairs(&[("triage", "round_robin")]));

    // The context: triage writes the attempts; when the user comes back to
    // it, its context condition holds and hands to the manager without
    // asking triage's model.
    let angry = Uuid::new_v4();
    c.start_with(angry, "desk", "angry!").await;
    let first = c.until_complete(angry).await;
    assert_eq!(reason(&first), "completed");
    c.say(angry, "hello again").await;
    let second = c.until_complete(angry).await;
    assert_eq!(reason(&second), "completed");
    assert_eq!(
        picks(&second),
        pairs(&[("triage", "handoff"), ("manager", "handoff")])
    );
    let texts: Vec<(&str, &str)> = of_type(&second, "chat.text")
        .iter()
        .filter(|t| t["agent"] != "user")
        .map(|t| (t["agent"].as_str().unwrap(), t["content"].as_str().unwrap()))
        .collect();
    assert_eq!(texts, [("manager", "A manager here.")]);
    let call = of_type(&second, "chat.tool_call")[0];
    assert_eq!(call["tool_name"], "transfer_to_manager");
    assert_eq!(call["agent"], "triage");
    assert_eq!(call["payload"], json!({"expression": "${attempts} >= 2"}));
    let usage = of_type(&second, "chat.usage_summary")[0];
    assert!(usage["by_agent"].get("triage").is_none(), "{usage}");

    // A third message goes on with the manager (it handed to the user).
    c.say(angry, "thanks").await;
    let third = c.until_complete(angry).await;
    assert_eq!(picks(&third), pairs(&[("manager", "handoff")]));
}
