//! The path every tool call takes, whatever its kind: the offer check,
//! context injection, schema validation, the approval gate, then the kind's
//! own run, timed; what the model gets back is capped. Every call is logged:
//! a `chat.tool_call` and its `chat.tool_response` (input-request tools log
//! `chat.input_request` instead).

use serde_json::{Value, json};

use super::record::{refuse, show};
use super::tool::{CallEnv, Tool};
use crate::link::{ComponentOutcome, Gone, RunLink, ToolOutcome};
use crate::llm::ToolCall;
use crate::protocol::{Display, EventKind, RunEndReason};

/// The `component_type` of an approval request.
pub const APPROVAL: &str = "approval";

/// Runs one tool call to its outcome; a result's content is capped at
/// `env.max_result_chars` (the log keeps it whole).
pub async fn execute(call: &ToolCall, env: &CallEnv<'_>) -> Result<ToolOutcome, Gone> {
    let link = env.link;
    let offered = env
        .tools
        .iter()
        .find(|t| t.name == call.name)
        .filter(|t| t.offered_for(env.context_type));
    let Some(tool) = offered else {
        return refuse(link, call, format!("there is no tool `{}`", call.name)).await;
    };
    let mut call = call.clone();
    inject(tool, &mut call.input, env.context);
    let errors: Vec<String> = tool
        .validator
        .iter_errors(&call.input)
        .map(|e| format!("{}: {e}", e.instance_path()))
        .collect();
    if !errors.is_empty() {
        return refuse(link, &call, format!("invalid input: {}", errors.join("; "))).await;
    }
    if tool.requires_approval {
        match ask_approval(link, &call).await? {
            Approval::Granted => {}
            Approval::Refused(reason) => {
                let why = match reason {
                    Some(r) => format!("the user refused this tool call: {r}"),
                    None => "the user refused this tool call".to_owned(),
                };
                return refuse(link, &call, why).await;
            }
            Approval::TimedOut => return Ok(ToolOutcome::End(RunEndReason::Timeout)),
        }
    }
    let started = std::time::Instant::now();
    let outcome = tool.kind.run(&call, env).await;
    metrics::histogram!(crate::metrics::TOOL_SECONDS, "kind" => tool.kind.label())
        .record(started.elapsed());
    Ok(match outcome? {
        ToolOutcome::Result { content, is_error } => ToolOutcome::Result {
            content: cap(&content, env.max_result_chars),
            is_error,
        },
        end @ ToolOutcome::End(_) => end,
    })
}

/// Fills arguments from the chat context where the model left them out or
/// gave a value of another JSON type than the context's.
fn inject(tool: &Tool, input: &mut Value, context: Option<&Value>) {
    let (Some(context), Some(args)) = (context, input.as_object_mut()) else {
        return;
    };
    for (arg, path) in &tool.inject {
        let Some(value) = path.iter().try_fold(context, |v, key| v.get(key)) else {
            continue;
        };
        let fits = args
            .get(arg)
            .is_some_and(|given| std::mem::discriminant(given) == std::mem::discriminant(value));
        if !fits {
            args.insert(arg.clone(), value.clone());
        }
    }
}

enum Approval {
    Granted,
    Refused(Option<String>),
    TimedOut,
}

/// Asks the user to approve a call (a `chat.tool_call` with `component_type:
/// "approval"` and the validated input in its payload).
async fn ask_approval(link: &RunLink, call: &ToolCall) -> Result<Approval, Gone> {
    let corr = format!("{}.approval", call.id);
    let payload = json!({"tool_name": call.name, "input": call.input, "tool_call_id": call.id});
    match show(
        link,
        &call.name,
        APPROVAL.to_owned(),
        payload,
        &corr,
        Display::Inline,
    )
    .await?
    {
        ComponentOutcome::Returned(data) => {
            link.emit(EventKind::ToolResponse {
                tool_name: call.name.clone(),
                content: data.clone(),
                success: true,
                corr,
            })
            .await?;
            Ok(if data["approved"].as_bool() == Some(true) {
                Approval::Granted
            } else {
                Approval::Refused(data["reason"].as_str().map(str::to_owned))
            })
        }
        ComponentOutcome::TimedOut => Ok(Approval::TimedOut),
    }
}

/// Cuts a tool result for the model, with a visible marker.
pub fn cap(content: &str, max_chars: usize) -> String {
    let total = content.chars().count();
    if total <= max_chars {
        return content.to_owned();
    }
    let kept: String = content.chars().take(max_chars).collect();
    format!(
        "{kept}\n[truncated: {} of {total} characters omitted]",
        total - max_chars
    )
}

#[cfg(test)]
mod tests {
    use super::cap;

    #[test]
    fn results_are_capped_with_a_marker() {
        assert_eq!(cap("short", 10), "short");
        let capped = cap(&"é".repeat(30), 10);
        assert!(capped.starts_with(&"é".repeat(10)));
        assert!(capped.ends_with("[truncated: 20 of 30 characters omitted]"));
    }
}
