//! A tool call on a server: its progress, its timeout, its cancellation,
//! and its result read into what the log keeps and what a model reads.

use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CancelledNotificationParam, ClientRequest, ContentBlock, Request,
    ServerResult,
};
use rmcp::service::PeerRequestOptions;
use rmcp::{RoleClient, ServiceError};
use serde_json::Value;
use tokio::sync::mpsc;

use super::handler::Progress;
use super::server::{Conn, McpServer, lock};
use crate::llm::cap_chars;
use crate::telemetry::{Span, SpanKind, kv, propagate};

/// A call's answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Called {
    /// The result as the server sent it (`content`, `structuredContent`,
    /// `isError`): what the log keeps.
    pub result: Value,
    /// What a model reads: the text blocks, else the structured content;
    /// an image, audio or resource as a note naming it (kept in the log).
    pub text: String,
    /// `isError`: a tool error for the model.
    pub is_error: bool,
}

/// Why a call has no answer.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CallError {
    #[error("the MCP server `{0}` is not connected")]
    Down(String),
    #[error("the MCP server `{server}` did not answer within {seconds} s")]
    Timeout { server: String, seconds: u64 },
    #[error("the MCP server `{server}` failed the call: {message}")]
    Failed { server: String, message: String },
}

/// Progress reports queued per call at most (the rest are dropped).
const PROGRESS_QUEUE: usize = 64;
/// How long a call that reported progress waits after its answer for
/// reports still on their way.
const PROGRESS_GRACE: Duration = Duration::from_millis(20);
/// How long a server whose call timed out has to answer a ping (at most:
/// never longer than the call's own timeout).
const PING_TIMEOUT: Duration = Duration::from_secs(10);

impl McpServer {
    /// Calls `tool` with `arguments`. Progress the server reports goes to
    /// `progress` (in increasing order; a full queue drops a report);
    /// `timeout` runs again from each report. Dropping the
    /// future before the answer cancels the call on the server
    /// (`notifications/cancelled`).
    ///
    /// # Errors
    /// The server is down, did not answer in time, or failed the request
    /// (not a tool error: that is an answer with `is_error`).
    pub async fn call(
        &self,
        tool: &str,
        arguments: serde_json::Map<String, Value>,
        timeout: Duration,
        progress: mpsc::Sender<Progress>,
    ) -> Result<Called, CallError> {
        // Its span (traces on), whose context the server gets in `_meta`
        // (and, over HTTP, as the `traceparent` header).
        let span = Span::start(
            || format!("tools/call {tool}").into(),
            SpanKind::Client,
            || {
                vec![
                    kv("mcp.method.name", "tools/call"),
                    kv("gen_ai.operation.name", "execute_tool"),
                    kv("gen_ai.tool.name", tool.to_owned()),
                    kv("agentwire.mcp.server", self.shared.name.clone()),
                ]
            },
        );
        let traceparent = span.context().and_then(propagate::traceparent_of);
        let called = self
            .call_traced(tool, arguments, timeout, progress, traceparent)
            .await;
        match &called {
            // The tool's own words only when contents are captured.
            Ok(c) if c.is_error => span.fail(
                || "tool_error".to_owned(),
                || match crate::telemetry::capture_content() {
                    true => cap_chars(&c.text, 200),
                    false => "the tool answered with an error".to_owned(),
                },
            ),
            Ok(_) => {}
            Err(e) => span.fail(
                || {
                    match e {
                        CallError::Down(_) => "down",
                        CallError::Timeout { .. } => "timeout",
                        CallError::Failed { .. } => "failed",
                    }
                    .to_owned()
                },
                || e.to_string(),
            ),
        }
        called
    }

