//! Input-request tools (`input_request:` and the `ask_user` built-in): a
//! `chat.input_request` the user answers with text; the call waits for it.

use serde_json::{Value, json};
use tokio::sync::oneshot;

use crate::link::{Gone, InputOutcome, RunLink, RunMsg, ToolOutcome};
use crate::llm::ToolCall;
use crate::protocol::RunEndReason;

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
        InputOutcome::Answered(text) => Ok(ToolOutcome::Result {
            content: text,
            is_error: false,
        }),
        InputOutcome::TimedOut => Ok(ToolOutcome::End(RunEndReason::Timeout)),
    }
}
