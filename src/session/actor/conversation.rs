//! The state machine of a template conversation (seed 004 §4): persisted with
//! the chat, every transition logged as a `chat.state`, illegal ones refused.
//! Chats of agents without a template have no conversation state.

use super::Actor;
use crate::protocol::{ConversationState as S, EventKind, RunEndReason};
use crate::session::SessionError;

impl Actor {
    /// Whether this chat's agent walks a template.
    pub(super) fn is_template(&self) -> bool {
        self.chat
            .as_ref()
            .and_then(|c| self.ctx.agents.get(&c.agent))
            .is_some_and(|a| a.template.is_some())
    }

    /// The conversation's state (`None`: not a template chat, or not begun).
    pub(super) fn conversation(&self) -> Option<S> {
        self.chat
            .as_ref()
            .and_then(|c| c.conversation_state.as_deref())
            .and_then(S::parse)
    }

    /// Moves the conversation to `to`, logging the `chat.state` with it.
    /// Does nothing for a chat without a template.
    ///
    /// # Errors
    /// `IllegalTransition` if seed 004 §4 does not allow it; the log's errors.
    pub(super) async fn transition(&mut self, to: S) -> Result<(), SessionError> {
        if !self.is_template() {
            return Ok(());
        }
        let from = self.conversation();
        if from == Some(to) {
            return Ok(());
        }
        let allowed = match from {
            None => to == S::Pending,
            Some(from) => from.allows(to),
        };
        if !allowed {
            return Err(SessionError::IllegalTransition(format!(
                "the conversation is {}; it cannot become {}",
                from.map_or("new", S::as_str),
                to.as_str()
            )));
        }
        let event = EventKind::State {
            state: to,
            previous: from,
        };
        let marks = super::Marks::default();
        self.append_with(vec![(event, None)], None, Some(to.as_str()), marks)
            .await?;
        Ok(())
    }

    /// Checks that a run may start: a template conversation runs once.
    pub(super) fn may_start_template(&self) -> Result<(), SessionError> {
        match self.conversation() {
            Some(s) if self.is_template() && s != S::Pending => {
                Err(SessionError::IllegalTransition(format!(
                    "the conversation is {}; it cannot become active",
                    s.as_str()
                )))
            }
            _ => Ok(()),
        }
    }

    /// The state a run's end leaves the conversation in.
    pub(super) async fn conversation_ended(&mut self, reason: RunEndReason) {
        let to = if reason == RunEndReason::Completed {
            S::Completed
        } else {
            S::Terminated
        };
        if self.is_template()
            && let Err(e) = self.transition(to).await
        {
            tracing::warn!(error = %e, "cannot record the end of the conversation");
        }
    }

    /// `chat.pause`: nothing new is shown and answers wait until resumed.
    pub(super) async fn pause(&mut self, user: &str) -> Result<(), SessionError> {
        self.owned(user)?;
        if !self.is_template() {
            return Err(SessionError::IllegalTransition(
                "only template conversations pause".into(),
            ));
        }
        self.transition(S::Paused).await?;
        self.paused = true;
        Ok(())
    }

    /// `chat.resume_run`: back to where the conversation was.
    pub(super) async fn resume_run(&mut self, user: &str) -> Result<(), SessionError> {
        self.owned(user)?;
        if self.conversation() != Some(S::Paused) {
            return Err(SessionError::IllegalTransition(format!(
                "the conversation is {}; only a paused one resumes",
                self.conversation().map_or("not a template", S::as_str)
            )));
        }
        let rewaits = self.run.as_ref().is_some_and(|r| !r.rewaits.is_empty());
        let to = if !self.components.is_empty() || rewaits {
            S::AwaitingWidget
        } else if !self.inputs.is_empty() {
            S::AwaitingUser
        } else {
            S::Active
        };
        self.transition(to).await?;
        self.paused = false;
        Ok(())
    }
}
