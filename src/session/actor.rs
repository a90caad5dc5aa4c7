//! The chat actor: the single writer of one chat's log.
//!
//! Everything that changes a chat passes through this task, one message at a
//! time: commands from connections ([`Command`]) and requests from the run
//! ([`RunMsg`]). It assigns `seq`, appends through the group-committing writer,
//! and only after the commit hands the envelopes to subscribers, so a client
//! never sees an envelope that a crash could take back.
//!
//! It never awaits a connection: subscribers get `try_send`, and one whose
//! queue is full is closed with 1013 (it will resume by `seq`).

use std::collections::HashMap;
use std::sync::{Arc, Weak};
use std::time::Duration;

use serde_json::{Map, Value};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;
use uuid::Uuid;

use super::handle::{Command, Reply};
use super::registry::Inner;
use super::{Outbound, Replay, SessionContext, SessionError, Subscriber};
use crate::agent::provider::Message;
use crate::agent::runtime::{
    self, ComponentOutcome, InputOutcome, RunControl, RunLink, RunMsg, RunSpec,
};
use crate::protocol::{Envelope, ErrorCode, EventKind, RunEndReason, now_ts};
use crate::store::{AppendBatch, ChatRecord, ChatState, NewEnvelope, StoreError};

/// Run requests buffered between the run and the actor.
const RUN_QUEUE: usize = 256;
/// Most run events folded into one append.
const MAX_EMIT_BATCH: usize = 256;
/// Most connections subscribed to one chat.
const MAX_SUBSCRIBERS: usize = 256;
/// What the log keeps of a password answer.
const REDACTED: &str = "[redacted]";

/// Spawns the actor of `chat_id` on the context's task tracker.
pub(super) fn spawn(
    chat_id: Uuid,
    generation: u64,
    rx: mpsc::Receiver<Command>,
    ctx: Arc<SessionContext>,
    registry: Weak<Inner>,
) {
    let tracker = ctx.tracker.clone();
    tracker.spawn(async move {
        let mut actor = Actor {
            chat_id,
            ctx,
            rx,
            chat: None,
            broken: None,
            next_seq: 1,
            subscribers: Vec::new(),
            run: None,
            inputs: HashMap::new(),
            components: HashMap::new(),
            idle_since: Instant::now(),
        };
        actor.run().await;
        if let Some(registry) = registry.upgrade() {
            registry.remove(chat_id, generation);
        }
    });
}

/// The run in flight.
struct ActiveRun {
    control: RunControl,
    rx: mpsc::Receiver<RunMsg>,
    /// Whether the log says the chat is running (written with the run's first envelope).
    state_written: bool,
    /// Whether the run's `chat.run_complete` is in the log.
    completed: bool,
}

struct PendingInput {
    password: bool,
    deadline: Instant,
    respond: oneshot::Sender<InputOutcome>,
}

struct PendingComponent {
    deadline: Instant,
    respond: oneshot::Sender<ComponentOutcome>,
}

struct Actor {
    chat_id: Uuid,
    ctx: Arc<SessionContext>,
    rx: mpsc::Receiver<Command>,
    /// The chat's row; `None` while the chat does not exist.
    chat: Option<ChatRecord>,
    /// Set when loading failed: every command gets this error.
    broken: Option<StoreError>,
    /// The `seq` the next envelope gets.
    next_seq: u64,
    subscribers: Vec<Subscriber>,
    run: Option<ActiveRun>,
    /// Input requests awaiting `user.input.submit`, by `request_id`.
    inputs: HashMap<String, PendingInput>,
    /// UI tool calls awaiting `inline_component.result`, by `corr`.
    components: HashMap<String, PendingComponent>,
    idle_since: Instant,
}

