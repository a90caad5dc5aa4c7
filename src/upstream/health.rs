//! What an upstream agent's calls did lately, as this node saw them (the
//! operator's page): runs started, failures, the last failure and when,
//! the last run the server answered.

use std::sync::Mutex;

/// An upstream agent's recent state, on this node.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct Health {
    /// Runs asked of it since this node started.
    pub runs: u64,
    /// Those that failed (unreachable, an error status, a broken stream,
    /// its own `RUN_ERROR`).
    pub errors: u64,
    /// The last failure's message, and when (RFC 3339).
    pub last_error: Option<String>,
    pub last_error_at: Option<String>,
    /// When it last answered a run with an event stream (RFC 3339).
    pub last_ok_at: Option<String>,
}

fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// [`Health`], kept as calls happen.
#[derive(Debug, Default)]
pub(super) struct Kept(Mutex<Health>);

impl Kept {
    fn with(&self, f: impl FnOnce(&mut Health)) {
        f(&mut self.0.lock().unwrap_or_else(|e| e.into_inner()));
    }

    pub(super) fn started(&self) {
        self.with(|h| h.runs += 1);
    }

    pub(super) fn answered(&self) {
        self.with(|h| h.last_ok_at = Some(now()));
    }

    pub(super) fn failed(&self, message: &str) {
        self.with(|h| {
            h.errors += 1;
            h.last_error = Some(message.to_owned());
            h.last_error_at = Some(now());
        });
    }

    pub(super) fn read(&self) -> Health {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}