    /// [`call`](Self::call), `traceparent` in the request's `_meta`.
    async fn call_traced(
        &self,
        tool: &str,
        arguments: serde_json::Map<String, Value>,
        timeout: Duration,
        progress: mpsc::Sender<Progress>,
        traceparent: Option<String>,
    ) -> Result<Called, CallError> {
        let name = self.shared.name.clone();
        let Some(conn) = lock(&self.shared.conn).clone() else {
            return Err(CallError::Down(name));
        };
        let params = CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments);
        let mut options = PeerRequestOptions::with_timeout(timeout).reset_timeout_on_progress();
        if let Some(traceparent) = traceparent {
            let mut meta = rmcp::model::RequestMetaObject::new();
            meta.insert("traceparent".to_owned(), Value::String(traceparent));
            options.meta = Some(meta);
        }
        let handle = match conn
            .peer
            .send_cancellable_request(
                ClientRequest::CallToolRequest(Request::new(params)),
                options,
            )
            .await
        {
            Ok(handle) => handle,
            Err(e) => return Err(self.failed(e, timeout, &conn)),
        };
        let (tx, mut rx) = mpsc::channel(PROGRESS_QUEUE);
        let token = handle.progress_token.clone();
        lock(&self.shared.progress).register(token.clone(), tx.clone());
        // However the call ends, its reports go nowhere after.
        let _registered = Registered {
            sinks: self.shared.progress.clone(),
            token,
            sink: tx,
        };
        // Dropped before the answer (the run cancelled): the server is told.
        let guard = CancelOnDrop {
            peer: Some(handle.peer.clone()),
            id: handle.id.clone(),
        };
        let answer = handle.await_response();
        tokio::pin!(answer);
        let mut last = f64::MIN;
        let outcome = loop {
            tokio::select! {
                outcome = &mut answer => break outcome,
                Some(p) = rx.recv() => {
                    // Reports may arrive out of order: only forward ones.
                    if p.progress > last {
                        last = p.progress;
                        let _ = progress.try_send(p);
                    }
                }
            }
        };
        guard.disarm();
        // Reports are handled on tasks of their own, so the last ones may
        // come just after the answer: a call that reported waits a moment
        // for them (a fixed moment: a server reporting on and on does not
        // hold the call).
        if last > f64::MIN {
            let deadline = tokio::time::Instant::now() + PROGRESS_GRACE;
            while let Ok(Some(p)) = tokio::time::timeout_at(deadline, rx.recv()).await {
                if p.progress > last {
                    last = p.progress;
                    let _ = progress.try_send(p);
                }
            }
        }
        match outcome {
            Ok(ServerResult::CallToolResult(result)) => Ok(read(&result)),
            Ok(_) => Err(CallError::Failed {
                server: name,
                message: "an answer that is not a tool result".into(),
            }),
            Err(e) => Err(self.failed(e, timeout, &conn)),
        }
    }

    /// What a failed request on `conn` means. A transport gone marks the
    /// connection broken for the supervisor; a timeout has the server
    /// pinged, and a server that does not answer that either too.
    fn failed(&self, e: ServiceError, timeout: Duration, conn: &Conn) -> CallError {
        let server = self.shared.name.clone();
        match e {
            ServiceError::Timeout { .. } => {
                probe(conn, timeout);
                CallError::Timeout {
                    server,
                    seconds: timeout.as_secs(),
                }
            }
            ServiceError::McpError(data) => CallError::Failed {
                server,
                message: data.message.to_string(),
            },
            ServiceError::TransportClosed | ServiceError::TransportSend(_) => {
                // The connection is gone: the supervisor connects again.
                conn.broken.mark("unreachable");
                CallError::Down(server)
            }
            other => CallError::Failed {
                server,
                message: other.to_string(),
            },
        }
    }
}

/// Pings the server of a call that timed out, in the background: one
/// that does not answer that either (a process stopped, a session lost
/// without a word) is marked down and connected again; one that answers
/// (a tool that hangs on its own) stays.
fn probe(conn: &Conn, timeout: Duration) {
    let Ok(rt) = tokio::runtime::Handle::try_current() else {
        return;
    };
    let (peer, broken) = (conn.peer.clone(), conn.broken.clone());
    let wait = timeout.min(PING_TIMEOUT);
    rt.spawn(async move {
        let ping = ClientRequest::PingRequest(rmcp::model::PingRequest::default());
        let options = PeerRequestOptions::with_timeout(wait);
        let answer = match peer.send_request_with_option(ping, options).await {
            Ok(handle) => handle.await_response().await,
            Err(e) => Err(e),
        };
        if let Err(
            ServiceError::Timeout { .. }
            | ServiceError::TransportClosed
            | ServiceError::TransportSend(_),
        ) = answer
        {
            broken.mark(&format!(
                "did not answer a call within {} s, nor a ping within {} s",
                timeout.as_secs(),
                wait.as_secs()
            ));
        }
    });
}

