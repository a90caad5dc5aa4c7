//! MCP servers as tool sources, against the real MCP server of
//! `examples/mcp` (the official Python SDK) over stdio and Streamable HTTP:
//! discovery, a call in the log, input refused before the call, `isError`,
//! progress, cancel mid-call, a crash mid-call (a tool error, the run goes
//! on, the server is started again; over HTTP, connected again when it is
//! back), a hung call's timeout, `list_changed`, allow/deny and an approval,
//! headers and a caller's own bearer over HTTP, an idempotent call cut by a
//! SIGKILL made again after the restart, and the shipped example. Then what
//! other hosts' users meet: a stdio server sees none of agentwire's secrets
//! and gets what `${env:NAME}` names; a server restarted while idle (its old
//! session answered 404 or 400) gets a new session; a server that answers
//! nothing is restarted; the server's instructions reach the model and a
//! task-only tool is left out; progress is not logged at `info`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};
use uuid::Uuid;

use crate::mock_llm::MockServer;
use crate::support::*;
use crate::vendors::{OpenAiWire, Wire};

/// The toolbox's tools agentwire takes: all but `research`, which runs
/// only as a task.
const TOOLS: u64 = 13;

fn toolbox() -> (PathBuf, PathBuf) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/mcp");
    (root.join(".venv/bin/python"), root.join("toolbox.py"))
}

/// The head of a scripted agent `tooled`, its rules to follow.
pub(crate) const SCRIPTED: &str =
    "id: tooled\nmodel:\n  provider: scripted\n  script:\n    rules:\n";

/// A scripted agent whose rules call the toolbox's tools (prefixed `box_`).
fn agent(server: &str, extra: &str) -> String {
    format!(
        r#"{SCRIPTED}      - exact: "add"
        call: {{tool: box_add, input: {{a: 2, b: 3}}}}
        then: "Sum: {{result}}"
      - exact: "bad add"
        call: {{tool: box_add, input: {{a: "two", b: 3}}}}
        then: "Sum: {{result}}"
      - exact: "fail"
        call: {{tool: box_fail, input: {{message: "no luck"}}}}
        then: "unreachable"
      - prefix: "count "
        arg: count
        call: {{tool: box_slow_count, input: {{n: "{{arg}}", delay: 0.05}}}}
        then: "Counted: {{result}}"
      - exact: "crash"
        call: {{tool: box_crash, input: {{}}}}
        then: "unreachable"
      - prefix: "grow "
        call: {{tool: box_add_tool, input: {{name: "{{arg}}"}}}}
        then: "Grew: {{result}}"
      - exact: "extra"
        call: {{tool: box_extra, input: {{}}}}
        then: "Extra: {{result}}"
      - exact: "who"
        call: {{tool: box_whoami, input: {{}}}}
        then: "Seen: {{result}}"
      - exact: "picture"
        call: {{tool: box_picture, input: {{}}}}
        then: "Picture: {{result}}"
      - exact: "hang"
        call: {{tool: box_hang, input: {{}}}}
        then: "unreachable"
      - prefix: "cancel "
        call: {{tool: box_wait_for_cancel, input: {{marker: "{{arg}}"}}}}
        then: "unreachable"
      - exact: "env"
        call: {{tool: box_environment, input: {{names: [OPENAI_API_KEY, ANTHROPIC_API_KEY, AGENTWIRE_JWT_SECRET, AGENTWIRE_MASTER_KEY, BOX_TOKEN, PATH]}}}}
        then: "Env: {{result}}"
      - exact: "research"
        call: {{tool: box_research, input: {{query: "x"}}}}
        then: "unreachable"
      - exact: "freeze"
        call: {{tool: box_freeze, input: {{}}}}
        then: "unreachable"
system_prompt: Test.
mcp_servers:
  - name: box
{server}
{extra}"#
    )
}

fn stdio() -> String {
    let (python, script) = toolbox();
    format!(
        "    stdio: {{command: \"{}\", args: [\"{}\"]}}",
        python.display(),
        script.display()
    )
}

/// The toolbox over Streamable HTTP, accepting these bearer tokens.
async fn http_toolbox(tokens: &str) -> (tokio::process::Child, std::net::SocketAddr) {
    http_toolbox_on(free_addr(), tokens).await
}

