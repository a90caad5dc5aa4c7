//! Agents nobody here wrote, behind agentwire over AG-UI (issue 37): a
//! Pydantic AI agent served by its own AG-UI adapter and a LangGraph graph
//! served by `ag-ui-langgraph` (`examples/ag-ui`, offline, on scripted
//! models), driven through agentwire's native WebSocket; then the real
//! binary killed mid-run and started again.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use uuid::Uuid;

use crate::continued::{kill, log_until_complete, spawn_server, with_agent};
use crate::support::*;

/// One of `examples/ag-ui`'s servers, on a free port: its child process
/// (killed when dropped) and its URL.
pub async fn peer(script: &str) -> (tokio::process::Child, String) {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples/ag-ui");
    let mut child = tokio::process::Command::new(dir.join(".venv/bin/python"))
        .arg(dir.join(script))
        .arg("0")
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let ready = tokio::time::timeout(Duration::from_secs(60), async {
        loop {
            let line = lines.next_line().await.unwrap().expect("the peer exited");
            if let Some(url) = line.strip_prefix("ready ") {
                return url.trim_end_matches('/').to_owned();
            }
        }
    })
    .await
    .expect("the peer printed ready");
    (child, ready)
}

fn agent(id: &str, url: &str, extra: &str) -> String {
    format!("id: {id}\nag_ui:\n  url: {url}\n{extra}")
}

async fn with_peers() -> (Server, Vec<tokio::process::Child>) {
    let (pyd, pyd_url) = peer("pydantic_agent.py").await;
    let (lg, lg_url) = peer("langgraph_agent.py").await;
    let server = Server::start_with(Opts {
        agents: vec![
            ("pyd.yaml".into(), agent("pyd", &format!("{pyd_url}/"), "")),
            (
                "lg.yaml".into(),
                agent("lg", &format!("{lg_url}/"), "  history: new\n"),
            ),
            (
                "lg_outcome.yaml".into(),
                agent(
                    "lg_outcome",
                    &format!("{lg_url}/outcome"),
                    "  history: new\n",
                ),
            ),
        ],
        ..Default::default()
    })
    .await;
    (server, vec![pyd, lg])
}

fn of<'a>(msgs: &'a [Value], ty: &str) -> Vec<&'a Value> {
    msgs.iter().filter(|m| m["type"] == ty).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(ag_ui_peer), ignore = "needs examples/ag-ui/.venv (see build.rs)")]
async fn pydantic_ai_and_langgraph_agents_answer_call_tools_and_ask_through_agentwire() {
    let (server, _peers) = with_peers().await;
    let mut c = server.client().await;
    for agent in ["pyd", "lg"] {
        // Text, then a backend tool of theirs, in one chat.
        let chat = Uuid::new_v4();
        c.start_with(chat, agent, "hello there").await;
        let msgs = c.until_complete(chat).await;
        assert!(
            last_text(&msgs).contains("You said: hello there"),
            "{agent}: {msgs:#?}"
        );
        assert!(of(&msgs, "chat.print").len() > 2, "{agent}: streamed");
        c.say(chat, "weather in Oslo").await;
        let msgs = c.until_complete(chat).await;
        let call = of(&msgs, "chat.tool_call")[0];
        assert_eq!(call["tool_name"], "get_weather", "{agent}");
        assert_eq!(call["payload"]["city"], "Oslo", "{agent}");
        let result = of(&msgs, "chat.tool_response")[0];
        assert_eq!(result["corr"], call["corr"], "{agent}");
        assert!(
            last_text(&msgs).contains("sunny in Oslo"),
            "{agent}: {msgs:#?}"
        );
        assert_eq!(msgs.last().unwrap()["reason"], "completed");
        // A third turn: the agent still answers (its history is consistent).
        c.say(chat, "thanks").await;
        let msgs = c.until_complete(chat).await;
        assert!(
            last_text(&msgs).contains("You said: thanks"),
            "{agent}: {msgs:#?}"
        );
    }

    // An attached image goes up as AG-UI's image part; both take it.
    for agent in ["pyd", "lg"] {
        let chat = Uuid::new_v4();
        let png = crate::attachments::png();
        let image =
            crate::attachments::upload(server.addr, chat, "cat.png", "image/png", png).await;
        c.send(
            json!({"type": "chat.start", "chat_id": chat, "agent": agent,
            "message": "look at this", "attachments": [{"file_id": image}]}),
        )
        .await;
        let msgs = c.until_complete(chat).await;
        assert!(
            last_text(&msgs).contains("look at this"),
            "{agent}: {msgs:#?}"
        );
        assert_eq!(msgs.last().unwrap()["reason"], "completed");
    }

    // Pydantic AI's tool that needs approval: an approval on the wire.
    for (approved, expect) in [
        (true, "Done: deleted /tmp/a.txt"),
        (false, "did not delete"),
    ] {
        let chat = Uuid::new_v4();
        c.start_with(chat, "pyd", "delete /tmp/a.txt").await;
        let gate = c
            .recv_until(|m| m["type"] == "chat.tool_call" && m["component_type"] == "approval")
            .await
            .pop()
            .unwrap();
        assert_eq!(gate["payload"]["tool_name"], "delete_file");
        assert_eq!(gate["payload"]["input"]["path"], "/tmp/a.txt");
        c.send(json!({"type": "inline_component.result", "chat_id": chat,
            "corr": gate["corr"], "data": {"approved": approved, "reason": "keep it"}}))
            .await;
        let msgs = c.until_complete(chat).await;
        assert!(last_text(&msgs).contains(expect), "{approved}: {msgs:#?}");
        // The call's result, from the run the answer resumed, is logged.
        let result = of(&msgs, "chat.tool_response")
            .into_iter()
            .find(|m| m["tool_name"] == "delete_file");
        assert!(result.is_some(), "{approved}: {msgs:#?}");
        assert_eq!(msgs.last().unwrap()["reason"], "completed");
    }

    // LangGraph's interrupt(), both as its default CUSTOM event and as
    // AG-UI's interrupt outcome: a choice on the wire, the answer resumes.
    for agent in ["lg", "lg_outcome"] {
        let chat = Uuid::new_v4();
        c.start_with(chat, agent, "book a table").await;
        let request = c
            .recv_until(|m| m["type"] == "chat.input_request")
            .await
            .pop()
            .unwrap();
        assert!(
            request["prompt"].as_str().unwrap().contains("Book a table"),
            "{request}"
        );
        assert_eq!(request["options"], json!(["yes", "no"]), "{request}");
        c.send(json!({"type": "user.input.submit", "chat_id": chat,
            "request_id": request["request_id"], "text": "yes"}))
            .await;
        let msgs = c.until_complete(chat).await;
        assert!(
            last_text(&msgs).contains("Booking confirmed. Your answer: yes"),
            "{agent}: {msgs:#?}"
        );
    }
}

