//! Group chats against AG2 itself: each scenario of `tests/ag2/scenarios.json`
//! runs in AG2 (`tests/ag2/parity.py`: the `ag2` package from PyPI, pinned,
//! agents with custom reply functions and no model) and in agentwire (the
//! same replies as scripted members), and both must give the same speakers
//! in the same order and end the same way. `auto` selection asks the same
//! selector server (the script's) on both sides.

use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use uuid::Uuid;

use crate::providers::set_key;
use crate::support::*;

const DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/ag2");

/// A scenario as an agentwire agent file (YAML reads JSON).
fn agent_file(s: &Value, selector_url: &str) -> String {
    let scripted = |rules: &Value| {
        let rules: Vec<Value> = rules
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                let mut rule = r.clone();
                if let Some(tool) = r.get("call") {
                    rule["call"] = json!({"tool": tool, "input": {}});
                }
                rule
            })
            .collect();
        json!({"provider": "scripted", "script": {"rules": rules}})
    };
    let members: Vec<Value> = s["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| json!({"name": m["name"], "description": m["name"], "model": scripted(&m["rules"])}))
        .collect();
    let method = s["method"].as_str().unwrap();
    let mut group = json!({
        "speaker_selection": if method == "pattern" { "round_robin" } else { method },
        "max_rounds": s["max_rounds"],
        "members": members,
    });
    if let Some(marker) = s["termination"].as_str() {
        group["termination"] = json!({ "marker": marker });
    }
    if let Some(graph) = s.get("transitions") {
        group["allowed_or_disallowed_speaker_transitions"] = graph.clone();
        group["speaker_transitions_type"] = json!("allowed");
    }
    if s.get("selector").is_some() {
        group["selector"] = json!({"model": {"provider": "openai", "name": s["name"],
            "base_url": selector_url, "api_key_env": "AGENTWIRE_TEST_KEY"}});
    }
    if method == "pattern" {
        // AG2's DefaultPattern: its initial agent opens; its group after
        // work is `terminate` unless given.
        group["first"] = s["initial"].clone();
        let mut handoffs =
            json!({"after_work": s.get("after_work").unwrap_or(&json!("terminate"))});
        for key in ["after", "conditions", "context_conditions"] {
            if let Some(v) = s.get(key) {
                handoffs[key] = v.clone();
            }
        }
        group["handoffs"] = handoffs;
        if let Some(context) = s.get("context") {
            group["context_variables"] = context.clone();
        }
    }
    json!({"id": s["name"], "model": scripted(&json!([{"reply": "unused"}])), "group": group})
        .to_string()
}

/// agentwire's run of scenario `s`: the speakers, and `completed` or
/// `max_rounds`; a `manual` choice is answered from the scenario's answers.
async fn run(server: &Server, s: &Value) -> (Vec<String>, String) {
    let mut c = server.client().await;
    let chat = Uuid::new_v4();
    c.start_with(
        chat,
        s["name"].as_str().unwrap(),
        s["message"].as_str().unwrap(),
    )
    .await;
    let mut answers = s["answers"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter();
    let mut speakers = Vec::new();
    loop {
        let m = c.recv().await;
        match m["type"].as_str().unwrap() {
            "chat.select_speaker" if m["method"] != "continue" => {
                speakers.push(m["agent"].as_str().unwrap().to_owned());
            }
            "chat.input_request" => {
                assert_eq!(m["tool_name"], "select_speaker", "{m}");
                let text = answers.next().expect("an answer for each choice");
                c.send(json!({"type": "user.input.submit", "chat_id": chat,
                              "request_id": m["request_id"], "text": text}))
                    .await;
            }
            "chat.run_complete" => {
                let reason = m["reason"].as_str().unwrap().to_owned();
                assert!(
                    reason == "completed" || reason == "max_rounds",
                    "{}: {m}",
                    s["name"]
                );
                return (speakers, reason);
            }
            _ => {}
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(ag2_peer), ignore = "needs tests/ag2/.venv (see build.rs)")]
async fn group_chats_pick_the_speakers_ag2_picks_and_end_as_it_ends() {
    set_key();
    let scenarios: Vec<Value> =
        serde_json::from_str(&std::fs::read_to_string(format!("{DIR}/scenarios.json")).unwrap())
            .unwrap();
    // AG2's side, and the selector server both sides ask.
    let mut ag2 = tokio::process::Command::new(format!("{DIR}/.venv/bin/python"))
        .arg(format!("{DIR}/parity.py"))
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .expect("python in tests/ag2/.venv");
    let mut lines = BufReader::new(ag2.stdout.take().unwrap()).lines();
    let mut line = async || {
        tokio::time::timeout(Duration::from_secs(180), lines.next_line())
            .await
            .expect("AG2 answered in time")
            .unwrap()
            .expect("a line from parity.py")
    };
    let url: Value = serde_json::from_str(&line().await).unwrap();
    let url = url["selector_url"].as_str().unwrap().to_owned();
    let theirs: Value = serde_json::from_str(&line().await).unwrap();

    let agents: Vec<(String, String)> = scenarios
        .iter()
        .map(|s| {
            let name = s["name"].as_str().unwrap();
            (format!("{name}.yaml"), agent_file(s, &url))
        })
        .collect();
    let server = Server::start_with(Opts {
        agents,
        ..Default::default()
    })
    .await;
    let outcome = |v: &Value| {
        let speakers: Vec<String> = v["speakers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s.as_str().unwrap().to_owned())
            .collect();
        (speakers, v["end"].as_str().unwrap().to_owned())
    };
    for s in &scenarios {
        let name = s["name"].as_str().unwrap();
        let ours = run(&server, s).await;
        match &theirs[name] {
            // `random`: AG2's runs over its seeds, and ours with its own
            // seed: the same rules make the same conversation from the
            // same first pick.
            Value::Array(runs) => {
                let runs: Vec<_> = runs.iter().map(outcome).collect();
                let firsts: std::collections::BTreeSet<_> =
                    runs.iter().map(|r| r.0[0].clone()).collect();
                assert!(firsts.len() > 1, "{name}: AG2 drew {firsts:?}");
                let same = runs.iter().find(|r| r.0[0] == ours.0[0]);
                assert_eq!(
                    Some(&ours),
                    same,
                    "{name}: ours, then AG2's from the same first pick"
                );
            }
            other => assert_eq!(ours, outcome(other), "{name}: ours, then AG2's"),
        }
    }
    drop(ag2.stdin.take());
    let _ = ag2.wait().await;
}
