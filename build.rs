//! Tells the test suite which real peers this machine has, so a test that
//! needs a missing one is reported as ignored (with the reason) in the test
//! summary instead of passing silently.
//!
//! - `socketio_peer`: the Socket.IO server of the benchmarks is installed
//!   (`npm ci` in `bench/socketio`). With `AGENTWIRE_REQUIRE_SOCKETIO=1`
//!   (`.ci/run`) its absence stops the build instead.
//! - `mcp_peer`: the MCP server of `examples/mcp` has its Python SDK (a
//!   virtual environment at `examples/mcp/.venv` with `requirements.txt`
//!   installed). With `AGENTWIRE_REQUIRE_MCP=1` (`.ci/run`) its absence
//!   stops the build instead.
//! - `ag_ui_peer`: the AG-UI agents of `examples/ag-ui` (Pydantic AI's and
//!   LangGraph's) have their packages (a virtual environment at
//!   `examples/ag-ui/.venv` with `requirements.txt` installed). With
//!   `AGENTWIRE_REQUIRE_AG_UI=1` (`.ci/run`) its absence stops the build.
//! - `mcp_everything_peer`: the reference MCP server
//!   `@modelcontextprotocol/server-everything` is installed (`npm ci` in
//!   `tests/mcp-everything`). `AGENTWIRE_REQUIRE_MCP=1` requires it too.
//! - `ag2_peer`: AG2 itself (PyPI `ag2`, pinned in `tests/ag2/requirements.txt`,
//!   in a virtual environment at `tests/ag2/.venv`), for the group-chat
//!   parity test. With `AGENTWIRE_REQUIRE_AG2=1` (`.ci/run`) its absence
//!   stops the build.
//! - `oidc_peer`: the OpenID provider of the sign-in tests, npm
//!   `oidc-provider`, is installed (`npm ci` in `tests/oidc`). With
//!   `AGENTWIRE_REQUIRE_OIDC=1` (`.ci/run`) its absence stops the build.

use std::path::Path;

fn main() {
    println!("cargo::rustc-check-cfg=cfg(socketio_peer)");
    println!("cargo::rustc-check-cfg=cfg(mcp_peer)");
    println!("cargo::rustc-check-cfg=cfg(mcp_everything_peer)");
    println!("cargo::rerun-if-changed=examples/mcp");
    println!("cargo::rerun-if-env-changed=AGENTWIRE_REQUIRE_MCP");
    let mcp = Path::new("examples/mcp/.venv/bin/python").exists()
        && std::fs::read_dir("examples/mcp/.venv/lib").is_ok_and(|mut d| {
            d.any(|e| e.is_ok_and(|e| e.path().join("site-packages/mcp").exists()))
        });
    if mcp {
        println!("cargo::rustc-cfg=mcp_peer");
    } else if std::env::var("AGENTWIRE_REQUIRE_MCP").as_deref() == Ok("1") {
        panic!(
            "AGENTWIRE_REQUIRE_MCP=1 but examples/mcp has no .venv with its requirements \
             (python3 -m venv examples/mcp/.venv && examples/mcp/.venv/bin/pip install -r \
             examples/mcp/requirements.txt)"
        );
    }
    println!("cargo::rustc-check-cfg=cfg(ag_ui_peer)");
    println!("cargo::rerun-if-changed=examples/ag-ui");
    println!("cargo::rerun-if-env-changed=AGENTWIRE_REQUIRE_AG_UI");
    let ag_ui = std::fs::read_dir("examples/ag-ui/.venv/lib").is_ok_and(|mut d| {
        d.any(|e| {
            e.is_ok_and(|e| {
                let site = e.path().join("site-packages");
                site.join("pydantic_ai").exists() && site.join("ag_ui_langgraph").exists()
            })
        })
    });
    if ag_ui {
        println!("cargo::rustc-cfg=ag_ui_peer");
    } else if std::env::var("AGENTWIRE_REQUIRE_AG_UI").as_deref() == Ok("1") {
        panic!(
            "AGENTWIRE_REQUIRE_AG_UI=1 but examples/ag-ui has no .venv with its requirements \
             (python3 -m venv examples/ag-ui/.venv && examples/ag-ui/.venv/bin/pip install -r \
             examples/ag-ui/requirements.txt)"
        );
    }
    // The folder (scanned as a whole): `npm ci` there changes it.
    println!("cargo::rerun-if-changed=tests/mcp-everything");
    let everything = Path::new(
        "tests/mcp-everything/node_modules/@modelcontextprotocol/server-everything/dist/index.js",
    )
    .exists();
    if everything {
        println!("cargo::rustc-cfg=mcp_everything_peer");
    } else if std::env::var("AGENTWIRE_REQUIRE_MCP").as_deref() == Ok("1") {
        panic!(
            "AGENTWIRE_REQUIRE_MCP=1 but tests/mcp-everything has no node_modules (npm ci there)"
        );
    }
    println!("cargo::rustc-check-cfg=cfg(ag2_peer)");
    println!("cargo::rerun-if-changed=tests/ag2");
    println!("cargo::rerun-if-env-changed=AGENTWIRE_REQUIRE_AG2");
    let ag2 = std::fs::read_dir("tests/ag2/.venv/lib").is_ok_and(|mut d| {
        d.any(|e| e.is_ok_and(|e| e.path().join("site-packages/autogen/agentchat").exists()))
    });
    if ag2 {
        println!("cargo::rustc-cfg=ag2_peer");
    } else if std::env::var("AGENTWIRE_REQUIRE_AG2").as_deref() == Ok("1") {
        panic!(
            "AGENTWIRE_REQUIRE_AG2=1 but tests/ag2 has no .venv with its requirements \
             (python3 -m venv tests/ag2/.venv && tests/ag2/.venv/bin/pip install -r \
             tests/ag2/requirements.txt)"
        );
    }
    println!("cargo::rustc-check-cfg=cfg(oidc_peer)");
    println!("cargo::rerun-if-changed=tests/oidc");
    println!("cargo::rerun-if-env-changed=AGENTWIRE_REQUIRE_OIDC");
    if Path::new("tests/oidc/node_modules/oidc-provider/package.json").exists() {
        println!("cargo::rustc-cfg=oidc_peer");
    } else if std::env::var("AGENTWIRE_REQUIRE_OIDC").as_deref() == Ok("1") {
        panic!("AGENTWIRE_REQUIRE_OIDC=1 but tests/oidc has no node_modules (npm ci there)");
    }
    // The folder (scanned as a whole): `npm ci` there changes it.
    println!("cargo::rerun-if-changed=bench/socketio");
    println!("cargo::rerun-if-env-changed=AGENTWIRE_REQUIRE_SOCKETIO");
    let installed = Path::new("bench/socketio/node_modules/socket.io").exists();
    if installed {
        println!("cargo::rustc-cfg=socketio_peer");
    } else if std::env::var("AGENTWIRE_REQUIRE_SOCKETIO").as_deref() == Ok("1") {
        panic!(
            "AGENTWIRE_REQUIRE_SOCKETIO=1 but bench/socketio has no node_modules (npm ci there)"
        );
    }
}
