//! A run that a restart (or a dead node) cut off, continued from the log
//! (issue 19): the log is the run's checkpoint.
//!
//! [`Cut`] reads what the log says of the last run (every envelope after the
//! chat's last `chat.run_complete`), and [`Cut::plan`] decides:
//!
//! - the run had logged its `chat.usage_summary`, or its last model turn
//!   answered without a tool call: it was ending, so it ends (`Finish`);
//! - inside a model turn (a `chat.select_speaker` no `chat.text` or tool call
//!   closed): the turn is dropped with `chat.turn_discarded` and asked again;
//! - tool calls with no result: a tool marked `idempotent` runs again, any
//!   other gets a tool error saying its outcome is unknown — never a silent
//!   second side effect;
//! - a call waiting for a person (an input request, a UI tool call, an
//!   approval) keeps waiting: the continued run makes the call again, and
//!   its link marks the request as logged already, so the actor registers it
//!   with what is left of its first timeout and logs nothing twice; the
//!   answer, sent after the restart, goes on as it would have;
//! - then the agent loop goes on from the log's history, with the model
//!   turns and the time the run had already used counted.
//!
//! Not yet continued, and ended `interrupted` with a `chat.error` saying why:
//! a template's walk, a group's turns, a workflow's run.

use std::collections::{HashMap, HashSet};

use serde_json::Value;

use super::Actor;
use crate::agent::APPROVAL;
use crate::agent::runtime::Resumed;
use crate::llm::ToolCall;
use crate::protocol::{Envelope, ErrorCode, EventKind, RunEndReason};
use crate::session::handle::RunExtras;
use crate::store::{ChatState, StoreError, StoredEnvelope};
use crate::tools::ToolKind;

/// What the tool result of a call cut off by a restart says (not idempotent).
pub(super) const UNKNOWN_OUTCOME: &str =
    "the outcome of this call is unknown: the server restarted before its result came";

/// Envelopes read per page while looking for the cut run.
const PAGE: u32 = 1_000;
/// Bytes read per page at most.
const PAGE_BYTES: usize = 4 << 20;

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
    untooled: HashSet<String>,
    /// Its `chat.usage_summary` is logged: it was ending.
    summarized: bool,
    /// It logged a `chat.error`.
    failed: bool,
    /// A request timed out: the run was ending with `timeout`.
    timed_out: bool,
    /// A kind of run that is not continued yet: what it is.
    shape: Option<&'static str>,
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
    /// Go on: drop the turn in flight, answer the calls that will not run
    /// again, then the loop.
    Continue {
        discard: Option<(String, u64)>,
        unknown: Vec<Call>,
        again: Vec<Call>,
        turns: u32,
        started: Option<String>,
    },
}

