//! AG-UI 1.0 (`@ag-ui/client`'s `HttpAgent`): one AG-UI run per response, its
//! events as data-only SSE events, in the order AG-UI's own verification
//! demands (nothing left open at `RUN_FINISHED`).
//!
//! - `RUN_STARTED {threadId, runId}` opens it (sent by the route); each model
//!   turn is a step (`STEP_STARTED`/`STEP_FINISHED`, `stepName` `turn-<seq>`,
//!   a group member's `<name>-<seq>`); its words `TEXT_MESSAGE_START`/
//!   `CONTENT`/`END` (`messageId` `msg-<seq>`); its reasoning
//!   (`chat.reasoning`) `REASONING_START`, `REASONING_MESSAGE_START`/
//!   `CONTENT`/`END`, `REASONING_END` (`messageId` `reasoning-<seq>`).
//! - A tool call is `TOOL_CALL_START`/`ARGS` (its input as JSON text)/`END`,
//!   its result `TOOL_CALL_RESULT` (`content`: the result as text).
//! - What waits for a person (an approval, a UI tool, an input request)
//!   ends the response with `RUN_FINISHED {outcome: {type: "interrupt",
//!   interrupts}}`: one interrupt per request, `id` `<reason>:<corr>@<seq>` (the seq
//!   says where the response stopped: the run that answers it goes on from
//!   there), `reason` `approval`, `component` or `input`, `toolCallId`,
//!   `message` (an input's prompt). The answers come in the next run's
//!   `resume[]`.
//! - A frontend tool's call (a tool the run input's `tools` brought) is a
//!   plain `TOOL_CALL_*`, its arguments the model's; the response then ends
//!   with `RUN_FINISHED {outcome: {type: "success", pendingToolCallIds}}`
//!   and the client's `tool` message in the next run input is its result
//!   (no `TOOL_CALL_RESULT` goes back to the client that sent it).
//! - An artifact (a component shown with `display: artifact`, such as a
//!   preview, and each of its patches) is shared state: `STATE_DELTA` adding
//!   the key `artifact:<corr>` `{tool_name, component_type, payload}`.
//! - What AG-UI has no event for is `CUSTOM` (`name` `agentwire.<what>`):
//!   `turn_discarded` (a turn a restart dropped: its message is void),
//!   `progress`, `state`, `error`, `usage`, `component` (shown, not waited
//!   on), `speaker` (a group's turn).
//! - The run's end: `RUN_FINISHED` (a cancel with `outcome {type:
//!   "cancelled"}`), or `RUN_ERROR {message, code}` for `error` and
//!   `interrupted`.

use serde_json::{Value, json};

use super::sse::{Encoder, Out};
use crate::protocol::{Envelope, EventKind, RunEndReason};

/// The AG-UI events of one response.
pub struct AgUi {
    thread: String,
    run: String,
    /// The open step's name.
    step: Option<String>,
    /// The open text message's id.
    text: Option<String>,
    /// The open reasoning message's id.
    reasoning: Option<String>,
    /// Requests waiting for a person: their corr and interrupt (its id is
    /// made at the end: `<corr>@<the seq the response stopped at>`).
    open: Vec<(String, Value)>,
    /// Frontend tool calls waiting for their client's result.
    pending: Vec<String>,
    /// Backend calls announced and not finished: the response does not end
    /// at a wait while one runs (its result would be missed).
    running: std::collections::HashSet<String>,
    /// Calls whose result the client has (its run input's `tool`
    /// messages): no `TOOL_CALL_RESULT` for them.
    known: std::collections::HashSet<String>,
    /// Every frontend tool call seen.
    frontend: std::collections::HashSet<String>,
    /// Calls announced in this response (a call logged again — past its
    /// approval, or a component patched — is announced once).
    calls: std::collections::HashSet<String>,
    /// The last `chat.error`'s message (a run that ends `error` says it).
    error: Option<String>,
    seq: u64,
    ended: bool,
}

