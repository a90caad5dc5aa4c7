//! One MCP server: its connection, kept up by a supervisor task, and the
//! tools it lists.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rmcp::RoleClient;
use rmcp::service::Peer;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::connect::{McpTool, Source, connect, list};
use super::handler::{Handler, ProgressSinks};
use super::tap::TaskOnly;

/// How long a server has to start and answer `initialize` and `tools/list`.
const START_TIMEOUT: Duration = Duration::from_secs(30);
/// The longest pause between two attempts to connect.
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// A connection that stayed up this long starts the backoff over.
const STABLE: Duration = Duration::from_secs(60);
/// Bytes of a server's `instructions` a model is given at most.
pub const MAX_INSTRUCTIONS: usize = 4 << 10;
/// Tools taken from one server at most (the rest are left out).
const MAX_TOOLS: usize = 256;
/// A change of the tool list is listed after this quiet (a storm of
/// changes is one listing).
const LIST_DEBOUNCE: Duration = Duration::from_millis(200);

/// Where a server stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum State {
    /// Connecting for the first time.
    Starting,
    /// Connected; its tools are offered.
    Ready,
    /// Not connected (failed to start, exited, unreachable): its tools are
    /// not offered; connecting again with backoff.
    Down,
}

/// What `/v1/agents` shows of a server.
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct Status {
    pub name: String,
    pub state: State,
    /// Tools the server lists (before the agent's `allow`/`deny`).
    pub tools: usize,
    /// Why it is down (or why it last went down).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Connections made after the first.
    pub restarts: u32,
}

/// What the supervisor keeps and calls read.
pub(super) struct Shared {
    pub name: String,
    pub conn: Mutex<Option<Conn>>,
    pub status: Mutex<Status>,
    pub progress: ProgressSinks,
}

/// A live connection.
#[derive(Clone)]
pub(super) struct Conn {
    pub peer: Peer<RoleClient>,
    pub tools: Arc<Vec<McpTool>>,
    /// What the server said at `initialize` of how to use it (cut to
    /// [`MAX_INSTRUCTIONS`]).
    pub instructions: Option<Arc<str>>,
    /// Marked by a call that found this connection broken: the supervisor
    /// connects again. Only this connection's.
    pub broken: Broken,
}

/// A connection found broken, and why.
#[derive(Clone, Default)]
pub(super) struct Broken {
    token: CancellationToken,
    why: Arc<Mutex<Option<String>>>,
}

impl Broken {
    /// Ends the connection (the first reason given is kept).
    pub fn mark(&self, why: &str) {
        lock(&self.why).get_or_insert_with(|| why.to_owned());
        self.token.cancel();
    }
}

/// One MCP server an agent uses. Dropping it stops its supervisor (and its
/// process).
pub struct McpServer {
    pub(super) shared: Arc<Shared>,
    stop: CancellationToken,
}

impl Drop for McpServer {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl std::fmt::Debug for McpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpServer")
            .field("name", &self.shared.name)
            .finish_non_exhaustive()
    }
}

