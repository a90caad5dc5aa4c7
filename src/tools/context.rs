//! `update_context`: a group member writes the group's context variables
//! (AG2's `ContextVariables`, which AG2's tools update through their
//! `ReplyResult`). The group offers it when its file declares
//! `context_variables`; each write is logged as the call, a
//! `chat.agent_state` delta under the group's id (so every wire and every
//! later run sees the state), and the answer.

use std::sync::{Arc, Mutex};

use serde_json::{Map, Value, json};

use super::record::{backend_call, finish};
use crate::link::{Gone, RunLink, ToolOutcome};
use crate::llm::ToolCall;
use crate::protocol::EventKind;

/// The tool's name.
pub const CONTEXT_TOOL: &str = "update_context";

/// Variables a group's context holds at most.
pub const MAX_VARIABLES: usize = 64;

/// The largest context, as JSON.
pub const MAX_CONTEXT_BYTES: usize = 16 << 10;

/// A group run's context variables, shared by its members' turns.
pub type Context = Arc<Mutex<Map<String, Value>>>;

/// Whether `name` may name a variable (`${name}` reads it).
pub fn valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len()) && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// Why `context` cannot be the group's, if it cannot.
pub fn check(context: &Map<String, Value>) -> Result<(), String> {
    if let Some(bad) = context.keys().find(|k| !valid_name(k)) {
        return Err(format!(
            "`{bad}` is not a variable name (ASCII letters, digits, `_`)"
        ));
    }
    if context.len() > MAX_VARIABLES {
        return Err(format!("more than {MAX_VARIABLES} variables"));
    }
    if !crate::protocol::limits::json_fits(&Value::Object(context.clone()), MAX_CONTEXT_BYTES) {
        return Err(format!("over {} KiB as JSON", MAX_CONTEXT_BYTES >> 10));
    }
    Ok(())
}

/// The input schema.
pub(super) fn schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "values": {"type": "object",
                       "description": "the variables to set, by name, with their new values"},
        },
        "required": ["values"],
        "additionalProperties": false,
    })
}

/// What the model reads about the tool: the variables there are.
pub(super) fn description(names: &[String]) -> String {
    let known = if names.is_empty() {
        String::new()
    } else {
        format!(" Its variables: {}.", names.join(", "))
    };
    format!("Set variables of the group's shared context, which every member reads.{known}")
}

/// Applies the call to `context` and logs it; a write past the limits is
/// refused (an error result) and changes nothing.
pub(super) async fn run(
    group: &str,
    context: &Context,
    call: &ToolCall,
    link: &RunLink,
) -> Result<ToolOutcome, Gone> {
    link.emit(backend_call(call)).await?;
    let values = call.input["values"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    // Merged, checked and kept under one lock: the calls of one turn run
    // at once, and none may lose another's write or pass the limits with it.
    let checked = {
        let mut now = context.lock().expect("context lock");
        let mut next = now.clone();
        next.extend(values.clone());
        check(&next).map(|()| *now = next)
    };
    if let Err(why) = checked {
        return finish(
            link,
            call,
            Err(format!("the context was not changed: {why}")),
        )
        .await;
    }
    let delta: Vec<Value> = values
        .iter()
        .map(|(name, value)| json!({"op": "add", "path": format!("/{name}"), "value": value}))
        .collect();
    link.emit(EventKind::AgentState {
        agent: group.to_owned(),
        snapshot: None,
        delta: Some(Value::Array(delta)),
    })
    .await?;
    finish(
        link,
        call,
        Ok(json!({ "context_variables": values }).to_string()),
    )
    .await
}
