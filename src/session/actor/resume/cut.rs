//! What the log says of a run a restart cut off ([`Cut`], fed the chat's
//! envelopes in order; everything after the last `chat.run_complete` is the
//! cut run) and what to do with it ([`Plan`]). Pure: no store, no actor.

use std::collections::{BTreeMap, HashMap, HashSet};

use serde_json::Value;

use crate::agent::APPROVAL;
use crate::llm::Usage;
use crate::protocol::{Envelope, ErrorCode, EventKind, RunEndReason};
use crate::store::StoredEnvelope;

/// A tool call of the cut run that has no result.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Call {
    /// The model's call id (a backend or UI call's `corr`, an input
    /// request's `request_id`).
    pub corr: String,
    pub tool_name: String,
    /// Its input (an input request's: `{"prompt": …}`).
    pub payload: Value,
    /// A group member's call: its name.
    pub agent: Option<String>,
    pub waits: Waits,
}

/// What a call without a result is doing.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Waits {
    /// Nothing: a backend tool, cut off while it ran.
    Not,
    /// For a person, on the request the log answers by this id (an input's
    /// `request_id`, a component's or approval's `corr`), logged at `ts`.
    OnPerson { id: String, ts: String },
}

impl Call {
    /// Whether an answer to `id` ends this call.
    fn closes(&self, id: &str) -> bool {
        self.corr == id || matches!(&self.waits, Waits::OnPerson { id: w, .. } if w == id)
    }
}

/// What the log says of the run a restart cut off.
#[derive(Debug, Default)]
pub(super) struct Cut {
    /// When its first envelope was logged (RFC 3339).
    started: Option<String>,
    /// Model turns it began (`chat.select_speaker`).
    turns: u32,
    /// The model turn in flight: its speaker and its `chat.select_speaker`'s seq.
    open_turn: Option<(String, u64)>,
    /// Whether the last model turn closed with text and nothing came after.
    answered: bool,
    /// Tool calls with no result yet, in order.
    calls: Vec<Call>,
    /// Open input requests of no tool (a group's choice of speaker).
    untooled: HashMap<String, String>,
    /// The log is inside a member's nested chats: nothing asked there (a
    /// tool's question, an inner group's choice of speaker) is waited on
    /// again by itself — the member's turn is held again whole.
    in_nested: bool,
    /// Its `chat.usage_summary` is logged: it was ending.
    summarized: bool,
    /// It logged a `chat.error`.
    failed: bool,
    /// A request timed out: the run was ending with `timeout`.
    timed_out: bool,
    /// A logged error said the model turns ran out.
    out_of_turns: bool,
    /// The calls the user approved (by call id).
    approved: HashSet<String>,
    /// A group run: its members' turns.
    group: Speaking,
    /// The last text a speaker logged.
    last_text: Option<String>,
    /// A workflow the user ran in this run.
    workflow: Option<Workflow>,
    /// A template's walk: how far it got.
    template: crate::templates::Trail,
    /// The frontend tools it called (a client brought them with the run).
    frontend: Vec<String>,
    /// The `context_type` its user's message was sent with.
    context_type: Option<String>,
    /// The model a regenerate that began it chose.
    model: Option<String>,
    /// What it had used, per speaker (its last `run_usage`).
    usage: BTreeMap<String, Usage>,
}

/// What a cut run carries on whatever it goes on as (or ends with).
pub(super) struct Carried {
    /// The `context_type` its user's message was sent with.
    pub context_type: Option<String>,
    /// The model a regenerate that began it chose.
    pub model: Option<String>,
    /// What it had used, per speaker.
    pub used: BTreeMap<String, Usage>,
}

/// What to do with a cut run.
#[derive(Debug, PartialEq)]
pub(super) enum Plan {
    /// Log its end (with a usage summary first unless it has one).
    Finish {
        reason: RunEndReason,
        summarized: bool,
    },
    /// End it `interrupted`, saying why.
    Interrupt(String),
    /// End it with `error`: each call here gets an "outcome unknown" result,
    /// and a `chat.error` says `why`.
    Abandon { unanswered: Vec<Call>, why: String },
    /// A workflow waiting for its approval: invoked again (its invocation
    /// logged already), the approval waited on again, logged at `asked`.
    Workflow {
        id: String,
        corr: String,
        parameters: Value,
        asked: String,
        started: Option<String>,
    },
    /// Go on: drop the turn in flight, answer the calls that will not run
    /// again, then the loop.
    Continue {
        discard: Option<(String, u64)>,
        unknown: Vec<Call>,
        again: Vec<Call>,
        turns: u32,
        started: Option<String>,
        /// Calls approved before the restart: their gate is not asked again.
        approved: HashSet<String>,
        /// Where a group run stood (for a group's agent).
        group: Option<Box<GroupPlace>>,
        /// A group's "who speaks next?" to the user, asked: its request id,
        /// and when it was logged.
        choosing: Option<(String, String)>,
    },
}

