//! The registry's commands inside a chat: a user turn, the answers to a
//! run's requests, cancel/pause/resume, the chat's model, archiving and
//! deleting it. Each is checked here (sizes, per-user rates) and then
//! handed to the chat's actor.

use serde_json::{Map, Value};
use uuid::Uuid;

use super::{Caller, Registry, check_text};
use crate::session::SessionError;
use crate::session::handle::{Op, Origin, RunExtras, WorkflowCall};

impl Registry {
    /// Archives the chat (its log stays; new turns are refused).
    ///
    /// # Errors
    /// `NotFound` for a chat that is not the user's.
    pub async fn archive(&self, chat_id: Uuid, user: &str) -> Result<(), SessionError> {
        let op = Op::Archive {
            user: user.to_owned(),
        };
        self.call_op(chat_id, op, Origin::Local { attempt: 0 })
            .await
    }

    /// Deletes the chat for good: its run stopped, its log and index rows
    /// gone, its followers told (`chat.error` `RESUME_FAILED`).
    ///
    /// # Errors
    /// `NotFound` for a chat that is not the user's.
    pub async fn purge(&self, chat_id: Uuid, user: &str) -> Result<(), SessionError> {
        let op = Op::Purge {
            user: user.to_owned(),
        };
        self.call_op(chat_id, op, Origin::Local { attempt: 0 })
            .await
    }

    /// Counts one costly action of `user`'s outside a chat's actor (binding
    /// a database: a connection and a schema read) against their turn rate.
    ///
    /// # Errors
    /// `RateLimited` past `rate_messages_per_minute`.
    pub fn charge(&self, user: &str) -> Result<(), SessionError> {
        self.inner.ctx.quotas.message(user)
    }

    /// Runs the workflow `id` in the chat (seed 002): one the caller may run
    /// (`claims`: their token's, for its `allow`), its `parameters` checked
    /// against its schema first, each fault named. A run of its own, so not
    /// while another is active.
    ///
    /// # Returns
    /// The invocation's `corr` (its `chat.tool_call`'s).
    ///
    /// # Errors
    /// `UnknownWorkflow`, `InvalidParameters`, `RateLimited`, and what a new
    /// turn may meet (`RunInProgress`, `NotFound`…).
    pub async fn invoke_workflow(
        &self,
        chat_id: Uuid,
        caller: Caller<'_>,
        id: &str,
        parameters: Value,
        claims: &Map<String, Value>,
    ) -> Result<String, SessionError> {
        let workflow = self
            .inner
            .ctx
            .agents
            .workflows()
            .get(id)
            .filter(|w| w.allows(caller.user, claims))
            .ok_or_else(|| SessionError::UnknownWorkflow(id.to_owned()))?;
        // What a form would send: the schema's defaults where nothing was given.
        let parameters = workflow.with_defaults(parameters);
        let faults = workflow.check(&parameters);
        if !faults.is_empty() {
            let named: Vec<String> = faults
                .iter()
                .map(|(at, why)| match at.as_str() {
                    "" => why.clone(),
                    at => format!("{at}: {why}"),
                })
                .collect();
            return Err(SessionError::InvalidParameters(named.join("; ")));
        }
        // A prompt is a user's message: held to the same size.
        if let Some(prompt) = workflow.prompt(&parameters) {
            check_text("the workflow's prompt", &prompt)?;
        }
        self.inner.ctx.quotas.message(caller.user)?;
        let corr = format!(
            "{}{}",
            crate::workflows::CORR_PREFIX,
            Uuid::new_v4().simple()
        );
        let op = Op::Workflow {
            user: caller.user.to_owned(),
            extras: RunExtras {
                workflow: Some(WorkflowCall {
                    id: id.to_owned(),
                    parameters,
                    corr: corr.clone(),
                }),
                ..caller.extras()
            },
        };
        self.call_op(chat_id, op, Origin::Local { attempt: 0 })
            .await?;
        Ok(corr)
    }

    /// `user.message`: a new user turn.
    pub async fn user_message(
        &self,
        chat_id: Uuid,
        caller: Caller<'_>,
        text: String,
        client_msg_id: Option<String>,
        multitask_strategy: Option<crate::protocol::MultitaskStrategy>,
    ) -> Result<(), SessionError> {
        check_text("text", &text)?;
        let attachments = self.attachments(chat_id, caller).await?;
        self.inner.ctx.quotas.message(caller.user)?;
        let op = Op::UserMessage {
            user: caller.user.to_owned(),
            text,
            client_msg_id,
            extras: RunExtras {
                attachments,
                ..caller.extras()
            },
            multitask_strategy,
        };
        self.call_op(chat_id, op, Origin::Local { attempt: 0 })
            .await
    }

    /// `user.input.submit`: answer a pending input request.
    pub async fn submit_input(
        &self,
        chat_id: Uuid,
        user: &str,
        request_id: String,
        text: String,
    ) -> Result<(), SessionError> {
        check_text("text", &text)?;
        self.inner.ctx.quotas.message(user)?;
        let op = Op::SubmitInput {
            user: user.to_owned(),
            request_id,
            text,
        };
        self.call_op(chat_id, op, Origin::Local { attempt: 0 })
            .await
    }

