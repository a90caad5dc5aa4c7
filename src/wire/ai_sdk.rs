//! The Vercel AI SDK's UI message stream (`ai` 7, `x-vercel-ai-ui-message-stream:
//! v1`): one run of the chat as one assistant message, its chunks as
//! data-only SSE events (`data: {json}`).
//!
//! - `start {messageId}` opens the response (sent by the route: the id is
//!   the run's, `<chat>:<seq of its first envelope>`, so a replay rebuilds
//!   the same message); each model turn is `start-step` … `finish-step`; its
//!   words `text-start`/`text-delta`/`text-end` (a turn that streamed nothing
//!   gets its whole `chat.text` as one delta); its reasoning (`chat.reasoning`)
//!   `reasoning-start`/`reasoning-delta`/`reasoning-end`; a turn a restart
//!   discarded is `reset-step`.
//! - Tool calls are dynamic tool parts: `tool-input-available` (UI tools and
//!   template widgets with `toolMetadata {component_type, display}`, input
//!   requests as a tool named after their tool, input `{prompt, password,
//!   options}`), then `tool-output-available` or `tool-output-error`. An
//!   approval is `tool-approval-request {approvalId: <the gate's corr>,
//!   toolCallId}`; a refusal `tool-output-denied`.
//! - What has no chunk of its own is a `data-*` part: `data-progress` and
//!   `data-state` (one part each, replaced), `data-speaker` (a group's turn),
//!   `data-component` (a component shown, not waited on), `data-error` (a
//!   `chat.error`: an `error` chunk would end the client's stream).
//! - The response ends with `finish` (and `data: [DONE]`) when the run
//!   completes (`finishReason` `stop`, `length` for `max_turns` and a
//!   group's `max_rounds`, `error`,
//!   `interrupted`; a cancel is `abort` first), or when it waits for a
//!   person (`tool-calls`): its answer comes in the next request. Just
//!   before, `message-metadata {agentwire: {seq}}` says where the response
//!   stopped in the log; the client sends it back with the message, and the
//!   next request goes on from there.

use std::collections::HashSet;

use serde_json::{Value, json};

use super::sse::{Encoder, Out};
use crate::protocol::{Envelope, EventKind, RunEndReason};

/// A tool part's name when a request names no tool (a group's question of
/// who speaks next).
const INPUT_TOOL: &str = "input_request";

/// The UI message stream of one response.
pub struct AiSdk {
    /// The open text part's id.
    text: Option<String>,
    /// The open reasoning part's id.
    reasoning: Option<String>,
    /// A step is open.
    step: bool,
    /// Tool calls given their part in this response (a call logged again,
    /// as one past its approval, keeps the one part).
    tools: HashSet<String>,
    /// Calls whose approval was refused: their refusal result is not sent again.
    denied: HashSet<String>,
    /// Components shown, not waited on (`data-component` parts): they have
    /// no tool part, so their logged result has no chunk (the `ai` package
    /// refuses an output for a tool call it has no part of).
    shown: HashSet<String>,
    /// Requests waiting for a person (a corr or request id).
    open: HashSet<String>,
    /// Backend calls announced and not finished: the response does not end
    /// at a wait while one runs (the client's step would not be complete).
    running: HashSet<String>,
    /// Tools the app knows by name (its agent file's): their parts are
    /// `tool-<name>`, as a server with typed tools sends them; the others
    /// (an MCP server's, a workflow's) are dynamic.
    declared: HashSet<String>,
    /// Each announced call's tool.
    names: std::collections::HashMap<String, String>,
    /// The last `chat.error`'s message (a run that ends in error says it).
    error: Option<String>,
    /// The last envelope encoded.
    seq: u64,
    ended: bool,
}

impl AiSdk {
    /// A response that goes on from `seq` (0: from the run's start).
    pub fn new(seq: u64) -> Self {
        Self {
            text: None,
            reasoning: None,
            step: false,
            tools: HashSet::new(),
            denied: HashSet::new(),
            shown: HashSet::new(),
            open: HashSet::new(),
            running: HashSet::new(),
            declared: HashSet::new(),
            names: std::collections::HashMap::new(),
            error: None,
            seq,
            ended: false,
        }
    }

