//! Nested chats (AG2's `register_nested_chats`): a member whose turn is
//! inner conversations with other agent files, logged in the same chat
//! under the member's name, summed up as its reply, and left out of what
//! the members read.

use serde_json::Value;
use uuid::Uuid;

use crate::group::{reason, server};
use crate::support::*;

const EDITORIAL: &str = include_str!("../../examples/agents/editorial.yaml");
const CRITIC: &str = include_str!("../../examples/agents/critic.yaml");
const PANEL: &str = include_str!("../../examples/agents/review-panel.yaml");

fn of_type<'a>(msgs: &'a [Value], kind: &str) -> Vec<&'a Value> {
    msgs.iter().filter(|m| m["type"] == kind).collect()
}

/// `(agent, method)` of every `chat.select_speaker` but a `continue`.
fn turns(msgs: &[Value]) -> Vec<(String, String)> {
    of_type(msgs, "chat.select_speaker")
        .iter()
        .filter(|m| m["method"] != "continue")
        .map(|m| {
            let s = |k: &str| m[k].as_str().unwrap_or_default().to_owned();
            (s("agent"), s("method"))
        })
        .collect()
}

fn texts(msgs: &[Value]) -> Vec<(String, String)> {
    of_type(msgs, "chat.text")
        .iter()
        .map(|m| {
            let s = |k: &str| m[k].as_str().unwrap_or_default().to_owned();
            (s("agent"), s("content"))
        })
        .collect()
}

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nested_member_holds_its_chats_and_replies_with_their_summary() {
    // `examples/agents/editorial.yaml` with its critic and panel, as shipped.
    let server = server(&[
        ("editorial", EDITORIAL.to_owned()),
        ("critic", CRITIC.to_owned()),
        ("review-panel", PANEL.to_owned()),
    ])
    .await;
    let mut c = server.client().await;
    let chat = Uuid::new_v4();
    c.start_with(chat, "editorial", "Write about resumable chats")
        .await;
    let msgs = c.until_complete(chat).await;
    assert_gap_free(&seqs(&msgs));
    assert_eq!(reason(&msgs), "max_rounds");
    assert_eq!(
        turns(&msgs),
        pairs(&[
            ("writer", "round_robin"),
            ("reviewer", "round_robin"),
            ("reviewer/critic", "nested"),
            ("reviewer/review-panel", "nested"),
            ("reviewer/chair", "round_robin"),
            ("reviewer/editor", "round_robin"),
        ])
    );
    // The opening messages: the last message of the conversation, then the
    // earlier chat's summary as carry-over.
    let opened: Vec<&str> = of_type(&msgs, "chat.select_speaker")
        .iter()
        .filter(|m| m["method"] == "nested")
        .map(|m| m["reason"].as_str().unwrap())
        .collect();
    assert_eq!(
        opened,
        [
            "Please critique: Draft: a chat backend should never lose a word.",
            "Weigh these notes: Notes: say why a word would be lost.",
        ]
    );
    let verdict = "Verdict: add one line on durability, then publish.";
    assert_eq!(
        texts(&msgs),
        pairs(&[
            ("user", "Write about resumable chats"),
            ("writer", "Draft: a chat backend should never lose a word."),
            ("reviewer/critic", "Notes: say why a word would be lost."),
            ("reviewer/chair", "The notes are fair."),
            ("reviewer/editor", verdict),
            ("reviewer", verdict),
        ])
    );
    // Usage per speaker, the nested ones by their path.
    let usage = of_type(&msgs, "chat.usage_summary")[0];
    for who in [
        "writer",
        "reviewer/critic",
        "reviewer/chair",
        "reviewer/editor",
    ] {
        assert!(
            usage["by_agent"][who]["total_tokens"].as_u64().unwrap() > 0,
            "{who}: {usage}"
        );
    }

    // The next run: the writer reads the reviewer's reply, and none of the
    // nested chats (the scripted writer answers the same; what it was sent
    // is the history the log rebuilds, checked below through a rejoin).
    c.say(chat, "Again").await;
    let again = c.until_complete(chat).await;
    assert_eq!(
        turns(&again)[..2],
        pairs(&[("writer", "round_robin"), ("reviewer", "round_robin")])
    );
    // A rejoin replays the nested chats like any envelope.
    let mut late = server.client().await;
    late.resume(chat, 0).await;
    let replay = late
        .recv_until(|m| m["type"] == "chat.resume_boundary")
        .await;
    assert_eq!(
        of_type(&replay, "chat.text")
            .iter()
            .filter(|m| m["agent"] == "reviewer/critic")
            .count(),
        2
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_read_a_nested_turn_as_its_reply_alone() {
    use crate::mock_llm::MockServer;
    use crate::providers::set_key;
    use crate::vendors::{OpenAiWire, Wire};
    set_key();
    let w = OpenAiWire;
    let llm = MockServer::start(vec![
        w.text(&["Draft one."], (3, 2)),
        w.text(&["Summary: tighten it."], (9, 3)),
        w.text(&["Draft two."], (3, 2)),
    ])
    .await;
    let model = format!(
        "{{provider: openai, name: m, base_url: \"{}/v1\", api_key_env: AGENTWIRE_TEST_KEY}}",
        llm.url()
    );
    let desk = format!(
        "id: desk\nmodel: {model}\ngroup:\n  max_rounds: 4\n  members:\n    \
         - {{name: writer, system_prompt: You write.}}\n    \
         - {{name: reviewer, nested: [{{agent: checker, summary: reflection_with_llm}}]}}\n"
    );
    // A nested agent with a tool: its call is its own, never the members'.
    let checker = "id: checker\nmodel: {provider: scripted, script: {rules: [{call: {tool: lookup, input: {steps: 1}}, then: \"Send me a draft to critique.\"}]}}\n\
                   tools: [{name: lookup, description: Look up, input_schema: {type: object, properties: {steps: {type: integer, minimum: 1}}, required: [steps]}, builtin: progress}]\n";
    let server = server(&[("desk", desk), ("checker", checker.to_owned())]).await;
    let mut c = server.client().await;
    let chat = Uuid::new_v4();
    c.start_with(chat, "desk", "Go").await;
    let msgs = c.until_complete(chat).await;
    assert_eq!(reason(&msgs), "max_rounds");
    // The reviewer's model summed the checker's chat up, with AG2's prompt,
    // reading the chat (the draft it was sent, the checker's answer).
    let requests = llm.requests();
    let summing = &requests[1].body["messages"];
    assert_eq!(
        summing[0]["content"],
        "Summarize the takeaway from the conversation. Do not add any introductory phrases."
    );
    let read = summing.to_string();
    assert!(
        read.contains("Draft one.") && read.contains("Send me a draft to critique."),
        "{read}"
    );
    let said = texts(&msgs);
    assert!(
        said.contains(&("reviewer".into(), "Summary: tighten it.".into())),
        "{said:?}"
    );
    // The writer's next turn reads the reviewer's reply, not the critic.
    let writer = requests[2].body["messages"].to_string();
    assert!(writer.contains("Summary: tighten it."), "{writer}");
    assert!(!writer.contains("Send me a draft"), "{writer}");
    assert!(!writer.contains("lookup"), "{writer}");
    let calls: Vec<&Value> = of_type(&msgs, "chat.tool_call");
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0]["agent"], "reviewer/checker");
    assert_eq!(
        of_type(&msgs, "chat.tool_response")[0]["agent"],
        "reviewer/checker"
    );
    assert!(
        of_type(&msgs, "chat.usage_summary")[0]["by_agent"]["reviewer"]["completion_tokens"]
            .as_u64()
            .unwrap()
            > 0
    );
}