impl AgUi {
    /// The run `run` of thread `thread`, going on from `seq` (0: the start).
    pub fn new(thread: String, run: String, seq: u64) -> Self {
        Self {
            thread,
            run,
            step: None,
            text: None,
            reasoning: None,
            open: Vec::new(),
            pending: Vec::new(),
            running: std::collections::HashSet::new(),
            known: std::collections::HashSet::new(),
            frontend: std::collections::HashSet::new(),
            calls: std::collections::HashSet::new(),
            error: None,
            seq,
            ended: false,
        }
    }

    /// A response to a run input that holds these tool calls (its
    /// assistant messages' `toolCalls`: not announced again) and these
    /// results (its `tool` messages: not sent again).
    #[must_use]
    pub fn knowing(
        mut self,
        calls: impl IntoIterator<Item = String>,
        results: impl IntoIterator<Item = String>,
    ) -> Self {
        self.calls.extend(calls);
        self.known.extend(results);
        self
    }

    /// `RUN_STARTED`.
    pub fn started(&self) -> String {
        json!({"type": "RUN_STARTED", "threadId": self.thread, "runId": self.run}).to_string()
    }

    /// `RUN_FINISHED` of a response with nothing to say (the run was over).
    pub fn over(mut self) -> String {
        let mut o = Vec::new();
        self.finish(&mut o, None);
        o.pop().map(|out| out.data).unwrap_or_default()
    }

    /// The `corr` an interrupt id (after its `<reason>:`) names, and the seq
    /// it was issued at.
    pub fn interrupt(id: &str) -> Option<(&str, u64)> {
        let (corr, seq) = id.rsplit_once('@')?;
        Some((corr, seq.parse().ok()?))
    }

    fn event(o: &mut Vec<Out>, event: Value) {
        o.push(Out {
            event: None,
            data: event.to_string(),
        });
    }

    fn custom(o: &mut Vec<Out>, name: &str, value: Value) {
        Self::event(
            o,
            json!({"type": "CUSTOM", "name": format!("agentwire.{name}"), "value": value}),
        );
    }

    /// A delta of the open text message, opening one (`msg-<seq>`) when
    /// none is.
    fn text_delta(&mut self, seq: u64, delta: &str, o: &mut Vec<Out>) {
        let id = self.text.get_or_insert_with(|| {
            let id = format!("msg-{seq}");
            Self::event(
                o,
                json!({"type": "TEXT_MESSAGE_START", "messageId": id, "role": "assistant"}),
            );
            id
        });
        Self::event(
            o,
            json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": id, "delta": delta}),
        );
    }

    /// A delta of the open reasoning, opening it (`reasoning-<seq>`: its
    /// span and its message) when none is.
    fn reasoning_delta(&mut self, seq: u64, delta: &str, o: &mut Vec<Out>) {
        let id = self.reasoning.get_or_insert_with(|| {
            let id = format!("reasoning-{seq}");
            Self::event(o, json!({"type": "REASONING_START", "messageId": id}));
            Self::event(
                o,
                json!({"type": "REASONING_MESSAGE_START", "messageId": id, "role": "reasoning"}),
            );
            id
        });
        Self::event(
            o,
            json!({"type": "REASONING_MESSAGE_CONTENT", "messageId": id, "delta": delta}),
        );
    }

    fn close_reasoning(&mut self, o: &mut Vec<Out>) {
        if let Some(id) = self.reasoning.take() {
            Self::event(o, json!({"type": "REASONING_MESSAGE_END", "messageId": id}));
            Self::event(o, json!({"type": "REASONING_END", "messageId": id}));
        }
    }

    /// Closes the open text message, and the open reasoning.
    fn close_text(&mut self, o: &mut Vec<Out>) {
        self.close_reasoning(o);
        if let Some(id) = self.text.take() {
            Self::event(o, json!({"type": "TEXT_MESSAGE_END", "messageId": id}));
        }
    }

    fn close_step(&mut self, o: &mut Vec<Out>) {
        self.close_text(o);
        if let Some(name) = self.step.take() {
            Self::event(o, json!({"type": "STEP_FINISHED", "stepName": name}));
        }
    }

    fn tool_call(&mut self, o: &mut Vec<Out>, id: &str, name: &str, input: &Value) {
        if !self.calls.insert(id.to_owned()) {
            return;
        }
        self.close_text(o);
        Self::event(
            o,
            json!({"type": "TOOL_CALL_START", "toolCallId": id, "toolCallName": name}),
        );
        Self::event(
            o,
            json!({"type": "TOOL_CALL_ARGS", "toolCallId": id, "delta": input.to_string()}),
        );
        Self::event(o, json!({"type": "TOOL_CALL_END", "toolCallId": id}));
    }

