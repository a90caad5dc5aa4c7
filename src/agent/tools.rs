//! Running one tool call: context injection, schema validation, the approval
//! gate, then the tool itself. Every call is logged: a `chat.tool_call` and its
//! `chat.tool_response` (input-request tools log `chat.input_request` instead).

use serde_json::{Value, json};
use tokio::sync::oneshot;

use super::link::{ComponentOutcome, Gone, InputOutcome, RunLink, RunMsg, RunSpec, ToolOutcome};
use super::{Agent, ComponentType, Tool, ToolKind};
use crate::llm::ToolCall;
use crate::protocol::{Display, EventKind, RunEndReason};

/// The `component_type` of an approval request.
pub const APPROVAL: &str = "approval";

/// Runs one tool call to its outcome.
pub(super) async fn execute(
    agent: &Agent,
    link: &RunLink,
    call: &ToolCall,
    spec: &RunSpec,
) -> Result<ToolOutcome, Gone> {
    let offered = agent
        .tool(&call.name)
        .filter(|t| t.offered_for(spec.context_type.as_deref()));
    let Some(tool) = offered else {
        return refuse(link, call, format!("there is no tool `{}`", call.name)).await;
    };
    let mut call = call.clone();
    inject(tool, &mut call.input, spec.context.as_ref());
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
    let kind = match &tool.kind {
        ToolKind::Ui { .. } => "ui",
        ToolKind::InputRequest { .. } => "input",
        ToolKind::Builtin(_) => "builtin",
        ToolKind::Http(_) => "http",
    };
    let started = std::time::Instant::now();
    let outcome = run(agent, tool, link, &call, spec).await;
    metrics::histogram!(crate::metrics::TOOL_SECONDS, "kind" => kind).record(started.elapsed());
    outcome
}

/// The tool itself, once its call is valid and approved.
async fn run(
    agent: &Agent,
    tool: &Tool,
    link: &RunLink,
    call: &ToolCall,
    spec: &RunSpec,
) -> Result<ToolOutcome, Gone> {
    match &tool.kind {
        ToolKind::Ui {
            component_type,
            display,
        } => {
            let component_type = match component_type {
                ComponentType::Fixed(c) => c.clone(),
                ComponentType::FromInput(field) => match call.input[field].as_str() {
                    Some(c) if !c.is_empty() => c.to_owned(),
                    _ => {
                        return refuse(
                            link,
                            call,
                            format!("input field `{field}` must name the component"),
                        )
                        .await;
                    }
                },
            };
            match show(
                link,
                &call.name,
                component_type,
                call.input.clone(),
                &call.id,
                *display,
            )
            .await?
            {
                ComponentOutcome::Returned(data) => {
                    respond(link, call, data.clone(), true).await?;
                    Ok(ToolOutcome::Result {
                        content: data.to_string(),
                        is_error: false,
                    })
                }
                ComponentOutcome::TimedOut => Ok(ToolOutcome::End(RunEndReason::Timeout)),
            }
        }
        ToolKind::InputRequest {
            prompt_field,
            password,
        } => {
            let (respond, answer) = oneshot::channel();
            link.send(RunMsg::AskInput {
                request_id: call.id.clone(),
                prompt: call.input[prompt_field]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                password: *password,
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
        ToolKind::Builtin(builtin) => {
            link.emit(backend_call(call)).await?;
            let result = builtin
                .call(&call.input, |percent, status_message| {
                    let link = link.clone();
                    let progress = EventKind::ToolProgress {
                        tool_name: call.name.clone(),
                        progress_percent: percent,
                        status_message,
                        corr: call.id.clone(),
                    };
                    async move { link.emit(progress).await.is_ok() }
                })
                .await;
            finish(link, call, result).await
        }
        ToolKind::Http(http) => {
            link.emit(backend_call(call)).await?;
            let result = http
                .call(&agent.http, &call.input, spec.bearer.as_deref())
                .await;
            finish(link, call, result).await
        }
    }
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

/// Shows a component and waits for the client's result.
async fn show(
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
        respond,
    })
    .await?;
    answer.await.map_err(|_| Gone)
}

/// Logs the response of a backend tool and hands its result to the model.
async fn finish(
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

async fn respond(
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
    })
    .await
}

/// Logs a call that will not run, and returns the reason to the model.
async fn refuse(link: &RunLink, call: &ToolCall, why: String) -> Result<ToolOutcome, Gone> {
    link.emit(backend_call(call)).await?;
    respond(link, call, Value::String(why.clone()), false).await?;
    Ok(ToolOutcome::Result {
        content: why,
        is_error: true,
    })
}

fn backend_call(call: &ToolCall) -> EventKind {
    EventKind::ToolCall {
        tool_name: call.name.clone(),
        component_type: None,
        awaiting_response: false,
        payload: call.input.clone(),
        corr: call.id.clone(),
        display: Display::Inline,
    }
}
