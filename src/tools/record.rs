//! What every kind of tool logs: a backend call's `chat.tool_call` and its
//! `chat.tool_response`, a refused call, and a component shown to the user
//! (a UI tool, or the approval gate's question).

use serde_json::Value;
use tokio::sync::oneshot;

use crate::link::{ComponentOutcome, Gone, RunLink, RunMsg, ToolOutcome};
use crate::llm::ToolCall;
use crate::protocol::{Display, EventKind};

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

/// Shows a component and waits for the client's result.
pub(super) async fn show(
    link: &RunLink,
    tool_name: &str,
    component_type: String,
    payload: Value,
    corr: &str,
    display: Display,
) -> Result<ComponentOutcome, Gone> {
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
    answer.await.map_err(|_| Gone)
}
