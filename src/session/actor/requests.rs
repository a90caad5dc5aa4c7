//! What a run asks of a person, on the actor's side: an input request or a
//! UI tool call logged and registered with its deadline (or, for a run a
//! restart cut off, registered again without logging — an answer that came
//! before that is held, then taken), an answer key kept, the requests whose
//! time ran out, and what an answer to none is told; and the answers to them.

use serde_json::Value;
use tokio::time::Instant;

use super::{Actor, Held, PendingComponent, PendingInput, REDACTED, Role};
use crate::link::{ComponentOutcome, InputOutcome, RunMsg};
use crate::protocol::{ConversationState, ErrorCode, EventKind};
use crate::session::SessionError;
use crate::session::handle::{Op, Reply};
use crate::store::StoreError;

/// How long an answer is held for a request a continued run has not waited
/// on again: below the registry's deadline, so its caller hears why.
const HOLD: std::time::Duration = std::time::Duration::from_secs(10);

impl Actor {
    pub(super) async fn request(&mut self, msg: RunMsg) {
        match msg {
            RunMsg::Emit(kind) => {
                if let Err(e) = self.append_run(vec![(kind, None)]).await {
                    self.deliver_transient_error(&e);
                }
            }
            RunMsg::Log { kind, respond } => {
                let logged = self.append_run(vec![(kind, None)]).await;
                if let Err(e) = &logged {
                    self.deliver_transient_error(e);
                }
                let _ = respond.send(logged.is_ok());
            }
            RunMsg::AskInput {
                request_id,
                prompt,
                password,
                options,
                tool_name,
                waited,
                respond,
            } => {
                let timeout = self.ctx.input_timeout;
                let speaker = tool_name.as_deref() == Some(crate::agent::SPEAKER_TOOL);
                let event = EventKind::InputRequest {
                    corr: request_id.clone(),
                    request_id: request_id.clone(),
                    prompt,
                    password,
                    timeout_seconds: Some(timeout.as_secs()),
                    options: options.clone(),
                    tool_name,
                };
                let state = crate::protocol::ConversationState::AwaitingUser;
                self.waits_again(&request_id);
                match self.log_request(event, state, waited).await {
                    Ok(()) => {
                        // A request waited on again keeps its first deadline.
                        let left = timeout.saturating_sub(waited.unwrap_or_default());
                        self.inputs.insert(
                            request_id.clone(),
                            PendingInput {
                                password,
                                options,
                                speaker,
                                deadline: Instant::now() + left,
                                respond,
                            },
                        );
                    }
                    // Dropping `respond` ends the run's wait.
                    Err(e) => self.deliver_transient_error(&e),
                }
                self.answer_held(&request_id).await;
            }
            RunMsg::Used { speaker, usage } => self.used(speaker, usage),
            RunMsg::TakeSteered { respond } => {
                let texts = self.take_steered().await;
                let _ = respond.send(texts);
            }
            RunMsg::KeepAnswer {
                corr,
                answer,
                respond,
            } => {
                let kept = self
                    .ctx
                    .store
                    .put_answer(self.chat_id, &corr, &answer)
                    .await;
                if let Err(e) = &kept {
                    self.deliver_transient_error(e);
                }
                let _ = respond.send(kept.is_ok());
            }
            RunMsg::ShowComponent {
                tool_name,
                component_type,
                payload,
                corr,
                display,
                check,
                agent,
                waited,
                respond,
            } => {
                let approval = component_type == crate::agent::APPROVAL;
                let event = EventKind::ToolCall {
                    tool_name,
                    component_type: Some(component_type),
                    awaiting_response: true,
                    payload,
                    corr: corr.clone(),
                    display,
                    agent,
                };
                let state = crate::protocol::ConversationState::AwaitingWidget;
                self.waits_again(&corr);
                match self.log_request(event, state, waited).await {
                    Ok(()) => {
                        let left = self
                            .ctx
                            .ui_timeout
                            .saturating_sub(waited.unwrap_or_default());
                        self.components.insert(
                            corr.clone(),
                            PendingComponent {
                                deadline: Instant::now() + left,
                                approval,
                                check,
                                respond,
                            },
                        );
                    }
                    Err(e) => self.deliver_transient_error(&e),
                }
                self.answer_held(&corr).await;
            }
        }
    }

    /// Counts what the run's model calls used (`speaker`'s, else the run's
    /// agent's); its next envelope that can carry the total does.
    pub(super) fn used(&mut self, speaker: Option<String>, usage: crate::llm::Usage) {
        let Some(run) = &mut self.run else { return };
        let speaker = speaker
            .or_else(|| self.chat.as_ref().map(|c| c.agent.clone()))
            .unwrap_or_default();
        let total = run.used.entry(speaker).or_default();
        total.prompt_tokens += usage.prompt_tokens;
        total.completion_tokens += usage.completion_tokens;
        run.used_unlogged = true;
    }