/// The toolbox over Streamable HTTP on `addr`.
async fn http_toolbox_on(
    addr: std::net::SocketAddr,
    tokens: &str,
) -> (tokio::process::Child, std::net::SocketAddr) {
    http_toolbox_with(addr, &[("MCP_REQUIRE_TOKEN", tokens)]).await
}

/// The toolbox over Streamable HTTP on `addr`, with `env`.
pub(crate) async fn http_toolbox_with(
    addr: std::net::SocketAddr,
    env: &[(&str, &str)],
) -> (tokio::process::Child, std::net::SocketAddr) {
    let (python, script) = toolbox();
    let child = tokio::process::Command::new(&python)
        .arg(&script)
        .args(["http", "127.0.0.1", &addr.port().to_string()])
        .envs(env.iter().copied())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    for _ in 0..200 {
        if tokio::net::TcpStream::connect(addr).await.is_ok() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    (child, addr)
}

pub(crate) async fn server_with(yaml: String) -> Server {
    let server = Server::start_with(Opts {
        agents: vec![("tooled.yaml".into(), yaml)],
        ..Default::default()
    })
    .await;
    ready(&server, 1).await;
    server
}

/// `/v1/agents`' view of the agent's MCP server (as `token`'s user).
pub(crate) async fn status_of(server: &Server, token: Option<&str>) -> Value {
    let auth = token.map(|t| format!("Bearer {t}"));
    let headers: Vec<(&str, &str)> = auth.iter().map(|a| ("authorization", a.as_str())).collect();
    let (code, body) = http_request(server.addr, "GET", "/v1/agents", &headers, "").await;
    assert_eq!(code, 200, "{body}");
    let list: Value = serde_json::from_str(&body).unwrap();
    let agent = list["agents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["id"] == "tooled")
        .cloned()
        .unwrap();
    agent["mcp_servers"][0].clone()
}

/// `/v1/agents`' view of the server, once it is ready with at least `tools`
/// tools after `restarts` restarts.
pub(crate) async fn ready_after(server: &Server, restarts: u64, tools: u64) -> Value {
    for _ in 0..300 {
        let status = status_of(server, None).await;
        if status["state"] == "ready"
            && status["restarts"].as_u64() >= Some(restarts)
            && status["tools"].as_u64() >= Some(tools)
        {
            return status;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the MCP server did not become ready");
}

pub(crate) async fn ready(server: &Server, tools: u64) -> Value {
    ready_after(server, 0, tools).await
}

pub(crate) async fn run(server: &Server, text: &str) -> Vec<Value> {
    let mut c = server.client().await;
    let chat = Uuid::new_v4();
    c.start_with(chat, "tooled", text).await;
    c.until_complete(chat).await
}

pub(crate) fn last_text(msgs: &[Value]) -> String {
    msgs.iter()
        .rev()
        .find(|m| m["type"] == "chat.text" && m["agent"] != "user")
        .map(|m| m["content"].as_str().unwrap().to_owned())
        .unwrap_or_default()
}

/// The run's one tool response: a failure whose text says `why`.
pub(crate) fn failed_with(msgs: &[Value], why: &str) {
    let response = one(msgs, "chat.tool_response");
    assert_eq!(response["success"], false, "{response}");
    let text = response["content"].as_str().unwrap_or_default();
    assert!(text.contains(why), "{response}");
}

pub(crate) fn one<'a>(msgs: &'a [Value], ty: &str) -> &'a Value {
    let found: Vec<_> = msgs.iter().filter(|m| m["type"] == ty).collect();
    assert_eq!(found.len(), 1, "one {ty} in {msgs:#?}");
    found[0]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(mcp_peer), ignore = "needs examples/mcp/.venv (see build.rs)")]
async fn a_stdio_servers_tools_are_discovered_called_and_logged() {
    let server = server_with(agent(&stdio(), "")).await;
    let status = ready(&server, TOOLS).await;
    assert_eq!(status["name"], "box");
    assert_eq!(status["restarts"], 0);

    let msgs = run(&server, "add").await;
    let call = one(&msgs, "chat.tool_call");
    assert_eq!(
        (
            &call["tool_name"],
            &call["component_type"],
            &call["payload"]
        ),
        (&json!("box_add"), &Value::Null, &json!({"a": 2, "b": 3}))
    );
    let response = one(&msgs, "chat.tool_response");
    assert_eq!(response["success"], true);
    assert_eq!(response["corr"], call["corr"]);
    // The server's whole result is logged; the model reads its text.
    assert_eq!(response["content"]["content"][0]["text"], "5.0");
    assert_eq!(last_text(&msgs), "Sum: 5.0");

    // Images are kept as files of the chat, named in the log (never their
    // bytes), not given to the model as text.
    let msgs = run(&server, "picture").await;
    let response = one(&msgs, "chat.tool_response");
    let image = &response["content"]["content"][0];
    assert_eq!(image["type"], "image");
    assert_eq!(image["mimeType"], "image/png");
    assert_eq!(image["name"], "box_picture-1.png");
    assert!(image.get("data").is_none(), "{image}");
    let file = image["file_id"].as_str().unwrap();
    let r = agentwire::llm::http_client()
        .get(format!("http://{}/v1/files/{file}", server.addr))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let png = r.bytes().await.unwrap();
    assert!(png.starts_with(b"\x89PNG"), "{png:?}");
    assert_eq!(image["size"], png.len());
    let text = last_text(&msgs);
    assert!(
        text.contains("an image (image/png)") && text.contains("a red pixel"),
        "{text}"
    );
    assert!(!text.contains("iVBOR"), "{text}");
}

/// A run started while its server is still making its first connection
/// (here a server that takes two seconds to start) waits for its tools
/// instead of running without them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(mcp_peer), ignore = "needs examples/mcp/.venv (see build.rs)")]
async fn a_run_started_before_its_server_is_up_waits_for_its_tools() {
    let (python, script) = toolbox();
    let slow = format!(
        "    stdio: {{command: \"/bin/sh\", args: [\"-c\", \"sleep 2; exec '{}' '{}'\"]}}",
        python.display(),
        script.display()
    );
    let server = Server::start_with(Opts {
        agents: vec![("tooled.yaml".into(), agent(&slow, ""))],
        ..Default::default()
    })
    .await;
    assert_eq!(status_of(&server, None).await["state"], "starting");
    let msgs = run(&server, "add").await;
    assert_eq!(
        one(&msgs, "chat.tool_response")["success"],
        true,
        "{msgs:#?}"
    );
    assert_eq!(last_text(&msgs), "Sum: 5.0");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(mcp_peer), ignore = "needs examples/mcp/.venv (see build.rs)")]
