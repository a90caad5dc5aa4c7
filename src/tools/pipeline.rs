//! The path every tool call takes, whatever its kind: the offer check,
//! context injection, schema validation, the approval gate, then the kind's
//! own run, timed; what the model gets back is capped. Every call is logged:
//! a `chat.tool_call` and its `chat.tool_response` (input-request tools log
//! `chat.input_request` instead).

use serde_json::{Value, json};

use super::env::CallEnv;
use super::preview::PREVIEW_SUFFIX;
use super::record::{refuse, show};
use super::tool::{Tool, ToolKind};
use crate::link::{ComponentOutcome, Gone, RunLink, ToolOutcome};
use crate::llm::ToolCall;
use crate::protocol::{Display, EventKind, RunEndReason};
use crate::telemetry::{Span, SpanKind, kv};

pub use super::record::APPROVAL;
/// An approval request's `corr`: the call's id and this.
pub const APPROVAL_SUFFIX: &str = ".approval";

/// Runs one tool call to its outcome; a result's content is capped at
/// `env.max_result_chars` (the log keeps it whole). Under its span
/// (`execute_tool {name}`), the approval's wait and the call's own spans
/// (an MCP call's, the `traceparent` an HTTP tool is sent) its children.
pub async fn execute(
    call: &ToolCall,
    tools: &[Tool],
    env: &CallEnv<'_>,
) -> Result<ToolOutcome, Gone> {
    let span = Span::start(
        || format!("execute_tool {}", call.name).into(),
        SpanKind::Internal,
        || {
            let mut attributes = vec![
                kv("gen_ai.operation.name", "execute_tool"),
                kv("gen_ai.tool.name", call.name.clone()),
                kv("gen_ai.tool.call.id", call.id.clone()),
                kv("gen_ai.tool.type", "function"),
            ];
            if crate::telemetry::capture_content() {
                attributes.push(kv("gen_ai.tool.call.arguments", call.input.to_string()));
            }
            attributes
        },
    );
    let outcome = span.scope(checked(call, tools, env)).await;
    match &outcome {
        Ok(ToolOutcome::Result { content, is_error }) => {
            span.record(|| {
                let mut attributes = vec![kv(
                    "agentwire.tool.outcome",
                    if *is_error { "error" } else { "ok" },
                )];
                // A secret answer (a `password` input request's) never.
                let secret = tools.iter().any(|t| {
                    t.name == call.name
                        && matches!(t.kind, ToolKind::InputRequest { password: true, .. })
                });
                if crate::telemetry::capture_content() && !secret {
                    attributes.push(kv("gen_ai.tool.call.result", content.clone()));
                }
                attributes
            });
            if *is_error {
                // The tool's own words only when contents are captured.
                let why = || match crate::telemetry::capture_content() {
                    true => cap(content, 200),
                    false => "the tool answered with an error".to_owned(),
                };
                span.fail(|| "tool_error".to_owned(), why);
            }
        }
        Ok(ToolOutcome::End(reason)) => span.record(|| {
            vec![
                kv("agentwire.tool.outcome", "ended"),
                kv("agentwire.run.end_reason", reason.as_str()),
            ]
        }),
        Err(Gone) => span.record(|| vec![kv("agentwire.tool.outcome", "gone")]),
    }
    outcome
}