    /// Logs a request the run waits on, and the conversation's new state;
    /// nothing for one the run a restart cut off had logged (`waited`).
    async fn log_request(
        &mut self,
        event: EventKind,
        state: crate::protocol::ConversationState,
        waited: Option<std::time::Duration>,
    ) -> Result<(), StoreError> {
        // A request waited on again is in the log; its state may not be (a
        // paused conversation resumed).
        if waited.is_none() {
            self.append_run(vec![(event, None)]).await?;
        }
        if let Err(e) = self.transition(state).await {
            tracing::warn!(error = %e, "cannot record the conversation's state");
        }
        Ok(())
    }

    /// `user.input.submit`: the user's answer goes to the run (logged as
    /// the user's words unless a pick from a choice, then acknowledged).
    pub(super) async fn submit_input(
        &mut self,
        user: &str,
        request_id: String,
        text: String,
    ) -> Result<(), SessionError> {
        self.owned(user)?;
        let Some(asked) = self.inputs.get(&request_id) else {
            return Err(self.not_pending(request_id));
        };
        // A choice takes one of its options (or its 1-based number), as
        // written; anything else is refused and the request stays open. A
        // group's "who speaks next?" also takes no choice (an empty answer:
        // its selector chooses, as AG2's manual selection does).
        let choice = match &asked.options {
            Some(_) if text.trim().is_empty() && asked.speaker => Some(String::new()),
            Some(options) => Some(super::run::chosen(options, &text).ok_or_else(|| {
                SessionError::InvalidAnswer(format!("answer with one of: {}", options.join(", ")))
            })?),
            None => None,
        };
        let Some(pending) = self.inputs.remove(&request_id) else {
            return Err(SessionError::RequestNotFound(request_id));
        };
        let ack = (
            EventKind::InputAck {
                corr: request_id.clone(),
                request_id: request_id.clone(),
            },
            None,
        );
        // What the user typed is a turn of the conversation; a pick from a
        // choice is not (its ack, and what the run does with it, say it).
        let events = match &choice {
            Some(_) => vec![ack],
            None => {
                let shown = if pending.password {
                    REDACTED.to_owned()
                } else {
                    text.clone()
                };
                let said = EventKind::Text {
                    agent: "user".into(),
                    content: shown,
                };
                vec![(said, None), ack]
            }
        };
        let text = choice.unwrap_or(text);
        if let Err(e) = self.append_run(events).await {
            // Not acknowledged: the request stays open for another try (unless
            // the chat moved to another node, and its run with it).
            if self.role != Role::Follower {
                self.inputs.insert(request_id, pending);
            }
            return Err(e.into());
        }
        if let Err(e) = self.transition(ConversationState::Active).await {
            tracing::warn!(error = %e, "cannot record the answer's state");
        }
        let _ = pending.respond.send(InputOutcome::Answered(text));
        Ok(())
    }

    pub(super) async fn component_result(
        &mut self,
        user: &str,
        corr: &str,
        data: Value,
    ) -> Result<(), SessionError> {
        self.owned(user)?;
        if self.paused {
            return Err(SessionError::IllegalTransition(
                "the conversation is paused; resume it first".into(),
            ));
        }
        let pending = self
            .components
            .remove(corr)
            .ok_or_else(|| self.not_pending(corr.to_owned()))?;
        if let Some(check) = &pending.check
            && let Err(why) = check.verify(&data)
        {
            // Refused: nothing is logged and the call stays open.
            self.components.insert(corr.to_owned(), pending);
            return Err(SessionError::InvalidAnswer(why));
        }
        // `{"approved": …, "all": true}` answers every open approval of the run.
        if pending.approval && data["all"].as_bool() == Some(true) {
            let others: Vec<String> = self
                .components
                .iter()
                .filter(|(_, p)| p.approval)
                .map(|(c, _)| c.clone())
                .collect();
            for corr in others {
                if let Some(other) = self.components.remove(&corr) {
                    let _ = other.respond.send(ComponentOutcome::Returned(data.clone()));
                }
            }
        }
        if let Err(e) = self.transition(ConversationState::Active).await {
            tracing::warn!(error = %e, "cannot record the answer's state");
        }
        // The run logs the tool_response when it takes the result.
        let _ = pending.respond.send(ComponentOutcome::Returned(data));
        Ok(())
    }

    /// Holds an answer to a request the log shows open that a continued
    /// run has not waited on again yet (it arrived just after a restart);
    /// gives back any other, to be answered now.
    pub(super) fn hold(&mut self, op: Op, reply: Reply) -> Option<(Op, Reply)> {
        let (user, id) = match &op {
            Op::SubmitInput {
                user, request_id, ..
            } => (user, request_id),
            Op::ComponentResult { user, corr, .. } => (user, corr),
            _ => return Some((op, reply)),
        };
        let open = self.run.as_ref().is_some_and(|r| r.rewaits.contains(id));
        // Anyone else's answer is refused as any other (`NotFound`); a
        // paused conversation says so.
        if !open || self.paused || self.owned(user).is_err() {
            return Some((op, reply));
        }
        let id = id.clone();
        tracing::debug!(%id, "an answer held until the continued run waits again");
        self.held.push(Held {
            id,
            op,
            reply,
            until: Instant::now() + HOLD,
        });
        None
    }

