//! The client side's answers to what a server sends on its own: progress of
//! a call in flight, and a changed tool list.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use rmcp::model::{
    ClientCapabilities, ClientConfig, Implementation, ProgressNotificationParam, ProgressToken,
};
use rmcp::service::NotificationContext;
use rmcp::{ClientHandler, RoleClient};
use tokio::sync::{mpsc, watch};

/// Progress a server reported.
#[derive(Debug, Clone, PartialEq)]
pub struct Progress {
    pub progress: f64,
    pub total: Option<f64>,
    pub message: Option<String>,
}

/// Where a call's progress goes, by its token.
pub(super) type ProgressSinks = Arc<Mutex<Sinks>>;

/// Reports an early report waits for its call at most.
const EARLY: usize = 64;

/// Calls in flight by progress token, and reports that came before their
/// call was known (a token is known only once the request is sent, and a
/// quick server reports before that).
#[derive(Default)]
pub(super) struct Sinks {
    sinks: HashMap<ProgressToken, mpsc::Sender<Progress>>,
    early: std::collections::VecDeque<(ProgressToken, Progress)>,
}

impl Sinks {
    /// Routes `token`'s reports to `sink`, those that came early first.
    pub fn register(&mut self, token: ProgressToken, sink: mpsc::Sender<Progress>) {
        let early = std::mem::take(&mut self.early);
        for (t, p) in early {
            if t == token {
                let _ = sink.try_send(p);
            } else {
                self.early.push_back((t, p));
            }
        }
        self.sinks.insert(token, sink);
    }

    /// Removes `token`'s sink if it is still `sink` (a token reused by a
    /// new connection belongs to another call).
    pub fn unregister(&mut self, token: &ProgressToken, sink: &mpsc::Sender<Progress>) {
        if self.sinks.get(token).is_some_and(|s| s.same_channel(sink)) {
            self.sinks.remove(token);
        }
    }

    /// A new connection: tokens start over (the calls of the old one have
    /// failed).
    pub fn reset(&mut self) {
        self.early.clear();
        self.sinks.clear();
    }

    fn report(&mut self, token: ProgressToken, progress: Progress) {
        match self.sinks.get(&token) {
            // A full queue drops a report, never blocks the connection.
            Some(sink) => {
                let _ = sink.try_send(progress);
            }
            None => {
                if self.early.len() == EARLY {
                    self.early.pop_front();
                }
                self.early.push_back((token, progress));
            }
        }
    }
}

/// One connection's handler.
#[derive(Clone)]
pub(super) struct Handler {
    /// The server's name, for the log.
    pub server: String,
    pub progress: ProgressSinks,
    /// Bumped when the server says its tools changed.
    pub tools_changed: Arc<watch::Sender<u64>>,
}

impl ClientHandler for Handler {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("agentwire", env!("CARGO_PKG_VERSION")),
        )
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        // One line per report: the log's `debug`, never its `info`.
        tracing::debug!(server = %self.server, progress = params.progress, total = ?params.total, "MCP progress");
        let progress = Progress {
            progress: params.progress,
            total: params.total,
            message: params.message,
        };
        self.progress
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .report(params.progress_token, progress);
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.tools_changed.send_modify(|n| *n += 1);
    }
}
