//! The reference MCP server, `@modelcontextprotocol/server-everything`
//! (installed in `tests/mcp-everything`), as a tool source: over stdio it
//! sees none of agentwire's secrets (its `get-env` tool shows its whole
//! environment) and its task-only tool is left out; over Streamable HTTP,
//! restarted while agentwire is idle, it answers the old session with 400,
//! and the next call goes through on a new session.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::mcp::{
    SCRIPTED, SECRETS, agentwire_with_env, last_text, one, ready, run, run_at, sees_only_its_own,
    server_with,
};
use crate::support::*;

/// Tools it lists, all but `simulate-research-query` (task-only) taken.
const TOOLS: u64 = 12;

fn everything() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(
        "tests/mcp-everything/node_modules/@modelcontextprotocol/server-everything/dist/index.js",
    )
}

fn agent(server: &str) -> String {
    format!(
        r#"{SCRIPTED}      - exact: "env"
        call: {{tool: every_get-env, input: {{}}}}
        then: "Env: {{result}}"
      - prefix: "echo "
        call: {{tool: every_echo, input: {{message: "{{arg}}"}}}}
        then: "{{result}}"
      - exact: "research"
        call: {{tool: every_simulate-research-query, input: {{topic: "x"}}}}
        then: "unreachable"
mcp_servers:
  every:
{server}
"#
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(mcp_everything_peer),
    ignore = "needs tests/mcp-everything/node_modules (see build.rs)"
)]
async fn over_stdio_it_sees_none_of_agentwires_secrets_and_no_task_only_tool_is_offered() {
    let server = format!(
        "    command: node\n    args: [\"{}\", stdio]\n    env: {{API_TOKEN: \"${{env:TEST_BOX_TOKEN}}\"}}",
        everything().display()
    );
    let dir = tempfile::tempdir().unwrap();
    let (child, addr) = agentwire_with_env(dir.path(), agent(&server), &SECRETS).await;
    let msgs = run_at(addr, "env").await;
    let response = one(&msgs, "chat.tool_response");
    let seen: Value =
        serde_json::from_str(response["content"]["content"][0]["text"].as_str().unwrap()).unwrap();
    let keys: Vec<String> = seen.as_object().unwrap().keys().cloned().collect();
    sees_only_its_own(
        &keys,
        |name| seen[name].clone(),
        &[("API_TOKEN", "box-token-1")],
    );
    let msgs = run_at(addr, "research").await;
    assert!(
        last_text(&msgs).contains("there is no tool `every_simulate-research-query`"),
        "{msgs:#?}"
    );
    let log = log_when_killed(child).await;
    assert!(!log.contains("box-token-1"), "{log}");
}

/// The reference server over Streamable HTTP on `port`.
async fn http_everything(port: u16) -> tokio::process::Child {
    let child = tokio::process::Command::new("node")
        .arg(everything())
        .arg("streamableHttp")
        .env("PORT", port.to_string())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    wait_for(std::net::SocketAddr::from(([127, 0, 0, 1], port))).await;
    child
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(mcp_everything_peer),
    ignore = "needs tests/mcp-everything/node_modules (see build.rs)"
)]
async fn over_http_restarted_while_idle_it_gets_a_new_session() {
    let port = free_addr().port();
    let mut first = http_everything(port).await;
    let http = format!(
        "    type: http\n    url: \"http://127.0.0.1:{port}/mcp\"\n    timeout_seconds: 20"
    );
    let server = server_with(agent(&http)).await;
    ready(&server, TOOLS).await;
    assert_eq!(last_text(&run(&server, "echo one").await), "Echo: one");
    first.kill().await.unwrap();
    let mut second = http_everything(port).await;
    // The old session is unknown to the new process (400): a new session,
    // and the call made again on it.
    let msgs = run(&server, "echo two").await;
    assert_eq!(last_text(&msgs), "Echo: two", "{msgs:#?}");
    second.kill().await.unwrap();
}