/// The next run message, or never when no run is in flight.
async fn recv_run(run: &mut Option<ActiveRun>) -> Option<RunMsg> {
    match run {
        Some(run) => run.rx.recv().await,
        None => std::future::pending().await,
    }
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

impl Actor {
    #[tracing::instrument(name = "chat", skip_all, fields(chat_id = %self.chat_id))]
    async fn run(&mut self) {
        if let Err(e) = self.load().await {
            tracing::error!(error = %e, "cannot load chat");
            self.broken = Some(e);
        }
        let mut shutting_down = false;
        // Every handle gone (the registry was dropped at shutdown): no more
        // commands, but a run in flight still gets to log its end.
        let mut orphaned = false;
        loop {
            let deadline = self.next_deadline();
            // A chat that does not exist (a resume of a random id) leaves at once.
            let linger = if self.chat.is_some() {
                self.ctx.idle
            } else {
                Duration::ZERO
            };
            let idle_at = self.is_idle().then(|| self.idle_since + linger);
            tokio::select! {
                biased;
                _ = self.ctx.shutdown.cancelled(), if !shutting_down => {
                    shutting_down = true;
                    self.cancel_run(RunEndReason::Interrupted);
                }
                msg = recv_run(&mut self.run) => self.on_run_msg(msg).await,
                cmd = self.rx.recv(), if !orphaned => match cmd {
                    Some(cmd) => self.on_command(cmd).await,
                    None => orphaned = true,
                },
                _ = sleep_until(deadline) => self.expire().await,
                _ = sleep_until(idle_at) => break,
            }
            if (shutting_down || orphaned) && self.run.is_none() {
                break;
            }
        }
        self.rx.close();
    }

    /// Rebuilds the chat from the store: its row, its next `seq`, and the end
    /// of a run that a crash cut off.
    async fn load(&mut self) -> Result<(), StoreError> {
        let Some(chat) = self.ctx.store.chat(self.chat_id).await? else {
            return Ok(());
        };
        self.next_seq = self
            .ctx
            .store
            .last(self.chat_id)
            .await?
            .map_or(1, |(s, _)| s + 1);
        let interrupted = chat.state == ChatState::Running;
        self.chat = Some(chat);
        if interrupted {
            tracing::info!("marking the run cut off by a restart as interrupted");
            self.append(
                vec![(
                    EventKind::RunComplete {
                        reason: RunEndReason::Interrupted,
                    },
                    None,
                )],
                Some(ChatState::Idle),
            )
            .await?;
        }
        Ok(())
    }

    fn is_idle(&self) -> bool {
        self.run.is_none()
            && self.inputs.is_empty()
            && self.components.is_empty()
            && self.subscribers.iter().all(|s| s.tx.is_closed())
    }

    fn next_deadline(&self) -> Option<Instant> {
        let inputs = self.inputs.values().map(|p| p.deadline);
        let components = self.components.values().map(|p| p.deadline);
        inputs.chain(components).min()
    }

    // ----- the log -------------------------------------------------------

    /// Appends events, waits for the commit, then delivers them.
    async fn append(
        &mut self,
        events: Vec<(EventKind, Option<String>)>,
        state: Option<ChatState>,
    ) -> Result<(), StoreError> {
        let mut envelopes = Vec::with_capacity(events.len());
        let ts_ms = chrono::Utc::now().timestamp_millis();
        let ts = now_ts();
        for (i, (kind, client_msg_id)) in events.into_iter().enumerate() {
            let seq = self.next_seq + i as u64;
            let type_name = kind.type_name();
            let corr = kind.corr().map(str::to_owned);
            let json: Arc<str> = Envelope {
                kind,
                chat_id: self.chat_id,
                seq,
                ts: ts.clone(),
            }
            .to_json()
            .into();
            envelopes.push(NewEnvelope {
                seq,
                kind: type_name,
                ts_ms,
                corr,
                client_msg_id,
                json,
            });
        }
        let count = envelopes.len() as u64;
        let batch = AppendBatch {
            chat_id: self.chat_id,
            envelopes,
            state,
        };
        self.ctx.writer.append(batch.clone()).await?;
        // Committed: the seqs are taken, whatever happens next.
        self.next_seq += count;
        if let Some(chat) = &mut self.chat
            && let Some(state) = state
        {
            chat.state = state;
        }
        for env in batch.envelopes {
            self.deliver(env.json);
        }
        Ok(())
    }

    /// Hands a committed envelope to every subscriber without waiting.
    fn deliver(&mut self, json: Arc<str>) {
        self.subscribers
            .retain(|sub| match sub.tx.try_send(Outbound::Event(json.clone())) {
                Ok(()) => true,
                Err(mpsc::error::TrySendError::Full(_)) => {
                    tracing::info!(
                        conn_id = sub.conn_id,
                        "subscriber too slow; closing with 1013"
                    );
                    sub.closer
                        .close(1013, "too slow: resume from your last seq");
                    false
                }
                Err(mpsc::error::TrySendError::Closed(_)) => false,
            });
    }

    /// Sends a non-persisted error to every subscriber (the log could not take it).
    fn deliver_transient_error(&mut self, e: &StoreError) {
        let frame = crate::protocol::connection_error(
            Some(self.chat_id),
            ErrorCode::PersistenceError,
            &format!("the chat log could not be written: {e}"),
            None,
            true,
        );
        for sub in &self.subscribers {
            let _ = sub.tx.try_send(Outbound::Frame(frame.clone()));
        }
    }

    // ----- commands ------------------------------------------------------

    async fn on_command(&mut self, cmd: Command) {
        self.idle_since = Instant::now();
        if let Command::Unsubscribe { conn_id, reply } = cmd {
            self.subscribers.retain(|s| s.conn_id != conn_id);
            let _ = reply.send(Ok(()));
            return;
        }
        let (result, reply) = if let Some(e) = &self.broken {
            (Err(SessionError::Persistence(e.clone())), reply_of(cmd))
        } else if self.ctx.shutdown.is_cancelled() {
            (Err(SessionError::ShuttingDown), reply_of(cmd))
        } else {
            self.handle(cmd).await
        };
        let _ = reply.send(result);
    }

    async fn handle(&mut self, cmd: Command) -> (Result<(), SessionError>, Reply) {
        match cmd {
            Command::Touch { reply } => (Ok(()), reply),
            Command::Start {
                user,
                agent,
                message,
                context,
                sub,
                reply,
            } => (self.start(user, agent, message, context, sub).await, reply),
            Command::Resume {
                user,
                after,
                sub,
                reply,
            } => {
                let r = self.owned(&user).map(|_| ());
                (r.and_then(|()| self.subscribe(sub, Some(after))), reply)
            }
            Command::UserMessage {
                user,
                text,
                client_msg_id,
                reply,
            } => (self.user_message(&user, text, client_msg_id).await, reply),
            Command::SubmitInput {
                user,
                request_id,
                text,
                reply,
            } => (self.submit_input(&user, request_id, text).await, reply),
            Command::ComponentResult {
                user,
                corr,
                data,
                reply,
            } => (self.component_result(&user, &corr, data), reply),
            Command::ArtifactPatch {
                user,
                corr,
                patch,
                reply,
            } => (self.artifact_patch(&user, corr, patch).await, reply),
            Command::Cancel { user, reply } => {
                let r = self.owned(&user).map(|_| ());
                if r.is_ok() {
                    self.cancel_run(RunEndReason::Cancelled);
                }
                (r, reply)
            }
            Command::Unsubscribe { reply, .. } => (Ok(()), reply),
        }
    }

    /// The chat, if it exists and is `user`'s. Another user's chat is reported
    /// exactly as a missing one.
    fn owned(&self, user: &str) -> Result<&ChatRecord, SessionError> {
        self.chat
            .as_ref()
            .filter(|c| c.owner == user)
            .ok_or(SessionError::NotFound)
    }

    /// Subscribes a connection. With `replay_after`, the connection first gets
    /// every envelope after that seq, then the boundary, then live events: the
    /// replay marker goes into its queue before any live event can, so nothing
    /// falls between the two.
    fn subscribe(
        &mut self,
        sub: Subscriber,
        replay_after: Option<u64>,
    ) -> Result<(), SessionError> {
        self.subscribers
            .retain(|s| s.conn_id != sub.conn_id && !s.tx.is_closed());
        if self.subscribers.len() >= MAX_SUBSCRIBERS {
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
            let replay = Replay::new(self.chat_id, from, last, recovered, self.ctx.store.clone());
            if sub.tx.try_send(Outbound::Replay(replay)).is_err() {
                sub.closer
                    .close(1013, "too slow: resume from your last seq");
                return Ok(());
            }
        }
        self.subscribers.push(sub);
        Ok(())
    }

    async fn start(
        &mut self,
        user: String,
        agent: String,
        message: Option<String>,
        context: Option<Map<String, Value>>,
        sub: Subscriber,
    ) -> Result<(), SessionError> {
        if self.chat.is_some() {
            // An existing chat of the caller's: a resume from the start.
            self.owned(&user)?;
            return self.subscribe(sub, Some(0));
        }
        let Some(definition) = self.ctx.agents.get(&agent) else {
            return Err(SessionError::UnknownAgent(agent));
        };
        let record = ChatRecord {
            id: self.chat_id,
            owner: user.clone(),
            agent,
            state: ChatState::Idle,
            context: context.map(|c| Value::Object(c).to_string()),
            created_at: chrono::Utc::now().timestamp_millis(),
        };
        let stored = self.ctx.store.create_chat(&record).await?;
        if stored.owner != user {
            return Err(SessionError::NotFound);
        }
        let existed = stored != record;
        self.chat = Some(stored);
        self.subscribe(sub, existed.then_some(0))?;
        if existed {
            return Ok(());
        }
        match message {
            Some(text) => self.start_run(Some((text, None))).await,
            None if definition.starts_first => self.start_run(None).await,
            None => Ok(()),
        }
    }

    async fn user_message(
        &mut self,
        user: &str,
        text: String,
        client_msg_id: Option<String>,
    ) -> Result<(), SessionError> {
        self.owned(user)?;
        if let Some(id) = &client_msg_id
            && self.ctx.store.has_client_msg_id(self.chat_id, id).await?
        {
            return Ok(()); // Already taken: no second effect.
        }
        if self.run.is_some() {
            return Err(SessionError::RunInProgress);
        }
        self.start_run(Some((text, client_msg_id))).await
    }

    /// Starts a run: logs the user's message (marking the chat running in the
    /// same commit), then spawns the agent.
    async fn start_run(
        &mut self,
        user_text: Option<(String, Option<String>)>,
    ) -> Result<(), SessionError> {
        let chat = self.chat.as_ref().ok_or(SessionError::NotFound)?;
        let agent = self
            .ctx
            .agents
            .get(&chat.agent)
            .ok_or_else(|| SessionError::AgentMissing(chat.agent.clone()))?;
        let context = chat.context.clone();
        let mut history: Vec<Message> = self
            .ctx
            .store
            .transcript(self.chat_id)
            .await?
            .iter()
            .filter_map(
                |stored| match serde_json::from_str::<Envelope>(&stored.json) {
                    Ok(Envelope {
                        kind: EventKind::Text { agent, content },
                        ..
                    }) => Some(if agent == "user" {
                        Message::User { text: content }
                    } else {
                        Message::Assistant {
                            text: content,
                            tool_calls: Vec::new(),
                        }
                    }),
                    _ => None,
                },
            )
            .collect();

        let (link, rx) = RunLink::channel(RUN_QUEUE);
        let control = RunControl::default();
        self.run = Some(ActiveRun {
            control: control.clone(),
            rx,
            state_written: false,
            completed: false,
        });
        if let Some((text, client_msg_id)) = user_text {
            let event = EventKind::Text {
                agent: "user".into(),
                content: text.clone(),
            };
            if let Err(e) = self.append_run(vec![(event, client_msg_id)]).await {
                self.run = None;
                return Err(e.into());
            }
            history.push(Message::User { text });
        }
        let spec = RunSpec {
            agent,
            history,
            context,
        };
        self.ctx.tracker.spawn(runtime::run(spec, link, control));
        Ok(())
    }

    async fn submit_input(
        &mut self,
        user: &str,
        request_id: String,
        text: String,
    ) -> Result<(), SessionError> {
        self.owned(user)?;
        let Some(pending) = self.inputs.remove(&request_id) else {
            return Err(SessionError::RequestNotFound(request_id));
        };
        let shown = if pending.password {
            REDACTED.to_owned()
        } else {
            text.clone()
        };
        let events = vec![
            (
                EventKind::Text {
                    agent: "user".into(),
                    content: shown,
                },
                None,
            ),
            (
                EventKind::InputAck {
                    corr: request_id.clone(),
                    request_id: request_id.clone(),
                },
                None,
            ),
        ];
        if let Err(e) = self.append_run(events).await {
            // Not acknowledged: the request stays open for another try.
            self.inputs.insert(request_id, pending);
            return Err(e.into());
        }
        let _ = pending.respond.send(InputOutcome::Answered(text));
        Ok(())
    }

    fn component_result(
        &mut self,
        user: &str,
        corr: &str,
        data: Value,
    ) -> Result<(), SessionError> {
        self.owned(user)?;
        let pending = self
            .components
            .remove(corr)
            .ok_or_else(|| SessionError::RequestNotFound(corr.to_owned()))?;
        // The run logs the tool_response when it takes the result.
        let _ = pending.respond.send(ComponentOutcome::Returned(data));
        Ok(())
    }

    /// Applies an RFC 6902 patch to the state of the component of tool call
    /// `corr`, and logs the new state as a `chat.tool_call` with the same corr.
    async fn artifact_patch(
        &mut self,
        user: &str,
        corr: String,
        patch: Value,
    ) -> Result<(), SessionError> {
        self.owned(user)?;
        let patch: json_patch::Patch =
            serde_json::from_value(patch).map_err(|e| SessionError::InvalidPatch(e.to_string()))?;
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
                    ..
                },
            ..
        }) = serde_json::from_str::<Envelope>(&stored.json)
        else {
            return Err(SessionError::RequestNotFound(corr));
        };
        json_patch::patch(&mut payload, &patch)
            .map_err(|e| SessionError::InvalidPatch(e.to_string()))?;
        let event = EventKind::ToolCall {
            tool_name,
            component_type: Some(component_type),
            awaiting_response: self.components.contains_key(&corr),
            payload,
            corr,
            display,
        };
        self.append_run(vec![(event, None)]).await?;
        Ok(())
    }

    // ----- the run -------------------------------------------------------

    /// Asks the run to end. Its open requests close now: an answer arriving
    /// before the run logs its end gets `INPUT_REQUEST_NOT_FOUND`, not an ack.
    fn cancel_run(&mut self, reason: RunEndReason) {
        if let Some(run) = &self.run {
            run.control.cancel(reason);
            self.inputs.clear();
            self.components.clear();
        }
    }

    /// Appends events of (or into) the run: the first marks the chat running,
    /// a `chat.run_complete` marks it idle.
    async fn append_run(
        &mut self,
        events: Vec<(EventKind, Option<String>)>,
    ) -> Result<(), StoreError> {
        let completes = events
            .iter()
            .any(|(k, _)| matches!(k, EventKind::RunComplete { .. }));
        let starts = self.run.as_ref().is_some_and(|r| !r.state_written);
        let state = if completes {
            Some(ChatState::Idle)
        } else if starts {
            Some(ChatState::Running)
        } else {
            None
        };
        self.append(events, state).await?;
        if let Some(run) = &mut self.run {
            run.state_written |= starts;
            run.completed |= completes;
        }
        Ok(())
    }

    async fn on_run_msg(&mut self, msg: Option<RunMsg>) {
        self.idle_since = Instant::now();
        let Some(msg) = msg else {
            return self.finish_run().await;
        };
        let RunMsg::Emit(first) = msg else {
            return self.on_run_request(msg).await;
        };
        // Fold whatever the run has already queued into the same commit.
        let mut events = vec![(first, None)];
        let mut next = None;
        if let Some(run) = &mut self.run {
            while events.len() < MAX_EMIT_BATCH {
                match run.rx.try_recv() {
                    Ok(RunMsg::Emit(kind)) => events.push((kind, None)),
                    Ok(other) => {
                        next = Some(other);
                        break;
                    }
                    Err(_) => break,
                }
            }
        }
        if let Err(e) = self.append_run(events).await {
            self.deliver_transient_error(&e);
            self.cancel_run(RunEndReason::Error);
        }
        if let Some(msg) = next {
            self.on_run_request(msg).await;
        }
    }

    async fn on_run_request(&mut self, msg: RunMsg) {
        match msg {
            RunMsg::Emit(kind) => {
                if let Err(e) = self.append_run(vec![(kind, None)]).await {
                    self.deliver_transient_error(&e);
                }
            }
            RunMsg::AskInput {
                request_id,
                prompt,
                password,
                respond,
            } => {
                let timeout = self.ctx.input_timeout;
                let event = EventKind::InputRequest {
                    corr: request_id.clone(),
                    request_id: request_id.clone(),
                    prompt,
                    password,
                    timeout_seconds: Some(timeout.as_secs()),
                };
                match self.append_run(vec![(event, None)]).await {
                    Ok(()) => {
                        self.inputs.insert(
                            request_id,
                            PendingInput {
                                password,
                                deadline: Instant::now() + timeout,
                                respond,
                            },
                        );
                    }
                    // Dropping `respond` ends the run's wait.
                    Err(e) => self.deliver_transient_error(&e),
                }
            }
            RunMsg::ShowComponent {
                tool_name,
                component_type,
                payload,
                corr,
                display,
                respond,
            } => {
                let event = EventKind::ToolCall {
                    tool_name,
                    component_type: Some(component_type),
                    awaiting_response: true,
                    payload,
                    corr: corr.clone(),
                    display,
                };
                match self.append_run(vec![(event, None)]).await {
                    Ok(()) => {
                        self.components.insert(
                            corr,
                            PendingComponent {
                                deadline: Instant::now() + self.ctx.ui_timeout,
                                respond,
                            },
                        );
                    }
                    Err(e) => self.deliver_transient_error(&e),
                }
            }
        }
    }

    /// The run task ended. If it did not log its completion (it panicked, or
    /// the log failed), log one for it.
    async fn finish_run(&mut self) {
        let Some(run) = self.run.take() else { return };
        self.inputs.clear();
        self.components.clear();
        if !run.completed {
            tracing::warn!("run ended without chat.run_complete; completing it with error");
            let events = vec![
                (
                    EventKind::Error {
                        message: "the run stopped unexpectedly".into(),
                        error_code: ErrorCode::AgentInitializationFailed,
                        details: None,
                        recoverable: true,
                    },
                    None,
                ),
                (
                    EventKind::RunComplete {
                        reason: RunEndReason::Error,
                    },
                    None,
                ),
            ];
            if let Err(e) = self.append(events, Some(ChatState::Idle)).await {
                self.deliver_transient_error(&e);
            }
        }
    }

    /// Times out the input requests and UI tool calls whose deadline passed.
    async fn expire(&mut self) {
        let now = Instant::now();
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
}

/// The reply channel of any command.
fn reply_of(cmd: Command) -> Reply {
    match cmd {
        Command::Touch { reply }
        | Command::Start { reply, .. }
        | Command::Resume { reply, .. }
        | Command::UserMessage { reply, .. }
        | Command::SubmitInput { reply, .. }
        | Command::ComponentResult { reply, .. }
        | Command::ArtifactPatch { reply, .. }
        | Command::Cancel { reply, .. }
        | Command::Unsubscribe { reply, .. } => reply,
    }
}