async fn bad_input_is_refused_before_the_call_and_is_error_is_a_tool_error() {
    let server = server_with(agent(&stdio(), "")).await;
    let msgs = run(&server, "bad add").await;
    let response = one(&msgs, "chat.tool_response");
    assert_eq!(response["success"], false);
    let why = response["content"].as_str().unwrap();
    assert!(why.starts_with("invalid input"), "{why}");

    let msgs = run(&server, "fail").await;
    let response = one(&msgs, "chat.tool_response");
    assert_eq!(response["success"], false);
    assert_eq!(response["content"]["isError"], true);
    let text = last_text(&msgs);
    assert!(
        text.starts_with("The tool box_fail failed: ") && text.ends_with("no luck"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(mcp_peer), ignore = "needs examples/mcp/.venv (see build.rs)")]
async fn progress_is_logged_and_a_cancel_stops_the_call() {
    let server = server_with(agent(&stdio(), "")).await;
    let msgs = run(&server, "count 4").await;
    let percents: Vec<f64> = msgs
        .iter()
        .filter(|m| m["type"] == "chat.tool_progress")
        .map(|m| m["progress_percent"].as_f64().unwrap())
        .collect();
    // Each step's report, in order (one that trails the answer by more
    // than a moment may be missed: never one out of order or twice).
    assert!(!percents.is_empty(), "{msgs:#?}");
    assert!(percents.windows(2).all(|w| w[0] < w[1]), "{percents:?}");
    assert!(
        percents
            .iter()
            .all(|p| [25.0, 50.0, 75.0, 100.0].contains(p)),
        "{percents:?}"
    );
    assert_eq!(last_text(&msgs), "Counted: counted 4");

    // A long count, cancelled after its first step: the run ends cancelled,
    // and the server is still there for the next call.
    let mut c = server.client().await;
    let chat = Uuid::new_v4();
    c.start_with(chat, "tooled", "count 200").await;
    c.recv_until(|m| m["type"] == "chat.tool_progress").await;
    c.send(json!({"type": "chat.cancel", "chat_id": chat}))
        .await;
    let msgs = c.until_complete(chat).await;
    assert_eq!(msgs.last().unwrap()["reason"], "cancelled");
    let msgs = run(&server, "add").await;
    assert_eq!(last_text(&msgs), "Sum: 5.0");
    let (_, list) = http_json(&server, "GET", "/v1/agents", "").await;
    assert_eq!(
        list["agents"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["id"] == "tooled")
            .unwrap()["mcp_servers"][0]["restarts"],
        0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(mcp_peer), ignore = "needs examples/mcp/.venv (see build.rs)")]
async fn a_crash_mid_call_is_a_tool_error_and_the_server_comes_back() {
    let server = server_with(agent(&stdio(), "")).await;
    let msgs = run(&server, "crash").await;
    failed_with(&msgs, "not connected");
    // The run went on: the model was told.
    assert!(
        last_text(&msgs).starts_with("The tool box_crash failed"),
        "{msgs:#?}"
    );
    assert_eq!(msgs.last().unwrap()["reason"], "completed");
    let status = ready_after(&server, 1, TOOLS).await;
    assert!(status.get("error").is_none(), "{status}");
    assert_eq!(last_text(&run(&server, "add").await), "Sum: 5.0");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(mcp_peer), ignore = "needs examples/mcp/.venv (see build.rs)")]
