//! [`Caller`]: who sends a command that may start a run, and what that
//! request adds to the run (`RunExtras`).

use serde_json::{Map, Value};

use crate::session::handle::RunExtras;

/// Who sends a command that may start a run.
#[derive(Debug, Clone, Copy)]
pub struct Caller<'a> {
    /// The authenticated user.
    pub user: &'a str,
    /// Their bearer token, forwarded to the run's HTTP tools (never stored).
    pub bearer: Option<&'a str>,
    /// Seed 000's `context_type`: selects the agent's tools for this run.
    pub context_type: Option<&'a str>,
    /// The UI state for this run (at `chat.start`, also kept with the chat).
    pub context: Option<&'a Map<String, Value>>,
    /// Tools the client brings with this run (checked already).
    pub client_tools: &'a [crate::tools::ClientTool],
    /// The files the message attaches (`None`: none named; an edit then
    /// keeps the edited message's).
    pub attachments: Option<&'a [crate::protocol::FileRef]>,
    /// The `traceparent` its connection was opened with (a WebSocket's; an
    /// HTTP request's is the current trace context).
    pub traceparent: Option<&'a str>,
}

impl<'a> Caller<'a> {
    /// A caller without a token.
    pub fn user(user: &'a str) -> Self {
        Self::bearing(user, None)
    }

    /// A caller with their token (forwarded to HTTP tools), no context.
    pub fn bearing(user: &'a str, bearer: Option<&'a str>) -> Self {
        Self {
            user,
            bearer,
            context_type: None,
            context: None,
            client_tools: &[],
            attachments: None,
            traceparent: None,
        }
    }

    /// The caller, its connection opened with `traceparent`.
    #[must_use]
    pub fn traced(self, traceparent: Option<&'a str>) -> Self {
        Self {
            traceparent,
            ..self
        }
    }

    pub(super) fn extras(&self) -> RunExtras {
        RunExtras {
            bearer: self.bearer.map(str::to_owned),
            context_type: self.context_type.map(str::to_owned),
            context: self.context.cloned(),
            derived_id: false,
            workflow: None,
            resumed: None,
            client_tools: self.client_tools.to_vec(),
            branch: None,
            model: None,
            attachments: None,
            traceparent: self
                .traceparent
                .map(str::to_owned)
                .or_else(crate::telemetry::propagate::current_traceparent),
        }
    }
}