/// A writer that hands the critic a slow job, and a reviewer nesting it.
const SLOW_DESK: &str = r#"id: desk
group:
  max_rounds: 3
  members:
    - name: writer
      model: {provider: scripted, script: {rules: [{reply: "slow: 60"}]}}
    - name: reviewer
      nested: [{agent: slow-critic}]
"#;

const SLOW_CRITIC: &str = r#"id: slow-critic
model:
  provider: scripted
  script:
    rules:
      - {prefix: "slow: ", arg: count, stream: {delay_ms: 20}}
      - reply: "?"
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nested_turn_cut_by_a_restart_runs_again_and_the_run_goes_on() {
    use crate::continued::{kill, log_until_complete, with_agent};
    let dir = with_agent("desk.yaml", SLOW_DESK);
    std::fs::write(dir.path().join("agents/slow-critic.yaml"), SLOW_CRITIC).unwrap();
    let url = database_url(dir.path()).await;
    let agents = dir.path().join("agents");
    let flags = ["--continue-runs-after-restart", "true"];
    let (child, addr) = spawn_agentwire(&url, &agents, &flags).await;
    let chat = Uuid::new_v4();
    let mut c = Client::connect(&format!("ws://{addr}/v1/ws")).await;
    c.start_with(chat, "desk", "Go").await;
    let mut seen = 0;
    while seen < 20 {
        let m = c.recv().await;
        if m["type"] == "chat.print" && m["agent"] == "reviewer/slow-critic" {
            seen += 1;
        }
    }
    kill(child).await;

    let (_child, addr) = spawn_agentwire(&url, &agents, &flags).await;
    let log = log_until_complete(addr, chat).await;
    assert_gap_free(&seqs(&log));
    let all: Vec<(String, String)> = of_type(&log, "chat.select_speaker")
        .iter()
        .map(|m| {
            let s = |k: &str| m[k].as_str().unwrap_or_default().to_owned();
            (s("agent"), s("method"))
        })
        .collect();
    // The reviewer's turn was cut inside its nested chat: it goes on
    // (`continue`) by holding the chat again from its start.
    assert_eq!(
        all,
        pairs(&[
            ("writer", "round_robin"),
            ("reviewer", "round_robin"),
            ("reviewer/slow-critic", "nested"),
            ("reviewer", "continue"),
            ("reviewer/slow-critic", "nested"),
        ])
    );
    let words: Vec<String> = (1..=60).map(|i| format!("w{i}")).collect();
    let reply = texts(&log).pop().unwrap();
    assert_eq!(reply, ("reviewer".to_owned(), words.join(" ")));
    assert_eq!(log.last().unwrap()["reason"], "max_rounds");
}
