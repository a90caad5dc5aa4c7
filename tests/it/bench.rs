//! The bench tool's scenarios at toy sizes against the real binary, the raw
//! ceiling and (where installed) the Socket.IO peer: they run, their JSON
//! lines parse and add up, and the report renders them. Speed is not judged
//! here (see docs/benchmarks.md).

use std::process::Stdio;

use serde_json::Value;
use tokio::process::{Child, Command};

use crate::support::*;

fn spawn(program: &str, args: &[&str], env: &[(&str, &str)]) -> Child {
    Command::new(program)
        .args(args)
        .envs(env.iter().copied())
        .env("RUST_LOG", "error")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap_or_else(|e| panic!("start {program}: {e}"))
}

/// Runs `agentwire-bench ARGS`; its one JSON line.
async fn bench(args: &[&str]) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_agentwire-bench"))
        .args(args)
        .arg("--quiet")
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "agentwire-bench {args:?}: {stderr}");
    assert!(stderr.contains("──"), "a table on stderr: {stderr}");
    let stdout = String::from_utf8(out.stdout).unwrap();
    let line: Value =
        serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    assert_eq!(line["tool"], "agentwire-bench");
    assert!(line["machine"]["cores"].as_u64().unwrap() >= 1);
    assert!(line["commit"].is_string());
    line
}

fn pid(child: &Child) -> String {
    child.id().unwrap().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_scenario_runs_at_toy_size_and_reports() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("agents")).unwrap();
    let db = database_url(dir.path()).await;
    let (server, addr) = spawn_agentwire(&db, &dir.path().join("agents"), &[]).await;
    let url = format!("ws://{addr}/v1/ws");
    let server_pid = pid(&server);
    let on = |extra: &[&str]| {
        let mut v = vec!["--url", url.as_str(), "--pid", server_pid.as_str()];
        v.extend_from_slice(extra);
        v.iter().map(|s| s.to_string()).collect::<Vec<_>>()
    };
    let run = async |scenario: &str, extra: &[&str]| {
        let mut args = vec![scenario.to_owned()];
        args.extend(on(extra));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        bench(&args).await
    };
    let mut lines = Vec::new();

    let s = run("stream", &["--chats", "3", "--n", "100"]).await;
    assert_eq!(
        s["figures"]["envelopes"],
        3 * 105,
        "every envelope of every run, once"
    );
    assert!(s["figures"]["envelopes_per_s"].as_f64().unwrap() > 0.0);
    assert!(s["figures"]["latency_ms"]["p99"].as_f64().unwrap() >= 0.0);
    assert!(s["figures"]["server_cpu_s"].as_f64().is_some());
    lines.push(s);

    let s = run("stream", &["--chats", "2", "--n", "5", "--paced"]).await;
    assert_eq!(s["figures"]["envelopes"], 2 * 10);
    assert_eq!(s["params"]["paced"], true);
    lines.push(s);

    // A burst, then paced runs on the same server, each one reported.
    let a = run(
        "after-burst",
        &[
            "--burst-chats",
            "2",
            "--burst-n",
            "50",
            "--chats",
            "2",
            "--n",
            "5",
            "--runs",
            "2",
        ],
    )
    .await;
    let paced = a["figures"]["runs"].as_array().unwrap();
    assert_eq!(paced.len(), 2);
    for r in paced {
        assert_eq!(r["envelopes"], 2 * 10, "every envelope of each paced run");
        assert!(r["latency_ms"]["p999"].as_f64().is_some());
    }
    assert_eq!(
        a["figures"]["burst"]["envelopes_per_s"]
            .as_f64()
            .map(|r| r > 0.0),
        Some(true)
    );
    lines.push(a);

    let f = run("fanout", &["--subscribers", "4", "--n", "50"]).await;
    assert_eq!(
        f["figures"]["delivered"],
        4 * 55,
        "each subscriber got the whole run"
    );
    lines.push(f);

    let r = run("resume", &["--envelopes", "300", "--repeats", "3"]).await;
    assert_eq!(r["figures"]["log_envelopes"], 300);
    assert_eq!(r["figures"]["whole"]["replayed"], 300);
    assert_eq!(r["figures"]["last_100"]["replayed"], 100);
    lines.push(r);

    // 4 points, each a burst of 5 and its regenerate (10 envelopes each).
    let b = run(
        "branched",
        &["--envelopes", "80", "--points", "4", "--repeats", "2"],
    )
    .await;
    assert_eq!(b["figures"]["log_envelopes"], 80);
    assert_eq!(b["figures"]["branch_points"], 4);
    assert_eq!(b["figures"]["whole"]["replayed"], 80);
    // The active path: each question and its regenerated answer (9 each:
    // the answer has no user text of its own, its branch is off the path).
    assert_eq!(b["figures"]["active_path"]["envelopes"], 4 * (1 + 9));
    lines.push(b);

    let i = run("idle", &["--connections", "20", "--settle", "0"]).await;
    assert_eq!(i["figures"]["open"], 20);
    assert!(i["figures"]["server_rss_kib"]["after"].as_u64().unwrap() > 0);
    lines.push(i);

    let f = run("files", &["--mib", "2", "--repeats", "2"]).await;
    assert!(f["figures"]["upload_mib_s"].as_f64().unwrap() > 0.0);
    assert!(f["figures"]["download_mib_s"].as_f64().unwrap() > 0.0);
    assert!(f["figures"]["rss_peak_during_upload_mib"].as_f64().unwrap() > 0.0);
    lines.push(f);

    let m = run(
        "mixed",
        &["--connections", "20", "--seconds", "1", "--n", "20"],
    )
    .await;
    assert!(m["figures"]["turns"].as_u64().unwrap() >= 1);
    assert!(m["figures"]["resumes"].as_u64().unwrap() >= 1);
    lines.push(m);

    // The raw ceiling speaks enough of the protocol for stream and fanout.
    let raw_addr = free_addr();
    let raw = spawn(
        env!("CARGO_BIN_EXE_raw-ceiling"),
        &[&raw_addr.to_string()],
        &[],
    );
    wait_for(raw_addr).await;
    let raw_url = format!("ws://{raw_addr}");
    let raw_pid = pid(&raw);
    let s = bench(&[
        "stream", "--url", &raw_url, "--pid", &raw_pid, "--label", "raw", "--chats", "3", "--n",
        "100",
    ])
    .await;
    assert_eq!(s["figures"]["envelopes"], 3 * 105);
    lines.push(s);
    let f = bench(&[
        "fanout",
        "--url",
        &raw_url,
        "--label",
        "raw",
        "--subscribers",
        "4",
        "--n",
        "50",
    ])
    .await;
    assert_eq!(f["figures"]["delivered"], 4 * 55);
    lines.push(f);

    // The storage ceiling, on a file of its own.
    let file = format!("sqlite://{}", dir.path().join("ceiling.db").display());
    let st = bench(&[
        "storage",
        "--database-url",
        &file,
        "--rows",
        "300",
        "--batches",
        "1,100",
    ])
    .await;
    assert!(
        st["figures"]["rows_per_s_by_batch"]["100"]
            .as_f64()
            .unwrap()
            > 0.0
    );
    lines.push(st);

    // The report turns the lines into the page.
    let jsonl: String = lines.iter().map(|l| format!("{l}\n")).collect();
    let file = dir.path().join("runs.jsonl");
    std::fs::write(&file, jsonl).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_agentwire-bench"))
        .args(["report", file.to_str().unwrap()])
        .output()
        .await
        .unwrap();
    assert!(out.status.success());
    let md = String::from_utf8(out.stdout).unwrap();
    for heading in [
        "## Targets",
        "## `stream`",
        "## `fanout`",
        "## `resume`",
        "## `branched`",
        "## `idle`",
        "## `mixed`",
        "## Storage ceiling",
    ] {
        assert!(md.contains(heading), "{heading} in\n{md}");
    }
    assert!(md.contains("| raw | 3 × 100 |"), "{md}");
    // The paced run is a row of the paced sweep (2 chats, 100 offered/s).
    assert!(md.contains("## Paced streams"), "{md}");
    assert!(md.contains("\n| 2 | 100 | "), "{md}");
    // The after-burst line is a row of its own, and a target.
    assert!(md.contains("## `after-burst`"), "{md}");
    assert!(md.contains("| agentwire | 2 × 50, 2 × 5 |"), "{md}");
    assert!(md.contains("five paced runs of 50 chats in a row"), "{md}");
    assert!(md.contains("with 100 branch points read in"), "{md}");
}

