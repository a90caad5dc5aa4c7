//! A workflow's run (seed 002): the user invoked it, so no model decides
//! anything until its action is done. The invocation is a `chat.tool_call`
//! (`component_type: "workflow"`, the parameters in its payload); an
//! approval gate when the workflow asks for one; then its action: one HTTP
//! call, a fixed sequence of tool calls (each logged as tool calls are, with
//! `chat.tool_progress` on the invocation between them), or a prompt that
//! becomes the user's message for the chat's agent, which then answers as in
//! any run. The invocation's `chat.tool_response` carries the result; a
//! failure is also a `chat.error`.

use serde_json::{Value, json};

use super::speak::RunSpec;
use super::tally::Tally;
use crate::link::{Gone, RunLink, ToolOutcome};
use crate::llm::ToolCall;
use crate::protocol::{Display, ErrorCode, EventKind, RunEndReason};
use crate::tools::{Approval, ask_approval, execute, respond};
use crate::workflows::{Action, Invocation, WORKFLOW, fill_json, fill_text};

/// How a workflow's part of the run ended.
pub(super) enum Then {
    End(RunEndReason),
    /// The chat's agent answers this user message (a prompt workflow).
    Answer(String),
}

/// Runs the workflow's part of the run.
pub(super) async fn run(
    spec: &RunSpec,
    invocation: &Invocation,
    link: &RunLink,
    tally: &mut Tally,
) -> Result<Then, Gone> {
    let wf = &invocation.workflow;
    let parameters = &invocation.parameters;
    let call = ToolCall {
        id: invocation.corr.clone(),
        name: wf.id.clone(),
        input: parameters.clone(),
    };
    // Invoked again after a restart (its approval was waiting): the
    // invocation is in the log.
    if spec.resumed.is_none() {
        link.emit(EventKind::ToolCall {
            tool_name: wf.id.clone(),
            component_type: Some(WORKFLOW.into()),
            awaiting_response: false,
            payload: json!({"workflow_id": wf.id, "title": wf.title, "category": wf.category,
                            "parameters": parameters}),
            corr: call.id.clone(),
            display: Display::Inline,
            agent: None,
        })
        .await?;
    }
    if wf.requires_approval {
        match ask_approval(link, &call).await? {
            Approval::Granted => {}
            Approval::Refused(reason) => {
                let refused = json!({"refused": true, "reason": reason});
                respond(link, &call, refused, false).await?;
                return Ok(Then::End(RunEndReason::Completed));
            }
            Approval::TimedOut => return Ok(Then::End(RunEndReason::Timeout)),
        }
    }
    match &wf.action {
        Action::Http(http) => {
            let result = http
                .call(&spec.agent.http, parameters, spec.bearer.as_deref())
                .await;
            finish(link, &call, result).await
        }
        Action::Prompt(template) => {
            let text = fill_text(template, parameters);
            respond(link, &call, json!({"status": "prompt_sent"}), true).await?;
            link.emit(EventKind::Text {
                agent: "user".into(),
                content: text.clone(),
            })
            .await?;
            Ok(Then::Answer(text))
        }
        Action::Steps { steps, tools } => {
            let agent = &spec.agent;
            let provider = spec.provider.as_deref().unwrap_or(agent.provider.as_ref());
            let spent = tally.of(&agent.id, spec.own_price());
            let env = spec.call_env(link, &spent.tools, agent, provider);
            let n = steps.len();
            let mut results = Vec::with_capacity(n);
            for (i, step) in steps.iter().enumerate() {
                link.emit(EventKind::ToolProgress {
                    tool_name: wf.id.clone(),
                    progress_percent: (i * 100 / n) as f64,
                    status_message: format!("step {} of {n}: {}", i + 1, step.tool),
                    corr: call.id.clone(),
                })
                .await?;
                let step_call = ToolCall {
                    id: format!("{}.{}", call.id, i + 1),
                    name: step.tool.clone(),
                    input: fill_json(&step.input, parameters),
                };
                match execute(&step_call, tools, &env).await? {
                    ToolOutcome::End(reason) => return Ok(Then::End(reason)),
                    ToolOutcome::Result {
                        content,
                        is_error: true,
                    } => {
                        let why = format!("step {} ({}): {content}", i + 1, step.tool);
                        return finish(link, &call, Err(why)).await;
                    }
                    ToolOutcome::Result { content, .. } => results.push(as_json(content)),
                }
            }
            link.emit(EventKind::ToolProgress {
                tool_name: wf.id.clone(),
                progress_percent: 100.0,
                status_message: "done".into(),
                corr: call.id.clone(),
            })
            .await?;
            finish(link, &call, Ok(json!({ "steps": results }).to_string())).await
        }
    }
}

/// Logs the invocation's result; a failure is also a run error.
async fn finish(
    link: &RunLink,
    call: &ToolCall,
    result: Result<String, String>,
) -> Result<Then, Gone> {
    match result {
        Ok(text) => {
            respond(link, call, as_json(text), true).await?;
            Ok(Then::End(RunEndReason::Completed))
        }
        Err(why) => {
            respond(link, call, Value::String(why.clone()), false).await?;
            link.emit(EventKind::Error {
                message: format!("the workflow `{}` failed: {why}", call.name),
                error_code: ErrorCode::ToolExecutionError,
                details: Some(json!({ "corr": call.id })),
                recoverable: true,
            })
            .await?;
            Ok(Then::End(RunEndReason::Error))
        }
    }
}

/// JSON text as JSON, anything else as a string.
fn as_json(text: String) -> Value {
    serde_json::from_str(&text).unwrap_or(Value::String(text))
}