impl McpServer {
    /// Starts supervising the server `name` (connecting in the background).
    /// Outside a tokio runtime it stays `down`, saying so.
    pub fn start(name: String, source: Source) -> Arc<Self> {
        let shared = Arc::new(Shared {
            name: name.clone(),
            conn: Mutex::new(None),
            status: Mutex::new(Status {
                name,
                state: State::Starting,
                tools: 0,
                error: None,
                restarts: 0,
            }),
            progress: ProgressSinks::default(),
        });
        let stop = CancellationToken::new();
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => {
                rt.spawn(supervise(shared.clone(), source, stop.clone()));
            }
            Err(_) => {
                let mut status = lock(&shared.status);
                status.state = State::Down;
                status.error = Some("not started: no runtime".into());
            }
        }
        Arc::new(Self { shared, stop })
    }

    pub fn name(&self) -> &str {
        &self.shared.name
    }

    /// Where it stands.
    pub fn status(&self) -> Status {
        lock(&self.shared.status).clone()
    }

    /// Its tools, while it is connected (none while it is down).
    pub fn tools(&self) -> Arc<Vec<McpTool>> {
        lock(&self.shared.conn)
            .as_ref()
            .map(|c| c.tools.clone())
            .unwrap_or_default()
    }

    /// What it said at `initialize` of how to use it, while it is connected
    /// (cut to [`MAX_INSTRUCTIONS`] bytes).
    pub fn instructions(&self) -> Option<Arc<str>> {
        lock(&self.shared.conn)
            .as_ref()
            .and_then(|c| c.instructions.clone())
    }

    /// Waits until the first connection is made or has failed (at most
    /// `wait`): for start-up and tests.
    pub async fn settled(&self, wait: Duration) -> State {
        let deadline = Instant::now() + wait;
        loop {
            let state = self.status().state;
            if state != State::Starting || Instant::now() >= deadline {
                return state;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

pub(super) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Connects, serves, and connects again when the connection ends.
async fn supervise(shared: Arc<Shared>, source: Source, stop: CancellationToken) {
    let name = shared.name.clone();
    let mut failures: u32 = 0;
    loop {
        let up = Instant::now();
        let outcome = tokio::select! {
            () = stop.cancelled() => return,
            outcome = connected(&shared, &source, &stop) => outcome,
        };
        let why = match outcome {
            Ok(why) => why,
            Err(why) => why,
        };
        *lock(&shared.conn) = None;
        if stop.is_cancelled() {
            return;
        }
        tracing::warn!(server = %name, error = %why, "MCP server down; its tools are not offered");
        {
            let mut status = lock(&shared.status);
            status.state = State::Down;
            status.tools = 0;
            status.error = Some(why);
        }
        failures = if up.elapsed() >= STABLE {
            1
        } else {
            failures + 1
        };
        let backoff = Duration::from_millis(250u64 << failures.min(7)).min(MAX_BACKOFF);
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(backoff) => {}
        }
        lock(&shared.status).restarts += 1;
    }
}

/// One connection's life: connect, list the tools, serve until it ends.
///
/// # Returns
/// Why it ended (`Err`: it never came up).
async fn connected(
    shared: &Arc<Shared>,
    source: &Source,
    stop: &CancellationToken,
) -> Result<String, String> {
    let (tools_changed, mut changes) = watch::channel(0u64);
    let handler = Handler {
        server: shared.name.clone(),
        progress: shared.progress.clone(),
        tools_changed: Arc::new(tools_changed),
    };
    let task_only = TaskOnly::default();
    let connecting = connect(handler, source, &shared.name, &task_only);
    let (running, mut child) = tokio::time::timeout(START_TIMEOUT, connecting)
        .await
        .map_err(|_| format!("did not start within {} s", START_TIMEOUT.as_secs()))??;
    let peer = running.peer().clone();
    let instructions = running
        .peer_info()
        .and_then(|info| info.instructions.clone())
        .map(|text| Arc::from(cut(&text, MAX_INSTRUCTIONS)));
    // A new connection: its progress tokens start over.
    lock(&shared.progress).reset();
    let listing = || tokio::time::timeout(START_TIMEOUT, list(&peer, &task_only, &shared.name));
    let tools = listing()
        .await
        .map_err(|_| "did not list its tools in time".to_owned())??;
    let broken = Broken::default();
    let conn = |tools: Vec<McpTool>| Conn {
        peer: peer.clone(),
        tools: Arc::new(tools),
        instructions: instructions.clone(),
        broken: broken.clone(),
    };
    publish(shared, conn(tools));
    tracing::info!(server = %shared.name, "MCP server ready");
    let cancel = running.cancellation_token();
    let mut done = Box::pin(running.waiting());
    let why = loop {
        tokio::select! {
            () = stop.cancelled() => {
                cancel.cancel();
                let _ = done.await;
                return Ok("stopped".into());
            }
            reason = &mut done => break format!("the connection ended ({reason:?})"),
            () = broken.token.cancelled() => {
                cancel.cancel();
                let _ = done.await;
                break lock(&broken.why).clone().unwrap_or_else(|| "unreachable".into());
            }
            Ok(()) = changes.changed() => {
                tokio::time::sleep(LIST_DEBOUNCE).await;
                changes.mark_unchanged();
                match listing().await {
                    Ok(Ok(tools)) => publish(shared, conn(tools)),
                    Ok(Err(e)) => tracing::warn!(server = %shared.name, error = %e, "MCP tools/list failed after list_changed"),
                    Err(_) => tracing::warn!(server = %shared.name, "MCP tools/list timed out after list_changed"),
                }
            }
        }
    };
    // A child that exited says how.
    let why = match child.as_mut().map(|c| c.child.try_wait()) {
        Some(Ok(Some(status))) => format!("the process exited ({status})"),
        _ => why,
    };
    Ok(why)
}

fn publish(shared: &Shared, mut conn: Conn) {
    if conn.tools.len() > MAX_TOOLS {
        tracing::warn!(server = %shared.name, listed = conn.tools.len(), "MCP server lists over {MAX_TOOLS} tools: the rest are left out");
        conn.tools = Arc::new(conn.tools[..MAX_TOOLS].to_vec());
    }
    let n = conn.tools.len();
    *lock(&shared.conn) = Some(conn);
    let mut status = lock(&shared.status);
    status.state = State::Ready;
    status.tools = n;
    status.error = None;
}

/// `text` cut to at most `max` bytes, on a character's boundary.
fn cut(text: &str, max: usize) -> &str {
    &text[..text.floor_char_boundary(max)]
}

#[cfg(test)]
mod tests {
    #[test]
    fn instructions_are_cut_on_a_character() {
        assert_eq!(super::cut("short", 4096), "short");
        let long = "é".repeat(3000);
        let cut = super::cut(&long, super::MAX_INSTRUCTIONS);
        assert_eq!(cut.len(), 4096);
        assert_eq!(super::cut("aé", 2), "a");
    }
}