impl Cut {
    /// Takes the next envelope of the log, in seq order.
    pub(super) fn push(&mut self, stored: &StoredEnvelope) {
        // Fragments are most of a log: nothing to read in them.
        if stored.kind == "chat.print" {
            return;
        }
        let Ok(env) = serde_json::from_str::<Envelope>(&stored.json) else {
            tracing::warn!(seq = stored.seq, "an unreadable envelope in a cut run");
            return;
        };
        if let EventKind::RunComplete { .. } = env.kind {
            *self = Self::default();
            return;
        }
        self.started.get_or_insert_with(|| env.ts.clone());
        match env.kind {
            EventKind::SelectSpeaker { agent, .. } => {
                self.turns += 1;
                self.open_turn = Some((agent, env.seq));
                self.answered = false;
            }
            EventKind::Text { agent, .. } if agent != "user" => {
                self.answered = self.open_turn.take().is_some() && self.calls.is_empty();
            }
            EventKind::Text { .. } => self.answered = false,
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
                    Some(crate::workflows::WORKFLOW) => {
                        self.shape = Some("a workflow's run");
                        return;
                    }
                    // The gate before a call: the call is in its payload.
                    Some(APPROVAL) => Call {
                        corr: payload["tool_call_id"].as_str().unwrap_or(&corr).to_owned(),
                        tool_name: payload["tool_name"]
                            .as_str()
                            .unwrap_or(&tool_name)
                            .to_owned(),
                        payload: payload["input"].clone(),
                        agent,
                        waits: person,
                    },
                    Some(_) if awaiting_response => Call {
                        corr,
                        tool_name,
                        payload,
                        agent,
                        waits: person,
                    },
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
            EventKind::ToolResponse { corr, .. } => {
                self.calls.retain(|c| !c.closes(&corr));
            }
            EventKind::InputRequest {
                request_id,
                prompt,
                tool_name: Some(tool_name),
                ..
            } => {
                self.open_turn = None;
                self.answered = false;
                self.calls.push(Call {
                    corr: request_id.clone(),
                    tool_name,
                    payload: serde_json::json!({ "prompt": prompt }),
                    agent: None,
                    waits: Waits::OnPerson {
                        id: request_id,
                        ts: env.ts,
                    },
                });
            }
            EventKind::InputRequest { request_id, .. } => {
                self.untooled.insert(request_id);
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
            EventKind::Error { error_code, .. } => {
                self.failed = true;
                self.timed_out |= error_code == ErrorCode::UiToolTimeout;
            }
            EventKind::Progress { .. } | EventKind::State { .. } => {
                self.shape = Some("a template's walk");
            }
            // A turn dropped by an earlier restart was asked again.
            EventKind::TurnDiscarded { .. } => {
                self.turns = self.turns.saturating_sub(1);
                self.open_turn = None;
            }
            EventKind::Print { .. }
            | EventKind::ToolProgress { .. }
            | EventKind::RunComplete { .. } => {}
        }
    }

    /// What to do with the run, given which tools may run twice.
    pub(super) fn plan(self, idempotent: impl Fn(&str) -> bool) -> Plan {
        let end = if self.timed_out {
            RunEndReason::Timeout
        } else if self.failed {
            RunEndReason::Error
        } else {
            RunEndReason::Completed
        };
        if self.summarized {
            return Plan::Finish {
                reason: end,
                summarized: true,
            };
        }
        if let Some(shape) = self.shape {
            return Plan::Interrupt(format!("{shape} does not continue after a restart yet"));
        }
        if self.timed_out {
            return Plan::Finish {
                reason: end,
                summarized: false,
            };
        }
        if !self.untooled.is_empty() {
            return Plan::Interrupt(
                "the run was waiting for a choice that no tool asked for when the server \
                 restarted; that does not continue after a restart yet"
                    .into(),
            );
        }
        if self.answered {
            return Plan::Finish {
                reason: end,
                summarized: false,
            };
        }
        // A call waiting for a person waits again; a backend call runs again
        // only if running it twice is safe.
        let (again, unknown) = self
            .calls
            .into_iter()
            .partition(|c| c.waits != Waits::Not || idempotent(&c.tool_name));
        // A dropped turn is asked again: it does not count against max_turns.
        let discarded = u32::from(self.open_turn.is_some());
        Plan::Continue {
            discard: self.open_turn,
            unknown,
            again,
            turns: self.turns - discarded,
            started: self.started,
        }
    }
}

impl Actor {
    /// Continues the run a restart cut off, or ends it when it cannot go on.
    pub(super) async fn continue_cut_run(&mut self) -> Result<(), StoreError> {
        let Some(chat) = &self.chat else {
            return Ok(());
        };
        let agent = self.ctx.agents.get(&chat.agent);
        let mut cut = Cut::default();
        let mut after = 0;
        loop {
            let (page, _) = self
                .ctx
                .store
                .load_bounded(self.chat_id, after, PAGE, PAGE_BYTES)
                .await?;
            let Some(last) = page.last() else { break };
            after = last.seq;
            page.iter().for_each(|e| cut.push(e));
        }
        let plan = match &agent {
            None => Plan::Interrupt(format!(
                "the run's agent `{}` is no longer configured",
                chat.agent
            )),
            Some(a) if a.template.is_some() => {
                Plan::Interrupt("a template's walk does not continue after a restart yet".into())
            }
            Some(a) if a.group.is_some() => {
                Plan::Interrupt("a group's run does not continue after a restart yet".into())
            }
            Some(a) => cut.plan(|name| a.tool(name).is_some_and(|t| t.idempotent)),
        };
        tracing::info!(?plan, "a run cut off by a restart");
        match plan {
            Plan::Finish { reason, summarized } => self.finish_cut_run(reason, summarized).await,
            Plan::Interrupt(why) => self.interrupt_cut_run(Some(why)).await,
            Plan::Continue {
                discard,
                unknown,
                again,
                turns,
                started,
            } => {
                let mut events = Vec::new();
                if let Some((agent, from_seq)) = discard {
                    events.push((
                        EventKind::TurnDiscarded {
                            agent,
                            from_seq,
                            reason: "restart".into(),
                        },
                        None,
                    ));
                }
                for call in unknown {
                    events.push((
                        EventKind::ToolResponse {
                            tool_name: call.tool_name,
                            content: Value::String(UNKNOWN_OUTCOME.into()),
                            success: false,
                            corr: call.corr,
                            agent: call.agent,
                        },
                        None,
                    ));
                }
                if !events.is_empty() {
                    self.append(events, None).await?;
                }
                let mut waited = HashMap::new();
                let mut calls = Vec::new();
                for c in again {
                    if let Waits::OnPerson { id, ts } = c.waits {
                        waited.insert(id, since(&ts));
                    }
                    let input = match agent.as_deref().and_then(|a| a.tool(&c.tool_name)) {
                        // An input request logs its prompt, not the call's input.
                        Some(t) => match &t.kind {
                            ToolKind::InputRequest { prompt_field, .. } => {
                                serde_json::json!({ prompt_field.as_str(): c.payload["prompt"] })
                            }
                            _ => c.payload,
                        },
                        None => c.payload,
                    };
                    calls.push(ToolCall {
                        id: c.corr,
                        name: c.tool_name,
                        input,
                    });
                }
                let resumed = Resumed {
                    turns,
                    elapsed: started.as_deref().map(since).unwrap_or_default(),
                    calls,
                    waited,
                };
                let extras = RunExtras {
                    resumed: Some(resumed),
                    ..RunExtras::default()
                };
                if let Err(e) = Box::pin(self.start_run(None, extras)).await {
                    tracing::warn!(error = %e, "a cut run could not continue");
                    return self
                        .interrupt_cut_run(Some(format!("the run could not continue: {e}")))
                        .await;
                }
                if let Some(run) = &mut self.run {
                    // The log says running already.
                    run.state_written = true;
                }
                Ok(())
            }
        }
    }