/// A workflow the user ran (its invocation's `chat.tool_call`).
#[derive(Debug)]
struct Workflow {
    corr: String,
    tool_name: String,
    /// Its parameters (the invocation's payload).
    parameters: Value,
    /// Its invocation's `chat.tool_response` is in the log.
    answered: bool,
    /// A user's message came after it: a prompt workflow's prompt.
    then_prompt: bool,
}

/// The members' turns of a group run so far.
#[derive(Debug, Default)]
struct Speaking {
    /// Member turns begun (a `chat.select_speaker` not `continue`).
    rounds: u32,
    /// The member of the last one.
    member: Option<String>,
    /// Model turns in it.
    model_turns: u32,
    /// Whom it handed the conversation to.
    handoff: Option<String>,
}

/// Where a group run a restart cut off stood.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct GroupPlace {
    /// The member speaking last.
    pub member: String,
    /// Member turns begun, its own included.
    pub rounds: u32,
    /// Model turns of its own turn (a dropped one not counted).
    pub model_turns: u32,
    /// Whether its turn had ended.
    pub done: bool,
    /// Whom it handed on to (a member, or `user`).
    pub handoff: Option<String>,
    /// The last text of the run's speakers (a group's end marker is in it).
    pub last_text: Option<String>,
}

impl Cut {
    /// The frontend tools the run called, made again so that a call waiting
    /// for its client still waits, and its answer reaches the model (their
    /// descriptions and schemas were the client's: not kept).
    pub(super) fn frontend_tools(&self) -> Vec<crate::tools::ClientTool> {
        self.frontend
            .iter()
            .map(|name| crate::tools::ClientTool {
                name: name.clone(),
                description: "A tool of the user's interface.".into(),
                parameters: None,
            })
            .collect()
    }

    /// What the run carries on whatever it goes on as.
    pub(super) fn carried(&self) -> Carried {
        Carried {
            context_type: self.context_type.clone(),
            model: self.model.clone(),
            used: self.usage.clone(),
        }
    }

