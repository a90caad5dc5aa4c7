//! What an upstream agent asks of a person: its interrupts, each an
//! approval of the call it names or an input request, answered as the next
//! run's `resume` entries; and, after a restart, the waits of the run it
//! cut off, made again.

use serde_json::{Value, json};

use crate::agent::speak::Voice;
use crate::link::{Gone, InputOutcome, RunMsg, ToolOutcome};
use crate::llm::{Message, ToolCall};
use crate::protocol::RunEndReason;
use crate::tools::{Approval, CallEnv, ask_approval_of, execute};
use crate::upstream::Interrupt;

/// The `tool_name` of an input request an upstream interrupt asks: a run
/// continued after a restart knows it by this.
pub const INTERRUPT_TOOL: &str = "ag_ui_interrupt";

/// Adds a call to the assistant's message it belongs to (the last one,
/// unless a result came after it).
pub(super) fn push_call(messages: &mut Vec<Message>, call: ToolCall) {
    match messages.last_mut() {
        Some(Message::Assistant { tool_calls, .. }) => tool_calls.push(call),
        _ => messages.push(Message::Assistant {
            text: String::new(),
            tool_calls: vec![call],
        }),
    }
}

/// The call `id` the agent made, in the history so far.
pub(super) fn find_call<'a>(messages: &'a [Message], id: &str) -> Option<&'a ToolCall> {
    messages.iter().rev().find_map(|m| match m {
        Message::Assistant { tool_calls, .. } => tool_calls.iter().find(|c| c.id == id),
        _ => None,
    })
}

/// Asks the user one interrupt: an approval of the call it names, else an
/// input request. Its answer is the next run's resume entry.
pub(super) async fn answer(
    env: &CallEnv<'_>,
    i: &Interrupt,
    messages: &[Message],
) -> Result<Result<Value, RunEndReason>, Gone> {
    let prompt = i
        .message
        .clone()
        .or_else(|| i.value.as_str().map(str::to_owned))
        .or_else(|| {
            ["question", "message", "prompt"]
                .iter()
                .find_map(|k| i.value[*k].as_str().map(str::to_owned))
        })
        .unwrap_or_else(|| match &i.value {
            Value::Null => format!("The agent needs your answer ({}).", i.reason),
            v => v.to_string(),
        });
    if let Some(call_id) = &i.tool_call_id {
        // The gate is the call's own (its id, name and arguments); the
        // interrupt it answers rides in its payload.
        let call = find_call(messages, call_id);
        let gate = ToolCall {
            id: call_id.clone(),
            name: call.map_or_else(|| i.reason.clone(), |c| c.name.clone()),
            input: call.map_or_else(|| i.value.clone(), |c| c.input.clone()),
        };
        return approve(env, &gate, &i.id).await;
    }
    // A choice (LangGraph's `interrupt({"options": [...]})`) is offered as one.
    let options: Option<Vec<String>> = i.value["options"].as_array().and_then(|o| {
        o.iter()
            .map(|v| v.as_str().map(str::to_owned))
            .collect::<Option<Vec<_>>>()
            .filter(|o| !o.is_empty())
    });
    ask(env, &i.id, &prompt, options, i.response_schema.is_some()).await
}

async fn approve(
    env: &CallEnv<'_>,
    gate: &ToolCall,
    interrupt: &str,
) -> Result<Result<Value, RunEndReason>, Gone> {
    Ok(
        match ask_approval_of(env.link, gate, Some(interrupt)).await? {
            Approval::Granted => Ok(entry(interrupt, json!({"approved": true}))),
            Approval::Refused(reason) => {
                let mut answer = json!({"approved": false});
                if let Some(reason) = reason {
                    answer["reason"] = json!(reason);
                }
                Ok(entry(interrupt, answer))
            }
            Approval::TimedOut => Err(RunEndReason::Timeout),
        },
    )
}

async fn ask(
    env: &CallEnv<'_>,
    id: &str,
    prompt: &str,
    options: Option<Vec<String>>,
    json_answer: bool,
) -> Result<Result<Value, RunEndReason>, Gone> {
    let (respond, answer) = tokio::sync::oneshot::channel();
    env.link
        .send(RunMsg::AskInput {
            request_id: id.to_owned(),
            prompt: prompt.to_owned(),
            password: false,
            options,
            tool_name: Some(INTERRUPT_TOOL.to_owned()),
            waited: None,
            respond,
        })
        .await?;
    Ok(match answer.await.map_err(|_| Gone)? {
        InputOutcome::Answered(text) => {
            // A form's answer is JSON when it parses as JSON.
            let payload = if json_answer {
                serde_json::from_str(&text).unwrap_or(Value::String(text))
            } else {
                Value::String(text)
            };
            Ok(entry(id, payload))
        }
        InputOutcome::TimedOut => Err(RunEndReason::Timeout),
    })
}

fn entry(id: &str, payload: Value) -> Value {
    json!({"interruptId": id, "status": "resolved", "payload": payload})
}

/// A continued run's waits, made again: the client's calls through the
/// pipeline (their results go up as tool messages), an interrupt's input
/// request or approval asked again (its answer, the next run's resume).
pub(super) async fn again(
    voice: &Voice<'_>,
    env: &CallEnv<'_>,
    messages: &mut Vec<Message>,
    calls: &[ToolCall],
) -> Result<Result<Vec<Value>, RunEndReason>, Gone> {
    let mut resume = Vec::new();
    for call in calls {
        if call.name == INTERRUPT_TOOL {
            let prompt = call.input["prompt"].as_str().unwrap_or_default();
            let options = serde_json::from_value(call.input["options"].clone()).ok();
            match ask(env, &call.id, prompt, options, false).await? {
                Ok(e) => resume.push(e),
                Err(end) => return Ok(Err(end)),
            }
        } else if voice.tools.iter().any(|t| t.name == call.name) {
            push_call(messages, call.clone());
            match execute(call, voice.tools, env).await? {
                ToolOutcome::End(end) => return Ok(Err(end)),
                ToolOutcome::Result { content, is_error } => messages.push(Message::ToolResult {
                    id: call.id.clone(),
                    name: call.name.clone(),
                    content,
                    is_error,
                }),
            }
        } else {
            // An approval the upstream agent asked for: its call put back on
            // the history (the log's leaves out a call without a result),
            // then asked again.
            let (input, interrupt) = match call.input.get("interrupt_id") {
                Some(i) => (call.input["input"].clone(), i.as_str().unwrap_or(&call.id)),
                None => (call.input.clone(), call.id.as_str()),
            };
            let gate = ToolCall {
                input,
                ..call.clone()
            };
            if find_call(messages, &gate.id).is_none() {
                push_call(messages, gate.clone());
            }
            match approve(env, &gate, interrupt).await? {
                Ok(e) => resume.push(e),
                Err(end) => return Ok(Err(end)),
            }
        }
    }
    Ok(Ok(resume))
}