    /// A request for a person: its call, and its interrupt.
    fn ask(
        &mut self,
        o: &mut Vec<Out>,
        corr: &str,
        reason: &str,
        call: (&str, &str, &Value),
        message: Option<&str>,
    ) {
        let (id, name, input) = call;
        self.tool_call(o, id, name, input);
        let mut interrupt = json!({"reason": reason, "toolCallId": id});
        if let Some(m) = message {
            interrupt["message"] = json!(m);
        }
        // A component patched while it waits is one interrupt.
        self.open.retain(|(c, _)| c != corr);
        self.open.push((corr.to_owned(), interrupt));
    }

    fn closed(&mut self, corr: &str) {
        self.open.retain(|(c, _)| c != corr);
        self.pending.retain(|c| c != corr);
        self.running.remove(corr);
    }

    fn finish(&mut self, o: &mut Vec<Out>, outcome: Option<Value>) {
        self.close_step(o);
        let mut event = json!({"type": "RUN_FINISHED", "threadId": self.thread, "runId": self.run,
                               "result": {"agentwire": {"seq": self.seq}}});
        if let Some(outcome) = outcome {
            event["outcome"] = outcome;
        }
        Self::event(o, event);
        self.ended = true;
    }
}

impl Encoder for AgUi {
    fn encode(&mut self, env: &Envelope, _raw: &str, o: &mut Vec<Out>) {
        if self.ended {
            return;
        }
        self.seq = env.seq;
        match &env.kind {
            EventKind::SelectSpeaker { agent, method, .. } => {
                self.close_step(o);
                let name = match method {
                    Some(_) => format!("{agent}-{}", env.seq),
                    None => format!("turn-{}", env.seq),
                };
                Self::event(o, json!({"type": "STEP_STARTED", "stepName": name}));
                self.step = Some(name);
                if method.is_some() {
                    Self::custom(o, "speaker", json!({"agent": agent, "method": method}));
                }
            }
            // An upstream agent's shared state, as it sent it.
            EventKind::AgentState {
                snapshot, delta, ..
            } => match (snapshot, delta) {
                (Some(s), _) => Self::event(o, json!({"type": "STATE_SNAPSHOT", "snapshot": s})),
                (None, Some(d)) => Self::event(o, json!({"type": "STATE_DELTA", "delta": d})),
                (None, None) => {}
            },
            EventKind::Reasoning { content, .. } => {
                if let Some(id) = self.text.take() {
                    Self::event(o, json!({"type": "TEXT_MESSAGE_END", "messageId": id}));
                }
                self.reasoning_delta(env.seq, content, o);
            }
            EventKind::Print { content, .. } => {
                self.close_reasoning(o);
                self.text_delta(env.seq, content, o);
            }
            EventKind::Text { agent, .. } if agent == "user" => {}
            EventKind::Text { content, .. } => {
                self.close_reasoning(o);
                // Not streamed (a template's message): all of it at once.
                if self.text.is_none() {
                    self.text_delta(env.seq, content, o);
                }
                self.close_text(o);
            }
            EventKind::TurnDiscarded {
                agent, from_seq, ..
            } => {
                let message = self.text.clone();
                let reasoning = self.reasoning.clone();
                self.close_text(o);
                let mut value = json!({"agent": agent, "from_seq": from_seq, "messageId": message});
                if let Some(id) = reasoning {
                    value["reasoningMessageId"] = json!(id);
                }
                Self::custom(o, "turn_discarded", value);
            }
            EventKind::ToolCall { .. } => self.tool_called(&env.kind, o),
            EventKind::ToolResponse { .. } => self.tool_responded(env, o),
            EventKind::InputRequest {
                request_id,
                prompt,
                password,
                options,
                tool_name,
                ..
            } => {
                let input = json!({"prompt": prompt, "password": password, "options": options});
                let name = tool_name.as_deref().unwrap_or("input_request");
                self.ask(
                    o,
                    request_id,
                    "input",
                    (request_id, name, &input),
                    Some(prompt),
                );
            }
            EventKind::InputAck { request_id, .. } => {
                self.closed(request_id);
                Self::event(
                    o,
                    json!({"type": "TOOL_CALL_RESULT", "messageId": format!("result-{}", env.seq),
                           "toolCallId": request_id, "content": "answered", "role": "tool"}),
                );
            }
            EventKind::InputTimeout { request_id, .. } => {
                self.closed(request_id);
                Self::event(
                    o,
                    json!({"type": "TOOL_CALL_RESULT", "messageId": format!("result-{}", env.seq),
                           "toolCallId": request_id, "content": "error: nobody answered in time", "role": "tool"}),
                );
            }
            EventKind::Progress { .. } | EventKind::State { .. } => {
                let name = match env.kind {
                    EventKind::Progress { .. } => "progress",
                    _ => "state",
                };
                let value = super::sse::fields(&env.kind);
                Self::custom(o, name, value);
            }
            EventKind::Error {
                message,
                error_code,
                recoverable,
                ..
            } => {
                self.error = Some(message.clone());
                Self::custom(
                    o,
                    "error",
                    json!({"message": message, "error_code": error_code, "recoverable": recoverable}),
                );
            }
            EventKind::UsageSummary {
                total_tokens,
                prompt_tokens,
                completion_tokens,
                ..
            } => Self::custom(
                o,
                "usage",
                json!({"total_tokens": total_tokens, "prompt_tokens": prompt_tokens,
                       "completion_tokens": completion_tokens}),
            ),
            EventKind::RunComplete { reason } => match reason {
                RunEndReason::Error | RunEndReason::Interrupted => {
                    self.close_step(o);
                    let code = if *reason == RunEndReason::Error {
                        "error"
                    } else {
                        "interrupted"
                    };
                    let message = self
                        .error
                        .clone()
                        .unwrap_or_else(|| format!("the run ended: {code}"));
                    Self::event(
                        o,
                        json!({"type": "RUN_ERROR", "message": message, "code": code}),
                    );
                    self.ended = true;
                }
                RunEndReason::Cancelled => self.finish(o, Some(json!({"type": "cancelled"}))),
                _ => self.finish(o, None),
            },
            _ => {}
        }
    }