async fn a_changed_tool_list_is_listed_again() {
    let server = server_with(agent(&stdio(), "")).await;
    let before = ready(&server, TOOLS).await["tools"].as_u64().unwrap();
    // Before it exists, the model is told there is no such tool.
    let msgs = run(&server, "extra").await;
    assert!(
        last_text(&msgs).contains("there is no tool `box_extra`"),
        "{msgs:#?}"
    );
    assert_eq!(
        last_text(&run(&server, "grow extra").await),
        "Grew: added extra"
    );
    ready(&server, before + 1).await;
    assert_eq!(
        last_text(&run(&server, "extra").await),
        "Extra: hello from extra"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(mcp_peer), ignore = "needs examples/mcp/.venv (see build.rs)")]
async fn allow_deny_and_an_approval_gate_apply_to_mcp_tools() {
    let extra = "    deny: [crash]\n    tools:\n      add: {requires_approval: true}";
    let server = server_with(agent(&stdio(), extra)).await;
    assert_eq!(
        ready(&server, TOOLS).await["tools"],
        TOOLS,
        "the server lists them all (crash is denied to the model)"
    );
    assert!(last_text(&run(&server, "crash").await).contains("there is no tool `box_crash`"));

    let mut c = server.client().await;
    let chat = Uuid::new_v4();
    c.start_with(chat, "tooled", "add").await;
    let gate = c
        .recv_until(|m| m["type"] == "chat.tool_call" && m["component_type"] == "approval")
        .await
        .pop()
        .unwrap();
    assert_eq!(gate["payload"]["tool_name"], "box_add");
    c.send(json!({"type": "inline_component.result", "chat_id": chat, "corr": gate["corr"], "data": {"approved": true}}))
        .await;
    let msgs = c.until_complete(chat).await;
    assert_eq!(last_text(&msgs), "Sum: 5.0");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(mcp_peer), ignore = "needs examples/mcp/.venv (see build.rs)")]
async fn a_streamable_http_server_with_a_token() {
    let (mut child, addr) = http_toolbox("s3cret").await;
    let http = format!(
        "    http: {{url: \"http://{addr}/mcp\", headers: {{Authorization: \"Bearer s3cret\"}}}}"
    );
    let server = server_with(agent(&http, "")).await;
    ready(&server, TOOLS).await;
    assert_eq!(last_text(&run(&server, "add").await), "Sum: 5.0");
    assert_eq!(last_text(&run(&server, "who").await), "Seen: Bearer s3cret");
    let msgs = run(&server, "count 3").await;
    let reports = msgs
        .iter()
        .filter(|m| m["type"] == "chat.tool_progress")
        .count();
    assert!((1..=3).contains(&reports), "{msgs:#?}");

    // A wrong token: the server stays down, saying why; nothing else is hurt.
    let wrong = format!(
        "    http: {{url: \"http://{addr}/mcp\", headers: {{Authorization: \"Bearer nope\"}}}}"
    );
    let other = Server::start_with(Opts {
        agents: vec![("tooled.yaml".into(), agent(&wrong, ""))],
        ..Default::default()
    })
    .await;
    let mut status = Value::Null;
    for _ in 0..200 {
        let (_, list) = http_json(&other, "GET", "/v1/agents", "").await;
        status = list["agents"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["id"] == "tooled")
            .unwrap()["mcp_servers"][0]
            .clone();
        if status["state"] == "down" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(status["state"], "down", "{status}");
    assert!(
        status["error"].as_str().unwrap().contains("initialize"),
        "{status}"
    );
    assert!(last_text(&run(&other, "add").await).contains("there is no tool `box_add`"));
    child.kill().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(mcp_peer), ignore = "needs examples/mcp/.venv (see build.rs)")]