    /// The continued run asks `id` again: no answer is held for it from now.
    fn waits_again(&mut self, id: &str) {
        if let Some(run) = &mut self.run {
            run.rewaits.remove(id);
        }
    }

    /// Answers what was held for `id`, now that the run waits on it again
    /// (or refuses it, if the request could not be registered): in the order
    /// the answers came, so a second one finds the request answered.
    async fn answer_held(&mut self, id: &str) {
        let (now, later) = std::mem::take(&mut self.held)
            .into_iter()
            .partition(|h| h.id == id);
        self.held = later;
        for Held { op, reply, .. } in now {
            // Its caller gave up: it was told the outcome is unknown.
            if reply.is_closed() {
                continue;
            }
            let result = Box::pin(self.handle_op(op)).await;
            let _ = reply.send(result);
        }
    }

    /// Refuses the held answers, saying `why` (given the request's id): all
    /// of them (the run ended, was left at shutdown, or moved to another
    /// node), or those whose request was not waited on again in time.
    pub(super) fn refuse_held(&mut self, all: bool, why: fn(String) -> SessionError) {
        let now = Instant::now();
        let (gone, kept) = std::mem::take(&mut self.held)
            .into_iter()
            .partition(|h| all || h.until <= now);
        self.held = kept;
        for h in gone {
            let _ = h.reply.send(Err(why(h.id)));
        }
    }

    /// Ends the wait `id` (an input request, a UI tool call or an approval)
    /// as if its time ran out: what it logs and what the run does are a
    /// timeout's (an operator's act).
    pub(super) async fn end_wait(&mut self, id: String) -> Result<(), SessionError> {
        let now = Instant::now();
        if let Some(pending) = self.inputs.get_mut(&id) {
            pending.deadline = now;
        } else if let Some(pending) = self.components.get_mut(&id) {
            pending.deadline = now;
        } else {
            return Err(SessionError::RequestNotFound(id));
        }
        self.expire().await;
        Ok(())
    }

    /// Times out the input requests and UI tool calls whose deadline passed.
    pub(super) async fn expire(&mut self) {
        let now = Instant::now();
        self.refuse_held(false, SessionError::RequestNotFound);
        let timeout = self.ctx.input_timeout.as_secs();
        let expired: Vec<String> = self
            .inputs
            .iter()
            .filter(|(_, p)| p.deadline <= now)
            .map(|(id, _)| id.clone())
            .collect();
        for request_id in expired {
            let Some(pending) = self.inputs.remove(&request_id) else {
                continue;
            };
            let event = EventKind::InputTimeout {
                corr: request_id.clone(),
                request_id,
                timeout_seconds: timeout,
            };
            if let Err(e) = self.append_run(vec![(event, None)]).await {
                self.deliver_transient_error(&e);
            }
            let _ = pending.respond.send(InputOutcome::TimedOut);
        }
        let expired: Vec<String> = self
            .components
            .iter()
            .filter(|(_, p)| p.deadline <= now)
            .map(|(corr, _)| corr.clone())
            .collect();
        for corr in expired {
            let Some(pending) = self.components.remove(&corr) else {
                continue;
            };
            let event = EventKind::Error {
                message: format!("no result for UI tool call `{corr}` in time"),
                error_code: ErrorCode::UiToolTimeout,
                details: Some(serde_json::json!({ "corr": corr })),
                recoverable: true,
            };
            if let Err(e) = self.append_run(vec![(event, None)]).await {
                self.deliver_transient_error(&e);
            }
            let _ = pending.respond.send(ComponentOutcome::TimedOut);
        }
    }

    /// The error for an answer to `id` that no request of its kind waits
    /// for: if a request of the other kind does, which message and route
    /// answer it.
    pub(super) fn not_pending(&self, id: String) -> SessionError {
        let chat = self.chat_id;
        let route = if self.inputs.contains_key(&id) {
            format!(
                "an input request: answer it with `user.input.submit` or POST /v1/chats/{chat}/inputs/{id}"
            )
        } else if self.components.get(&id).is_some_and(|p| p.approval) {
            format!(
                "an approval: answer it with `inline_component.result` or POST /v1/chats/{chat}/approvals/{id}"
            )
        } else if self.components.contains_key(&id) {
            format!(
                "a UI component: answer it with `inline_component.result` or POST /v1/chats/{chat}/components/{id}"
            )
        } else {
            return SessionError::RequestNotFound(id);
        };
        SessionError::OtherKind(format!("request `{id}` is pending, as {route}"))
    }
}