    /// Logs the end of a run that was ending when it was cut off.
    async fn finish_cut_run(
        &mut self,
        reason: RunEndReason,
        summarized: bool,
    ) -> Result<(), StoreError> {
        let mut events = Vec::new();
        if !summarized {
            // What the run spent before the restart is not in the log.
            events.push((
                EventKind::UsageSummary {
                    total_tokens: 0,
                    prompt_tokens: 0,
                    completion_tokens: 0,
                    cost: None,
                    by_agent: None,
                },
                None,
            ));
        }
        events.push((EventKind::RunComplete { reason }, None));
        self.append(events, Some(ChatState::Idle)).await?;
        self.conversation_ended(reason).await;
        Ok(())
    }

    /// Ends the cut run `interrupted`; with a `chat.error` saying `why`
    /// when it could have gone on but cannot.
    pub(super) async fn interrupt_cut_run(
        &mut self,
        why: Option<String>,
    ) -> Result<(), StoreError> {
        let mut events = Vec::new();
        if let Some(message) = why {
            events.push((
                EventKind::Error {
                    message,
                    error_code: ErrorCode::AgentInitializationFailed,
                    details: None,
                    recoverable: true,
                },
                None,
            ));
        }
        let reason = RunEndReason::Interrupted;
        events.push((EventKind::RunComplete { reason }, None));
        self.append(events, Some(ChatState::Idle)).await?;
        self.conversation_ended(reason).await;
        Ok(())
    }
}

/// How long ago `ts` (RFC 3339) was; zero if it cannot be read or is ahead.
fn since(ts: &str) -> std::time::Duration {
    chrono::DateTime::parse_from_rfc3339(ts)
        .ok()
        .and_then(|t| (chrono::Utc::now() - t.to_utc()).to_std().ok())
        .unwrap_or_default()
}

#[cfg(test)]
#[path = "resume_tests.rs"]
mod tests;
