//! The actor's answers to commands from connections.

use serde_json::Value;
use tokio::time::Instant;

use super::{Actor, MAX_SUBSCRIBERS, Role};
use crate::protocol::{ConversationState, Envelope, ErrorCode, EventKind, RunEndReason, limits};
use crate::session::handle::{Command, MessageRef, Op, Origin, RunExtras};
use crate::session::{Outbound, Replay, SessionError, Subscriber};
use crate::store::{ChatRecord, ChatState, StoreError};

impl Actor {
    pub(super) async fn on_command(&mut self, cmd: Command) {
        self.idle_since = Instant::now();
        if let Command::Unsubscribe { conn_id, reply } = cmd {
            self.subscribers.lock().retain(|s| s.conn_id != conn_id);
            let _ = reply.send(Ok(()));
            return;
        }
        if cmd.reply().is_closed() {
            // Its caller gave up waiting (the registry's deadline, or a
            // connection that went away): it was told the outcome is
            // unknown, so nothing of it happens now.
            tracing::debug!("a command whose caller left is skipped");
            return;
        }
        if let Some(e) = &self.broken {
            let _ = cmd
                .into_reply()
                .send(Err(SessionError::Persistence(e.clone())));
            return;
        }
        if self.ctx.shutdown.is_cancelled() {
            let _ = cmd.into_reply().send(Err(SessionError::ShuttingDown));
            return;
        }
        match cmd {
            Command::Op { op, origin, reply } => {
                let op = *op;
                if self.role == Role::Follower {
                    return self.forward(op, origin, reply).await;
                }
                let Some((op, reply)) = self.hold(op, reply) else {
                    return;
                };
                let retry = op.clone();
                let result = self.handle_op(op).await;
                if let Err(SessionError::Persistence(StoreError::Fenced(_))) = result
                    && self.role == Role::Follower
                {
                    // The chat moved under this request, before anything of
                    // it was logged: it goes to the new owner.
                    return self.forward(retry, origin, reply).await;
                }
                let _ = reply.send(result);
            }
            Command::Start {
                user,
                agent,
                message,
                extras,
                sub,
                reply,
            } => {
                let extras = *extras;
                if self.chat.is_some() {
                    // An existing chat of the caller's: a resume from the start.
                    let result = self.resume(&user, sub, Some(0)).await;
                    let _ = reply.send(result);
                } else if self.role == Role::Follower {
                    // Another node holds the (new) chat: follow it from its
                    // first envelope, and have the holder create it.
                    if self.ctx.agents.get(&agent).is_none() {
                        let _ = reply.send(Err(SessionError::UnknownAgent(agent)));
                        return;
                    }
                    if let Some(sub) = sub
                        && let Err(e) = self.subscribe(sub, None)
                    {
                        let _ = reply.send(Err(e));
                        return;
                    }
                    let op = Op::Create {
                        user,
                        agent,
                        message,
                        extras,
                    };
                    self.forward(op, Origin::Local { attempt: 0 }, reply).await;
                } else {
                    let result = self.start(user, agent, message, extras, sub).await;
                    let _ = reply.send(result);
                }
            }
            Command::Resume {
                user,
                after,
                sub,
                reply,
            } => {
                let result = self.resume(&user, Some(sub), after).await;
                let _ = reply.send(result);
            }
            Command::Unsubscribe { reply, .. } => {
                let _ = reply.send(Ok(()));
            }
        }
    }