    /// A response whose app knows these tools by name (`tool-<name>`
    /// parts; `dynamic-tool` for any other).
    #[must_use]
    pub fn declaring(mut self, tools: HashSet<String>) -> Self {
        self.declared = tools;
        self
    }

    /// A tool chunk's `dynamic` flag: set for a tool the app does not know.
    fn mark(&self, chunk: &mut Value, name: &str) {
        if !self.declared.contains(name) {
            chunk["dynamic"] = Value::Bool(true);
        }
    }

    /// A request now waiting for a person.
    fn wait_on(&mut self, id: &str) {
        self.open.insert(id.to_owned());
    }

    /// The `start` chunk of the run whose message this is.
    pub fn start(message_id: &str) -> String {
        json!({"type": "start", "messageId": message_id}).to_string()
    }

    fn chunk(o: &mut Vec<Out>, chunk: Value) {
        o.push(Out {
            event: None,
            data: chunk.to_string(),
        });
    }

    /// A delta of the open `kind` part (`text`, `reasoning`: its slot),
    /// opening one (`<kind>-start`, id `<kind>-<seq>`) when none is.
    fn delta(slot: &mut Option<String>, kind: &str, seq: u64, delta: &str, o: &mut Vec<Out>) {
        let id = slot.get_or_insert_with(|| {
            let id = format!("{kind}-{seq}");
            Self::chunk(o, json!({"type": format!("{kind}-start"), "id": id}));
            id
        });
        Self::chunk(
            o,
            json!({"type": format!("{kind}-delta"), "id": id, "delta": delta}),
        );
    }

    /// `<kind>-end` of the open `kind` part, if one is.
    fn end(slot: &mut Option<String>, kind: &str, o: &mut Vec<Out>) {
        if let Some(id) = slot.take() {
            Self::chunk(o, json!({"type": format!("{kind}-end"), "id": id}));
        }
    }

    fn close_reasoning(&mut self, o: &mut Vec<Out>) {
        Self::end(&mut self.reasoning, "reasoning", o);
    }

    /// Closes the open text part, and the open reasoning part.
    fn close_text(&mut self, o: &mut Vec<Out>) {
        self.close_reasoning(o);
        Self::end(&mut self.text, "text", o);
    }

    fn close_step(&mut self, o: &mut Vec<Out>) {
        self.close_text(o);
        if std::mem::take(&mut self.step) {
            Self::chunk(o, json!({"type": "finish-step"}));
        }
    }

    /// Opens a step if none is (a tool result outside a model turn).
    fn ensure_step(&mut self, o: &mut Vec<Out>) {
        if !self.step {
            self.step = true;
            Self::chunk(o, json!({"type": "start-step"}));
        }
    }

    /// The end of the response: where it stopped, then `finish`. A run
    /// that failed says so with the protocol's `error` chunk first (the
    /// client's `status` becomes `error`, its `error` the message).
    fn finish(&mut self, reason: &str, o: &mut Vec<Out>) {
        self.close_step(o);
        Self::chunk(
            o,
            json!({"type": "message-metadata", "messageMetadata": {"agentwire": {"seq": self.seq}}}),
        );
        if reason == "error" {
            let text = self
                .error
                .take()
                .unwrap_or_else(|| "the run ended in an error".into());
            Self::chunk(o, json!({"type": "error", "errorText": text}));
        }
        Self::chunk(o, json!({"type": "finish", "finishReason": reason}));
        o.push(Out {
            event: None,
            data: "[DONE]".into(),
        });
        self.ended = true;
    }

    /// A tool part for a call, once.
    fn tool_input(
        &mut self,
        o: &mut Vec<Out>,
        id: &str,
        name: &str,
        input: &Value,
        meta: Option<Value>,
    ) {
        if !self.tools.insert(id.to_owned()) {
            return;
        }
        self.close_text(o);
        self.ensure_step(o);
        let mut chunk = json!({"type": "tool-input-available", "toolCallId": id, "toolName": name, "input": input});
        self.mark(&mut chunk, name);
        self.names.insert(id.to_owned(), name.to_owned());
        if let Some(meta) = meta {
            chunk["toolMetadata"] = meta;
        }
        Self::chunk(o, chunk);
    }

