//! The chat actor: the single writer of one chat's log.
//!
//! Everything that changes a chat passes through this task, one message at a
//! time: commands from connections ([`Command`]) and requests from the run
//! ([`RunMsg`]). It assigns `seq` and appends through the group-committing
//! writer, which hands the envelopes to the chat's subscribers ([`Fanout`])
//! once committed, so a client never sees an envelope that a crash could take
//! back.
//!
//! Nothing awaits a connection: subscribers get `try_send`, and one whose
//! queue is full is closed with 1013 (it will resume by `seq`).
//!
//! On several nodes, each node that has a chat in use runs an actor for it,
//! in one of two roles ([`Role`]): the **owner** (it holds the chat's lease and
//! does all of the above, its appends fenced by the lease) or a **follower**
//! (it serves its own subscribers from the store, woken by the owner's commit
//! notifications, and forwards every change to the owner — or takes the chat
//! over when the lease is free or its holder is dead).

mod attach;
mod branches;
mod cluster;
mod commands;
mod conversation;
mod feed;
mod history;
mod post;
mod purge;
mod queue;
mod requests;
mod resume;
mod run;
mod titles;
mod waiting;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;
use waiting::{Marks, Queue};

use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;
use uuid::Uuid;

use super::SessionContext;
use super::handle::{Command, Op, Reply, Signal};
use super::subscriber::Fanout;
use crate::link::{ComponentOutcome, InputOutcome, RunControl, RunMsg};
use crate::protocol::{Envelope, EventKind, now_ts};
use crate::store::{AppendBatch, ChatRecord, ChatState, Fence, NewEnvelope, StoreError};

/// Run requests buffered between the run and the actor.
const RUN_QUEUE: usize = 256;
/// Most run events folded into one append.
const MAX_EMIT_BATCH: usize = 256;
/// Most connections subscribed to one chat.
const MAX_SUBSCRIBERS: usize = 256;
/// What the log keeps of a password answer.
const REDACTED: &str = "[redacted]";

/// What a new actor is made of.
pub(super) struct Spawn {
    pub(super) chat_id: Uuid,
    pub(super) rx: mpsc::Receiver<Box<Command>>,
    /// The actor's own mailbox, to requeue a forward that found the chat moved.
    pub(super) me: mpsc::WeakSender<Box<Command>>,
    pub(super) signal: Arc<Signal>,
    /// The chat's subscribers, kept by the registry while the chat sleeps.
    pub(super) subscribers: Arc<Fanout>,
    pub(super) ctx: Arc<SessionContext>,
    /// Called once the actor has stopped, with whether the chat may sleep
    /// (it stopped idle on a single node): the registry keeps the chat's
    /// subscribers then, and forgets the chat otherwise (unless the actor was
    /// already replaced). A callback, so the actor knows nothing of the
    /// registry that spawned it.
    pub(super) on_end: Box<dyn FnOnce(bool) + Send>,
}

/// Spawns the actor of `chat_id` on the context's task tracker.
pub(super) fn spawn(s: Spawn) {
    let tracker = s.ctx.tracker.clone();
    let (chat_id, on_end) = (s.chat_id, s.on_end);
    tracker.spawn(async move {
        // On NATS, the chat's commit notices while the actor lives.
        let _watch = s
            .ctx
            .node
            .as_ref()
            .and_then(|n| n.watch(chat_id, &s.signal));
        let role = if s.ctx.node.is_some() {
            Role::Follower
        } else {
            Role::Single
        };
        let mut actor = Actor {
            chat_id,
            ctx: s.ctx,
            rx: s.rx,
            me: s.me,
            signal: s.signal,
            role,
            chat: None,
            broken: None,
            next_seq: 1,
            paused: false,
            subscribers: s.subscribers,
            run: None,
            inputs: HashMap::new(),
            components: HashMap::new(),
            held: Vec::new(),
            queue: Queue::new(),
            idle_since: Instant::now(),
            draining: false,
            titling: false,
            purged: false,
        };
        let may_sleep = actor.run().await;
        Box::pin(actor.release()).await;
        on_end(may_sleep);
    });
}

