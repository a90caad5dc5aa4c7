//! `handoff_to`: a group member names who speaks next (seed 001, AG2's
//! handoffs). The group offers it when its file asks (`handoffs.tool`); the
//! call is logged like any backend tool, and the group's loop reads the
//! target from the successful call (`Tool::handoff_target`) and ends the
//! member's turn there.

use serde_json::{Value, json};

use super::record::{backend_call, finish};
use crate::link::{Gone, RunLink, ToolOutcome};
use crate::llm::{Message, ToolCall};

/// The tool's name.
pub const HANDOFF_TOOL: &str = "handoff_to";

/// The target that hands the conversation back to the user.
pub const TO_USER: &str = "user";

/// The input schema: `agent`, one of the members or `user`.
pub(super) fn schema(members: &[String]) -> Value {
    let mut targets: Vec<&str> = members.iter().map(String::as_str).collect();
    targets.push(TO_USER);
    json!({
        "type": "object",
        "properties": {
            "agent": {"type": "string", "enum": targets,
                      "description": "who speaks next: a member of the group, or `user` to hand the conversation back"},
        },
        "required": ["agent"],
        "additionalProperties": false,
    })
}

/// What the model reads about the tool.
pub(super) fn description(members: &[String]) -> String {
    format!(
        "Hand the conversation to another member of the group ({}), or back to the user. Your turn ends with this call.",
        members.join(", ")
    )
}

/// The prefix of an `OnCondition`'s tool (AG2's `transfer_to_<target>_<n>`),
/// and of the call a met `OnContextCondition` is logged as.
pub const TRANSFER_PREFIX: &str = "transfer_to_";

/// Whether a logged call of `name` is a group's handoff: its answer's
/// `handoff_to` names whom the conversation went to.
pub fn is_handoff(name: &str) -> bool {
    name == HANDOFF_TOOL || name.starts_with(TRANSFER_PREFIX)
}

/// Whether `name` is kept for a group's own tools (`handoff_to`,
/// `transfer_to_…`, `update_context`, the speaker choice's
/// `select_speaker`): no agent file, MCP server or client may offer a tool
/// of that name.
pub fn reserved(name: &str) -> bool {
    is_handoff(name) || name == super::CONTEXT_TOOL || name == SPEAKER_TOOL
}

/// The `tool_name` of a group's "who speaks next?" to the user: what a
/// client (and the log, read again after a restart) knows it by; kept, so
/// no input tool of an agent file is taken for it.
pub const SPEAKER_TOOL: &str = "select_speaker";

/// Logs the call and its answer; `to`: an `OnCondition`'s target (else the
/// call names it).
pub(super) async fn run(
    call: &ToolCall,
    to: Option<&str>,
    link: &RunLink,
) -> Result<ToolOutcome, Gone> {
    link.emit(backend_call(call)).await?;
    let to = to.or(call.input["agent"].as_str()).unwrap_or_default();
    finish(link, call, Ok(json!({ "handoff_to": to }).to_string())).await
}

/// Logs a met `OnContextCondition` of the speaking member as its handoff:
/// a call of `transfer_to_<to>` (cut to a name a model takes) with the
/// expression as its input, answered `{"handoff_to": to}`. Returns the
/// messages it adds to the transcript.
pub async fn handed_over(link: &RunLink, to: &str, expression: &str) -> Result<[Message; 2], Gone> {
    let mut name = format!("{TRANSFER_PREFIX}{to}");
    name.truncate(64);
    let call = ToolCall {
        id: format!("ctx_{}", uuid::Uuid::new_v4().simple()),
        name,
        input: json!({ "expression": expression }),
    };
    let ToolOutcome::Result { content, is_error } = run(&call, Some(to), link).await? else {
        unreachable!("a handoff never ends the run")
    };
    Ok([
        Message::Assistant {
            text: String::new(),
            tool_calls: vec![call.clone()],
        },
        Message::ToolResult {
            id: call.id,
            name: call.name,
            content,
            is_error,
        },
    ])
}
