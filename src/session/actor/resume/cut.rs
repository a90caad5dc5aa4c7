//! What the log says of a run a restart cut off ([`Cut`], fed the chat's
//! envelopes in order; everything after the last `chat.run_complete` is the
//! cut run) and what to do with it ([`Plan`]). Pure: no store, no actor.

use std::collections::HashSet;

use serde_json::Value;

use crate::agent::APPROVAL;
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
    untooled: HashSet<String>,
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
        /// Calls approved before the restart: their gate is not asked again.
        approved: HashSet<String>,
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
            EventKind::ToolResponse { corr, content, .. } => {
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
            EventKind::Error {
                error_code,
                message,
                ..
            } => {
                self.failed = true;
                self.timed_out |= error_code == ErrorCode::UiToolTimeout;
                self.out_of_turns |= message.starts_with(crate::agent::MAX_TURNS_ERROR);
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
        } else if self.out_of_turns {
            RunEndReason::MaxTurns
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
        // A run logs an error as it ends (a provider's failure, the turns
        // run out): it was ending.
        if self.failed {
            return Plan::Finish {
                reason: end,
                summarized: false,
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
            approved: self.approved,
        }
    }
}

#[cfg(test)]
#[path = "cut_tests.rs"]
mod tests;
