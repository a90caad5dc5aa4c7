//! Input-request tools (`input_request:` and the `ask_user` built-in): a
//! `chat.input_request` the user answers with text; the call waits for it.

use serde_json::{Value, json};
use tokio::sync::oneshot;

use crate::link::{Gone, InputOutcome, RunLink, RunMsg, ToolOutcome};
use crate::llm::ToolCall;
use crate::protocol::RunEndReason;
use crate::telemetry::{Span, SpanKind, kv};

/// `ask_user`'s input when the agent file gives none.
pub(super) fn default_schema() -> Value {
    json!({
        "type": "object",
        "properties": {"prompt": {"type": "string", "description": "The question for the user"}},
        "required": ["prompt"],
    })
}

/// Asks the user and hands the answer to the model.
pub(super) async fn run(
    prompt_field: &str,
    password: bool,
    call: &ToolCall,
    link: &RunLink,
) -> Result<ToolOutcome, Gone> {
    // The wait for a person, as a span of its own; a secret answer is
    // never recorded.
    let span = Span::start(
        || format!("await_input {}", call.name).into(),
        SpanKind::Internal,
        || {
            vec![
                kv("agentwire.wait.kind", "input"),
                kv("gen_ai.tool.name", call.name.clone()),
                kv("agentwire.input.secret", password),
            ]
        },
    );
    let (respond, answer) = oneshot::channel();
    link.send(RunMsg::AskInput {
        request_id: call.id.clone(),
        prompt: call.input[prompt_field]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
        password,
        options: None,
        tool_name: Some(call.name.clone()),
        waited: None,
        respond,
    })
    .await?;
    match answer.await.map_err(|_| Gone)? {
        InputOutcome::Answered(text) => {
            span.record(|| {
                let mut attributes = vec![kv("agentwire.wait.outcome", "answered")];
                if crate::telemetry::capture_content() && !password {
                    attributes.push(kv("agentwire.wait.answer", text.clone()));
                }
                attributes
            });
            Ok(ToolOutcome::Result {
                content: text,
                is_error: false,
            })
        }
        InputOutcome::TimedOut => {
            span.record(|| vec![kv("agentwire.wait.outcome", "timed_out")]);
            Ok(ToolOutcome::End(RunEndReason::Timeout))
        }
    }
}