async fn a_hung_call_times_out_and_a_cancelled_one_is_cancelled_on_the_server() {
    let server = server_with(agent(&stdio(), "    timeout_seconds: 1")).await;
    let msgs = run(&server, "hang").await;
    failed_with(&msgs, "did not answer within 1 s");
    assert_eq!(
        msgs.last().unwrap()["reason"],
        "completed",
        "the run went on"
    );

    // The run cancelled mid-call: the server is told, and stops the tool.
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("marker");
    let mut c = server.client().await;
    let chat = Uuid::new_v4();
    c.start_with(chat, "tooled", &format!("cancel {}", marker.display()))
        .await;
    c.recv_until(|m| m["type"] == "chat.tool_call").await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    c.send(json!({"type": "chat.cancel", "chat_id": chat}))
        .await;
    assert_eq!(
        c.until_complete(chat).await.last().unwrap()["reason"],
        "cancelled"
    );
    // The server creates the file, then writes it: read until written.
    let mut written = String::new();
    for _ in 0..100 {
        written = std::fs::read_to_string(&marker).unwrap_or_default();
        if !written.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(written, "cancelled");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(mcp_peer), ignore = "needs examples/mcp/.venv (see build.rs)")]
async fn a_callers_bearer_is_forwarded_when_configured() {
    let ann = crate::auth::token("ann", 600, crate::auth::SECRET);
    let (mut child, addr) = http_toolbox(&format!("service,{ann}")).await;
    let http = format!(
        "    http: {{url: \"http://{addr}/mcp\", headers: {{Authorization: \"Bearer service\"}}, forward_bearer: true}}"
    );
    let server = Server::start_with(Opts {
        settings: agentwire::config::Settings {
            auth: Some(agentwire::config::AuthMode::Jwt),
            jwt_secret: Some(crate::auth::SECRET.into()),
            ..Default::default()
        },
        agents: vec![("tooled.yaml".into(), agent(&http, ""))],
    })
    .await;
    for _ in 0..200 {
        if status_of(&server, Some(&ann)).await["state"] == "ready" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut c = Client::connect(&format!("{}?access_token={ann}", server.ws_url())).await;
    let chat = Uuid::new_v4();
    c.start_with(chat, "tooled", "who").await;
    let msgs = c.until_complete(chat).await;
    assert_eq!(last_text(&msgs), format!("Seen: Bearer {ann}"));

    // A run with no caller's token (here: auth none) never borrows the
    // service's credentials for the call.
    let anonymous = Server::start_with(Opts {
        agents: vec![("tooled.yaml".into(), agent(&http, ""))],
        ..Default::default()
    })
    .await;
    ready(&anonymous, TOOLS).await;
    let msgs = run(&anonymous, "who").await;
    failed_with(&msgs, "the caller's token");
    child.kill().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(mcp_peer), ignore = "needs examples/mcp/.venv (see build.rs)")]