    /// Takes the next envelope of the log, in seq order.
    pub(super) fn push(&mut self, stored: &StoredEnvelope) {
        // Fragments are most of a log: nothing to read in them.
        if stored.kind == "chat.print" {
            return;
        }
        let Ok(mut env) = serde_json::from_str::<Envelope>(&stored.json) else {
            tracing::warn!(seq = stored.seq, "an unreadable envelope in a cut run");
            return;
        };
        if let EventKind::RunComplete { .. } = env.kind {
            *self = Self::default();
            return;
        }
        if let Some(used) = env.run_usage.take() {
            self.usage = used
                .into_iter()
                .map(|(name, u)| {
                    let usage = Usage {
                        prompt_tokens: u.prompt_tokens,
                        completion_tokens: u.completion_tokens,
                    };
                    (name, usage)
                })
                .collect();
        }
        if self.context_type.is_none() {
            self.context_type = env.context_type.take();
        }
        self.started.get_or_insert_with(|| env.ts.clone());
        self.template.push(&env.kind, &env.ts);
        match env.kind {
            // Inside a member's nested chats: its turn is open (a restart
            // runs it again from its first chat); nothing in them is
            // waited on or run again by itself.
            EventKind::SelectSpeaker { ref agent, .. } | EventKind::Text { ref agent, .. }
                if crate::protocol::is_nested(agent) =>
            {
                self.in_nested = true;
                self.answered = false;
            }
            EventKind::ToolCall {
                agent: Some(ref agent),
                ..
            }
            | EventKind::ToolResponse {
                agent: Some(ref agent),
                ..
            } if crate::protocol::is_nested(agent) => {
                self.in_nested = true;
                self.answered = false;
            }
            EventKind::InputRequest { .. }
            | EventKind::InputAck { .. }
            | EventKind::InputTimeout { .. }
                if self.in_nested => {}
            EventKind::SelectSpeaker { agent, method, .. } => {
                self.in_nested = false;
                self.turns += 1;
                // Only a group's turns say how their speaker was chosen.
                match method.as_deref() {
                    Some("continue") => self.group.model_turns += 1,
                    Some(_) => {
                        self.group = Speaking {
                            rounds: self.group.rounds + 1,
                            member: Some(agent.clone()),
                            model_turns: 1,
                            handoff: None,
                        };
                    }
                    None => {}
                }
                self.open_turn = Some((agent, env.seq));
                self.answered = false;
            }
            EventKind::Text { agent, content } if agent != "user" => {
                self.in_nested = false;
                self.answered = self.open_turn.take().is_some() && self.calls.is_empty();
                self.last_text = Some(content);
            }
            EventKind::Text { .. } => {
                self.answered = false;
                // A prompt workflow's prompt: the agent answers it.
                if let Some(w) = &mut self.workflow {
                    w.then_prompt |= w.answered;
                }
            }
            EventKind::ToolCall {
                tool_name,
                component_type,
                awaiting_response,
                payload,
                corr,
                agent,
                ..
            } => {
                self.open_turn = None;
                self.answered = false;
                let person = Waits::OnPerson {
                    id: corr.clone(),
                    ts: env.ts,
                };
                let call = match component_type.as_deref() {
                    // A workflow the user ran: its own state.
                    Some(crate::workflows::WORKFLOW) => {
                        self.workflow = Some(Workflow {
                            corr,
                            tool_name,
                            parameters: payload["parameters"].clone(),
                            answered: false,
                            then_prompt: false,
                        });
                        return;
                    }
                    // The gate before a call: the call is in its payload.
                    Some(APPROVAL) => Call {
                        corr: payload["tool_call_id"].as_str().unwrap_or(&corr).to_owned(),
                        tool_name: payload["tool_name"]
                            .as_str()
                            .unwrap_or(&tool_name)
                            .to_owned(),
                        // An upstream agent's: the interrupt it resumes too.
                        payload: match payload.get("interrupt_id") {
                            Some(i) => serde_json::json!({"input": payload["input"], "interrupt_id": i}),
                            None => payload["input"].clone(),
                        },
                        agent,
                        waits: person,
                    },
                    Some(kind) if awaiting_response => {
                        if kind == crate::tools::FRONTEND && !self.frontend.contains(&tool_name) {
                            self.frontend.push(tool_name.clone());
                        }
                        Call {
                            corr,
                            tool_name,
                            payload,
                            agent,
                            waits: person,
                        }
                    }
                    // Shown, not waited on (a preview).
                    Some(_) => return,
                    None => Call {
                        corr,
                        tool_name,
                        payload,
                        agent,
                        waits: Waits::Not,
                    },
                };
                // A call logged again (re-run, or past its approval) is one call.
                self.calls.retain(|c| c.corr != call.corr);
                self.calls.push(call);
            }
            EventKind::ToolResponse {
                corr,
                content,
                success,
                ..
            } => {
                // A member's handoff (`handoff_to`, a `transfer_to_…`) ends
                // its turn; its answer names whom to.
                if let Some(call) = self.calls.iter().find(|c| c.corr == corr)
                    && crate::tools::is_handoff(&call.tool_name)
                    && success
                {
                    self.group.handoff = content["handoff_to"].as_str().map(str::to_owned);
                }
                if let Some(w) = &mut self.workflow
                    && w.corr == corr
                {
                    w.answered = true;
                }
                self.calls.retain(|c| !c.closes(&corr));
                if let Some(id) = corr.strip_suffix(crate::tools::APPROVAL_SUFFIX)
                    && content["approved"] == true
                {
                    self.approved.insert(id.to_owned());
                }
            }
            EventKind::InputRequest {
                request_id,
                prompt,
                tool_name: Some(tool_name),
                options,
                ..
            } if tool_name != crate::agent::SPEAKER_TOOL => {
                self.open_turn = None;
                self.answered = false;
                // Its choices, when it offered some, are offered again.
                let mut payload = serde_json::json!({ "prompt": prompt });
                if let Some(options) = options {
                    payload["options"] = serde_json::json!(options);
                }
                self.calls.push(Call {
                    corr: request_id.clone(),
                    tool_name,
                    payload,
                    agent: None,
                    waits: Waits::OnPerson {
                        id: request_id,
                        ts: env.ts,
                    },
                });
            }
            EventKind::InputRequest { request_id, .. } => {
                self.untooled.insert(request_id, env.ts);
            }
            EventKind::InputAck { request_id, .. } => {
                self.untooled.remove(&request_id);
                // An input tool's result is the answer, never logged: the
                // call is done once acknowledged.
                self.calls.retain(|c| !c.closes(&request_id));
            }
            EventKind::InputTimeout { request_id, .. } => {
                self.untooled.remove(&request_id);
                self.calls.retain(|c| !c.closes(&request_id));
                self.timed_out = true;
            }
            EventKind::UsageSummary { .. } => self.summarized = true,
            EventKind::Error {
                error_code,
                message,
                ..
            } => {
                self.failed = true;
                self.timed_out |= error_code == ErrorCode::UiToolTimeout;
                self.out_of_turns |= message.starts_with(crate::agent::MAX_TURNS_ERROR);
            }
            // A turn dropped by an earlier restart was asked again.
            EventKind::TurnDiscarded { .. } => {
                self.turns = self.turns.saturating_sub(1);
                self.group.model_turns = self.group.model_turns.saturating_sub(1);
                self.open_turn = None;
            }
            EventKind::Print { .. }
            | EventKind::Reasoning { .. }
            | EventKind::Progress { .. }
            | EventKind::State { .. }
            | EventKind::ToolProgress { .. }
            | EventKind::AgentState { .. }
            | EventKind::RunComplete { .. }
            // The chat's name, not the run's.
            | EventKind::Title { .. }
            // A message sent during the run waits in the chat's queue
            // (`restore_queue`).
            | EventKind::Queued { .. } => {}
            // A regenerate's branch leads its run, with the model it chose;
            // the path it made is the log's, read again when the run goes on.
            EventKind::Branch { model, .. } => self.model = model,
        }
    }
}

#[path = "plan.rs"]
pub(super) mod plan;

#[cfg(test)]
#[path = "cut_tests.rs"]
mod tests;