/// The first envelope of `chat`'s log that `pred` picks.
async fn logged(addr: SocketAddr, chat: Uuid, pred: impl Fn(&Value) -> bool) -> Value {
    let mut c = Client::connect(&format!("ws://{addr}/v1/ws")).await;
    c.resume(chat, 0).await;
    c.recv_until(|m| pred(m)).await.pop().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(ag_ui_peer), ignore = "needs examples/ag-ui/.venv (see build.rs)")]
async fn a_killed_server_ends_a_cut_upstream_run_unless_idempotent_and_an_interrupt_waits_again() {
    let (_pyd, pyd_url) = peer("pydantic_agent.py").await;
    let (_lg, lg_url) = peer("langgraph_agent.py").await;
    for idempotent in [false, true] {
        let extra = if idempotent {
            "  idempotent: true\n"
        } else {
            ""
        };
        let dir = with_agent("pyd.yaml", &agent("pyd", &format!("{pyd_url}/"), extra));
        std::fs::write(
            dir.path().join("agents/lg.yaml"),
            agent("lg", &format!("{lg_url}/"), "  history: new\n"),
        )
        .unwrap();
        let (child, addr) = spawn_server(dir.path()).await;
        let chat = Uuid::new_v4();
        let mut c = Client::connect(&format!("ws://{addr}/v1/ws")).await;
        c.start_with(chat, "pyd", "slow").await;
        c.recv_until(|m| m["type"] == "chat.print").await;
        // And a LangGraph run waiting on its interrupt.
        let waiting = Uuid::new_v4();
        c.start_with(waiting, "lg", "book a table").await;
        c.recv_until(|m| m["type"] == "chat.input_request" && m["chat_id"] == waiting.to_string())
            .await;
        // And a Pydantic AI approval waiting.
        let gated = Uuid::new_v4();
        c.start_with(gated, "pyd", "delete /tmp/b.txt").await;
        c.recv_until(|m| m["component_type"] == "approval" && m["chat_id"] == gated.to_string())
            .await;
        kill(child).await;

        let (child, addr) = spawn_server(dir.path()).await;
        let log = log_until_complete(addr, chat).await;
        if idempotent {
            // The turn in flight dropped, the run asked again to its end.
            assert_eq!(of(&log, "chat.turn_discarded").len(), 1, "{log:#?}");
            assert!(last_text(&log).contains("word20"), "{log:#?}");
            assert_eq!(log.last().unwrap()["reason"], "completed");
        } else {
            let err = of(&log, "chat.error");
            assert_eq!(err.len(), 1, "{log:#?}");
            assert!(
                err[0]["message"]
                    .as_str()
                    .unwrap()
                    .contains("outcome of its run is unknown"),
                "{err:?}"
            );
            assert_eq!(log.last().unwrap()["reason"], "error");
        }
        // The interrupt waits again; its answer resumes LangGraph's run.
        let request = logged(addr, waiting, |m| m["type"] == "chat.input_request").await;
        let msgs = crate::continued::answer_after(
            addr,
            waiting,
            &request["seq"],
            json!({"type": "user.input.submit", "chat_id": waiting,
                "request_id": request["request_id"], "text": "no"}),
        )
        .await;
        assert!(
            last_text(&msgs).contains("Booking cancelled. Your answer: no"),
            "{msgs:#?}"
        );
        // The approval waits again; granted, the agent's call runs.
        let gate = logged(addr, gated, |m| m["component_type"] == "approval").await;
        let msgs = crate::continued::answer_after(
            addr,
            gated,
            &gate["seq"],
            json!({"type": "inline_component.result", "chat_id": gated,
                "corr": gate["corr"], "data": {"approved": true}}),
        )
        .await;
        assert!(
            last_text(&msgs).contains("Done: deleted /tmp/b.txt"),
            "{msgs:#?}"
        );
        kill(child).await;
    }
}
