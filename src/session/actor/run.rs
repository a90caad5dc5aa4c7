//! The actor's side of a run: starting it, logging what it emits, answering
//! its requests, timing them out, and closing it.

use std::collections::BTreeMap;

use tokio::time::Instant;

use super::{ActiveRun, Actor, MAX_EMIT_BATCH, Marks, RUN_QUEUE};
use crate::agent::runtime::{self, RunSpec};
use crate::link::{RunControl, RunLink, RunMsg};
use crate::llm::{Message, Usage};
use crate::protocol::{AgentUsage, ErrorCode, EventKind, RunEndReason};
use crate::session::SessionError;
use crate::session::handle::RunExtras;
use crate::store::{ChatState, StoreError};

impl Actor {
    /// Starts a run: logs the user's message (marking the chat running in the
    /// same commit), then spawns the agent.
    pub(super) async fn start_run(
        &mut self,
        user_text: Option<(String, Option<String>)>,
        extras: RunExtras,
    ) -> Result<(), SessionError> {
        self.start_run_with(user_text, extras, None).await
    }

    /// [`Self::start_run`] with the run's slot in its user's quota, when the
    /// caller took it already (`None`: take it here).
    pub(super) async fn start_run_with(
        &mut self,
        user_text: Option<(String, Option<String>)>,
        mut extras: RunExtras,
        permit: Option<crate::session::Slot>,
    ) -> Result<(), SessionError> {
        let chat = self.chat.as_ref().ok_or(SessionError::NotFound)?;
        if chat.archived {
            return Err(SessionError::Archived);
        }
        let owner = chat.owner.clone();
        // A continued run goes on in the state its conversation was in.
        let resumed = extras.resumed.is_some();
        if !resumed {
            self.may_start_template()?;
        }
        let agent = self
            .ctx
            .agents
            .get(&chat.agent)
            .ok_or_else(|| SessionError::AgentMissing(chat.agent.clone()))?;
        let permit = match permit {
            Some(permit) => permit,
            None => self.ctx.quotas.run(&chat.owner)?,
        };
        // A regenerate's model, for its run only, else the chat's.
        let model = extras
            .branch
            .as_ref()
            .and_then(|b| b.model.clone())
            .or_else(|| extras.model.clone())
            .or_else(|| chat.model.clone())
            .and_then(|m| self.ctx.agents.models().resolve(&m));
        // This request's context, else the one kept with the chat.
        let context = match extras.context {
            Some(map) => Some(serde_json::Value::Object(map)),
            None => chat
                .context
                .as_deref()
                .and_then(|c| serde_json::from_str::<serde_json::Value>(c).ok()),
        };
        let workflow = match extras.workflow {
            Some(call) => Some(crate::workflows::Invocation {
                workflow: self
                    .ctx
                    .agents
                    .workflows()
                    .get(&call.id)
                    .ok_or(SessionError::UnknownWorkflow(call.id))?,
                parameters: call.parameters,
                corr: call.corr,
            }),
            None => None,
        };
        let workflow_title = workflow.as_ref().map(|w| w.workflow.title.clone());
        // The model sees the active path only (or the one the run branches
        // to): never a version the user left.
        let transcript = self.ctx.store.transcript(self.chat_id).await?;
        let tree = crate::session::tree::Tree::of_log(&transcript, self.next_seq - 1);
        let path = tree.path(
            extras
                .branch
                .as_ref()
                .map_or_else(|| tree.pointer(), |b| b.at),
        );
        // Seed 003: a chat with a database is grounded on it.
        let database = match &self.ctx.connections {
            Some(_) => self
                .ctx
                .store
                .chat_database(self.chat_id)
                .await?
                .map(|d| crate::databases::grounding(&d.db_schema, d.sql_result.as_deref())),
            None => None,
        };
        let on_path = transcript
            .iter()
            .filter(|e| crate::session::tree::Tree::within(&path, e.seq));
        let agent_state = super::history::agent_states(on_path.clone().map(|e| e.json.as_str()));
        let mut history = super::history::from_log(on_path.map(|e| e.json.as_str()));
        let branch = extras.branch.take().map(|b| {
            let event = EventKind::Branch {
                at: b.at,
                reason: b.reason,
                model: b.model,
            };
            (event, None)
        });

        let (link, rx) = RunLink::channel(RUN_QUEUE);
        let files = self.ctx.files.clone();
        let store = self.ctx.store.clone();
        let files = crate::link::RunFiles::new(store, owner.clone(), self.chat_id, files);
        let who = (owner.as_str(), self.chat_id);
        let gate = super::super::usage_quota::gate(&self.ctx, who, &agent, model.as_deref());
        let link = link.keeping_files(files).metered(gate);
        // A continued run waits again on what its cut-off self had asked.
        let link = match &extras.resumed {
            Some(resumed) => link
                .rewaiting(resumed.waited.clone())
                .approving(resumed.approved.clone()),
            None => link,
        };
        let control = RunControl::default();
        self.run = Some(ActiveRun {
            steer: link.steer_flag(),
            control: control.clone(),
            rx,
            state_written: false,
            printed: None,
            named: workflow_title,
            said: user_text.as_ref().map(|(text, _)| text.clone()),
            rewaits: extras
                .resumed
                .as_ref()
                .map(open_requests)
                .unwrap_or_default(),
            used: extras
                .resumed
                .as_ref()
                .map(|r| r.usage.clone())
                .unwrap_or_default(),
            used_unlogged: false,
            _gauge: crate::metrics::RunGauge::start(),
            _permit: permit,
        });
        // Steers that wait (from a run that ended before reading them) steer
        // this one.
        if self
            .queue
            .iter()
            .any(|q| q.mode == crate::protocol::MultitaskStrategy::Steer)
            && let Some(run) = &self.run
        {
            run.steer.store(true, std::sync::atomic::Ordering::Release);
        }
        if let Some((text, client_msg_id)) = user_text {
            let attachments = extras.attachments.take().unwrap_or_default();
            let event = EventKind::Text {
                agent: "user".into(),
                content: text.clone(),
            };
            let marks = Marks {
                context_type: extras.context_type.clone(),
                starts_run: true,
                attachments: vec![attachments.clone()],
                ..Marks::default()
            };
            let events = branch.into_iter().chain([(event, client_msg_id)]).collect();
            if let Err(e) = self.append_marked(events, marks).await {
                self.run = None;
                return Err(e.into());
            }
            history.push(crate::link::Said {
                by: None,
                message: Message::User {
                    text,
                    files: crate::link::named(&attachments),
                },
            });
        } else if let Some(branch) = branch {
            // A regenerate: its branch is the run's first envelope.
            if let Err(e) = self.append_run(vec![branch]).await {
                self.run = None;
                return Err(e.into());
            }
        }
        // A model the chat switched to overrides the agent's.
        let provider = model.as_ref().map(|m| m.provider.clone());
        let model = model.map(|m| (m.name.clone(), m.price));
        let spec = RunSpec {
            chat_id: self.chat_id,
            user: owner,
            connections: self.ctx.connections.clone(),
            database,
            agent,
            history,
            context,
            context_type: extras.context_type,
            bearer: extras.bearer,
            provider,
            model,
            workflow,
            resumed: extras.resumed,
            client_tools: extras.client_tools,
            agent_state,
            traceparent: extras.traceparent,
        };
        if !resumed
            && let Err(e) = self
                .transition(crate::protocol::ConversationState::Active)
                .await
        {
            self.run = None;
            return Err(e);
        }
        let delay = resumed.then_some(self.ctx.continue_delay);
        let run = super::attach::then_run(spec, link, control, delay);
        self.ctx.tracker.spawn(run);
        Ok(())
    }