    /// Runs a request that changes the chat, on the chat's writer.
    pub(super) async fn handle_op(&mut self, op: Op) -> Result<(), SessionError> {
        match op {
            Op::Touch => Ok(()),
            Op::Create {
                user,
                agent,
                message,
                extras,
            } => self.start(user, agent, message, extras, None).await,
            Op::UserMessage {
                user,
                text,
                client_msg_id,
                extras,
                multitask_strategy,
            } => {
                self.user_message(&user, text, client_msg_id, extras, multitask_strategy)
                    .await
            }
            Op::SubmitInput {
                user,
                request_id,
                text,
            } => self.submit_input(&user, request_id, text).await,
            Op::ComponentResult { user, corr, data } => {
                self.component_result(&user, &corr, data).await
            }
            Op::ArtifactPatch { user, corr, patch } => {
                self.artifact_patch(&user, corr, patch).await
            }
            Op::Cancel { user } => {
                self.owned(&user)?;
                // A paused run must be read again to log its end.
                self.paused = false;
                self.cancel_run(RunEndReason::Cancelled);
                Ok(())
            }
            Op::EndWait { user, id } => {
                self.owned(&user)?;
                self.end_wait(id).await
            }
            Op::Pause { user } => self.pause(&user).await,
            Op::ResumeRun { user } => self.resume_run(&user).await,
            Op::SetModel { user, model } => self.set_model(&user, model).await,
            Op::Archive { user } => self.archive(&user).await,
            Op::Purge { user } => self.purge(&user).await,
            Op::Update {
                user,
                title,
                pinned,
                archived,
            } => {
                let flags = crate::store::ChatFlags {
                    pinned,
                    archived,
                    read: None,
                };
                self.update(&user, title, flags).await
            }
            Op::Title {
                user,
                title,
                source,
                usage,
            } => self.set_title(&user, title, source, usage).await,
            Op::Workflow { user, extras } => self.workflow(&user, extras).await,
            Op::Edit {
                user,
                seq,
                text,
                client_msg_id,
                extras,
            } => self.edit(&user, seq, text, client_msg_id, extras).await,
            Op::Regenerate {
                user,
                seq,
                nth,
                model,
                extras,
            } => {
                let seq = match nth {
                    Some(n) => Some(MessageRef::Nth(n)),
                    None => seq.map(MessageRef::Seq),
                };
                self.regenerate(&user, seq, model, extras).await
            }
            Op::Switch { user, to } => self.switch(&user, to).await,
            Op::MarkRead { user, seq } => self.mark_read(&user, seq).await,
            Op::Post {
                user,
                agent,
                events,
            } => self.post(&user, agent, events).await,
            Op::Fork {
                user,
                agent,
                context,
                model,
                events,
                partial,
            } => {
                self.fork(user, (agent, context, model), (events, partial))
                    .await
            }
        }
    }

    /// Subscribes a connection of the chat's owner (on a follower, after
    /// reading what it has not delivered yet, so the replay reaches as far as
    /// the log the client may have seen on another node).
    async fn resume(
        &mut self,
        user: &str,
        sub: Option<Subscriber>,
        after: Option<u64>,
    ) -> Result<(), SessionError> {
        if self.role == Role::Follower {
            self.catch_up().await?;
        }
        self.owned(user)?;
        match sub {
            Some(sub) => self.subscribe(sub, after),
            None => Ok(()),
        }
    }

    /// The chat, if it exists and is `user`'s. Another user's chat is reported
    /// exactly as a missing one.
    pub(super) fn owned(&self, user: &str) -> Result<&ChatRecord, SessionError> {
        self.chat
            .as_ref()
            .filter(|c| c.owner == user)
            .ok_or(SessionError::NotFound)
    }

    /// Sends a non-persisted error to every subscriber (the log could not take it).
    /// Not for a lost lease: the chat's new owner carries on, and this node
    /// follows it.
    pub(super) fn deliver_transient_error(&mut self, e: &StoreError) {
        if let StoreError::Fenced(_) = e {
            return;
        }
        let frame = crate::protocol::connection_error(
            Some(self.chat_id),
            ErrorCode::PersistenceError,
            &format!("the chat log could not be written: {e}"),
            None,
            true,
        );
        for sub in self.subscribers.lock().iter() {
            sub.try_send(Outbound::Frame(frame.clone()));
        }
    }

