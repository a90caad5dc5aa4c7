//! What to do with a cut run: [`Cut::plan`] for an agent's or a group's,
//! [`Cut::template_walk`] for a template's.

use serde_json::Value;

use super::{Call, Cut, GroupPlace, Plan, Waits};
use crate::protocol::RunEndReason;

/// The plan for a run of an upstream AG-UI agent (`agent`): one cut while
/// its run was streaming (nothing waiting for a person: a turn open, its own
/// tool calls without their results, or between them) is asked again only
/// when its file says `idempotent` — the turn dropped, the calls answered
/// "outcome unknown" —, else it ends with an error saying the outcome is
/// unknown. A run waiting for a person (an interrupt, a client's tool)
/// waits again. One cut after its last text and before its end is taken
/// as ended (the log cannot tell them apart).
pub(in crate::session::actor::resume) fn upstream(
    plan: Plan,
    agent: &str,
    idempotent: bool,
) -> Plan {
    match plan {
        // Nothing waits for a person: the agent's run was streaming (a run
        // ends on its text, or on what it waits for).
        Plan::Continue { unknown, again, .. }
            if !idempotent && again.iter().all(|c| c.waits == Waits::Not) =>
        {
            Plan::Abandon {
                unanswered: unknown.into_iter().chain(again).collect(),
                why: format!(
                    "the upstream agent `{agent}` was answering when the server restarted: the \
                     outcome of its run is unknown, and it is not asked again (its agent file \
                     does not say `idempotent: true`)"
                ),
            }
        }
        plan => plan,
    }
}

impl Cut {
    /// When the run's first envelope was logged (RFC 3339).
    pub(in crate::session::actor::resume) fn started(&self) -> Option<&str> {
        self.started.as_deref()
    }

    /// A template's walk: what it logged, to go on from; or, when it was
    /// ending, the reason to end it with and whether its usage is logged.
    pub(in crate::session::actor::resume) fn template_walk(
        self,
        template: &crate::templates::Template,
    ) -> Result<crate::templates::Trail, (RunEndReason, bool)> {
        let summarized = self.summarized;
        if self.timed_out {
            Err((RunEndReason::Timeout, summarized))
        } else if self.template.stopped(template) {
            Err((RunEndReason::Error, summarized))
        } else if self.template.scored(template) {
            Err((RunEndReason::Completed, summarized))
        } else if summarized {
            // Ending for a reason its log does not say.
            Err((RunEndReason::Interrupted, summarized))
        } else {
            Ok(self.template)
        }
    }

    /// What to do with the run, given which tools may run twice.
    pub(in crate::session::actor::resume) fn plan(
        mut self,
        idempotent: impl Fn(&str) -> bool,
    ) -> Plan {
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
        if self.timed_out {
            return Plan::Finish {
                reason: end,
                summarized: false,
            };
        }
        match self.workflow.take() {
            // Its action was under way: whether it took effect is unknown,
            // and it is not run again.
            Some(w) if !w.answered => {
                // Its approval waits: nothing of its action has run.
                if let Some(Waits::OnPerson { ts, .. }) = self
                    .calls
                    .iter()
                    .find(|c| c.corr == w.corr)
                    .map(|c| c.waits.clone())
                {
                    return Plan::Workflow {
                        id: w.tool_name,
                        corr: w.corr,
                        parameters: w.parameters,
                        asked: ts,
                        started: self.started,
                    };
                }
                let mut unanswered = std::mem::take(&mut self.calls);
                unanswered.push(Call {
                    corr: w.corr,
                    tool_name: w.tool_name,
                    payload: Value::Null,
                    agent: None,
                    waits: Waits::Not,
                });
                return Plan::Abandon {
                    unanswered,
                    why: "the workflow was running when the server restarted: whether it took \
                          effect is unknown, and it is not run again"
                        .into(),
                };
            }
            // Done (an HTTP call's or steps' result): the run was ending.
            Some(w) if !w.then_prompt => {
                return Plan::Finish {
                    reason: end,
                    summarized: false,
                };
            }
            // A prompt workflow's prompt: the run goes on as any other.
            _ => {}
        }
        // A group's choice of the next speaker by the user is asked again
        // (after the member that had finished); no other request comes
        // without a tool.
        let speaker = crate::agent::SPEAKER_REQUEST;
        let choosing = match self.untooled.len() {
            0 => None,
            1 if self.untooled.keys().all(|id| id.starts_with(speaker)) => {
                self.untooled.drain().next()
            }
            _ => {
                return Plan::Interrupt(
                    "the run was waiting for a choice that no tool asked for when the server \
                     restarted; that does not continue after a restart"
                        .into(),
                );
            }
        };
        // A group member's answer ends its turn, not the run.
        if self.answered && self.group.member.is_none() {
            return Plan::Finish {
                reason: end,
                summarized: false,
            };
        }
        let calls_done = self.calls.is_empty();
        // A call waiting for a person waits again; a backend call runs again
        // only if running it twice is safe.
        let (again, unknown) = self
            .calls
            .into_iter()
            .partition(|c| c.waits != Waits::Not || idempotent(&c.tool_name));
        // A dropped turn is asked again: it does not count against max_turns.
        let discarded = u32::from(self.open_turn.is_some());
        let group = self.group.member.clone().map(|member| {
            Box::new(GroupPlace {
                member,
                rounds: self.group.rounds,
                model_turns: self.group.model_turns - discarded,
                // Its turn ended: it answered, or handed the conversation on.
                done: self.open_turn.is_none()
                    && calls_done
                    && (self.answered || self.group.handoff.is_some()),
                handoff: self.group.handoff,
                last_text: self.last_text,
            })
        });
        Plan::Continue {
            discard: self.open_turn,
            unknown,
            again,
            turns: self.turns - discarded,
            started: self.started,
            approved: self.approved,
            group,
            choosing,
        }
    }
}
