//! `handoff_to`: a group member names who speaks next (seed 001, AG2's
//! handoffs). The group offers it when its file asks (`handoffs.tool`); the
//! call is logged like any backend tool, and the group's loop reads the
//! target from the successful call (`Tool::handoff_target`) and ends the
//! member's turn there.

use serde_json::{Value, json};

use super::record::{backend_call, finish};
use crate::link::{Gone, RunLink, ToolOutcome};
use crate::llm::ToolCall;

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

/// Logs the call and its answer.
pub(super) async fn run(call: &ToolCall, link: &RunLink) -> Result<ToolOutcome, Gone> {
    link.emit(backend_call(call)).await?;
    let to = call.input["agent"].as_str().unwrap_or_default();
    finish(link, call, Ok(json!({ "handoff_to": to }).to_string())).await
}