    /// Subscribes a connection. With `replay_after`, the connection first gets
    /// every envelope after that seq, then the boundary, then live events: the
    /// replay marker goes into its queue before any live event can, so nothing
    /// falls between the two.
    pub(super) fn subscribe(
        &mut self,
        sub: Subscriber,
        replay_after: Option<u64>,
    ) -> Result<(), SessionError> {
        let mut subs = self.subscribers.lock();
        subs.retain(|s| s.conn_id != sub.conn_id && !s.is_closed());
        if subs.len() >= MAX_SUBSCRIBERS {
            return Err(SessionError::TooManySubscriptions);
        }
        if let Some(after) = replay_after {
            let last = self.next_seq - 1;
            // A position beyond the log (a restored backup): replay it all.
            let (from, recovered) = if after > last {
                (0, false)
            } else {
                (after, true)
            };
            metrics::counter!(crate::metrics::REPLAYS).increment(1);
            metrics::histogram!(crate::metrics::REPLAY_ENVELOPES).record((last - from) as f64);
            let replay = Replay::new(self.chat_id, from, last, recovered, self.ctx.store.clone());
            if !sub.try_send(Outbound::Replay(Box::new(replay))) {
                sub.closer
                    .close(1013, "too slow: resume from your last seq");
                return Ok(());
            }
        }
        subs.push(sub);
        Ok(())
    }

    pub(super) async fn start(
        &mut self,
        user: String,
        agent: String,
        message: Option<String>,
        extras: RunExtras,
        sub: Option<Subscriber>,
    ) -> Result<(), SessionError> {
        if self.chat.is_some() {
            // An existing chat of the caller's: a resume from the start.
            self.owned(&user)?;
            return sub.map_or(Ok(()), |sub| self.subscribe(sub, Some(0)));
        }
        if crate::session::is_conversation_chat(self.chat_id) && !extras.derived_id {
            return Err(SessionError::ReservedId);
        }
        let Some(definition) = self.ctx.agents.get(&agent) else {
            return Err(SessionError::UnknownAgent(agent));
        };
        // Counted where a chat is really created (a start on an existing chat
        // is a resume), so on the node that runs it.
        self.ctx.quotas.new_chat(&user)?;
        if message.is_some() {
            self.ctx.quotas.message(&user)?;
        }
        // A refused run must not leave a chat behind: its slot is taken first.
        let runs = message.is_some() || definition.starts_first;
        let permit = runs.then(|| self.ctx.quotas.run(&user)).transpose()?;
        let now = chrono::Utc::now().timestamp_millis();
        let record = ChatRecord {
            id: self.chat_id,
            owner: user.clone(),
            agent,
            state: ChatState::Idle,
            context: extras.context.clone().map(|c| Value::Object(c).to_string()),
            model: None,
            archived: false,
            conversation_state: None,
            created_at: now,
            updated_at: now,
            // As the store writes it: active since its creation.
            listing: crate::store::Listing {
                active_at: now,
                ..Default::default()
            },
        };
        let stored = self.ctx.store.create_chat(&record).await?;
        if stored.owner != user {
            return Err(SessionError::NotFound);
        }
        let existed = stored != record;
        self.chat = Some(stored);
        if let Some(sub) = sub {
            self.subscribe(sub, existed.then_some(0))?;
        }
        if existed {
            return Ok(());
        }
        self.transition(ConversationState::Pending).await?;
        match (message, permit) {
            (Some(text), permit) => {
                self.start_run_with(Some((text, None)), extras, permit)
                    .await
            }
            (None, Some(permit)) => self.start_run_with(None, extras, Some(permit)).await,
            (None, None) => Ok(()),
        }
    }

