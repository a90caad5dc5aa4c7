//! Opening a connection to a server: a stdio child (its environment, its
//! process group, its stderr to the log) or Streamable HTTP, `initialize`,
//! and its tool list.

use std::collections::BTreeMap;
use std::process::Stdio;

use rmcp::model::Tool;
use rmcp::service::{Peer, RunningService};
use rmcp::{RoleClient, ServiceExt};
use serde_json::Value;

use super::handler::Handler;
use super::tap::{TapRead, TaskOnly};

/// Lines of a stdio server's stderr logged at most per connection.
const MAX_STDERR_LINES: usize = 1_000;
/// The longest stderr line logged (a longer one is skipped).
const MAX_STDERR_LINE: usize = 8 << 10;

/// How to reach a server. (Its `Debug` names no header or environment
/// value: they may hold secrets.)
#[derive(Clone)]
pub enum Source {
    /// A child process speaking JSON-RPC lines on stdin/stdout; its stderr
    /// goes to the log.
    Stdio {
        command: String,
        args: Vec<String>,
        env: BTreeMap<String, String>,
        cwd: Option<std::path::PathBuf>,
    },
    /// A Streamable HTTP endpoint, with headers sent on every request.
    Http {
        url: String,
        headers: BTreeMap<String, String>,
    },
}

impl std::fmt::Debug for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Stdio { command, args, .. } => f
                .debug_struct("Stdio")
                .field("command", command)
                .field("args", args)
                .finish_non_exhaustive(),
            Self::Http { url, .. } => f
                .debug_struct("Http")
                .field("url", url)
                .finish_non_exhaustive(),
        }
    }
}

/// A tool as the server lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct McpTool {
    pub name: String,
    pub description: String,
    /// Its `inputSchema` (an object's JSON Schema).
    pub input_schema: Value,
}

/// A stdio server's process: its whole process group is killed when the
/// connection ends (a wrapper such as `npx` or `sh -c` leaves nothing
/// behind), and its stderr reader stops.
pub(super) struct Process {
    pub child: tokio::process::Child,
    stderr: Option<tokio::task::JoinHandle<()>>,
}

impl Drop for Process {
    fn drop(&mut self) {
        #[cfg(unix)]
        if let Some(pid) = self.child.id().and_then(|p| i32::try_from(p).ok()) {
            // SAFETY: killpg only sends a signal; the group is the child's own
            // (spawned with process_group(0)), so nothing else is hit.
            unsafe {
                libc::killpg(pid, libc::SIGKILL);
            }
        }
        if let Some(task) = self.stderr.take() {
            task.abort();
        }
    }
}

/// Opens the transport and does `initialize`; what the server sends is
/// read for `task_only` too.
pub(super) async fn connect(
    handler: Handler,
    source: &Source,
    name: &str,
    task_only: &TaskOnly,
) -> Result<(RunningService<RoleClient, Handler>, Option<Process>), String> {
    match source {
        Source::Stdio {
            command,
            args,
            env,
            cwd,
        } => {
            let mut cmd = tokio::process::Command::new(command);
            // Nothing of agentwire's environment but a few variables: never
            // its keys and secrets.
            cmd.args(args)
                .env_clear()
                .envs(super::env::child_env(env))
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .kill_on_drop(true);
            if let Some(cwd) = cwd {
                cmd.current_dir(cwd);
            }
            #[cfg(unix)]
            cmd.process_group(0);
            let mut child = cmd
                .spawn()
                .map_err(|e| format!("cannot start `{command}`: {e}"))?;
            let (Some(stdout), Some(stdin), stderr) =
                (child.stdout.take(), child.stdin.take(), child.stderr.take())
            else {
                return Err("the process has no pipes".into());
            };
            let stderr = stderr.map(|stderr| {
                let name = name.to_owned();
                tokio::spawn(async move {
                    use futures_util::StreamExt;
                    let codec = tokio_util::codec::LinesCodec::new_with_max_length(MAX_STDERR_LINE);
                    let mut lines = tokio_util::codec::FramedRead::new(stderr, codec);
                    let mut n = 0;
                    while let Some(line) = lines.next().await {
                        // A line over the limit is skipped, not kept.
                        let Ok(line) = line else { continue };
                        n += 1;
                        if n <= MAX_STDERR_LINES {
                            tracing::info!(server = %name, "MCP stderr: {line}");
                        }
                    }
                })
            });
            let process = Process { child, stderr };
            let running = handler
                .serve((TapRead::new(stdout, task_only.clone()), stdin))
                .await
                .map_err(|e| format!("initialize failed: {e}"))?;
            Ok((running, Some(process)))
        }
        Source::Http { url, headers } => {
            use rmcp::transport::StreamableHttpClientTransport;
            use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
            let _ = rustls::crypto::ring::default_provider().install_default();
            let mut custom = std::collections::HashMap::new();
            for (k, v) in headers {
                let name = reqwest::header::HeaderName::from_bytes(k.as_bytes())
                    .map_err(|e| format!("header `{k}`: {e}"))?;
                let value = reqwest::header::HeaderValue::from_str(v)
                    .map_err(|e| format!("header `{k}`: {e}"))?;
                custom.insert(name, value);
            }
            let client = reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .map_err(|e| format!("HTTP client: {e}"))?;
            let client = super::http::Client::new(client, task_only.clone());
            let config =
                StreamableHttpClientTransportConfig::with_uri(url.as_str()).custom_headers(custom);
            let transport = StreamableHttpClientTransport::with_client(client, config);
            let running = handler
                .serve(transport)
                .await
                .map_err(|e| format!("initialize failed: {e}"))?;
            Ok((running, None))
        }
    }
}

/// The server's tools, but those it runs only as tasks (which agentwire
/// does not ask for: every call would fail), left out with a warning.
pub(super) async fn list(
    peer: &Peer<RoleClient>,
    task_only: &TaskOnly,
    name: &str,
) -> Result<Vec<McpTool>, String> {
    let tools: Vec<Tool> = peer
        .list_all_tools()
        .await
        .map_err(|e| format!("tools/list failed: {e}"))?;
    Ok(tools
        .into_iter()
        .filter(|t| {
            let only = task_only.contains(&t.name);
            if only {
                tracing::warn!(server = %name, tool = %t.name, "MCP tool left out: it runs only as a task (execution.taskSupport: required)");
            }
            !only
        })
        .map(|t| McpTool {
            name: t.name.to_string(),
            description: t.description.map(|d| d.to_string()).unwrap_or_default(),
            input_schema: Value::Object((*t.input_schema).clone()),
        })
        .collect())
}