    fn waiting(&self) -> bool {
        !self.ended
            && self.running.is_empty()
            && (!self.open.is_empty() || !self.pending.is_empty())
    }

    fn close(&mut self, o: &mut Vec<Out>) {
        if !self.ended && self.open.is_empty() {
            let pending = std::mem::take(&mut self.pending);
            self.finish(
                o,
                Some(json!({"type": "success", "pendingToolCallIds": pending})),
            );
        } else if !self.ended {
            let seq = self.seq;
            let interrupts: Vec<Value> = std::mem::take(&mut self.open)
                .into_iter()
                .map(|(corr, mut i)| {
                    let reason = i["reason"].as_str().unwrap_or_default().to_owned();
                    i["id"] = json!(format!("{reason}:{corr}@{seq}"));
                    i
                })
                .collect();
            self.finish(
                o,
                Some(json!({"type": "interrupt", "interrupts": interrupts})),
            );
        }
    }

    fn ended(&self) -> bool {
        self.ended
    }

    fn crosses(&self, env: &Envelope) -> bool {
        let answers =
            |id: &String| self.open.iter().any(|(c, _)| c == id) || self.pending.contains(id);
        match &env.kind {
            EventKind::InputAck { request_id, .. } => answers(request_id),
            EventKind::ToolResponse { corr, .. } => answers(corr),
            _ => false,
        }
    }

    /// A response is its own AG-UI run: a step or message opened before
    /// it is not open in it, and the results of the frontend calls it
    /// answers come from its own client (not sent back). A whole run's
    /// stream goes on as it was.
    fn boundary(&mut self, response: bool, _out: &mut Vec<Out>) {
        if response {
            self.step = None;
            self.text = None;
            self.reasoning = None;
            self.known.extend(self.pending.iter().cloned());
        }
    }
}

#[path = "ag_ui_tools.rs"]
mod tools;

#[cfg(test)]
#[path = "ag_ui_tests.rs"]
mod tests;