    pub(super) async fn user_message(
        &mut self,
        user: &str,
        text: String,
        client_msg_id: Option<String>,
        extras: RunExtras,
        strategy: Option<crate::protocol::MultitaskStrategy>,
    ) -> Result<(), SessionError> {
        self.owned(user)?;
        if let Some(id) = &client_msg_id
            && self.ctx.store.has_client_msg_id(self.chat_id, id).await?
        {
            return Ok(()); // Already taken: no second effect.
        }
        if self.run.is_some() {
            return self.during_run(text, client_msg_id, extras, strategy).await;
        }
        self.start_run(Some((text, client_msg_id)), extras).await
    }

    /// Archives the chat: its log stays readable, new turns are refused.
    pub(super) async fn archive(&mut self, user: &str) -> Result<(), SessionError> {
        self.owned(user)?;
        // A template conversation is archived once it has ended (seed 004 §4).
        self.transition(ConversationState::Archived).await?;
        let flags = crate::store::ChatFlags {
            archived: Some(true),
            ..Default::default()
        };
        self.ctx.store.set_chat_flags(self.chat_id, flags).await?;
        if let Some(chat) = &mut self.chat {
            chat.archived = true;
        }
        Ok(())
    }

    /// Persists the chat's model; the next run uses it.
    pub(super) async fn set_model(
        &mut self,
        user: &str,
        model: String,
    ) -> Result<(), SessionError> {
        self.owned(user)?;
        self.ctx
            .store
            .set_chat_model(self.chat_id, Some(&model))
            .await?;
        if let Some(chat) = &mut self.chat {
            chat.model = Some(model);
        }
        Ok(())
    }

    /// Applies an RFC 6902 patch to the state of the component of tool call
    /// `corr`, and logs the new state as a `chat.tool_call` with the same corr.
    pub(super) async fn artifact_patch(
        &mut self,
        user: &str,
        corr: String,
        patch: Value,
    ) -> Result<(), SessionError> {
        self.owned(user)?;
        let patch: json_patch::Patch =
            serde_json::from_value(patch).map_err(|e| SessionError::InvalidPatch(e.to_string()))?;
        if patch.0.len() > limits::MAX_PATCH_OPS {
            return Err(SessionError::InvalidPatch(format!(
                "{} operations; at most {} are accepted",
                patch.0.len(),
                limits::MAX_PATCH_OPS
            )));
        }
        let stored = self
            .ctx
            .store
            .last_tool_call(self.chat_id, &corr)
            .await?
            .ok_or_else(|| SessionError::RequestNotFound(corr.clone()))?;
        let Ok(Envelope {
            kind:
                EventKind::ToolCall {
                    tool_name,
                    component_type: Some(component_type),
                    mut payload,
                    display,
                    agent,
                    ..
                },
            ..
        }) = serde_json::from_str::<Envelope>(&stored.json)
        else {
            return Err(SessionError::RequestNotFound(corr));
        };
        // One operation at a time, each result checked: `copy` and `add` can
        // double a value per operation, so the bound must hold all along, not
        // only at the end. `payload` is a copy: a refused patch changes nothing.
        let max_bytes = self.ctx.max_message_bytes;
        for op in &patch.0 {
            json_patch::patch(&mut payload, std::slice::from_ref(op))
                .map_err(|e| SessionError::InvalidPatch(e.to_string()))?;
            if limits::json_depth(&payload) > limits::MAX_JSON_DEPTH {
                return Err(SessionError::InvalidPatch(format!(
                    "the patched state would nest deeper than {} levels",
                    limits::MAX_JSON_DEPTH
                )));
            }
            if !limits::json_fits(&payload, max_bytes) {
                return Err(SessionError::InvalidPatch(format!(
                    "the patched state would exceed {max_bytes} bytes (max_message_bytes)"
                )));
            }
        }
        let event = EventKind::ToolCall {
            tool_name,
            component_type: Some(component_type),
            awaiting_response: self.components.contains_key(&corr),
            payload,
            corr,
            display,
            agent,
        };
        self.append_run(vec![(event, None)]).await?;
        Ok(())
    }
}