    /// Runs a workflow the user invoked (in `extras`): a run of its own.
    pub(super) async fn workflow(
        &mut self,
        user: &str,
        extras: RunExtras,
    ) -> Result<(), SessionError> {
        self.owned(user)?;
        if self.run.is_some() {
            return Err(SessionError::RunInProgress);
        }
        // A template's conversation is its walk: nothing else runs in it.
        let agent = self
            .chat
            .as_ref()
            .and_then(|c| self.ctx.agents.get(&c.agent));
        if agent.is_some_and(|a| a.template.is_some()) {
            return Err(SessionError::IllegalTransition(
                "a template conversation runs no workflows".into(),
            ));
        }
        self.start_run(None, extras).await
    }

    /// Asks the run to end. Its open requests close now: an answer arriving
    /// before the run logs its end gets `INPUT_REQUEST_NOT_FOUND`, not an ack.
    pub(super) fn cancel_run(&mut self, reason: RunEndReason) {
        if let Some(run) = &self.run {
            run.control.cancel(reason);
            self.inputs.clear();
            self.components.clear();
            self.refuse_held(true, SessionError::RequestNotFound);
        }
    }

    /// Appends events of (or into) the run: the first marks the chat running,
    /// a `chat.run_complete` marks it idle; the first that can carries what
    /// the run has used, if that grew since it was last logged.
    pub(super) async fn append_run(
        &mut self,
        events: Vec<(EventKind, Option<String>)>,
    ) -> Result<(), StoreError> {
        self.append_marked(events, Marks::default()).await
    }