/// A call's progress sink, removed when the call ends or is dropped.
struct Registered {
    sinks: super::handler::ProgressSinks,
    token: rmcp::model::ProgressToken,
    sink: mpsc::Sender<Progress>,
}

impl Drop for Registered {
    fn drop(&mut self) {
        lock(&self.sinks).unregister(&self.token, &self.sink);
    }
}

/// Sends `notifications/cancelled` for a request dropped before its answer.
struct CancelOnDrop {
    peer: Option<rmcp::service::Peer<RoleClient>>,
    id: rmcp::model::RequestId,
}

impl CancelOnDrop {
    fn disarm(mut self) {
        self.peer = None;
    }
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if let Some(peer) = self.peer.take() {
            let params = CancelledNotificationParam::new(
                Some(self.id.clone()),
                Some("the run was cancelled".into()),
            );
            if let Ok(rt) = tokio::runtime::Handle::try_current() {
                rt.spawn(async move {
                    let _ = peer.notify_cancelled(params).await;
                });
            }
        }
    }
}

/// A tool result: the JSON the log keeps, and the text a model reads.
fn read(result: &rmcp::model::CallToolResult) -> Called {
    let json = serde_json::to_value(result).unwrap_or(Value::Null);
    let mut parts = Vec::new();
    for block in &result.content {
        match block {
            ContentBlock::Text(t) => parts.push(t.text.clone()),
            ContentBlock::Image(i) => {
                parts.push(format!("[an image ({}) is shown to the user]", i.mime_type))
            }
            ContentBlock::Audio(a) => {
                parts.push(format!("[audio ({}) is kept for the user]", a.mime_type))
            }
            ContentBlock::Resource(r) => parts.push(resource_text(&r.resource)),
            ContentBlock::ResourceLink(l) => parts.push(format!("[resource {}]", l.uri)),
            _ => parts.push("[content the model cannot read, kept for the user]".into()),
        }
    }
    let text = if parts.iter().all(|p| p.is_empty()) {
        match &result.structured_content {
            Some(v) => v.to_string(),
            None => String::new(),
        }
    } else {
        parts.join("\n")
    };
    Called {
        result: json,
        text,
        is_error: result.is_error == Some(true),
    }
}

fn resource_text(resource: &rmcp::model::ResourceContents) -> String {
    match resource {
        rmcp::model::ResourceContents::TextResourceContents { uri, text, .. } => {
            format!("[resource {uri}]\n{text}")
        }
        rmcp::model::ResourceContents::BlobResourceContents { uri, .. } => {
            format!("[resource {uri}: binary, kept for the user]")
        }
        _ => "[a resource the model cannot read, kept for the user]".into(),
    }
}

#[cfg(test)]
mod tests {
    use rmcp::model::{CallToolResult, ContentBlock};
    use serde_json::json;

    use super::read;

    #[test]
    fn text_blocks_are_what_a_model_reads_and_the_log_keeps_everything() {
        let mut result = CallToolResult::success(vec![
            ContentBlock::text("first"),
            ContentBlock::image("iVBORw0KGgo=", "image/png"),
            ContentBlock::text("second"),
        ]);
        result.structured_content = Some(json!({"n": 1}));
        let called = read(&result);
        assert_eq!(
            called.text,
            "first\n[an image (image/png) is shown to the user]\nsecond"
        );
        assert!(!called.is_error);
        assert_eq!(called.result["content"][1]["data"], "iVBORw0KGgo=");
        assert_eq!(called.result["structuredContent"], json!({"n": 1}));
    }

    #[test]
    fn structured_content_alone_is_read_as_json_and_is_error_is_kept() {
        let mut result = CallToolResult::structured(json!({"temp": 21}));
        result.content.clear();
        assert_eq!(read(&result).text, r#"{"temp":21}"#);
        let failed = CallToolResult::error(vec![ContentBlock::text("no luck")]);
        let called = read(&failed);
        assert!(called.is_error);
        assert_eq!(called.text, "no luck");
    }
}
