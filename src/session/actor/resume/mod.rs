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
//! A template's walk goes on at the item and content it was on
//! (`templates::Trail`, `templates::Place`): the widget that waited waits
//! again as it was shown, the score counts the answers given before, and a
//! paused conversation stays paused. A group's run goes on where its
//! members' turns stood (`GroupPlace`): the member cut off goes on with its
//! turn, or the next is chosen after one that had finished. A workflow cut
//! off during its action is abandoned (`Plan::Abandon`: never run again, its
//! outcome unknown, the run ends `error`).
//!
//! A workflow waiting for its approval is invoked again (`Plan::Workflow`):
//! its invocation is in the log, its approval waits again.
//!
//! A group's "who speaks next?" to the user is asked again by its id.
//!
//! Not continued, and ended `interrupted` with a `chat.error` saying why: a
//! walk whose template changed under it, a run whose agent (or workflow) is
//! gone.

mod cut;

use std::collections::HashMap;

use serde_json::Value;

use super::Actor;
use crate::agent::runtime::{GroupResumed, Resumed};
use crate::link::RunMsg;
use crate::llm::ToolCall;
use crate::protocol::{ConversationState, ErrorCode, EventKind, RunEndReason};
use crate::session::handle::{RunExtras, WorkflowCall};
use crate::store::StoreError;
use crate::templates::{Template, Trail};
use crate::tools::ToolKind;
use cut::{Carried, Cut, Plan, Waits};

/// What the tool result of a call cut off by a restart says (not idempotent).
pub(super) const UNKNOWN_OUTCOME: &str =
    "the outcome of this call is unknown: the server restarted before its result came";

