//! The first run, as a new user meets it: the real binary's messages when
//! something is wrong, and what it leaves behind.

use std::process::Stdio;
use std::time::Duration;

use serde_json::json;
use tokio::io::AsyncReadExt;
use uuid::Uuid;

use crate::support::*;

/// Runs the binary to its exit with these flags and environment; returns
/// its exit code and everything it printed (stdout, then stderr).
async fn run_to_exit(dir: &std::path::Path, args: &[&str], env: &[(&str, &str)]) -> (i32, String) {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_agentwire"));
    cmd.current_dir(dir)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = tokio::time::timeout(WAIT, cmd.output())
        .await
        .expect("the binary exits by itself")
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap_or(-1), text)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_taken_address_is_named_with_its_key() {
    let dir = tempfile::tempdir().unwrap();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let (code, text) = run_to_exit(dir.path(), &["--listen", &addr], &[]).await;
    assert_ne!(code, 0);
    assert!(text.contains(&addr), "{text}");
    assert!(
        text.contains("`listen`") && text.contains("AGENTWIRE_LISTEN"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_environment_value_names_the_variable() {
    let dir = tempfile::tempdir().unwrap();
    let (code, text) = run_to_exit(dir.path(), &[], &[("AGENTWIRE_AUTH", "maybe")]).await;
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("AGENTWIRE_AUTH"), "{text}");
    assert!(text.contains("none") && text.contains("jwt"), "{text}");
    assert!(!text.contains("--auth"), "the flag was never typed: {text}");
    let (code, text) =
        run_to_exit(dir.path(), &[], &[("AGENTWIRE_MAX_MESSAGE_BYTES", "lots")]).await;
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("AGENTWIRE_MAX_MESSAGE_BYTES"), "{text}");
    // A flag that was typed is still reported as the flag.
    let (code, text) = run_to_exit(dir.path(), &["--auth", "maybe"], &[]).await;
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("--auth"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_start_leaves_no_database_behind() {
    let dir = tempfile::tempdir().unwrap();
    let agents = dir.path().join("agents");
    std::fs::create_dir_all(&agents).unwrap();
    std::fs::write(
        agents.join("broken.yaml"),
        "id: x\nmodel: {provider: nope}\n",
    )
    .unwrap();
    let addr = free_addr().to_string();
    let (code, text) = run_to_exit(dir.path(), &["--listen", &addr], &[]).await;
    assert_ne!(code, 0);
    assert!(text.contains("broken.yaml"), "{text}");
    assert!(
        !dir.path().join("data").exists(),
        "no ./data was created: {text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logs_to_a_file_have_no_colours_and_name_an_unreachable_model_server() {
    let dir = tempfile::tempdir().unwrap();
    let agents = dir.path().join("agents");
    std::fs::create_dir_all(&agents).unwrap();
    let (_held, dead) = refused_addr();
    std::fs::write(
        agents.join("remote.yaml"),
        format!("id: remote\nmodel: {{provider: openai, name: m, base_url: 'http://{dead}/v1'}}\n"),
    )
    .unwrap();
    let addr = free_addr();
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_agentwire"))
        .current_dir(dir.path())
        .args(["--listen", &addr.to_string(), "--agents"])
        .arg(&agents)
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    wait_for(addr).await;
    let mut c = Client::connect(&format!("ws://{addr}/v1/ws")).await;
    let chat = Uuid::new_v4();
    c.send(json!({"type": "chat.start", "chat_id": chat, "agent": "remote", "message": "hi"}))
        .await;
    let msgs = c.until_complete(chat).await;
    let err = msgs.iter().find(|m| m["type"] == "chat.error").unwrap();
    assert!(
        err["message"].as_str().unwrap().contains(&dead.to_string()),
        "{err}"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    child.start_kill().unwrap();
    let mut out = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .await
        .unwrap();
    assert!(
        !out.contains('\u{1b}'),
        "no ANSI escapes in a piped log: {out}"
    );
    let warn = out
        .lines()
        .find(|l| l.contains("cannot reach the model server"))
        .unwrap_or_else(|| panic!("the failure is logged: {out}"));
    assert!(
        warn.contains("WARN") && warn.contains(&dead.to_string()),
        "{warn}"
    );
}
