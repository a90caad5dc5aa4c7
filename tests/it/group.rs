//! Group chats (seed 001, AG2's group chat): several members take turns in
//! one chat, chosen by round robin, random, the selector model (auto) or the
//! user (manual), or by a handoff; every turn attributed on the wire and in
//! each SSE dialect, resumable like any chat.

use std::collections::BTreeSet;

use serde_json::{Value, json};
use uuid::Uuid;

use crate::mock_llm::MockServer;
use crate::providers::set_key;
use crate::sse::{all, open};
use crate::support::*;
use crate::vendors::{AnthropicWire, OpenAiWire, Wire};

/// A scripted model answering by `rules` (a YAML flow sequence).
fn scripted(rules: &str) -> String {
    format!("{{provider: scripted, script: {{rules: {rules}}}}}")
}

/// The test group `team`: a planner, a researcher with a tool, a writer that
/// ends the run with `TERMINATE` (unless `group`, lines added under
/// `group:`, sets another `termination`).
fn team(group: &str) -> String {
    let termination = if group.contains("termination:") {
        ""
    } else {
        "  termination: {marker: TERMINATE}"
    };
    format!(
        r#"id: team
name: Team
description: Plans, looks up, writes
model: {default}
max_turns: 4
group:
{termination}
{group}
  members:
    - name: planner
      description: Breaks the task into steps
      model: {planner}
    - name: researcher
      description: Looks facts up with its tool
      model: {researcher}
      tools:
        - name: lookup
          description: Look a fact up
          input_schema: {{type: object, properties: {{steps: {{type: integer, minimum: 1}}}}, required: [steps]}}
          builtin: progress
    - name: writer
      description: Writes the final answer
      model: {writer}
"#,
        default = scripted("[{reply: unused}]"),
        planner = scripted(
            r#"[{prefix: "slow ", arg: count, stream: {delay_ms: 40}},
                {prefix: "hand ", call: {tool: handoff_to, input: {agent: "{arg}"}}},
                {prefix: "quiet", reply: "Quiet plan."},
                {prefix: "break", reply: "Broken plan."},
                {reply: "Plan: look it up, then write."}]"#
        ),
        researcher = scripted(
            r#"[{prefix: "Plan", call: {tool: lookup, input: {steps: 1}}, then: "Found it ({result})."},
                {prefix: "Broken", call: {tool: lookup, input: {steps: 0}}},
                {reply: "Nothing to look up."}]"#
        ),
        writer = scripted(
            r#"[{prefix: "Quiet", reply: "Written quietly."}, {reply: "Final answer. TERMINATE"}]"#
        ),
    )
}

pub(crate) async fn server(agents: &[(&str, String)]) -> Server {
    Server::start_with(Opts {
        agents: agents
            .iter()
            .map(|(name, yaml)| (format!("{name}.yaml"), yaml.clone()))
            .collect(),
        ..Default::default()
    })
    .await
}

/// Runs one message of `team` on a new chat (or `chat`) to its end.
async fn talk(server: &Server, chat: Uuid, message: &str) -> Vec<Value> {
    let mut c = server.client().await;
    c.start_with(chat, "team", message).await;
    let msgs = c.until_complete(chat).await;
    assert_gap_free(&seqs(&msgs));
    msgs
}

/// `(agent, method)` of every `chat.select_speaker`.
fn speakers(msgs: &[Value]) -> Vec<(String, String)> {
    msgs.iter()
        .filter(|m| m["type"] == "chat.select_speaker")
        .map(|m| {
            (
                m["agent"].as_str().unwrap().to_owned(),
                m["method"].as_str().unwrap_or("-").to_owned(),
            )
        })
        .collect()
}

/// [`speakers`] less each member's `continue` turns: who was chosen, and how.
pub(crate) fn picks(msgs: &[Value]) -> Vec<(String, String)> {
    speakers(msgs)
        .into_iter()
        .filter(|(_, method)| method != "continue")
        .collect()
}

pub(crate) fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(a, m)| ((*a).to_owned(), (*m).to_owned()))
        .collect()
}

/// The names of the tools an OpenAI request offers.
pub(crate) fn offered(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .map(|t| {
            t.iter()
                .map(|t| t["function"]["name"].as_str().unwrap().to_owned())
                .collect()
        })
        .unwrap_or_default()
}

pub(crate) fn reason(msgs: &[Value]) -> &str {
    msgs.last().unwrap()["reason"].as_str().unwrap()
}

