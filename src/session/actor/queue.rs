//! Messages sent while a run is in flight ("double texting"): refused, or
//! kept as a `chat.queued` envelope until a run takes them — after the run
//! (`enqueue`), at once with the run cancelled (`interrupt`), or before the
//! running agent's next model turn (`steer`). A message a run takes is
//! logged again as the user's `chat.text`, marked `queued` with the seq of
//! its `chat.queued`; one taken when a run ends is logged in the commit of
//! that end, which keeps the chat running, so a crash never leaves a taken
//! message without its run, nor a pending one in a chat that looks idle.

use super::waiting::{Queue, Queued};
use super::{Actor, Marks};
use crate::protocol::{EventKind, MultitaskStrategy};
use crate::session::SessionError;
use crate::session::handle::RunExtras;
use crate::store::{ChatState, StoreError};

/// Messages one chat keeps waiting at most; past it, `RUN_IN_PROGRESS`.
pub(super) const MAX_QUEUED: usize = 16;

impl Actor {
    /// A user's message while a run is in flight, by `strategy` (the
    /// agent's when the message names none).
    pub(super) async fn during_run(
        &mut self,
        text: String,
        client_msg_id: Option<String>,
        extras: RunExtras,
        strategy: Option<MultitaskStrategy>,
    ) -> Result<(), SessionError> {
        let default = self
            .chat
            .as_ref()
            .and_then(|c| self.ctx.agents.get(&c.agent))
            .map(|a| a.multitask_strategy)
            .unwrap_or_default();
        let mode = strategy.unwrap_or(default);
        // A template's walk and a paused conversation take no other turn.
        if mode == MultitaskStrategy::Reject || self.is_template() || self.paused {
            return Err(SessionError::RunInProgress);
        }
        if self.chat.as_ref().is_some_and(|c| c.archived) {
            return Err(SessionError::Archived);
        }
        if self.queue.len() >= MAX_QUEUED {
            return Err(SessionError::RunInProgress);
        }
        let event = EventKind::Queued {
            agent: "user".into(),
            content: text.clone(),
            mode,
        };
        let seq = self.next_seq;
        let marks = Marks {
            attachments: vec![extras.attachments.clone().unwrap_or_default()],
            ..Marks::default()
        };
        self.append_with(vec![(event, client_msg_id)], None, None, marks)
            .await?;
        let queued = Queued {
            seq,
            text,
            mode,
            extras,
        };
        match mode {
            MultitaskStrategy::Interrupt => {
                // Ahead of what was queued, behind earlier interrupts.
                let at = self
                    .queue
                    .iter()
                    .take_while(|q| q.mode == MultitaskStrategy::Interrupt)
                    .count();
                self.queue.insert(at, queued);
                self.cancel_run(crate::protocol::RunEndReason::Cancelled);
            }
            MultitaskStrategy::Steer => {
                self.queue.push_back(queued);
                if let Some(run) = &self.run {
                    run.steer.store(true, std::sync::atomic::Ordering::Release);
                }
            }
            _ => self.queue.push_back(queued),
        }
        Ok(())
    }

    /// The run asks for what steers it: every waiting `steer` message is
    /// logged as the user's text, and their texts go to the model.
    pub(super) async fn take_steered(&mut self) -> Vec<(String, Vec<crate::protocol::Attachment>)> {
        // A run being cancelled (or timed out) will not read them: they wait
        // for the next run instead.
        if self
            .run
            .as_ref()
            .is_none_or(|r| r.control.token.is_cancelled())
        {
            return Vec::new();
        }
        let (steer, rest): (Queue, Queue) = std::mem::take(&mut self.queue)
            .into_iter()
            .partition(|q| q.mode == MultitaskStrategy::Steer);
        self.queue = rest;
        if steer.is_empty() {
            return Vec::new();
        }
        let events: Vec<_> = steer.iter().map(said).collect();
        let marks = Marks {
            queued: steer.iter().map(|q| q.seq).collect(),
            attachments: steer.iter().map(files).collect(),
            ..Marks::default()
        };
        match self.append_marked(events, marks).await {
            Ok(()) => steer
                .into_iter()
                .map(|q| {
                    let attached = files(&q);
                    (q.text, attached)
                })
                .collect(),
            Err(e) => {
                // Not logged: they wait for the run's end instead.
                self.deliver_transient_error(&e);
                for q in steer.into_iter().rev() {
                    self.queue.push_front(q);
                }
                Vec::new()
            }
        }
    }