/// The Socket.IO peer, when its npm packages are installed: otherwise the
/// test is ignored, and says why in the summary (`build.rs` looks; `.ci/run`
/// installs them and sets `AGENTWIRE_REQUIRE_SOCKETIO=1`, which makes their
/// absence a build failure).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(socketio_peer),
    ignore = "needs the Socket.IO peer: run `npm ci` in bench/socketio"
)]
async fn the_socketio_peer_is_driven_the_same_way() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let addr = free_addr();
    let port = addr.port().to_string();
    let server = root.join("bench/socketio/server.mjs");
    let peer = spawn("node", &[server.to_str().unwrap()], &[("PORT", &port)]);
    wait_for(addr).await;
    let url = format!("ws://{addr}");
    let peer_pid = pid(&peer);
    let s = bench(&[
        "stream",
        "--url",
        &url,
        "--protocol",
        "socketio",
        "--label",
        "socketio",
        "--pid",
        &peer_pid,
        "--chats",
        "3",
        "--n",
        "100",
    ])
    .await;
    assert_eq!(s["figures"]["envelopes"], 3 * 105);
    assert_eq!(s["params"]["protocol"], "socketio");
    let f = bench(&[
        "fanout",
        "--url",
        &url,
        "--protocol",
        "socketio",
        "--label",
        "socketio",
        "--subscribers",
        "4",
        "--n",
        "50",
    ])
    .await;
    assert_eq!(f["figures"]["delivered"], 4 * 55);
}
