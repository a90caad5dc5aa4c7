//! What a run input holds, read for the run: its trailing `tool` messages
//! (the results of frontend tools), the calls and results it already has,
//! and its `context` and `state` as the run's context.

use serde_json::{Value, json};

use super::RunAgentInput;
use crate::http::error::ApiError;
use crate::http::state::AppState;
use crate::protocol::EventKind;
use crate::wire::text_parts;

/// Most trailing `tool` messages one run input may answer with.
pub(super) const MAX_RESULTS: usize = crate::tools::MAX_CLIENT_TOOLS;

/// A result for the call logged at `seq`.
pub(super) type ToolResult = (String, Value, u64);

/// The results a run input ends with (its trailing `tool` messages with a
/// `toolCallId`): `(toolCallId, the result, 0)`, in order.
pub(super) fn tool_results(messages: &[Value]) -> Vec<ToolResult> {
    let trailing = messages
        .iter()
        .rev()
        .take_while(|m| m["role"] == "tool")
        .count();
    messages[messages.len() - trailing..]
        .iter()
        .filter_map(|m| {
            let id = m["toolCallId"].as_str().filter(|id| !id.is_empty())?;
            let content = Value::String(text_parts(&m["content"]));
            let result = match m["error"].as_str() {
                Some(error) => json!({"error": error, "content": content}),
                None => content,
            };
            Some((id.to_owned(), result, 0))
        })
        .collect()
}

/// The results that answer a frontend tool's call of the chat, each with
/// the seq its call was logged at (the previous response stopped at or
/// after it). A `tool` message of any other call (a server tool's result
/// the client holds, an input request or an approval, which are answered
/// through `resume[]`) answers nothing.
pub(super) async fn frontend_results(
    state: &AppState,
    user: &str,
    chat_id: uuid::Uuid,
    results: Vec<ToolResult>,
) -> Result<Vec<ToolResult>, ApiError> {
    let transcript = state.registry.history(chat_id, user, u64::MAX).await?;
    let called = |corr: &str| {
        transcript.iter().rev().find_map(|e| match &e.kind {
            EventKind::ToolCall {
                corr: c,
                component_type: Some(kind),
                ..
            } if c == corr && kind == crate::tools::FRONTEND => Some(e.seq),
            _ => None,
        })
    };
    Ok(results
        .into_iter()
        .filter_map(|(corr, data, _)| Some((corr.clone(), data, called(&corr)?)))
        .collect())
}

/// The tool calls (assistant messages' `toolCalls`) and results (`tool`
/// messages) a run input holds, by call id.
pub(super) fn held(messages: &[Value]) -> (Vec<String>, Vec<String>) {
    let calls = messages
        .iter()
        .flat_map(|m| m["toolCalls"].as_array().into_iter().flatten())
        .filter_map(|c| c["id"].as_str().map(str::to_owned))
        .collect();
    let results = messages
        .iter()
        .filter(|m| m["role"] == "tool")
        .filter_map(|m| m["toolCallId"].as_str().map(str::to_owned))
        .collect();
    (calls, results)
}

/// The run's context: each `context` entry's value under its description,
/// and the client's `state` (when it has any) under `state`.
pub(super) fn run_context(input: &RunAgentInput) -> Option<serde_json::Map<String, Value>> {
    let mut context: serde_json::Map<String, Value> = input
        .context
        .iter()
        .map(|c| (c.description.clone(), c.value.clone()))
        .collect();
    // The artifacts agentwire shared (`artifact:<corr>`) are its own, not
    // the client's to tell the model.
    let state = match &input.state {
        Value::Object(o) => Value::Object(
            o.iter()
                .filter(|(k, _)| !k.starts_with("artifact:"))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        ),
        other => other.clone(),
    };
    let stateful = match &state {
        Value::Null => false,
        Value::Object(o) => !o.is_empty(),
        _ => true,
    };
    if stateful {
        context.insert("state".into(), state);
    }
    (!context.is_empty()).then_some(context)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(body: Value) -> RunAgentInput {
        serde_json::from_value(body).unwrap()
    }

    #[test]
    fn context_entries_and_state_are_the_runs_context() {
        let i = input(json!({"threadId": "t", "runId": "r",
            "context": [{"description": "The user's name", "value": "Ada"}],
            "state": {"cart": [1]}}));
        assert_eq!(
            Value::Object(run_context(&i).unwrap()),
            json!({"The user's name": "Ada", "state": {"cart": [1]}})
        );
        // AG-UI's defaults (`state: {}`, no context) are no context; nor
        // are the artifacts agentwire shared.
        let i = input(json!({"threadId": "t", "runId": "r", "context": [],
            "state": {"artifact:c1": {"payload": {}}}}));
        assert!(run_context(&i).is_none());
    }

    #[test]
    fn only_the_trailing_tool_messages_are_results() {
        let messages = [
            json!({"role": "tool", "toolCallId": "old", "content": "x"}),
            json!({"role": "assistant", "toolCalls": []}),
            json!({"role": "tool", "toolCallId": "a", "content": "sunny"}),
            json!({"role": "tool", "toolCallId": "b", "content": [{"type": "text", "text": "4"}, {"type": "text", "text": "2"}], "error": "late"}),
            json!({"role": "tool", "content": "no id: not a result"}),
        ];
        assert_eq!(
            tool_results(&messages),
            [
                ("a".to_owned(), json!("sunny"), 0),
                ("b".to_owned(), json!({"error": "late", "content": "42"}), 0)
            ]
        );
        assert!(tool_results(&[json!({"role": "user", "content": "hi"})]).is_empty());
    }

    #[test]
    fn what_a_run_input_holds_is_known() {
        let messages = [
            json!({"role": "user", "content": "hi"}),
            json!({"role": "assistant", "toolCalls": [{"id": "c1"}, {"id": "c2"}]}),
            json!({"role": "tool", "toolCallId": "c1", "content": "x"}),
        ];
        assert_eq!(
            held(&messages),
            (
                vec!["c1".to_owned(), "c2".to_owned()],
                vec!["c1".to_owned()]
            )
        );
    }
}