    /// What a run's end commits along with it: the next waiting message as
    /// the user's text, its seq for the text's `queued` mark.
    pub(super) fn take_next(
        &mut self,
        events: &mut Vec<(EventKind, Option<String>)>,
        marks: &mut Marks,
    ) -> Option<Queued> {
        let next = self.queue.pop_front()?;
        events.push(said(&next));
        marks.queued.push(next.seq);
        marks.attachments.push(files(&next));
        marks.starts_run = true;
        Some(next)
    }

    /// Logs the end of a run its task did not log (`events`, ending with
    /// its `chat.run_complete`) with the next waiting message, which keeps
    /// the chat running, then starts that message's run.
    pub(super) async fn log_end(
        &mut self,
        mut events: Vec<(EventKind, Option<String>)>,
    ) -> Result<(), StoreError> {
        let mut marks = Marks::default();
        let next = self.take_next(&mut events, &mut marks);
        let state = if next.is_some() {
            ChatState::Running
        } else {
            ChatState::Idle
        };
        if let Err(e) = self.append_with(events, Some(state), None, marks).await {
            if let Some(next) = next {
                self.queue.push_front(next);
            }
            return Err(e);
        }
        Box::pin(self.run_taken(next)).await;
        Ok(())
    }

    /// Starts the run of a message a run's end took (logged already).
    pub(super) async fn run_taken(&mut self, next: Option<Queued>) {
        let Some(next) = next else {
            return;
        };
        // Shutting down: the chat stays running with the message logged; the
        // next start continues (or ends) that run, and restores the rest.
        if self.ctx.shutdown.is_cancelled() || self.draining {
            return;
        }
        if let Err(e) = self.start_run_with(None, next.extras, None).await {
            // Its run ends at once, saying why; the next waiting one goes on.
            tracing::warn!(error = %e, "the run of a queued message could not start");
            let events = vec![
                (
                    EventKind::Error {
                        message: e.to_string(),
                        error_code: e.code(),
                        details: e.details(),
                        recoverable: e.recoverable(),
                    },
                    None,
                ),
                (
                    EventKind::RunComplete {
                        reason: crate::protocol::RunEndReason::Error,
                    },
                    None,
                ),
            ];
            if let Err(e) = self.log_end(events).await {
                self.deliver_transient_error(&e);
            }
        }
    }

    /// After a restart: the messages the log holds that no run took yet
    /// wait again (without the bearer their request brought), interrupts
    /// first.
    pub(super) async fn restore_queue(&mut self) -> Result<(), StoreError> {
        // Any run's messages may still wait (those of an earlier run behind
        // the one its end took): the whole log is read, once, at recovery.
        let store = self.ctx.store.clone();
        let mut after = 0;
        let mut waiting: Vec<Queued> = Vec::new();
        loop {
            let page = store.load_after(self.chat_id, after, 1000).await?;
            let Some(last) = page.last() else { break };
            after = last.seq;
            for row in page
                .iter()
                .filter(|r| r.kind == "chat.queued" || r.kind == "chat.text")
            {
                let Ok(env) = serde_json::from_str::<crate::protocol::Envelope>(&row.json) else {
                    continue;
                };
                match env.kind {
                    EventKind::Queued { content, mode, .. } => waiting.push(Queued {
                        seq: env.seq,
                        text: content,
                        mode,
                        extras: RunExtras {
                            attachments: Some(env.attachments),
                            ..RunExtras::default()
                        },
                    }),
                    EventKind::Text { .. } => {
                        if let Some(q) = env.queued {
                            waiting.retain(|w| w.seq != q);
                        }
                    }
                    _ => {}
                }
            }
        }
        // An interrupt goes first, as it did.
        waiting.sort_by_key(|q| q.mode != MultitaskStrategy::Interrupt);
        self.queue = waiting.into();
        Ok(())
    }
}

/// A waiting message as the user's text a run takes (its `queued` mark
/// comes from the batch's [`Marks`]).
/// The files a waiting message attaches.
fn files(q: &Queued) -> Vec<crate::protocol::Attachment> {
    q.extras.attachments.clone().unwrap_or_default()
}

fn said(q: &Queued) -> (EventKind, Option<String>) {
    let text = EventKind::Text {
        agent: "user".into(),
        content: q.text.clone(),
    };
    (text, None)
}
