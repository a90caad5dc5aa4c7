//! What every kind of tool logs: a backend call's `chat.tool_call` and its
//! `chat.tool_response`, a refused call, and a component shown to the user
//! (a UI tool, or the approval gate's question).

use serde_json::Value;
use tokio::sync::oneshot;

use crate::link::{ComponentOutcome, Gone, RunLink, RunMsg, ToolOutcome};
use crate::llm::ToolCall;
use crate::protocol::{Display, EventKind};
use crate::telemetry::{Span, SpanKind, kv};

/// A tool the server runs: its `chat.tool_call` logged, then the work, then
/// its `chat.tool_response`.
pub(super) async fn backend(
    link: &RunLink,
    call: &ToolCall,
    work: impl Future<Output = Result<String, String>>,
) -> Result<ToolOutcome, Gone> {
    // In the log before it runs: a restart never finds an effect unlogged.
    link.log(backend_call(call)).await?;
    let result = work.await;
    finish(link, call, result).await
}

/// Logs the response of a backend tool and hands its result to the model.
pub(super) async fn finish(
    link: &RunLink,
    call: &ToolCall,
    result: Result<String, String>,
) -> Result<ToolOutcome, Gone> {
    let (content, is_error) = match result {
        Ok(content) => (content, false),
        Err(content) => (content, true),
    };
    // JSON answers are logged as JSON, anything else as text.
    let logged = serde_json::from_str(&content).unwrap_or_else(|_| Value::String(content.clone()));
    respond(link, call, logged, !is_error).await?;
    Ok(ToolOutcome::Result { content, is_error })
}

pub(crate) async fn respond(
    link: &RunLink,
    call: &ToolCall,
    content: Value,
    success: bool,
) -> Result<(), Gone> {
    link.emit(EventKind::ToolResponse {
        tool_name: call.name.clone(),
        content,
        success,
        corr: call.id.clone(),
        agent: None,
    })
    .await
}

/// Logs a call that will not run, and returns the reason to the model.
pub(super) async fn refuse(
    link: &RunLink,
    call: &ToolCall,
    why: String,
) -> Result<ToolOutcome, Gone> {
    link.emit(backend_call(call)).await?;
    respond(link, call, Value::String(why.clone()), false).await?;
    Ok(ToolOutcome::Result {
        content: why,
        is_error: true,
    })
}

pub(super) fn backend_call(call: &ToolCall) -> EventKind {
    EventKind::ToolCall {
        tool_name: call.name.clone(),
        component_type: None,
        awaiting_response: false,
        payload: call.input.clone(),
        corr: call.id.clone(),
        display: Display::Inline,
        agent: None,
    }
}

/// The `component_type` of an approval request.
pub const APPROVAL: &str = "approval";

/// Shows a component and waits for the client's result.
pub(super) async fn show(
    link: &RunLink,
    tool_name: &str,
    component_type: String,
    payload: Value,
    corr: &str,
    display: Display,
) -> Result<ComponentOutcome, Gone> {
    // The wait for a person, as a span of its own.
    let approval = component_type == APPROVAL;
    let span = Span::start(
        || {
            let kind = if approval { "approval" } else { "ui" };
            format!("await_{kind} {tool_name}").into()
        },
        SpanKind::Internal,
        || {
            vec![
                kv(
                    "agentwire.wait.kind",
                    if approval { "approval" } else { "ui" },
                ),
                kv("agentwire.component_type", component_type.clone()),
                kv("gen_ai.tool.name", tool_name.to_owned()),
                kv("agentwire.corr", corr.to_owned()),
            ]
        },
    );
    let (respond, answer) = oneshot::channel();
    link.send(RunMsg::ShowComponent {
        tool_name: tool_name.to_owned(),
        component_type,
        payload,
        corr: corr.to_owned(),
        display,
        check: None,
        agent: None,
        waited: None,
        respond,
    })
    .await?;
    let outcome = answer.await.map_err(|_| Gone)?;
    span.record(|| match &outcome {
        ComponentOutcome::Returned(data) => {
            let mut attributes = vec![kv("agentwire.wait.outcome", "answered")];
            if approval {
                let granted = data["approved"].as_bool() == Some(true);
                attributes.push(kv("agentwire.approval.granted", granted));
            } else if crate::telemetry::capture_content() {
                attributes.push(kv("agentwire.wait.answer", data.to_string()));
            }
            attributes
        }
        ComponentOutcome::TimedOut => vec![kv("agentwire.wait.outcome", "timed_out")],
    });
    Ok(outcome)
}