    /// A tool part's end, if the part is in this response's message.
    fn tool_output(&mut self, o: &mut Vec<Out>, id: &str, output: Value, success: bool) {
        self.open.remove(id);
        self.running.remove(id);
        if self.denied.contains(id) {
            return;
        }
        self.ensure_step(o);
        let mut chunk = if success {
            json!({"type": "tool-output-available", "toolCallId": id, "output": output})
        } else {
            let text = super::sse::as_text(&output);
            json!({"type": "tool-output-error", "toolCallId": id, "errorText": text})
        };
        let name = self.names.get(id).cloned().unwrap_or_default();
        self.mark(&mut chunk, &name);
        Self::chunk(o, chunk);
    }
}

impl AiSdk {
    /// Ends a response that has nothing to stream.
    /// `waits`: the run still waits for a person (`tool-calls`).
    pub fn close_now(&mut self, waits: bool, o: &mut Vec<Out>) {
        self.finish(if waits { "tool-calls" } else { "stop" }, o);
    }
}

impl Encoder for AiSdk {
    fn encode(&mut self, env: &Envelope, _raw: &str, o: &mut Vec<Out>) {
        if self.ended {
            return;
        }
        self.seq = env.seq;
        match &env.kind {
            EventKind::SelectSpeaker { agent, method, .. } => {
                // A run's error is its last turn's.
                self.error = None;
                self.close_step(o);
                self.step = true;
                Self::chunk(o, json!({"type": "start-step"}));
                if method.is_some() {
                    Self::chunk(
                        o,
                        json!({"type": "data-speaker", "id": format!("speaker-{}", env.seq),
                               "data": {"agent": agent, "method": method}}),
                    );
                }
            }
            EventKind::Reasoning { content, .. } => {
                self.ensure_step(o);
                Self::end(&mut self.text, "text", o);
                Self::delta(&mut self.reasoning, "reasoning", env.seq, content, o);
            }
            EventKind::Print { content, .. } => {
                self.ensure_step(o);
                self.close_reasoning(o);
                Self::delta(&mut self.text, "text", env.seq, content, o);
            }
            EventKind::Text { agent, .. } if agent == "user" => {}
            EventKind::Text { content, .. } => {
                self.close_reasoning(o);
                if self.text.is_none() {
                    // Not streamed (a template's message, a scripted reply).
                    self.ensure_step(o);
                    Self::delta(&mut self.text, "text", env.seq, content, o);
                }
                self.close_text(o);
            }
            EventKind::TurnDiscarded { .. } => {
                self.text = None;
                self.reasoning = None;
                Self::chunk(o, json!({"type": "reset-step"}));
            }
            EventKind::ToolCall {
                tool_name,
                component_type,
                awaiting_response,
                payload,
                corr,
                display,
                ..
            } => match component_type.as_deref() {
                Some(crate::tools::APPROVAL) => {
                    let call = payload["tool_call_id"].as_str().unwrap_or(corr).to_owned();
                    let name = payload["tool_name"]
                        .as_str()
                        .unwrap_or(tool_name)
                        .to_owned();
                    self.tool_input(o, &call, &name, &payload["input"], None);
                    self.wait_on(corr);
                    Self::chunk(
                        o,
                        json!({"type": "tool-approval-request", "approvalId": corr, "toolCallId": call}),
                    );
                }
                Some(kind) if *awaiting_response => {
                    let meta = json!({"component_type": kind, "display": display});
                    self.tool_input(o, corr, tool_name, payload, Some(meta));
                    self.wait_on(corr);
                }
                Some(crate::workflows::WORKFLOW) | None => {
                    if !self.tools.contains(corr) {
                        self.running.insert(corr.clone());
                    }
                    self.tool_input(o, corr, tool_name, payload, None);
                }
                Some(kind) => {
                    self.shown.insert(corr.clone());
                    Self::chunk(
                        o,
                        json!({"type": "data-component", "id": corr,
                               "data": {"tool_name": tool_name, "component_type": kind, "payload": payload,
                                        "display": display}}),
                    );
                }
            },
            EventKind::ToolResponse {
                content,
                success,
                corr,
                ..
            } => {
                // An approval (its request may be in an earlier response).
                if let Some(call) = corr.strip_suffix(crate::tools::APPROVAL_SUFFIX) {
                    self.open.remove(corr);
                    // Its part exists (from the request): the call logged
                    // next (run, or refused) adds none.
                    self.tools.insert(call.to_owned());
                    if content["approved"] != true {
                        self.ensure_step(o);
                        Self::chunk(o, json!({"type": "tool-output-denied", "toolCallId": call}));
                        self.denied.insert(call.to_owned());
                    }
                } else if !self.shown.contains(corr) {
                    self.tool_output(o, corr, content.clone(), *success);
                }
            }
            EventKind::InputRequest {
                request_id,
                prompt,
                password,
                options,
                tool_name,
                ..
            } => {
                let input = json!({"prompt": prompt, "password": password, "options": options});
                let name = tool_name.as_deref().unwrap_or(INPUT_TOOL);
                self.tool_input(
                    o,
                    request_id,
                    name,
                    &input,
                    Some(json!({"input_request": true})),
                );
                self.wait_on(request_id);
            }
            EventKind::InputAck { request_id, .. } => {
                self.tool_output(o, request_id, json!({"answered": true}), true);
            }
            EventKind::InputTimeout { request_id, .. } => {
                self.tool_output(o, request_id, json!("nobody answered in time"), false);
            }
            EventKind::Progress { .. } | EventKind::State { .. } => {
                let (name, id) = match env.kind {
                    EventKind::Progress { .. } => ("data-progress", "progress"),
                    _ => ("data-state", "state"),
                };
                let data = super::sse::fields(&env.kind);
                Self::chunk(o, json!({"type": name, "id": id, "data": data}));
            }
            EventKind::Error {
                message,
                error_code,
                recoverable,
                ..
            } => {
                self.error = Some(message.clone());
                Self::chunk(
                    o,
                    json!({"type": "data-error", "id": format!("error-{}", env.seq),
                           "data": {"message": message, "error_code": error_code, "recoverable": recoverable}}),
                );
            }
            EventKind::UsageSummary {
                total_tokens,
                prompt_tokens,
                completion_tokens,
                ..
            } => Self::chunk(
                o,
                json!({"type": "message-metadata", "messageMetadata": {"usage": {
                    "totalTokens": total_tokens, "inputTokens": prompt_tokens,
                    "outputTokens": completion_tokens}}}),
            ),
            EventKind::RunComplete { reason } => {
                let finish = match reason {
                    RunEndReason::Completed => "stop",
                    RunEndReason::MaxTurns | RunEndReason::MaxRounds => "length",
                    RunEndReason::Interrupted => "interrupted",
                    RunEndReason::Timeout => {
                        self.error = Some("the run timed out".into());
                        "error"
                    }
                    RunEndReason::Cancelled => {
                        self.close_step(o);
                        Self::chunk(o, json!({"type": "abort", "reason": "cancelled"}));
                        "other"
                    }
                    _ => "error",
                };
                self.finish(finish, o);
            }
            _ => {}
        }
    }

    fn waiting(&self) -> bool {
        !self.ended && !self.open.is_empty() && self.running.is_empty()
    }

    fn close(&mut self, o: &mut Vec<Out>) {
        if !self.ended {
            self.finish("tool-calls", o);
        }
    }

    fn ended(&self) -> bool {
        self.ended
    }

    fn crosses(&self, env: &Envelope) -> bool {
        match &env.kind {
            EventKind::InputAck { request_id, .. } => self.open.contains(request_id),
            EventKind::ToolResponse { corr, .. } => self.open.contains(corr),
            _ => false,
        }
    }
}

#[cfg(test)]
#[path = "ai_sdk_tests.rs"]
mod tests;