    /// `inline_component.result`: answer a pending UI tool call.
    pub async fn component_result(
        &self,
        chat_id: Uuid,
        user: &str,
        corr: String,
        data: Value,
    ) -> Result<(), SessionError> {
        // Answers cost the server a logged envelope each, like turns.
        self.inner.ctx.quotas.message(user)?;
        let op = Op::ComponentResult {
            user: user.to_owned(),
            corr,
            data,
        };
        self.call_op(chat_id, op, Origin::Local { attempt: 0 })
            .await
    }

    /// `artifact_patch`: patch a component's state.
    pub async fn artifact_patch(
        &self,
        chat_id: Uuid,
        user: &str,
        corr: String,
        patch: Value,
    ) -> Result<(), SessionError> {
        // A patch logs the component's whole state again: it counts as a turn.
        self.inner.ctx.quotas.message(user)?;
        let op = Op::ArtifactPatch {
            user: user.to_owned(),
            corr,
            patch,
        };
        self.call_op(chat_id, op, Origin::Local { attempt: 0 })
            .await
    }

    /// A backend's post into `user`'s chat (the server API): `events` as
    /// `agent`'s turn, between runs. Counted as one of the user's turns.
    pub async fn post(
        &self,
        chat_id: Uuid,
        user: &str,
        agent: String,
        events: Vec<crate::protocol::EventKind>,
    ) -> Result<(), SessionError> {
        self.inner.ctx.quotas.message(user)?;
        let op = Op::Post {
            user: user.to_owned(),
            agent,
            events,
        };
        self.call_op(chat_id, op, Origin::Local { attempt: 0 })
            .await
    }

    /// `chat.read`: the user read the chat up to `seq` (its end if `None`).
    pub async fn mark_read(
        &self,
        chat_id: Uuid,
        user: &str,
        seq: Option<u64>,
    ) -> Result<(), SessionError> {
        // Counted as a turn: each may read part of the log.
        self.inner.ctx.quotas.message(user)?;
        let op = Op::MarkRead {
            user: user.to_owned(),
            seq,
        };
        self.call_op(chat_id, op, Origin::Local { attempt: 0 })
            .await
    }

    /// `chat.cancel`: end the active run (no effect when none is active).
    pub async fn cancel(&self, chat_id: Uuid, user: &str) -> Result<(), SessionError> {
        let op = Op::Cancel {
            user: user.to_owned(),
        };
        self.call_op(chat_id, op, Origin::Local { attempt: 0 })
            .await
    }

    /// Ends the wait `id` of `user`'s chat as if its time ran out (an
    /// operator's act, made as the chat's owner).
    pub async fn end_wait(&self, chat_id: Uuid, user: &str, id: &str) -> Result<(), SessionError> {
        let op = Op::EndWait {
            user: user.to_owned(),
            id: id.to_owned(),
        };
        self.call_op(chat_id, op, Origin::Local { attempt: 0 })
            .await
    }

    /// `chat.pause`: pause a template conversation.
    pub async fn pause(&self, chat_id: Uuid, user: &str) -> Result<(), SessionError> {
        let op = Op::Pause {
            user: user.to_owned(),
        };
        self.call_op(chat_id, op, Origin::Local { attempt: 0 })
            .await
    }

    /// `chat.resume_run`: resume a paused template conversation.
    pub async fn resume_run(&self, chat_id: Uuid, user: &str) -> Result<(), SessionError> {
        let op = Op::ResumeRun {
            user: user.to_owned(),
        };
        self.call_op(chat_id, op, Origin::Local { attempt: 0 })
            .await
    }

    /// The chat's model (`None`: the agent's own), if the chat is `user`'s.
    ///
    /// # Errors
    /// `NotFound` for a chat that is not the user's.
    pub async fn chat_model(
        &self,
        chat_id: Uuid,
        user: &str,
    ) -> Result<Option<String>, SessionError> {
        match self.inner.ctx.store.chat(chat_id).await? {
            Some(chat) if chat.owner == user => Ok(chat.model),
            _ => Err(SessionError::NotFound),
        }
    }

    /// Switches the chat's model to `name` (a model or an alias).
    ///
    /// # Returns
    /// The model's name.
    ///
    /// # Errors
    /// `UnknownModel`, or `NotFound` for a chat that is not the user's.
    pub async fn set_model(
        &self,
        chat_id: Uuid,
        user: &str,
        name: &str,
    ) -> Result<String, SessionError> {
        let model = self
            .inner
            .ctx
            .agents
            .models()
            .resolve(name)
            .ok_or_else(|| SessionError::UnknownModel(name.to_owned()))?;
        let op = Op::SetModel {
            user: user.to_owned(),
            model: model.name.clone(),
        };
        self.call_op(chat_id, op, Origin::Local { attempt: 0 })
            .await?;
        Ok(model.name.clone())
    }

    /// Renames, pins, archives or restores `user`'s chat (`None` leaves a
    /// field). The title is logged (`chat.title`), so every client sees it.
    ///
    /// # Errors
    /// `NotFound` unless the chat is the user's; an archive its template
    /// forbids; the store's errors.
    pub async fn update(
        &self,
        chat_id: Uuid,
        user: &str,
        title: Option<String>,
        flags: crate::store::ChatFlags,
    ) -> Result<(), SessionError> {
        // A write of the chat (a rename is logged): counted as a turn.
        self.inner.ctx.quotas.message(user)?;
        let op = Op::Update {
            user: user.to_owned(),
            title,
            pinned: flags.pinned,
            archived: flags.archived,
        };
        self.call_op(chat_id, op, Origin::Local { attempt: 0 })
            .await
    }
}