    pub(super) async fn append_marked(
        &mut self,
        events: Vec<(EventKind, Option<String>)>,
        mut marks: Marks,
    ) -> Result<(), StoreError> {
        let usage_logged = self.run.as_ref().is_some_and(|r| r.used_unlogged)
            && events.iter().any(|(k, _)| k.carries_run_usage());
        if usage_logged && let Some(run) = &self.run {
            marks.run_usage = Some(run_usage(&run.used));
        }
        let ended = events.iter().find_map(|(k, _)| match k {
            EventKind::RunComplete { reason } => Some(*reason),
            _ => None,
        });
        let completes = ended.is_some();
        self.note_said(&events);
        // An untitled chat's title without a model goes in the commit of
        // the run's end, just after it (a model's comes later).
        let mut events = events;
        let titled = if completes {
            self.title_at_end(&mut events)
        } else {
            None
        };
        let starts = self.run.as_ref().is_some_and(|r| !r.state_written);
        // A run's end takes the next waiting message along (the chat stays
        // running: its run starts once this is committed).
        let next = if completes {
            self.take_next(&mut events, &mut marks)
        } else {
            None
        };
        let state = if completes {
            Some(if next.is_some() {
                ChatState::Running
            } else {
                ChatState::Idle
            })
        } else if starts {
            Some(ChatState::Running)
        } else {
            None
        };
        if let Err(e) = self.append_with(events, state, None, marks).await {
            if let Some(next) = next {
                self.queue.push_front(next);
            }
            return Err(e);
        }
        if let Some(run) = &mut self.run {
            run.state_written |= starts;
            run.used_unlogged &= !usage_logged;
        }
        if let (Some(title), Some(chat)) = (titled.clone(), &mut self.chat) {
            chat.listing.title = Some(title);
        }
        if let Some(reason) = ended {
            // Over once its end is logged: a client that read it may start
            // the next run before the run's task has gone (and before the
            // actor hears it went: it now reads commands between a run's
            // batches), so the chat must not still count it in progress.
            if self.run.take().is_some() {
                self.inputs.clear();
                self.components.clear();
                self.refuse_held(true, SessionError::RequestNotFound);
            }
            self.conversation_ended(reason).await;
            if titled.is_none() {
                self.title_after_run();
            }
            Box::pin(self.run_taken(next)).await;
        }
        Ok(())
    }

    pub(super) async fn on_run_msg(&mut self, msg: Option<RunMsg>) {
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
        // Shutting down: nothing of the next model turn is logged; the run
        // is left to the next start, which asks that turn.
        let leave = self.draining
            && events
                .iter()
                .position(|(k, _)| matches!(k, EventKind::SelectSpeaker { .. }))
                .map(|at| events.truncate(at))
                .is_some();
        let marks = Marks {
            partial: self.close_printed(&mut events).into_iter().collect(),
            ..Marks::default()
        };
        if !events.is_empty()
            && let Err(e) = self.append_marked(events, marks).await
        {
            // Its prints were not logged: a partial text would hold words
            // no client saw. The run ends with what the log has.
            if let Some(run) = &mut self.run {
                run.printed = None;
            }
            self.deliver_transient_error(&e);
            self.cancel_run(RunEndReason::Error);
        }
        if leave {
            return self.leave_run();
        }
        if let Some(msg) = next {
            self.on_run_request(msg).await;
        }
    }

    /// [`super::waiting::close_printed`] on the run's turn.
    fn close_printed(&mut self, events: &mut Vec<(EventKind, Option<String>)>) -> Option<usize> {
        super::waiting::close_printed(&mut self.run.as_mut()?.printed, events)
    }

    pub(super) async fn on_run_request(&mut self, msg: RunMsg) {
        // Shutting down: a request to a person is logged, then the run is
        // left to the next start, which waits on it again.
        let asks = matches!(msg, RunMsg::AskInput { .. } | RunMsg::ShowComponent { .. });
        if self.draining && matches!(msg, RunMsg::Emit(EventKind::SelectSpeaker { .. })) {
            return self.leave_run();
        }
        self.request(msg).await;
        if self.draining && asks {
            self.leave_run();
        }
    }

    /// The run task ended without logging its end (a run that logs it is
    /// over then): it panicked, or the log failed. Log one for it.
    pub(super) async fn finish_run(&mut self) {
        if self.run.take().is_none() {
            return;
        }
        self.inputs.clear();
        self.components.clear();
        self.refuse_held(true, SessionError::RequestNotFound);
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
        if let Err(e) = self.log_end(events).await {
            self.deliver_transient_error(&e);
        } else {
            self.conversation_ended(RunEndReason::Error).await;
        }
    }
}

/// The run's usage per speaker, as the log keeps it.
fn run_usage(used: &BTreeMap<String, Usage>) -> BTreeMap<String, AgentUsage> {
    used.iter()
        .map(|(name, u)| {
            let usage = AgentUsage {
                total_tokens: u.prompt_tokens + u.completion_tokens,
                prompt_tokens: u.prompt_tokens,
                completion_tokens: u.completion_tokens,
                cost: None,
            };
            (name.clone(), usage)
        })
        .collect()
}

/// The requests a continued run will wait on again: its calls' (and a
/// group's choice of speaker), or the widget its walk stood at.
fn open_requests(resumed: &runtime::Resumed) -> std::collections::HashSet<String> {
    let widget = resumed.template.as_ref().and_then(|p| p.waiting.as_ref());
    resumed
        .waited
        .keys()
        .cloned()
        .chain(widget.map(|w| w.corr.clone()))
        .collect()
}

/// The option `answer` picks: one of `options` (letter case aside) or its
/// 1-based number.
pub(super) fn chosen(options: &[String], answer: &str) -> Option<String> {
    let answer = answer.trim();
    let by_number = answer
        .parse::<usize>()
        .ok()
        .and_then(|n| n.checked_sub(1))
        .and_then(|i| options.get(i));
    options
        .iter()
        .find(|o| o.eq_ignore_ascii_case(answer))
        .or(by_number)
        .cloned()
}