/// Every print, text, tool call and response carries the agent of the
/// `chat.select_speaker` that opened its turn.
fn assert_attributed(msgs: &[Value]) {
    let mut speaker = None;
    for m in msgs {
        match m["type"].as_str().unwrap() {
            "chat.select_speaker" => speaker = m["agent"].as_str(),
            "chat.print" | "chat.text" | "chat.tool_call" | "chat.tool_response"
                if m["agent"] != "user" =>
            {
                assert_eq!(m["agent"].as_str(), speaker, "{m}");
            }
            _ => {}
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn round_robin_takes_turns_in_order_and_attributes_every_event() {
    let server = server(&[("team", team(""))]).await;
    let msgs = talk(&server, Uuid::new_v4(), "Plan a trip").await;
    assert_eq!(
        speakers(&msgs),
        pairs(&[
            ("planner", "round_robin"),
            ("researcher", "round_robin"),
            ("researcher", "continue"),
            ("writer", "round_robin"),
        ])
    );
    assert_attributed(&msgs);
    let texts: Vec<(&str, &str)> = msgs
        .iter()
        .filter(|m| m["type"] == "chat.text")
        .map(|m| (m["agent"].as_str().unwrap(), m["content"].as_str().unwrap()))
        .collect();
    assert_eq!(
        texts,
        [
            ("user", "Plan a trip"),
            ("planner", "Plan: look it up, then write."),
            ("researcher", "Found it (completed 1 steps)."),
            ("writer", "Final answer. TERMINATE"),
        ]
    );
    let call = msgs.iter().find(|m| m["type"] == "chat.tool_call").unwrap();
    assert_eq!(
        (&call["agent"], &call["tool_name"]),
        (&json!("researcher"), &json!("lookup"))
    );
    // Usage per member, summing to the run's total.
    let usage = msgs
        .iter()
        .find(|m| m["type"] == "chat.usage_summary")
        .unwrap();
    let by = usage["by_agent"].as_object().unwrap();
    let members: BTreeSet<&str> = by.keys().map(String::as_str).collect();
    assert_eq!(members, BTreeSet::from(["planner", "researcher", "writer"]));
    assert!(by["researcher"]["completion_tokens"].as_u64().unwrap() > 0);
    assert_eq!(reason(&msgs), "completed");

    // The agent list names a group's members, in order.
    let (status, list) = http_json(&server, "GET", "/v1/agents", "").await;
    assert_eq!(status, 200);
    let team = list["agents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["id"] == "team")
        .unwrap();
    assert_eq!(
        team["members"][2],
        json!({"name": "writer", "description": "Writes the final answer"})
    );
    let demo = list["agents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["id"] == "demo")
        .unwrap();
    assert!(demo.get("members").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_rounds_ends_the_run_with_its_reason() {
    let server = server(&[("team", team("  max_rounds: 3"))]).await;
    let msgs = talk(&server, Uuid::new_v4(), "quiet please").await;
    assert_eq!(
        picks(&msgs),
        pairs(&[("planner", "round_robin"), ("researcher", "round_robin")])
    );
    assert_eq!(reason(&msgs), "max_rounds");
    assert!(
        !msgs.iter().any(|m| m["type"] == "chat.error"),
        "reaching max_rounds is AG2's ordinary stop, not an error"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_picks_are_reproducible_from_the_chats_seed() {
    let group =
        team("  speaker_selection: random\n  max_rounds: 7\n  termination: {marker: NEVER}");
    let a = server(&[("team", group.clone())]).await;
    let b = server(&[("team", group)]).await;
    // A fixed chat: its seed, and so its picks, are known.
    let chat = Uuid::from_u128(0x5eed_0000_0000_4000_8000_0000_0000_0001);
    let first = talk(&a, chat, "quiet please").await;
    let again = talk(&b, chat, "quiet please").await;
    let drawn = picks(&first);
    assert_eq!(drawn.len(), 6, "{drawn:?}");
    assert_eq!(drawn, picks(&again), "same chat, same seed, same picks");
    assert!(drawn.iter().all(|(_, m)| m == "random"));
    assert!(
        drawn.windows(2).all(|w| w[0].0 != w[1].0),
        "never the last speaker again: {drawn:?}"
    );
    let members: BTreeSet<&str> = drawn.iter().map(|(a, _)| a.as_str()).collect();
    assert_eq!(members.len(), 3, "{drawn:?}");
    // Each pick says its seed and draw, so the log explains it.
    let reasons: Vec<&str> = first
        .iter()
        .filter(|m| m["type"] == "chat.select_speaker" && m["method"] == "random")
        .map(|m| m["reason"].as_str().unwrap())
        .collect();
    assert!(
        reasons[0].starts_with("seed ") && reasons[5].ends_with("draw 6"),
        "{reasons:?}"
    );
    // Another chat has its own seed.
    let other = talk(&a, Uuid::new_v4(), "quiet please").await;
    let seeds = |m: &[Value]| {
        m.iter()
            .find(|m| m["type"] == "chat.select_speaker")
            .unwrap()["reason"]
            .clone()
    };
    assert_ne!(seeds(&first), seeds(&other));
    assert_eq!(reason(&first), "max_rounds");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_asks_the_selector_and_falls_back_to_round_robin() {
    let auto = |answer: &str, rounds: u32| {
        team(&format!(
            "  speaker_selection: auto\n  max_rounds: {rounds}\n  selector:\n    model: {}",
            scripted(&format!("[{{reply: \"{answer}\"}}]"))
        ))
    };
    let server = server(&[("team", auto("The writer, please.", 4))]).await;
    let msgs = talk(&server, Uuid::new_v4(), "go").await;
    assert_eq!(picks(&msgs), pairs(&[("writer", "auto")]));
    assert_eq!(reason(&msgs), "completed");
    // The selector's own calls count, under the group's id.
    let usage = msgs
        .iter()
        .find(|m| m["type"] == "chat.usage_summary")
        .unwrap();
    assert!(
        usage["by_agent"]["team"]["completion_tokens"]
            .as_u64()
            .unwrap()
            > 0,
        "{usage}"
    );

    let server = crate::group::server(&[("team", auto("nobody", 3))]).await;
    let msgs = talk(&server, Uuid::new_v4(), "quiet please").await;
    assert_eq!(
        picks(&msgs),
        pairs(&[("planner", "round_robin"), ("researcher", "round_robin")])
    );
    let why = msgs
        .iter()
        .find(|m| m["type"] == "chat.select_speaker")
        .unwrap()["reason"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        why.contains("`nobody`") && why.contains("round robin instead"),
        "{why}"
    );
    // Asked three times per pick (AG2's default two retries): three times
    // the selector's words, twice.
    let tokens = |msgs: &[Value]| {
        msgs.iter()
            .find(|m| m["type"] == "chat.usage_summary")
            .unwrap()["by_agent"]["team"]["completion_tokens"]
            .clone()
    };
    assert_eq!(tokens(&msgs), 6);
    // `max_retries_for_selecting_speaker: 0`: asked once per pick.
    let once = auto("nobody", 3).replace(
        "  speaker_selection: auto",
        "  speaker_selection: auto\n  max_retries_for_selecting_speaker: 0",
    );
    let server = crate::group::server(&[("team", once)]).await;
    let msgs = talk(&server, Uuid::new_v4(), "quiet please").await;
    assert_eq!(tokens(&msgs), 2);
}

/// `(agent, method, reason)` of every pick.
fn reasons(msgs: &[Value]) -> Vec<(String, String, String)> {
    msgs.iter()
        .filter(|m| m["type"] == "chat.select_speaker" && m["method"] != "continue")
        .map(|m| {
            let s = |k: &str| m[k].as_str().unwrap_or_default().to_owned();
            (s("agent"), s("method"), s("reason"))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transitions_say_who_may_follow_whom_under_every_method() {
    let quiet = "  termination: {marker: NEVER}";
    let graph = |rules: &str, kind: &str, rest: &str| {
        team(&format!(
            "{quiet}\n  allowed_or_disallowed_speaker_transitions: {rules}\n  speaker_transitions_type: {kind}\n{rest}"
        ))
    };
    // Allowed: the only member allowed next speaks without the method.
    let cycle = graph(
        "{planner: [writer], writer: [researcher], researcher: [planner]}",
        "allowed",
        "  max_rounds: 5",
    );
    // A member with no way on (writer) ends the conversation after it.
    let dead_end = graph("{planner: [writer]}", "allowed", "  max_rounds: 6");
    // Disallowed: everyone else (the speaker itself included) may follow.
    let skip = graph("{planner: [researcher]}", "disallowed", "  max_rounds: 4");
    // No repeats: `auto`'s selector naming the last speaker again names
    // nobody allowed; round robin among the allowed instead.
    let no_repeat = team(&format!(
        "{quiet}\n  max_rounds: 3\n  speaker_selection: auto\n  allow_repeat_speaker: false\n  selector:\n    model: {}",
        scripted("[{reply: \"planner\"}]")
    ));
    let server = server(&[
        ("cycle", cycle.replace("id: team", "id: cycle")),
        ("deadend", dead_end.replace("id: team", "id: deadend")),
        ("skip", skip.replace("id: team", "id: skip")),
        ("norepeat", no_repeat.replace("id: team", "id: norepeat")),
    ])
    .await;
    let run = |agent: &'static str| {
        let server = &server;
        async move {
            let mut c = server.client().await;
            let chat = Uuid::new_v4();
            c.start_with(chat, agent, "quiet please").await;
            c.until_complete(chat).await
        }
    };
    let msgs = run("cycle").await;
    let only = "the only member allowed to speak next";
    assert_eq!(
        reasons(&msgs),
        vec![
            ("planner".into(), "round_robin".into(), String::new()),
            ("writer".into(), "round_robin".into(), only.into()),
            ("researcher".into(), "round_robin".into(), only.into()),
            ("planner".into(), "round_robin".into(), only.into()),
        ]
    );
    assert_eq!(reason(&msgs), "max_rounds");
    // A dead end ends the run, not the conversation: the next message
    // starts afresh.
    let chat = Uuid::new_v4();
    let mut c = server.client().await;
    c.start_with(chat, "deadend", "quiet please").await;
    let msgs = c.until_complete(chat).await;
    assert_eq!(
        picks(&msgs),
        pairs(&[("planner", "round_robin"), ("writer", "round_robin")])
    );
    assert_eq!(reason(&msgs), "completed", "writer is a dead end");
    c.say(chat, "quiet please").await;
    assert_eq!(
        picks(&c.until_complete(chat).await),
        pairs(&[("planner", "round_robin"), ("writer", "round_robin")])
    );
    let msgs = run("skip").await;
    assert_eq!(
        picks(&msgs),
        pairs(&[
            ("planner", "round_robin"),
            ("writer", "round_robin"),
            ("planner", "round_robin")
        ])
    );
    let msgs = run("norepeat").await;
    let picked = reasons(&msgs);
    assert_eq!(
        (picked[0].0.as_str(), picked[0].1.as_str()),
        ("planner", "auto")
    );
    assert_eq!(
        (picked[1].0.as_str(), picked[1].1.as_str()),
        ("researcher", "round_robin")
    );
    assert!(picked[1].2.contains("`planner`"), "{picked:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn manual_with_no_choice_moves_to_the_next_member_and_offers_only_the_allowed() {
    let group = team(
        "  speaker_selection: manual\n  max_rounds: 3\n  termination: {marker: NEVER}\n  \
         allowed_or_disallowed_speaker_transitions: {planner: [researcher, writer], researcher: [planner, writer], writer: [planner]}\n  \
         speaker_transitions_type: allowed",
    );
    let server = server(&[("team", group)]).await;
    let chat = Uuid::new_v4();
    let mut c = server.client().await;
    c.start_with(chat, "team", "quiet please").await;
    let mut seen = Vec::new();
    let (id, options) = next_request(&mut c, &mut seen).await;
    assert_eq!(options, json!(["planner", "researcher", "writer"]));
    // The request names itself: a UI replaying the log knows the choice.
    assert_eq!(seen.last().unwrap()["tool_name"], "select_speaker");
    c.send(
        json!({"type": "user.input.submit", "chat_id": chat, "request_id": id, "text": "planner"}),
    )
    .await;
    // After the planner, only those it may hand to are offered; an empty
    // answer (over HTTP here) is no choice: the next allowed member speaks,
    // as AG2's `GroupChat.select_speaker` moves to its next agent.
    let (id, options) = next_request(&mut c, &mut seen).await;
    assert_eq!(options, json!(["researcher", "writer"]));
    let (status, body) = http_json(
        &server,
        "POST",
        &format!("/v1/chats/{chat}/inputs/{id}"),
        &json!({"text": ""}).to_string(),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    seen.extend(c.until_complete(chat).await);
    assert_eq!(
        reasons(&seen),
        vec![
            ("planner".into(), "manual".into(), String::new()),
            (
                "researcher".into(),
                "round_robin".into(),
                "no choice was made; round robin instead".into()
            ),
        ]
    );
}

/// Reads until an input request; its id and options.
async fn next_request(c: &mut Client, seen: &mut Vec<Value>) -> (String, Value) {
    let more = c.recv_until(|m| m["type"] == "chat.input_request").await;
    seen.extend(more);
    let r = seen.last().unwrap();
    (
        r["request_id"].as_str().unwrap().to_owned(),
        r["options"].clone(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn manual_selection_is_answered_over_the_websocket_and_http() {
    let server = server(&[("team", team("  speaker_selection: manual\n  max_rounds: 4"))]).await;
    let chat = Uuid::new_v4();
    let mut c = server.client().await;
    c.start_with(chat, "team", "quiet please").await;
    let mut seen = Vec::new();
    let (id, options) = next_request(&mut c, &mut seen).await;
    assert_eq!(options, json!(["planner", "researcher", "writer"]));
    // The request names itself: a UI replaying the log knows the choice.
    assert_eq!(seen.last().unwrap()["tool_name"], "select_speaker");
    c.send(
        json!({"type": "user.input.submit", "chat_id": chat, "request_id": id, "text": "planner"}),
    )
    .await;

    // Over HTTP: a name that is no member is refused and the request stays
    // open (nothing logged); its number picks.
    let (id, _) = next_request(&mut c, &mut seen).await;
    let answer = |id: &str, text: &str| {
        let path = format!("/v1/chats/{chat}/inputs/{id}");
        let body = json!({ "text": text }).to_string();
        let server = &server;
        async move { http_json(server, "POST", &path, &body).await }
    };
    let (status, refused) = answer(&id, "nobody").await;
    assert_eq!(status, 400, "{refused}");
    assert_eq!(refused["error"]["code"], "SCHEMA_VALIDATION_FAILED");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("planner, researcher, writer")
    );
    // Over the WebSocket the same: a chat.error for this connection only.
    c.send(json!({"type": "user.input.submit", "chat_id": chat, "request_id": id, "text": "4"}))
        .await;
    let err = c.expect("chat.error").await;
    assert_eq!(err["error_code"], "SCHEMA_VALIDATION_FAILED");
    assert!(err.get("seq").is_none());
    assert_eq!(answer(&id, "2").await.0, 200);
    let (id, _) = next_request(&mut c, &mut seen).await;
    c.send(
        json!({"type": "user.input.submit", "chat_id": chat, "request_id": id, "text": "Writer"}),
    )
    .await;
    seen.extend(c.until_complete(chat).await);
    assert_eq!(
        picks(&seen),
        pairs(&[
            ("planner", "manual"),
            ("researcher", "manual"),
            ("writer", "manual")
        ])
    );
    assert_eq!(reason(&seen), "completed");
    assert_attributed(&seen);
    // A pick is acknowledged, never a user's turn: the only user text is the
    // message, and the log has nothing of the refused answers.
    let users: Vec<&Value> = seen
        .iter()
        .filter(|m| m["type"] == "chat.text" && m["agent"] == "user")
        .collect();
    assert_eq!(users.len(), 1, "{users:?}");
    assert_eq!(
        seen.iter()
            .filter(|m| m["type"] == "chat.input_ack")
            .count(),
        3
    );
    assert_gap_free(&seqs(&seen));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handoff_overrides_the_method() {
    let server = server(&[
        ("team", team("  handoffs: {tool: true}")),
        (
            "relay",
            team("  handoffs: {after: {planner: writer, writer: user}}")
                .replace("id: team", "id: relay"),
        ),
    ])
    .await;
    // The planner's handoff_to(writer) beats round robin's researcher.
    let msgs = talk(&server, Uuid::new_v4(), "hand writer").await;
    assert_eq!(
        picks(&msgs),
        pairs(&[("planner", "round_robin"), ("writer", "handoff")])
    );
    let resp = msgs
        .iter()
        .find(|m| m["type"] == "chat.tool_response")
        .unwrap();
    assert_eq!(resp["content"], json!({"handoff_to": "writer"}));
    assert_eq!(resp["agent"], "planner");
    // A handoff to nobody is a tool error; the method goes on.
    let msgs = talk(&server, Uuid::new_v4(), "hand nobody").await;
    assert_eq!(
        picks(&msgs)[1],
        ("researcher".to_owned(), "round_robin".to_owned())
    );

    // Rules: after the planner the writer, after the writer the user.
    let mut c = server.client().await;
    let chat = Uuid::new_v4();
    c.start_with(chat, "relay", "quiet please").await;
    let msgs = c.until_complete(chat).await;
    assert_eq!(
        picks(&msgs),
        pairs(&[("planner", "round_robin"), ("writer", "after")])
    );
    assert_eq!(last_text(&msgs), "Written quietly.", "{msgs:#?}");
    assert_eq!(reason(&msgs), "completed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_members_tool_error_does_not_end_the_run() {
    let server = server(&[("team", team(""))]).await;
    let msgs = talk(&server, Uuid::new_v4(), "break it").await;
    let resp = msgs
        .iter()
        .find(|m| m["type"] == "chat.tool_response")
        .unwrap();
    assert_eq!(
        (&resp["success"], &resp["agent"]),
        (&json!(false), &json!("researcher"))
    );
    assert_eq!(
        picks(&msgs).last().unwrap(),
        &("writer".to_owned(), "round_robin".to_owned())
    );
    assert_eq!(reason(&msgs), "completed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_mid_turn_ends_the_group() {
    let auto = format!(
        "  speaker_selection: auto\n  selector:\n    model: {}",
        scripted("[{reply: planner}]")
    );
    let server = server(&[("team", team(&auto))]).await;
    let chat = Uuid::new_v4();
    let mut c = server.client().await;
    c.start_with(chat, "team", "slow 200").await;
    let mut msgs = c.recv_until(|m| m["type"] == "chat.print").await;
    c.send(json!({"type": "chat.cancel", "chat_id": chat}))
        .await;
    msgs.extend(c.until_complete(chat).await);
    assert_eq!(reason(&msgs), "cancelled");
    assert_eq!(picks(&msgs), pairs(&[("planner", "auto")]));
    // What was spent before the cancel still counts: the selector's call too.
    let usage = msgs
        .iter()
        .find(|m| m["type"] == "chat.usage_summary")
        .unwrap();
    assert_eq!(usage["by_agent"]["team"]["completion_tokens"], 1, "{usage}");
    let prints = msgs.iter().filter(|m| m["type"] == "chat.print").count();
    assert!(prints < 200, "the stream stopped: {prints}");
    // The chat takes the next message.
    c.say(chat, "quiet please").await;
    let more = c.until_complete(chat).await;
    // (The selector names the planner every time: the default ten rounds,
    // the message the first of them, as AG2 counts.)
    assert_eq!(reason(&more), "max_rounds");
    assert_eq!(
        picks(&more),
        vec![("planner".to_owned(), "auto".to_owned()); 9]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_resumes_mid_run_with_every_turn_attributed() {
    let server = server(&[("team", team("  speaker_selection: manual\n  max_rounds: 3"))]).await;
    let chat = Uuid::new_v4();
    let mut c = server.client().await;
    c.start_with(chat, "team", "quiet please").await;
    let mut seen = Vec::new();
    let (id, _) = next_request(&mut c, &mut seen).await;
    c.send(
        json!({"type": "user.input.submit", "chat_id": chat, "request_id": id, "text": "planner"}),
    )
    .await;
    let (id, _) = next_request(&mut c, &mut seen).await;
    // Drop everything after the planner's text, then the connection.
    let cut = seen
        .iter()
        .position(|m| m["type"] == "chat.text" && m["agent"] == "planner")
        .unwrap();
    let held: Vec<Value> = seen[..=cut].to_vec();
    let last = held.last().unwrap()["seq"].as_u64().unwrap();
    c.close().await;

    let mut c = server.client().await;
    c.resume(chat, last).await;
    let replayed = c.recv_until(|m| m["type"] == "chat.resume_boundary").await;
    let boundary = replayed.last().unwrap();
    assert_eq!(boundary["recovered"], true);
    let replayed = &replayed[..replayed.len() - 1];
    assert!(replayed.iter().all(|m| m["replay"] == true));
    assert_eq!(replayed[0]["seq"].as_u64().unwrap(), last + 1);
    // The waiting request is in the replay; answering it goes on.
    assert_eq!(replayed.last().unwrap()["request_id"], json!(id));
    c.send(
        json!({"type": "user.input.submit", "chat_id": chat, "request_id": id, "text": "writer"}),
    )
    .await;
    let live = c.until_complete(chat).await;
    let mut whole: Vec<Value> = held;
    whole.extend(replayed.iter().map(without_replay));
    whole.extend(live);
    assert_gap_free(&seqs(&whole));
    assert_eq!(
        picks(&whole),
        pairs(&[("planner", "manual"), ("writer", "manual")])
    );
    assert_eq!(reason(&whole), "max_rounds");
    assert_attributed(&whole);

    // A replay from the start is the same log, every agent intact.
    let mut c = server.client().await;
    c.resume(chat, 0).await;
    let all = c.recv_until(|m| m["type"] == "chat.resume_boundary").await;
    let all: Vec<Value> = all[..all.len() - 1].iter().map(without_replay).collect();
    assert_eq!(all, whole);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_sse_dialect_names_the_speaker() {
    let server = server(&[("team", team(""))]).await;
    let expected = ["planner", "researcher", "researcher", "writer"];

    // Seed 000: `message_start {turn, agent}`.
    let o = open(
        &server,
        "POST",
        "/v1/agent/chat",
        Some(json!({"message": "Plan a trip", "context_type": "trip", "agent": "team"})),
        None,
    )
    .await;
    assert_eq!(o.status, 200);
    let chat = o.headers["x-conversation-id"].to_str().unwrap().to_owned();
    let evs = all(o.events).await;
    let starts: Vec<(u64, &str)> = evs
        .iter()
        .filter(|e| e.event == "message_start")
        .map(|e| {
            (
                e.data["turn"].as_u64().unwrap(),
                e.data["agent"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        starts,
        [
            (0, "planner"),
            (1, "researcher"),
            (2, "researcher"),
            (3, "writer")
        ]
    );

    // Rejoined as seed 004's from inside the researcher's text: the turn
    // that was cut is still named.
    let turn = evs
        .iter()
        .position(|e| e.event == "message_start" && e.data["turn"] == 2)
        .unwrap();
    let cut = evs[turn..]
        .iter()
        .find(|e| e.event == "content_chunk")
        .unwrap();
    let path = format!("/v1/chats/{chat}/events?dialect=agent-host");
    let o = open(&server, "GET", &path, None, Some(&cut.id)).await;
    let rest = all(o.events).await;
    let first_complete = rest.iter().find(|e| e.event == "message_complete").unwrap();
    assert_eq!(first_complete.data["name"], "researcher", "{rest:?}");

    // The same chat rejoined as seed 003's threads: chunks name their member.
    let path = format!("/v1/chats/{chat}/events?dialect=threads");
    let o = open(&server, "GET", &path, None, Some("0")).await;
    let evs = all(o.events).await;
    let mut chunk_agents: Vec<&str> = evs
        .iter()
        .filter(|e| e.data["type"] == "chunk")
        .map(|e| e.data["agent"].as_str().unwrap())
        .collect();
    chunk_agents.dedup();
    assert_eq!(chunk_agents, ["planner", "researcher", "writer"]);

    // Seed 004: `message_added {role: assistant, name}` per turn, named completes.
    let o = open(
        &server,
        "POST",
        "/api/chat/send",
        Some(json!({"message": "Plan a trip", "agent": "team"})),
        None,
    )
    .await;
    let evs = all(o.events).await;
    let added: Vec<&str> = evs
        .iter()
        .filter(|e| e.event == "message_added" && e.data["role"] == "assistant")
        .map(|e| e.data["name"].as_str().unwrap())
        .collect();
    assert_eq!(added, expected);
    let completes: Vec<&str> = evs
        .iter()
        .filter(|e| e.event == "message_complete")
        .map(|e| e.data["name"].as_str().unwrap())
        .collect();
    assert_eq!(completes, ["planner", "researcher", "writer"]);
}

/// Two members on a real vendor wire: the second sees the first's turn under
/// its name (a prefix; OpenAI's `name` field too).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_member_sees_the_others_by_name_on_the_vendors_wire() {
    set_key();
    let wires: [&dyn Wire; 2] = [&OpenAiWire, &AnthropicWire];
    for w in wires {
        let llm = MockServer::start(vec![
            w.text(&["Plan ", "A"], (7, 2)),
            w.text(&["Done. ", "TERMINATE"], (11, 2)),
            w.text(&["Plan B"], (1, 1)),
            w.text(&["TERMINATE"], (1, 1)),
            w.text(&["TERMINATE"], (1, 1)),
        ])
        .await;
        let base = match w.provider() {
            "openai" => format!("{}/v1", llm.url()),
            _ => llm.url(),
        };
        let yaml = format!(
            "id: duo\nmodel: {{provider: {p}, name: m, base_url: \"{base}\", api_key_env: AGENTWIRE_TEST_KEY}}\n\
             system_prompt: You are a duo.\ncontext_prompts: {{trip: You are a travelling duo.}}\n\
             group:\n  termination: {{marker: TERMINATE}}\n  members:\n    \
             - {{name: planner, description: Plans, system_prompt: You plan.}}\n    \
             - {{name: writer, description: Writes, system_prompt: You write.}}\n",
            p = w.provider()
        );
        let server = server(&[("duo", yaml)]).await;
        let mut c = server.client().await;
        let chat = Uuid::new_v4();
        c.start_with(chat, "duo", "Go").await;
        let msgs = c.until_complete(chat).await;
        assert_eq!(reason(&msgs), "completed", "{}", w.provider());
        let requests = llm.requests();
        let body = &requests[1].body;
        let messages = body["messages"].as_array().unwrap();
        match w.provider() {
            "openai" => {
                assert_eq!(
                    messages.last().unwrap(),
                    &json!({"role": "user", "name": "planner", "content": "planner: Plan A"})
                );
                let system = messages[0]["content"].as_str().unwrap();
                assert!(
                    system.starts_with("You are a duo.\n\nYou write.")
                        && system.contains("You are `writer`"),
                    "{system}"
                );
                // The next message's run rebuilds the turns from the log: the
                // planner's own as the assistant's, the writer's by name.
                c.say(chat, "Again").await;
                assert_eq!(reason(&c.until_complete(chat).await), "completed");
                let again = &llm.requests()[2].body["messages"];
                assert_eq!(
                    again.as_array().unwrap()[1..],
                    [
                        json!({"role": "user", "content": "Go"}),
                        json!({"role": "assistant", "content": "Plan A"}),
                        json!({"role": "user", "name": "writer", "content": "writer: Done. TERMINATE"}),
                        json!({"role": "user", "content": "Again"}),
                    ]
                );
                // A run with a context_type reads the group's prompt for it.
                let o = open(
                    &server,
                    "POST",
                    "/v1/agent/chat",
                    Some(json!({"message": "Go", "context_type": "trip", "agent": "duo"})),
                    None,
                )
                .await;
                all(o.events).await;
                let system = llm.requests()[4].body["messages"][0]["content"].clone();
                assert!(
                    system
                        .as_str()
                        .unwrap()
                        .starts_with("You are a travelling duo.\n\nYou plan."),
                    "{system}"
                );
            }
            _ => {
                // Roles alternate: the user's turn and the planner's share one message.
                assert_eq!(messages.len(), 1, "{body}");
                assert_eq!(
                    messages[0]["content"],
                    json!([{"type": "text", "text": "Go"}, {"type": "text", "text": "planner: Plan A"}])
                );
            }
        }
        let usage = msgs
            .iter()
            .find(|m| m["type"] == "chat.usage_summary")
            .unwrap();
        assert_eq!(usage["by_agent"]["planner"]["prompt_tokens"], 7);
        assert_eq!(usage["by_agent"]["writer"]["prompt_tokens"], 11);
        assert_eq!(usage["total_tokens"], 22);
    }
}

/// `examples/agents/research-team.yaml` as shipped, its HTTP tool pointed at
/// a local stand-in of the example weather server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_example_team_plans_looks_up_and_writes() {
    let weather = MockServer::start(vec![crate::mock_llm::Reply::json(
        200,
        r#"{"city": "Lisbon", "temperature_c": 21, "conditions": "sunny"}"#,
    )])
    .await;
    let yaml = include_str!("../../examples/agents/research-team.yaml")
        .replace("http://127.0.0.1:9000", &weather.url());
    let server = server(&[("research-team", yaml)]).await;
    let mut c = server.client().await;
    let chat = Uuid::new_v4();
    c.start_with(chat, "research-team", "trip to Lisbon").await;
    let msgs = c.until_complete(chat).await;
    assert_eq!(
        picks(&msgs),
        pairs(&[
            ("planner", "round_robin"),
            ("researcher", "round_robin"),
            ("writer", "round_robin"),
        ])
    );
    assert_eq!(weather.requests()[0].body, json!({"city": "Lisbon"}));
    assert!(
        last_text(&msgs).starts_with("Here is your day"),
        "{}",
        last_text(&msgs)
    );
    assert!(last_text(&msgs).contains("sunny"));
    assert_eq!(reason(&msgs), "completed", "after the writer, the user");
    assert_attributed(&msgs);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_termination_pattern_ends_the_run_where_it_matches() {
    // AG2's usual `is_termination_msg` as a pattern: the marker at the
    // end of the words (the writer's).
    let group = team("  max_rounds: 7\n  termination: {pattern: 'TERMINATE\\s*$'}");
    let server = server(&[("team", group)]).await;
    let msgs = talk(&server, Uuid::new_v4(), "quiet please").await;
    assert_eq!(
        picks(&msgs),
        pairs(&[
            ("planner", "round_robin"),
            ("researcher", "round_robin"),
            ("writer", "round_robin"),
        ])
    );
    assert_eq!(last_text(&msgs), "Final answer. TERMINATE");
    assert_eq!(reason(&msgs), "completed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_work_targets_stay_terminate_select_or_go_back_to_the_user() {
    let quiet = "  termination: {marker: NEVER}\n  max_rounds: 4";
    let stay = team(&format!("{quiet}\n  handoffs: {{after_work: stay}}"));
    let ending = team(&format!(
        "{quiet}\n  handoffs: {{after_work: terminate, after: {{planner: researcher}}}}"
    ))
    .replace("id: team", "id: ending");
    let asking = team(&format!(
        "{quiet}\n  handoffs: {{after_work: user, after: {{planner: select}}}}"
    ))
    .replace("id: team", "id: asking");
    let server = server(&[("team", stay), ("ending", ending), ("asking", asking)]).await;
    let msgs = talk(&server, Uuid::new_v4(), "quiet please").await;
    assert_eq!(
        picks(&msgs),
        pairs(&[
            ("planner", "round_robin"),
            ("planner", "after"),
            ("planner", "after")
        ])
    );
    // Terminate: the run ends; the next message goes on after that member.
    let chat = Uuid::new_v4();
    let mut c = server.client().await;
    c.start_with(chat, "ending", "quiet please").await;
    let first = c.until_complete(chat).await;
    assert_eq!(
        picks(&first),
        pairs(&[("planner", "round_robin"), ("researcher", "after")])
    );
    assert_eq!(reason(&first), "completed");
    c.say(chat, "quiet please").await;
    let next = c.until_complete(chat).await;
    assert_eq!(picks(&next), pairs(&[("writer", "round_robin")]));
    // `select`: the method picks after the planner; back to the user after
    // the researcher, whose turn the next message is.
    let chat = Uuid::new_v4();
    c.start_with(chat, "asking", "quiet please").await;
    let first = c.until_complete(chat).await;
    assert_eq!(
        picks(&first),
        pairs(&[("planner", "round_robin"), ("researcher", "round_robin")])
    );
    c.say(chat, "quiet please").await;
    let next = c.until_complete(chat).await;
    assert_eq!(picks(&next), pairs(&[("researcher", "handoff")]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conversation_goes_on_where_the_group_stopped() {
    let one_each = team("  max_rounds: 2\n  termination: {marker: NEVER}");
    let handing =
        team("  max_rounds: 4\n  handoffs: {tool: true}").replace("id: team", "id: handing");
    let opening = team("  max_rounds: 2\n  first: planner\n  termination: {marker: NEVER}")
        .replace("id: team", "id: opening");
    let server = server(&[
        ("team", one_each),
        ("handing", handing),
        ("opening", opening),
    ])
    .await;
    // One member turn per message: each message goes on with the next.
    let chat = Uuid::new_v4();
    let mut c = server.client().await;
    c.start_with(chat, "team", "quiet please").await;
    let mut order = picks(&c.until_complete(chat).await);
    for _ in 0..3 {
        c.say(chat, "quiet please").await;
        order.extend(picks(&c.until_complete(chat).await));
    }
    assert_eq!(
        order,
        pairs(&[
            ("planner", "round_robin"),
            ("researcher", "round_robin"),
            ("writer", "round_robin"),
            ("planner", "round_robin"),
        ])
    );
    // Handed to the user: the user's answer goes back to that member.
    let chat = Uuid::new_v4();
    let mut c = server.client().await;
    c.start_with(chat, "handing", "hand user").await;
    let first = c.until_complete(chat).await;
    assert_eq!(picks(&first), pairs(&[("planner", "round_robin")]));
    assert_eq!(reason(&first), "completed");
    c.say(chat, "quiet please").await;
    let next = c.until_complete(chat).await;
    let back = reasons(&next);
    assert_eq!(
        (back[0].0.as_str(), back[0].1.as_str()),
        ("planner", "handoff")
    );
    assert!(
        back[0].2.contains("handed the conversation over"),
        "{back:?}"
    );
    // Handed to a member as the run ran out of rounds: the next message
    // goes to it; a refused handoff (no such member) hands over nothing.
    let once = team("  max_rounds: 2\n  handoffs: {tool: true}\n  termination: {marker: NEVER}")
        .replace("id: team", "id: once");
    let once_server = crate::group::server(&[("once", once)]).await;
    for (first, then) in [
        ("hand writer", ("writer", "handoff")),
        ("hand ghost", ("researcher", "round_robin")),
    ] {
        let chat = Uuid::new_v4();
        let mut c = once_server.client().await;
        c.start_with(chat, "once", first).await;
        assert_eq!(
            picks(&c.until_complete(chat).await),
            pairs(&[("planner", "round_robin")])
        );
        c.say(chat, "quiet please").await;
        assert_eq!(
            picks(&c.until_complete(chat).await),
            pairs(&[then]),
            "after `{first}`"
        );
    }
    // `first` opens every run instead.
    let chat = Uuid::new_v4();
    let mut c = server.client().await;
    c.start_with(chat, "opening", "quiet please").await;
    assert_eq!(
        picks(&c.until_complete(chat).await),
        pairs(&[("planner", "first")])
    );
    c.say(chat, "quiet please").await;
    assert_eq!(
        picks(&c.until_complete(chat).await),
        pairs(&[("planner", "first")])
    );
}

/// `examples/agents/support-desk.yaml` as shipped: triage opens, the
/// selector picks among those triage may hand to, and triage alone may
/// follow billing, so it speaks without the selector and wraps up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_example_support_desk_follows_its_graph() {
    let yaml = include_str!("../../examples/agents/support-desk.yaml").to_owned();
    let server = server(&[("support-desk", yaml)]).await;
    let mut c = server.client().await;
    let chat = Uuid::new_v4();
    c.start_with(chat, "support-desk", "my invoice is wrong")
        .await;
    let msgs = c.until_complete(chat).await;
    assert_eq!(
        reasons(&msgs),
        vec![
            ("triage".into(), "first".into(), String::new()),
            ("billing".into(), "auto".into(), String::new()),
            (
                "triage".into(),
                "auto".into(),
                "the only member allowed to speak next".into()
            ),
        ]
    );
    assert_eq!(last_text(&msgs), "Anything else? [done]");
    assert_eq!(reason(&msgs), "completed");
    assert_attributed(&msgs);
}

/// `examples/agents/research-team-local.yaml` as shipped, on a stand-in
/// OpenAI-compatible server: the planner opens (`first`) and hands off with
/// its tool, the researcher calls its HTTP tool, the selector (the same
/// model, `auto`) names the writer, whose TERMINATE ends the run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_local_example_team_runs_on_an_openai_compatible_server() {
    let w = OpenAiWire;
    let llm = MockServer::start(vec![
        w.tools(
            Some("Find the weather."),
            &[("h1", "handoff_to", r#"{"agent":"researcher"}"#)],
            (30, 5),
        ),
        w.tools(
            None,
            &[("g1", "get_weather", r#"{"city":"Lisbon"}"#)],
            (40, 5),
        ),
        w.text(&["Lisbon: 21 C, sunny."], (50, 6)),
        w.text(&["Everyone!"], (60, 1)),
        w.text(&["writer"], (61, 1)),
        w.text(&["Pack sunglasses. ", "TERMINATE"], (70, 4)),
    ])
    .await;
    let weather = MockServer::start(vec![crate::mock_llm::Reply::json(
        200,
        r#"{"city": "Lisbon", "temperature_c": 21, "conditions": "sunny"}"#,
    )])
    .await;
    let yaml = include_str!("../../examples/agents/research-team-local.yaml")
        .replace("http://127.0.0.1:11434/v1", &format!("{}/v1", llm.url()))
        .replace("http://127.0.0.1:9000", &weather.url());
    let server = server(&[("research-team-local", yaml)]).await;
    let mut c = server.client().await;
    let chat = Uuid::new_v4();
    c.start_with(chat, "research-team-local", "A day in Lisbon?")
        .await;
    let msgs = c.until_complete(chat).await;
    assert_eq!(
        picks(&msgs),
        pairs(&[
            ("planner", "first"),
            ("researcher", "handoff"),
            ("writer", "auto")
        ])
    );
    assert_eq!(reason(&msgs), "completed");
    assert_eq!(last_text(&msgs), "Pack sunglasses. TERMINATE");
    assert_attributed(&msgs);
    let requests = llm.requests();
    assert_eq!(requests.len(), 6);
    // Members are offered their own tools and handoff_to; the selector none.
    let tools = |i: usize| offered(&requests[i].body);
    assert_eq!(tools(0), ["handoff_to"]);
    assert_eq!(tools(1), ["get_weather", "handoff_to"]);
    assert!(tools(3).is_empty());
    // The selector reads the members and the conversation, with names; its
    // answer named nobody, so it was asked again, with its answer shown.
    let again = requests[4].body["messages"].as_array().unwrap();
    assert_eq!(again[again.len() - 2]["content"], "Everyone!");
    let selector = &requests[3].body["messages"];
    let system = selector[0]["content"].as_str().unwrap();
    assert!(
        system.contains("writer: Writes the final answer"),
        "{system}"
    );
    assert!(
        selector
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["name"] == "researcher" && m["content"].as_str().unwrap().contains("sunny")),
        "{selector}"
    );
    // The writer sees the researcher's finding under its name.
    let writer = requests[5].body["messages"].as_array().unwrap();
    assert!(
        writer.iter().any(|m| m
            == &json!({"role": "user", "name": "researcher", "content": "researcher: Lisbon: 21 C, sunny."})),
        "{writer:?}"
    );
    let usage = msgs
        .iter()
        .find(|m| m["type"] == "chat.usage_summary")
        .unwrap();
    assert_eq!(
        usage["by_agent"]["research-team-local"]["prompt_tokens"], 121,
        "the selector's two calls"
    );
    assert_eq!(usage["by_agent"]["researcher"]["prompt_tokens"], 90);
}