/// [`execute`]'s steps.
async fn checked(call: &ToolCall, tools: &[Tool], env: &CallEnv<'_>) -> Result<ToolOutcome, Gone> {
    let link = env.link;
    let offered = tools
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
    // A continued run does not ask again for an approval the log has.
    if tool.requires_approval && !link.approved(&call.id) {
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
    let (content, is_error) = match outcome? {
        ToolOutcome::Result { content, is_error } => (content, is_error),
        end @ ToolOutcome::End(_) => return Ok(end),
    };
    let content = match (&tool.preview, &tool.summary) {
        (Some(preview), _) if !is_error => {
            link.emit(EventKind::ToolCall {
                tool_name: call.name.clone(),
                component_type: Some(preview.component_type.clone()),
                awaiting_response: false,
                payload: preview.payload(&call.input, &content),
                corr: format!("{}{PREVIEW_SUFFIX}", call.id),
                display: Display::Artifact,
                agent: None,
            })
            .await?;
            preview.answer()
        }
        (_, Some(summary)) if !is_error => summary.apply(&content),
        _ => content,
    };
    Ok(ToolOutcome::Result {
        content: cap(&content, env.max_result_chars),
        is_error,
    })
}

/// Fills arguments from the chat context where the model left them out or
/// gave a value of another JSON type than the context's. An id (a UUID in the
/// context) also replaces a value that is not a UUID — a rule's name where its
/// id belongs —, and keeps one that is (seed 000: the model may mean another).
fn inject(tool: &Tool, input: &mut Value, context: Option<&Value>) {
    let (Some(context), Some(args)) = (context, input.as_object_mut()) else {
        return;
    };
    for (arg, path) in &tool.inject {
        let Some(value) = path.iter().try_fold(context, |v, key| v.get(key)) else {
            continue;
        };
        let fits = args.get(arg).is_some_and(|given| {
            if is_uuid(value) {
                is_uuid(given)
            } else {
                std::mem::discriminant(given) == std::mem::discriminant(value)
            }
        });
        if !fits {
            args.insert(arg.clone(), value.clone());
        }
    }
}

fn is_uuid(v: &Value) -> bool {
    v.as_str().is_some_and(|s| uuid::Uuid::parse_str(s).is_ok())
}

/// The user's answer to an approval gate.
pub enum Approval {
    Granted,
    Refused(Option<String>),
    TimedOut,
}

/// Asks the user to approve a call (a `chat.tool_call` with `component_type:
/// "approval"` and the validated input in its payload).
///
/// Also the gate of a workflow that `requires_approval` (its invocation is
/// the call).
pub async fn ask_approval(link: &RunLink, call: &ToolCall) -> Result<Approval, Gone> {
    ask_approval_of(link, call, None).await
}

/// [`ask_approval`] for an upstream agent's interrupt (`interrupt_id`, in
/// the payload: what the answer resumes, after a restart too).
pub async fn ask_approval_of(
    link: &RunLink,
    call: &ToolCall,
    interrupt_id: Option<&str>,
) -> Result<Approval, Gone> {
    let corr = format!("{}{APPROVAL_SUFFIX}", call.id);
    let mut payload = json!({"tool_name": call.name, "input": call.input, "tool_call_id": call.id});
    if let Some(id) = interrupt_id {
        payload["interrupt_id"] = json!(id);
    }
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
            // Committed before the call goes on: a restart never finds the
            // gate open after the action ran (and asks, and runs it, again).
            link.log(EventKind::ToolResponse {
                tool_name: call.name.clone(),
                content: data.clone(),
                success: true,
                corr,
                agent: None,
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
pub use crate::llm::cap_chars as cap;

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::{Tool, cap, inject};

    #[test]
    fn an_id_from_the_context_replaces_a_name_but_not_another_id() {
        let spec = json!({"name": "get_rule", "builtin": "progress",
            "inject": {"workflow_id": "context.workflow_id", "units": "context.units"}});
        let tool = Tool::from_spec(serde_json::from_value(spec).unwrap(), 0).unwrap();
        let ctx = json!({"workflow_id": "550e8400-e29b-41d4-a716-446655440000", "units": "metric"});
        let other = "6ba7b810-9dad-11d1-80b4-00c04fd430c8";
        for (given, expect) in [
            (json!({}), ctx["workflow_id"].clone()),
            (
                json!({"workflow_id": "Low Stock Alert"}),
                ctx["workflow_id"].clone(),
            ),
            (json!({"workflow_id": 7}), ctx["workflow_id"].clone()),
            (json!({"workflow_id": other}), json!(other)),
        ] {
            let mut input = given.clone();
            inject(&tool, &mut input, Some(&ctx));
            assert_eq!(input["workflow_id"], expect, "given {given}");
            assert_eq!(input["units"], "metric");
        }
        // Not an id: a value of the context's type is kept.
        let mut input = json!({"units": "imperial"});
        inject(&tool, &mut input, Some(&ctx));
        assert_eq!(input["units"], "imperial");
    }

    #[test]
    fn results_are_capped_with_a_marker() {
        assert_eq!(cap("short", 10), "short");
        let capped = cap(&"é".repeat(30), 10);
        assert!(capped.starts_with(&"é".repeat(10)));
        assert!(capped.ends_with("[truncated: 20 of 30 characters omitted]"));
    }
}