async fn the_shipped_example_works() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let yaml = include_str!("../../examples/agents/mcp-toolbox.yaml").replace(
        "examples/mcp/",
        &format!("{}/examples/mcp/", root.display()),
    );
    let server = Server::start_with(Opts {
        agents: vec![("mcp-toolbox.yaml".into(), yaml)],
        ..Default::default()
    })
    .await;
    let mut c = server.client().await;
    let chat = Uuid::new_v4();
    // The first run may come before the server is up: wait for it.
    for _ in 0..300 {
        let (_, list) = http_json(&server, "GET", "/v1/agents", "").await;
        if list["agents"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a["mcp_servers"][0]["state"] == "ready")
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    c.start_with(chat, "mcp-toolbox", "echo hello").await;
    assert_eq!(last_text(&c.until_complete(chat).await), "Echo: hello");
    c.say(chat, "count 2").await;
    let msgs = c.until_complete(chat).await;
    let reports = msgs
        .iter()
        .filter(|m| m["type"] == "chat.tool_progress")
        .count();
    assert!((1..=2).contains(&reports), "{msgs:#?}");
    assert_eq!(last_text(&msgs), "Done: counted 2");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(mcp_peer), ignore = "needs examples/mcp/.venv (see build.rs)")]
async fn an_idempotent_call_cut_by_a_kill_runs_again_after_the_restart() {
    let dir = tempfile::tempdir().unwrap();
    let agents = dir.path().join("agents");
    std::fs::create_dir_all(&agents).unwrap();
    let extra = "    tools:\n      slow_count: {idempotent: true}";
    std::fs::write(agents.join("tooled.yaml"), agent(&stdio(), extra)).unwrap();
    let db = database_url(dir.path()).await;
    let flags = ["--continue-runs-after-restart", "true"];
    let settled = |addr| async move {
        for _ in 0..300 {
            let (_, body) = http_get(addr, "/v1/agents", &[]).await;
            if body.contains("\"state\":\"ready\"") {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("the MCP server did not come up");
    };
    let (mut first, addr) = spawn_agentwire(&db, &agents, &flags).await;
    settled(addr).await;
    let mut c = Client::connect(&format!("ws://{addr}/v1/ws")).await;
    let chat = Uuid::new_v4();
    c.start_with(chat, "tooled", "count 40").await;
    c.recv_until(|m| m["type"] == "chat.tool_progress").await;
    first.start_kill().unwrap(); // SIGKILL, mid-call
    first.wait().await.unwrap();

    let (_second, addr) = spawn_agentwire(&db, &agents, &flags).await;
    let mut c = Client::connect(&format!("ws://{addr}/v1/ws")).await;
    c.resume(chat, 0).await;
    let log = c.until_complete(chat).await;
    let calls: Vec<_> = log
        .iter()
        .filter(|m| m["type"] == "chat.tool_call")
        .map(|m| m["corr"].clone())
        .collect();
    assert_eq!(
        calls.len(),
        2,
        "the call, then the same call again: {log:#?}"
    );
    assert_eq!(calls[0], calls[1]);
    assert_eq!(last_text(&log), "Counted: counted 40");
    assert_eq!(log.last().unwrap()["reason"], "completed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(mcp_peer), ignore = "needs examples/mcp/.venv (see build.rs)")]
async fn an_http_server_that_dies_mid_call_is_connected_again_when_it_is_back() {
    let (mut child, addr) = http_toolbox("s3cret").await;
    let http = format!(
        "    http: {{url: \"http://{addr}/mcp\", headers: {{Authorization: \"Bearer s3cret\"}}}}"
    );
    let server = server_with(agent(&http, "")).await;
    ready(&server, TOOLS).await;
    let msgs = run(&server, "crash").await;
    let response = one(&msgs, "chat.tool_response");
    assert_eq!(response["success"], false, "{response}");
    assert_eq!(
        msgs.last().unwrap()["reason"],
        "completed",
        "the run went on"
    );
    let _ = child.wait().await;
    // Back on the same address: connected again, its tools offered again.
    let (mut again, _) = http_toolbox_on(addr, "s3cret").await;
    let status = ready_after(&server, 1, TOOLS).await;
    assert_eq!(status["state"], "ready");
    assert_eq!(last_text(&run(&server, "add").await), "Sum: 5.0");
    again.kill().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(mcp_peer), ignore = "needs examples/mcp/.venv (see build.rs)")]
async fn a_server_written_as_claude_desktop_writes_it_works() {
    let (python, script) = toolbox();
    let yaml = agent(&stdio(), "").replace(
        &format!("mcp_servers:\n  - name: box\n{}\n", stdio()),
        &format!(
            "mcp_servers:\n  box:\n    command: \"{}\"\n    args: [\"{}\"]\n",
            python.display(),
            script.display()
        ),
    );
    assert!(yaml.contains("  box:\n    command:"), "{yaml}");
    let server = server_with(yaml).await;
    assert_eq!(last_text(&run(&server, "add").await), "Sum: 5.0");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(mcp_peer), ignore = "needs examples/mcp/.venv (see build.rs)")]
async fn an_http_server_restarted_while_idle_gets_a_new_session() {
    // The specification's answer to a session it does not know (the Python
    // SDK's), and the reference TypeScript server's.
    for unknown in ["404", "400"] {
        let addr = free_addr();
        let env = [("MCP_UNKNOWN_SESSION", unknown)];
        let (mut child, _) = http_toolbox_with(addr, &env).await;
        let http = format!("    http: {{url: \"http://{addr}/mcp\"}}");
        let server = server_with(agent(&http, "    timeout_seconds: 20")).await;
        ready(&server, TOOLS).await;
        assert_eq!(last_text(&run(&server, "add").await), "Sum: 5.0");
        child.kill().await.unwrap();
        let (mut again, _) = http_toolbox_with(addr, &env).await;
        let msgs = run(&server, "add").await;
        assert_eq!(last_text(&msgs), "Sum: 5.0", "{unknown}: {msgs:#?}");
        again.kill().await.unwrap();
    }
}

/// The real binary with the agent file `tooled` (`yaml`), `env` in its
/// environment and its log (`RUST_LOG` unset: the default) piped.
pub(crate) async fn agentwire_with_env(
    dir: &Path,
    yaml: String,
    env: &[(&str, &str)],
) -> (tokio::process::Child, std::net::SocketAddr) {
    let agents = dir.join("agents");
    std::fs::create_dir_all(&agents).unwrap();
    std::fs::write(agents.join("tooled.yaml"), yaml).unwrap();
    let db = database_url(dir).await;
    let env: Vec<(String, String)> = env
        .iter()
        .map(|(k, v)| ((*k).into(), (*v).into()))
        .collect();
    let (child, addr) = spawn_agentwire_with(&db, &agents, &[], |cmd| {
        cmd.envs(env)
            .env_remove("RUST_LOG")
            .stdout(std::process::Stdio::piped());
    })
    .await;
    for _ in 0..300 {
        let (_, body) = http_get(addr, "/v1/agents", &[]).await;
        if body.contains("\"state\":\"ready\"") {
            return (child, addr);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the MCP server did not come up");
}

/// A run of `text` on the binary at `addr`.
pub(crate) async fn run_at(addr: std::net::SocketAddr, text: &str) -> Vec<Value> {
    let mut c = Client::connect(&format!("ws://{addr}/v1/ws")).await;
    let chat = Uuid::new_v4();
    c.start_with(chat, "tooled", text).await;
    c.until_complete(chat).await
}

/// What agentwire's environment holds and a stdio server must not see (the
/// first four), and a token an agent file may name (`TEST_BOX_TOKEN`).
pub(crate) const SECRETS: [(&str, &str); 5] = [
    ("OPENAI_API_KEY", "sk-agentwire-only"),
    ("ANTHROPIC_API_KEY", "sk-ant-agentwire-only"),
    ("AGENTWIRE_JWT_SECRET", "a-jwt-secret-of-agentwire"),
    (
        "AGENTWIRE_MASTER_KEY",
        "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff",
    ),
    ("TEST_BOX_TOKEN", "box-token-1"),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(mcp_peer), ignore = "needs examples/mcp/.venv (see build.rs)")]
async fn a_stdio_server_gets_none_of_agentwires_secrets_and_env_can_name_one() {
    let (python, script) = toolbox();
    let server = format!(
        "    stdio: {{command: \"{}\", args: [\"{}\"], env: {{BOX_TOKEN: \"Bearer ${{env:TEST_BOX_TOKEN}}\"}}}}",
        python.display(),
        script.display()
    );
    let dir = tempfile::tempdir().unwrap();
    let (child, addr) = agentwire_with_env(dir.path(), agent(&server, ""), &SECRETS).await;
    let msgs = run_at(addr, "env").await;
    let response = one(&msgs, "chat.tool_response");
    let seen: Value =
        serde_json::from_str(response["content"]["content"][0]["text"].as_str().unwrap()).unwrap();
    let keys: Vec<String> = serde_json::from_value(seen["keys"].clone()).unwrap();
    let own = [("BOX_TOKEN", "Bearer box-token-1")];
    sees_only_its_own(&keys, |name| seen["values"][name].clone(), &own);
    assert_eq!(
        seen["values"]["PATH"].as_str(),
        std::env::var("PATH").ok().as_deref(),
        "inherited"
    );
    // The value a variable gave is never logged.
    let log = log_when_killed(child).await;
    assert!(!log.contains("box-token-1"), "{log}");
}

/// Checks the environment a server reported (its variables' names, and
/// `value` of a name): none of [`SECRETS`]' first four, each of `own` with
/// its value, and no other variable but the few a child inherits (and the
/// locale Python sets for itself).
pub(crate) fn sees_only_its_own(
    keys: &[String],
    value: impl Fn(&str) -> Value,
    own: &[(&str, &str)],
) {
    for (name, _) in &SECRETS[..4] {
        assert_eq!(value(name), Value::Null, "{name} reached the server");
    }
    for (name, expected) in own {
        assert_eq!(value(name), *expected, "{name}");
    }
    let inherited = [
        "HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER", "LC_CTYPE",
    ];
    for key in keys {
        assert!(
            inherited.contains(&key.as_str()) || own.iter().any(|(name, _)| name == key),
            "{key} reached the server: {keys:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(mcp_peer), ignore = "needs examples/mcp/.venv (see build.rs)")]
async fn progress_reports_are_not_logged_at_info() {
    let dir = tempfile::tempdir().unwrap();
    let (child, addr) = agentwire_with_env(dir.path(), agent(&stdio(), ""), &[]).await;
    let msgs = run_at(addr, "count 4").await;
    assert_eq!(last_text(&msgs), "Counted: counted 4");
    let log = log_when_killed(child).await;
    assert!(log.contains("MCP server ready"), "the log at info: {log}");
    let progress: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("INFO") && l.to_lowercase().contains("progress"))
        .collect();
    assert!(progress.is_empty(), "{progress:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(mcp_peer), ignore = "needs examples/mcp/.venv (see build.rs)")]
async fn a_server_that_answers_nothing_is_marked_down_and_started_again() {
    let server = server_with(agent(&stdio(), "    timeout_seconds: 1")).await;
    ready(&server, TOOLS).await;
    // The process stops itself (SIGSTOP): it answers neither the call nor
    // the ping that follows, and is replaced.
    failed_with(&run(&server, "freeze").await, "did not answer within 1 s");
    let status = ready_after(&server, 1, TOOLS).await;
    assert!(status.get("error").is_none(), "{status}");
    assert_eq!(last_text(&run(&server, "add").await), "Sum: 5.0");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(mcp_peer), ignore = "needs examples/mcp/.venv (see build.rs)")]
async fn the_servers_instructions_reach_the_model_and_task_only_tools_are_left_out() {
    let llm = MockServer::start(vec![OpenAiWire.text(&["ok"], (1, 1))]).await;
    crate::providers::set_key();
    let yaml = format!(
        "id: tooled\nmodel: {{provider: openai, name: test-model, base_url: \"{}/v1\", \
         api_key_env: AGENTWIRE_TEST_KEY}}\nsystem_prompt: Be brief.\nmcp_servers:\n  - name: box\n{}\n",
        llm.url(),
        stdio()
    );
    let server = server_with(yaml).await;
    ready(&server, TOOLS).await;
    run(&server, "hello").await;
    let body = &llm.requests()[0].body;
    let system = body["messages"][0]["content"].as_str().unwrap();
    assert!(
        system.starts_with("Be brief.")
            && system.contains("The MCP server `box` (its tools are named `box_…`)")
            && system.ends_with("Toolbox rules: add numbers with add; never guess a sum."),
        "{system}"
    );
    let offered: Vec<&str> = body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert!(offered.contains(&"box_add"), "{offered:?}");
    assert!(
        !offered.contains(&"box_research"),
        "a task-only tool: {offered:?}"
    );

    // A scripted model that calls it anyway is told there is no such tool.
    let scripted = server_with(agent(&stdio(), "")).await;
    let msgs = run(&scripted, "research").await;
    assert!(
        last_text(&msgs).contains("there is no tool `box_research`"),
        "{msgs:#?}"
    );
}