/// What this node's actor is to its chat.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    /// The only node (SQLite): the actor owns the chat, no lease needed.
    Single,
    /// This node holds the chat's lease, granted with this epoch.
    Owner { epoch: i64 },
    /// Another node owns the chat (or nobody does yet).
    Follower,
}

/// The run in flight.
struct ActiveRun {
    control: RunControl,
    rx: mpsc::Receiver<RunMsg>,
    /// Whether the log says the chat is running (written with the run's first envelope).
    state_written: bool,
    /// Set when a message waits to steer the run (the run's link reads it).
    steer: Arc<std::sync::atomic::AtomicBool>,
    /// Counts the run in `agentwire_runs_active` while it lives.
    _gauge: crate::metrics::RunGauge,
    /// The run's slot in its user's quota (`max_runs_per_user`).
    _permit: crate::session::Slot,
    /// A continued run: the requests its cut-off self had asked that the log
    /// shows open (input `request_id`s, component and approval `corr`s), until
    /// it waits on each again. An answer to one meanwhile is held, not
    /// refused. (A paused conversation reads its run only once resumed.)
    rewaits: HashSet<String>,
    /// What the run has used so far, per speaker (with what its cut-off
    /// self had, for a continued run), and whether its next envelope that
    /// can carry it must (`Envelope::run_usage`).
    used: std::collections::BTreeMap<String, crate::llm::Usage>,
    used_unlogged: bool,
    /// What the open model turn has printed (speaker, text) and not yet
    /// closed with its `chat.text`: kept, marked `partial`, if the run stops.
    printed: Option<(String, String)>,
    /// The title of the workflow the run invokes (the chat's, if untitled).
    named: Option<String>,
    /// The run's first words (its user's, else its first answer's): an
    /// untitled chat's title when no model makes one.
    said: Option<String>,
}

/// An answer that came, just after a restart, for a request the continued
/// run had not waited on again yet: answered once it does (or refused when
/// the run ends first, or at `until`).
struct Held {
    id: String,
    op: Op,
    reply: Reply,
    until: Instant,
}

struct PendingInput {
    password: bool,
    /// A choice's options: only one of them answers it (`speaker`: also "").
    options: Option<Vec<String>>,
    speaker: bool,
    deadline: Instant,
    respond: oneshot::Sender<InputOutcome>,
}

struct PendingComponent {
    deadline: Instant,
    /// An approval gate (`component_type: "approval"`): answerable in a batch.
    approval: bool,
    /// What a result must pass before it is taken.
    check: Option<crate::link::AnswerCheck>,
    respond: oneshot::Sender<ComponentOutcome>,
}