/// Envelopes read per page while looking for the cut run.
const PAGE: u32 = 1_000;
/// Bytes read per page at most.
const PAGE_BYTES: usize = 4 << 20;

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
        let carried = cut.carried();
        if let Some(template) = agent.as_ref().and_then(|a| a.template.as_ref()) {
            let started = cut.started().map(str::to_owned);
            return match cut.template_walk(template) {
                Ok(trail) => self.continue_walk(template, &trail, started, carried).await,
                Err((reason, summarized)) => {
                    self.finish_cut_run(reason, summarized, &carried).await
                }
            };
        }
        let client_tools = cut.frontend_tools();
        let plan = match &agent {
            None => Plan::Interrupt(format!(
                "the run's agent `{}` is no longer configured",
                chat.agent
            )),
            Some(a) => {
                // A group's tools are its members'. MCP servers starting with
                // the process list theirs first (their calls are known, and
                // made again when idempotent).
                let members: Vec<&crate::agent::Agent> = a
                    .group
                    .iter()
                    .flat_map(|g| &g.members)
                    .map(|m| m.agent.as_ref())
                    .collect();
                // One deadline for them all: the chat answers nothing
                // meanwhile, so a group of many servers must not add up.
                let until = tokio::time::Instant::now() + crate::agent::MCP_SETTLE;
                for agent in std::iter::once(a.as_ref()).chain(members.iter().copied()) {
                    agent.mcp_settled(until).await;
                }
                let mut tools: Vec<crate::tools::Tool> = a.tools_now().into_owned();
                for m in &members {
                    tools.extend(m.tools_now().iter().cloned());
                }
                let plan = cut.plan(|name| tools.iter().any(|t| t.name == name && t.idempotent));
                let plan = match &a.upstream {
                    Some(up) => cut::plan::upstream(plan, &a.id, up.idempotent),
                    None => plan,
                };
                drop(members);
                match (plan, a.group.as_ref()) {
                    // The member's last words ended the conversation.
                    (Plan::Continue { group: Some(g), .. }, Some(group))
                        if g.done && g.last_text.as_deref().is_some_and(|t| group.ends(t)) =>
                    {
                        Plan::Finish {
                            reason: RunEndReason::Completed,
                            summarized: false,
                        }
                    }
                    (plan, _) => plan,
                }
            }
        };
        tracing::info!(?plan, "a run cut off by a restart");
        match plan {
            Plan::Finish { reason, summarized } => {
                self.finish_cut_run(reason, summarized, &carried).await
            }
            Plan::Interrupt(why) => self.interrupt_cut_run(Some(why)).await,
            Plan::Workflow {
                id,
                corr,
                parameters,
                asked,
                started,
            } => {
                // The approval shown must still be the workflow's gate.
                let gated = self
                    .ctx
                    .agents
                    .workflows()
                    .get(&id)
                    .is_some_and(|w| w.requires_approval);
                if !gated {
                    return self
                        .interrupt_cut_run(Some(format!(
                            "the workflow `{id}` no longer asks for the approval it was waiting \
                             for (or is no longer configured): it is not run"
                        )))
                        .await;
                }
                let gate = format!("{corr}{}", crate::tools::APPROVAL_SUFFIX);
                let resumed = Resumed {
                    elapsed: started.as_deref().map(since).unwrap_or_default(),
                    waited: HashMap::from([(gate, since(&asked))]),
                    ..Resumed::default()
                };
                let call = WorkflowCall {
                    id,
                    parameters,
                    corr,
                };
                self.start_resumed(resumed, Some(call), Vec::new(), carried)
                    .await
            }
            Plan::Abandon { unanswered, why } => {
                let mut events: Vec<_> = unanswered.into_iter().map(unknown_outcome).collect();
                events.push((
                    EventKind::Error {
                        message: why,
                        error_code: ErrorCode::ToolExecutionError,
                        details: None,
                        recoverable: true,
                    },
                    None,
                ));
                self.append(events, None).await?;
                self.finish_cut_run(RunEndReason::Error, false, &carried)
                    .await
            }
            Plan::Continue {
                discard,
                unknown,
                again,
                turns,
                started,
                approved,
                group,
                choosing,
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
                events.extend(unknown.into_iter().map(unknown_outcome));
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
                if let Some((id, ts)) = choosing {
                    waited.insert(id, since(&ts));
                }
                let resumed = Resumed {
                    // A group member's own model turns, else the run's.
                    turns: group.as_ref().map_or(turns, |g| g.model_turns),
                    elapsed: started.as_deref().map(since).unwrap_or_default(),
                    calls,
                    waited,
                    approved,
                    group: group.map(|g| GroupResumed {
                        member: g.member.clone(),
                        rounds: g.rounds,
                        done: g.done,
                        handoff: g.handoff.clone(),
                    }),
                    template: None,
                    usage: Default::default(),
                };
                self.start_resumed(resumed, None, client_tools, carried)
                    .await
            }
        }
    }

    /// Continues a template's walk from where its log says it stood (its
    /// answer keys come from the store).
    async fn continue_walk(
        &mut self,
        template: &Template,
        trail: &Trail,
        started: Option<String>,
        carried: Carried,
    ) -> Result<(), StoreError> {
        let mut keys = HashMap::new();
        for corr in trail.corrs() {
            if let Some(json) = self.ctx.store.answer(self.chat_id, corr).await?
                && let Ok(key) = serde_json::from_str(&json)
            {
                keys.insert(corr.to_owned(), key);
            }
        }
        let place = match trail.place(template, &keys, since) {
            Ok(place) => place,
            Err(why) => return self.interrupt_cut_run(Some(why)).await,
        };
        tracing::info!(?place, "a template's walk cut off by a restart");
        let resumed = Resumed {
            elapsed: started.as_deref().map(since).unwrap_or_default(),
            template: Some(place),
            ..Resumed::default()
        };
        self.start_resumed(resumed, None, Vec::new(), carried).await
    }

    /// Starts the run again from what the log said of it (a workflow's
    /// run: invoking it again), with the `context_type` it was started
    /// with and counting on from what it had used.
    async fn start_resumed(
        &mut self,
        mut resumed: Resumed,
        workflow: Option<WorkflowCall>,
        client_tools: Vec<crate::tools::ClientTool>,
        carried: Carried,
    ) -> Result<(), StoreError> {
        resumed.usage = carried.used;
        let extras = RunExtras {
            resumed: Some(resumed),
            workflow,
            client_tools,
            context_type: carried.context_type,
            model: carried.model,
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
        // A paused conversation stays paused: its run waits unread until
        // `chat.resume_run`. One cut off before it became active does now.
        self.paused = self.conversation() == Some(ConversationState::Paused);
        if self.conversation() == Some(ConversationState::Pending)
            && let Err(e) = self.transition(ConversationState::Active).await
        {
            tracing::warn!(error = %e, "cannot record the conversation's state");
        }
        Ok(())
    }

    /// At shutdown: a run a restart can continue is left in the log for the
    /// next start — at once if it waits for a person, else after the model
    /// turn or tool calls in flight, as far as the grace period lets it —;
    /// any other is cancelled and logs its end `interrupted`. A paused
    /// conversation's run is left as it is: nothing new is shown while paused.
    pub(super) async fn at_shutdown(&mut self, paused: bool) {
        // A run the log does not show as running yet (an agent that starts
        // first, before its first envelope) would not be found again.
        let continuable =
            self.ctx.continue_runs && self.run.as_ref().is_some_and(|r| r.state_written);
        if !continuable {
            return self.cancel_run(RunEndReason::Interrupted);
        }
        if paused {
            // What it queued before the pause (an accepted answer) is logged;
            // nothing new is shown.
            self.flush_run().await;
            self.leave_run();
        } else if self.inputs.is_empty() && self.components.is_empty() {
            self.draining = true;
        } else {
            // What the run queued before it waited (a parallel call's
            // result) is logged first.
            self.flush_run().await;
            self.leave_run();
        }
    }

    /// Logs the events the run has queued, up to its next model turn or
    /// request.
    async fn flush_run(&mut self) {
        let mut events = Vec::new();
        let mut used = Vec::new();
        if let Some(run) = &mut self.run {
            loop {
                match run.rx.try_recv() {
                    Ok(RunMsg::Emit(EventKind::SelectSpeaker { .. })) => break,
                    Ok(RunMsg::Emit(kind)) => events.push((kind, None)),
                    Ok(RunMsg::Used { speaker, usage }) => used.push((speaker, usage)),
                    _ => break,
                }
            }
        }
        for (speaker, usage) in used {
            self.used(speaker, usage);
        }
        if !events.is_empty()
            && let Err(e) = self.append_run(events).await
        {
            self.deliver_transient_error(&e);
        }
    }

    /// Lets go of the run without logging its end: the log still says the
    /// chat is running, and the next start (or node) continues it. The run
    /// task is stopped (its messages go nowhere now, so it logs nothing).
    pub(super) fn leave_run(&mut self) {
        if let Some(run) = self.run.take() {
            let super::ActiveRun { control, rx, .. } = run;
            drop(rx);
            control.cancel(RunEndReason::Interrupted);
            tracing::info!("run left for the next start to continue");
        }
        self.inputs.clear();
        self.components.clear();
        self.refuse_held(true, |_| crate::session::SessionError::ShuttingDown);
        self.draining = false;
    }

    /// Logs the end of a run that was ending when it was cut off (with its
    /// usage summary, from what it had logged it used, unless it has one).
    async fn finish_cut_run(
        &mut self,
        reason: RunEndReason,
        summarized: bool,
        carried: &Carried,
    ) -> Result<(), StoreError> {
        let mut events = Vec::new();
        if !summarized {
            let agent = self
                .chat
                .as_ref()
                .and_then(|c| self.ctx.agents.get(&c.agent));
            let chat_model = self.chat.as_ref().and_then(|c| c.model.clone());
            let switched = (carried.model.clone().or(chat_model))
                .and_then(|m| self.ctx.agents.models().resolve(&m));
            let summary = match agent {
                Some(agent) => {
                    crate::agent::runtime::summary_of(&agent, &carried.used, switched.as_deref())
                }
                None => EventKind::UsageSummary {
                    total_tokens: 0,
                    prompt_tokens: 0,
                    completion_tokens: 0,
                    cost: None,
                    by_agent: None,
                    model: None,
                },
            };
            events.push((summary, None));
        }
        events.push((EventKind::RunComplete { reason }, None));
        self.log_end(events).await?;
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
        self.log_end(events).await?;
        self.conversation_ended(reason).await;
        Ok(())
    }
}

/// The result of a call a restart cut off, which is not run again.
fn unknown_outcome(call: cut::Call) -> (EventKind, Option<String>) {
    let response = EventKind::ToolResponse {
        tool_name: call.tool_name,
        content: Value::String(UNKNOWN_OUTCOME.into()),
        success: false,
        corr: call.corr,
        agent: call.agent,
    };
    (response, None)
}

/// How long ago `ts` (RFC 3339) was; zero if it cannot be read or is ahead.
fn since(ts: &str) -> std::time::Duration {
    chrono::DateTime::parse_from_rfc3339(ts)
        .ok()
        .and_then(|t| (chrono::Utc::now() - t.to_utc()).to_std().ok())
        .unwrap_or_default()
}