struct Actor {
    chat_id: Uuid,
    ctx: Arc<SessionContext>,
    rx: mpsc::Receiver<Box<Command>>,
    me: mpsc::WeakSender<Box<Command>>,
    signal: Arc<Signal>,
    role: Role,
    /// The chat's row; `None` while the chat does not exist.
    chat: Option<ChatRecord>,
    /// Set when loading failed: every command gets this error.
    broken: Option<StoreError>,
    /// The `seq` the next envelope gets; on a follower, one past the last
    /// envelope it delivered.
    next_seq: u64,
    /// A paused template conversation: the run's messages wait unread.
    paused: bool,
    /// Shared with the log writer, which delivers each commit to them.
    subscribers: Arc<Fanout>,
    run: Option<ActiveRun>,
    /// Input requests awaiting `user.input.submit`, by `request_id`.
    inputs: HashMap<String, PendingInput>,
    /// UI tool calls awaiting `inline_component.result`, by `corr`.
    components: HashMap<String, PendingComponent>,
    /// Answers held for requests a continued run waits on again.
    held: Vec<Held>,
    /// Messages sent during a run, waiting for one (`queue.rs`).
    queue: Queue,
    idle_since: Instant,
    /// Shutting down with a continuable run: it runs until its next model
    /// turn or request to a person, then is left for the next start.
    draining: bool,
    /// A title is being made (`titles.rs`): the actor stays for it.
    titling: bool,
    /// The chat was deleted (`purge.rs`): the actor stops.
    purged: bool,
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
    /// The actor's life. Returns whether it stopped idle on a single node,
    /// where the chat may sleep with its subscribers until its next command.
    #[tracing::instrument(name = "chat", skip_all, fields(chat_id = %self.chat_id))]
    async fn run(&mut self) -> bool {
        if let Err(e) = Box::pin(self.load()).await {
            tracing::error!(error = %e, "cannot load chat");
            self.broken = Some(e);
        }
        let mut shutting_down = false;
        // Every handle gone (the registry was dropped at shutdown): no more
        // commands, but a run in flight still gets to log its end.
        let mut orphaned = false;
        // One wait for shutdown across the loop: a fresh `cancelled()` per
        // iteration registered with (and left) the token every actor shares,
        // twice per word under a lock (`bench/notes.md`).
        let shutdown = self.ctx.shutdown.clone().cancelled_owned();
        tokio::pin!(shutdown);
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
                () = &mut shutdown, if !shutting_down => {
                    shutting_down = true;
                    // A paused run is read again, so it can log its end (or,
                    // continued at the next start, is left as it is).
                    let paused = std::mem::take(&mut self.paused);
                    Box::pin(self.at_shutdown(paused)).await;
                }
                // The handlers are boxed: their futures are large and live
                // only while they run, so an idle actor stays small.
                msg = recv_run(&mut self.run), if !self.paused => {
                    Box::pin(self.on_run_msg(msg)).await;
                    // A run that always has something queued would keep the
                    // commands below from ever being read (a burst held a
                    // cancel back for its whole length): one waiting command
                    // goes between two of its batches.
                    if !orphaned && let Ok(cmd) = self.rx.try_recv() {
                        Box::pin(self.on_command(*cmd)).await;
                    }
                }
                () = self.signal.wake.notified(), if self.role != Role::Single => {
                    Box::pin(self.on_wake()).await;
                }
                cmd = self.rx.recv(), if !orphaned => match cmd {
                    Some(cmd) => Box::pin(self.on_command(*cmd)).await,
                    None => orphaned = true,
                },
                _ = sleep_until(deadline) => Box::pin(self.expire()).await,
                _ = sleep_until(idle_at) => {
                    self.rx.close();
                    return self.role == Role::Single && !shutting_down && !orphaned;
                }
            }
            if self.purged {
                self.rx.close();
                return false;
            }
            if (shutting_down || orphaned) && self.run.is_none() {
                break;
            }
        }
        self.rx.close();
        false
    }

    /// Rebuilds the chat from the store: its row, its next `seq`, and the end
    /// of a run that a crash cut off. On several nodes it first asks for the
    /// chat's lease, so that what it reads includes the last owner's appends.
    async fn load(&mut self) -> Result<(), StoreError> {
        if let Some(node) = &self.ctx.node {
            let lease = node.cluster().acquire(self.chat_id).await?;
            self.set_lease(lease);
        }
        let Some(chat) = self.ctx.store.chat(self.chat_id).await? else {
            return Ok(());
        };
        self.next_seq = self
            .ctx
            .store
            .last(self.chat_id)
            .await?
            .map_or(1, |(s, _)| s + 1);
        self.chat = Some(chat);
        self.recover_cut_run().await
    }

    /// Logs the end of a run that the chat's last writer did not finish (a
    /// crash, or a node that died). Only the chat's writer does this.
    async fn recover_cut_run(&mut self) -> Result<(), StoreError> {
        let cut = self
            .chat
            .as_ref()
            .is_some_and(|c| c.state == ChatState::Running)
            && self.run.is_none()
            && self.role != Role::Follower;
        if !cut {
            return Ok(());
        }
        // What was sent during the run and not taken waits again.
        self.restore_queue().await?;
        if self.ctx.continue_runs {
            return Box::pin(self.continue_cut_run()).await;
        }
        tracing::info!("marking the run cut off by a restart as interrupted");
        self.interrupt_cut_run(None).await
    }

    /// Whether nothing needs this actor: no run, no pending request, and
    /// no subscriber — except on a single node, where an idle chat's
    /// subscribers stay with the registry while the chat sleeps (nothing but
    /// this actor writes to the chat, so nothing can arrive for them). On
    /// several nodes a follower's subscribers need their actor to read the
    /// owner's appends, and an owner keeps its lease while followed.
    fn is_idle(&self) -> bool {
        self.run.is_none()
            && self.inputs.is_empty()
            && self.components.is_empty()
            && self.held.is_empty()
            && self.queue.is_empty()
            && !self.titling
            && (self.role == Role::Single || self.subscribers.all_gone())
    }

    fn next_deadline(&self) -> Option<Instant> {
        let inputs = self.inputs.values().map(|p| p.deadline);
        let components = self.components.values().map(|p| p.deadline);
        let held = self.held.iter().map(|h| h.until);
        inputs.chain(components).chain(held).min()
    }

    // ----- the log -------------------------------------------------------

    /// Appends events and waits for the commit (the writer has delivered them
    /// by then).
    async fn append(
        &mut self,
        events: Vec<(EventKind, Option<String>)>,
        state: Option<ChatState>,
    ) -> Result<(), StoreError> {
        self.append_with(events, state, None, Marks::default())
            .await
    }

    /// [`append`](Self::append), also setting the conversation state, and
    /// with what the run's envelopes carry for a restart.
    async fn append_with(
        &mut self,
        events: Vec<(EventKind, Option<String>)>,
        state: Option<ChatState>,
        conversation_state: Option<&'static str>,
        mut marks: Marks,
    ) -> Result<(), StoreError> {
        let mut envelopes = Vec::with_capacity(events.len());
        let ts_ms = chrono::Utc::now().timestamp_millis();
        let ts = now_ts();
        for (i, (kind, client_msg_id)) in events.into_iter().enumerate() {
            let seq = self.next_seq + i as u64;
            let type_name = kind.type_name();
            let corr = kind.corr().map(str::to_owned);
            if let EventKind::Error { error_code, .. } = &kind {
                crate::metrics::error_sent(error_code.as_str());
            }
            let mut env = Envelope::new(kind, self.chat_id, seq, ts.clone());
            // On the run's user text (after its chat.branch, if one leads).
            if matches!(env.kind, EventKind::Text { .. }) {
                env.context_type = marks.context_type.take();
            }
            if matches!(&env.kind, EventKind::Text { agent, .. } | EventKind::Queued { agent, .. } if agent == "user")
                && !marks.attachments.is_empty()
            {
                env.attachments = marks.attachments.remove(0);
            }
            if matches!(&env.kind, EventKind::Text { agent, .. } if agent == "user") {
                if !marks.queued.is_empty() {
                    env.queued = Some(marks.queued.remove(0));
                }
                env.starts_run = std::mem::take(&mut marks.starts_run);
            }
            env.partial = marks.partial.contains(&i);
            if env.kind.carries_run_usage() {
                env.run_usage = marks.run_usage.take();
            }
            let json: Arc<str> = env.to_json().into();
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
        let milestone = Self::milestone(&envelopes);
        let fence = match self.role {
            Role::Single => None,
            Role::Owner { epoch } => Some(Fence {
                node: self.ctx.node.as_ref().map_or(0, |n| n.id()),
                epoch,
            }),
            Role::Follower => return Err(StoreError::Fenced(Arc::from([self.chat_id]))),
        };
        let batch = AppendBatch {
            chat_id: self.chat_id,
            envelopes,
            state,
            conversation_state,
            fence,
        };
        // The writer hands the batch to the subscribers once it is committed.
        let deliver: Arc<dyn crate::store::OnCommit> = self.subscribers.clone();
        if let Err(e) = self.ctx.writer.append_then(batch, Some(deliver)).await {
            if let StoreError::Fenced(_) = e {
                self.demote().await;
            }
            return Err(e);
        }
        // Committed: the seqs are taken, whatever happens next.
        self.next_seq += count;
        if let Some(chat) = &mut self.chat {
            if let Some(state) = state {
                chat.state = state;
            }
            if let Some(cs) = conversation_state {
                chat.conversation_state = Some(cs.to_owned());
            }
        }
        if let Some(reason) = milestone {
            self.announce(reason).await;
        }
        Ok(())
    }
}
