//! Chat id → actor. Starts an actor on first use; an actor removes itself
//! when it has been idle long enough, and is rebuilt from the store when the
//! chat is used again.
//!
//! A chat's subscribers live in its entry, not in its actor: on a single node
//! an idle chat's actor stops even while connections follow the chat, and the
//! entry keeps them (the chat *sleeps*: a few hundred bytes instead of a task
//! and a mailbox). The next command starts an actor with the same subscribers.

mod branches;
mod caller;
mod files;
mod reads;
mod turns;

pub use branches::{Branches, MessageRef};
pub use caller::Caller;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use tokio::sync::mpsc;
use uuid::Uuid;

use super::handle::{Command, Handle, Op, Origin, Reply, RunExtras, Signal};
use super::subscriber::Fanout;
use super::{SessionContext, SessionError, Subscriber, actor};
use crate::protocol::limits;
use crate::store::{ChatState, StoreError};

/// Commands waiting for one actor; senders wait when it is full.
const MAILBOX: usize = 64;
/// A command lost to an actor that stopped is retried on a fresh one this often.
const ATTEMPTS: usize = 3;
/// How long a caller waits for a chat's actor to answer (retries included)
/// before it gets [`SessionError::NoAnswer`]: a connection's reader waits on
/// its chats' actors, so one actor that never answered would stop the whole
/// connection being read. Above what an actor may take to load a chat (an
/// MCP server's start, `MCP_SETTLE`, and the store's pool timeout).
pub(crate) const ANSWER_DEADLINE: std::time::Duration = std::time::Duration::from_secs(15);

struct Entry {
    generation: u64,
    /// The chat's subscribers, shared with its actor while it runs; kept
    /// while the chat sleeps.
    subscribers: Arc<Fanout>,
    /// The chat's actor; `None` while the chat sleeps.
    live: Option<Live>,
}

/// A running actor's ends.
struct Live {
    handle: Handle,
    signal: Arc<Signal>,
}

impl Entry {
    /// The actor's signal, if one runs.
    fn signal(&self) -> Option<&Signal> {
        self.live.as_ref().map(|l| &*l.signal)
    }
}

struct Inner {
    ctx: Arc<SessionContext>,
    // A std mutex: nothing awaits while holding it.
    chats: Mutex<HashMap<Uuid, Entry>>,
    next_generation: AtomicU64,
    /// When sleeping chats were last swept for subscribers that left
    /// without unsubscribing.
    swept: Mutex<Instant>,
}

impl Inner {
    /// Called by an actor as it stops (unless it was already replaced): the
    /// chat sleeps if it `may_sleep` and a connection still follows it, else
    /// it is forgotten.
    fn actor_ended(&self, chat_id: Uuid, generation: u64, may_sleep: bool) {
        let mut chats = self.chats.lock().expect("registry lock");
        let Some(entry) = chats.get_mut(&chat_id) else {
            return;
        };
        if entry.generation != generation {
            return;
        }
        // At shutdown nothing sleeps: the entry would keep its streams open.
        if may_sleep && !entry.subscribers.all_gone() && !self.ctx.shutdown.is_cancelled() {
            entry.live = None;
        } else {
            chats.remove(&chat_id);
        }
        self.sweep(&mut chats);
    }

    /// Forgets the sleeping chats whose every subscriber is gone without
    /// unsubscribing (a stream dropped by its client: its queue is closed,
    /// nobody told the registry). At most once per `idle_chat_seconds`, so
    /// the walk over every entry costs nothing per actor that stops.
    fn sweep(&self, chats: &mut HashMap<Uuid, Entry>) {
        let mut swept = self.swept.lock().expect("sweep lock");
        if swept.elapsed() < self.ctx.idle {
            return;
        }
        *swept = Instant::now();
        chats.retain(|_, e| e.live.is_some() || !e.subscribers.all_gone());
    }
}

/// The chats in memory. Cheap to clone.
#[derive(Clone)]
pub struct Registry {
    inner: Arc<Inner>,
}

impl Registry {
    pub fn new(ctx: Arc<SessionContext>) -> Self {
        Self {
            inner: Arc::new(Inner {
                ctx,
                chats: Mutex::new(HashMap::new()),
                next_generation: AtomicU64::new(1),
                swept: Mutex::new(Instant::now()),
            }),
        }
    }

    pub(super) fn context(&self) -> &Arc<SessionContext> {
        &self.inner.ctx
    }

    /// Per-user rates and quotas.
    pub fn quotas(&self) -> &super::Quotas {
        &self.inner.ctx.quotas
    }

    /// Users' feeds on this node.
    pub fn feed(&self) -> &Arc<super::Feed> {
        &self.inner.ctx.feed
    }

    /// Another node committed to `chat_id` up to `seq`: wake the chat's
    /// actor here, if any (a follower reads it; an owner learns it lost the chat).
    pub(super) fn on_commit(&self, chat_id: Uuid, seq: u64) {
        let chats = self.inner.chats.lock().expect("registry lock");
        if let Some(s) = chats.get(&chat_id).and_then(Entry::signal) {
            s.committed(seq);
        }
    }

    /// This node's lock was lost for a while: every owner checks its lease.
    pub(super) fn check_leases(&self) {
        let chats = self.inner.chats.lock().expect("registry lock");
        for s in chats.values().filter_map(Entry::signal) {
            if !s.following.load(Ordering::Acquire) {
                s.check_lease.store(true, Ordering::Release);
                s.wake.notify_one();
            }
        }
    }

    /// Wakes the followers whose owner is not among the `live` nodes, to take
    /// their chats over.
    pub(super) fn on_live_nodes(&self, live: &HashSet<i64>) {
        let chats = self.inner.chats.lock().expect("registry lock");
        for s in chats.values().filter_map(Entry::signal) {
            if s.following.load(Ordering::Acquire)
                && !live.contains(&s.holder.load(Ordering::Acquire))
            {
                s.take_over.store(true, Ordering::Release);
                s.wake.notify_one();
            }
        }
    }

    /// Wakes every follower to read the store (notices were lost), and to
    /// look whether its chat is gone if `deletions` may have been lost too.
    pub(super) fn wake_followers(&self, deletions: bool) {
        let chats = self.inner.chats.lock().expect("registry lock");
        for s in chats.values().filter_map(Entry::signal) {
            if s.following.load(Ordering::Acquire) {
                s.gone.fetch_or(deletions, Ordering::AcqRel);
                s.wake.notify_one();
            }
        }
    }

    /// This node's id in its cluster (PostgreSQL only).
    pub fn node_id(&self) -> Option<i64> {
        self.inner.ctx.node.as_ref().map(|n| n.id())
    }

    /// The models chats may switch to.
    pub fn models(&self) -> &crate::agent::ModelRegistry {
        self.inner.ctx.agents.models()
    }

    /// How many chats have an actor in memory.
    pub fn active_chats(&self) -> usize {
        let chats = self.inner.chats.lock().expect("registry lock");
        chats.values().filter(|e| e.live.is_some()).count()
    }

    /// How many chats sleep: followed by a connection, with no actor.
    pub fn sleeping_chats(&self) -> usize {
        let chats = self.inner.chats.lock().expect("registry lock");
        chats.values().filter(|e| e.live.is_none()).count()
    }

    /// Shutdown: forgets every sleeping chat, so that the streams following
    /// one (an SSE stream watches no token of its own) see their queue end
    /// rather than wait out the grace period. Running actors forget their
    /// chats as they stop.
    pub fn forget_sleeping(&self) {
        let mut chats = self.inner.chats.lock().expect("registry lock");
        chats.retain(|_, e| e.live.is_some());
    }

    /// The chat's running actor, started (with the subscribers the chat
    /// kept while it slept) if it has none.
    fn handle(&self, chat_id: Uuid) -> Handle {
        let mut chats = self.inner.chats.lock().expect("registry lock");
        let entry = chats.get(&chat_id);
        if let Some(live) = entry.and_then(|e| e.live.as_ref())
            && !live.handle.tx.is_closed()
        {
            return live.handle.clone();
        }
        let subscribers = entry.map(|e| e.subscribers.clone()).unwrap_or_default();
        let generation = self.inner.next_generation.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = mpsc::channel(MAILBOX);
        let signal = Arc::new(Signal::default());
        actor::spawn(actor::Spawn {
            chat_id,
            rx,
            me: tx.downgrade(),
            signal: signal.clone(),
            subscribers: subscribers.clone(),
            ctx: self.inner.ctx.clone(),
            on_end: {
                let registry = Arc::downgrade(&self.inner);
                Box::new(move |may_sleep| {
                    if let Some(registry) = registry.upgrade() {
                        registry.actor_ended(chat_id, generation, may_sleep);
                    }
                })
            },
        });
        let handle = Handle { tx };
        chats.insert(
            chat_id,
            Entry {
                generation,
                subscribers,
                live: Some(Live {
                    handle: handle.clone(),
                    signal,
                }),
            },
        );
        handle
    }

    /// Asks the chat's actor (a fresh one if it stopped meanwhile), within
    /// [`ANSWER_DEADLINE`]. An actor skips a command whose caller gave up
    /// waiting, so a request answered `NoAnswer` while it still queued never
    /// takes effect (one under way when the deadline passed may).
    async fn call(
        &self,
        chat_id: Uuid,
        make: impl Fn(Reply) -> Command,
    ) -> Result<(), SessionError> {
        let asked = async {
            for _ in 0..ATTEMPTS {
                if self.inner.ctx.shutdown.is_cancelled() {
                    break;
                }
                if let Ok(answer) = self.handle(chat_id).ask(&make).await {
                    return answer;
                }
            }
            Err(SessionError::ShuttingDown)
        };
        tokio::time::timeout(ANSWER_DEADLINE, asked)
            .await
            .unwrap_or_else(|_| {
                tracing::warn!(%chat_id, "a chat did not answer in time");
                Err(SessionError::NoAnswer)
            })
    }

    /// Runs a request that changes the chat (on this node if it owns the
    /// chat, else on its owner).
    pub(super) async fn call_op(
        &self,
        chat_id: Uuid,
        op: Op,
        origin: Origin,
    ) -> Result<(), SessionError> {
        self.call(chat_id, |reply| Command::Op {
            op: Box::new(op.clone()),
            origin,
            reply,
        })
        .await
    }

    /// `chat.start`: create the chat (or resume it if it is already the caller's).
    pub async fn start(
        &self,
        chat_id: Uuid,
        caller: Caller<'_>,
        agent: &str,
        message: Option<String>,
        sub: Option<Subscriber>,
    ) -> Result<(), SessionError> {
        self.start_with(chat_id, caller, agent, message, sub, false)
            .await
    }

    /// As [`Registry::start`], for the chat [`conversation_chat`](super::conversation_chat)
    /// derived from the caller's own conversation id.
    pub async fn start_conversation(
        &self,
        chat_id: Uuid,
        caller: Caller<'_>,
        agent: &str,
        message: Option<String>,
        sub: Option<Subscriber>,
    ) -> Result<(), SessionError> {
        self.start_with(chat_id, caller, agent, message, sub, true)
            .await
    }

    async fn start_with(
        &self,
        chat_id: Uuid,
        caller: Caller<'_>,
        agent: &str,
        message: Option<String>,
        sub: Option<Subscriber>,
        derived_id: bool,
    ) -> Result<(), SessionError> {
        if let Some(m) = &message {
            check_text("message", m)?;
        }
        let attachments = self.attachments(chat_id, caller).await?;
        // Files alone are a first message too.
        let message = match message {
            None if attachments.as_ref().is_some_and(|a| !a.is_empty()) => Some(String::new()),
            m => m,
        };
        self.call(chat_id, |reply| Command::Start {
            user: caller.user.to_owned(),
            agent: agent.to_owned(),
            message: message.clone(),
            extras: Box::new(RunExtras {
                derived_id,
                attachments: attachments.clone(),
                ..caller.extras()
            }),
            sub: sub.clone(),
            reply,
        })
        .await
    }

    /// `client.resume`: subscribe and replay everything after `after`.
    pub async fn resume(
        &self,
        chat_id: Uuid,
        user: &str,
        after: u64,
        sub: Subscriber,
    ) -> Result<(), SessionError> {
        self.call(chat_id, |reply| Command::Resume {
            user: user.to_owned(),
            after: Some(after),
            sub: sub.clone(),
            reply,
        })
        .await
    }

    /// The agents the server knows.
    pub fn agents(&self) -> &crate::agent::AgentRegistry {
        &self.inner.ctx.agents
    }

    /// Subscribes to what the chat logs from now on, with no replay.
    pub async fn follow(
        &self,
        chat_id: Uuid,
        user: &str,
        sub: Subscriber,
    ) -> Result<(), SessionError> {
        self.call(chat_id, |reply| Command::Resume {
            user: user.to_owned(),
            after: None,
            sub: sub.clone(),
            reply,
        })
        .await
    }

    /// Stops delivering the chat to connection `conn_id`. A running actor
    /// is asked (it may then stop); a sleeping chat is not woken: the
    /// connection leaves its entry, and the entry goes with the last one.
    pub async fn unsubscribe(&self, chat_id: Uuid, conn_id: u64) {
        // Bounded as every call: a connection that ends is not held by a
        // chat that does not answer (its subscriber is a closed queue, which
        // the chat drops at its next delivery).
        let _ = tokio::time::timeout(ANSWER_DEADLINE, self.leave(chat_id, conn_id)).await;
    }

    async fn leave(&self, chat_id: Uuid, conn_id: u64) {
        for _ in 0..ATTEMPTS {
            let handle = {
                let mut chats = self.inner.chats.lock().expect("registry lock");
                let Some(entry) = chats.get(&chat_id) else {
                    return;
                };
                match &entry.live {
                    Some(live) if !live.handle.tx.is_closed() => live.handle.clone(),
                    // Asleep, or its actor is stopping: nothing else changes
                    // the list now but the writer, under the list's lock.
                    _ => {
                        let empty = {
                            let mut subs = entry.subscribers.lock();
                            subs.retain(|s| s.conn_id != conn_id && !s.is_closed());
                            subs.is_empty()
                        };
                        if empty && entry.live.is_none() {
                            chats.remove(&chat_id);
                        }
                        return;
                    }
                }
            };
            let asked = handle.ask(|reply| Command::Unsubscribe { conn_id, reply });
            if asked.await.is_ok() {
                return;
            }
            // The actor stopped meanwhile: look again.
        }
    }

    /// Loads the chat (its actor takes the lease, and continues or ends a
    /// run that was cut off).
    pub(super) async fn touch(&self, chat_id: Uuid) -> Result<(), SessionError> {
        self.call_op(chat_id, Op::Touch, Origin::Local { attempt: 0 })
            .await
    }

    /// Start-up: every chat whose run was cut off (by a crash) is continued,
    /// or gets its `chat.run_complete` with `reason: "interrupted"`.
    ///
    /// # Returns
    /// How many chats were recovered.
    ///
    /// # Errors
    /// The store could not be read.
    pub async fn recover_interrupted(&self) -> Result<usize, StoreError> {
        let ids = self
            .inner
            .ctx
            .store
            .chats_in_state(ChatState::Running)
            .await?;
        for id in &ids {
            // Loading the actor is what appends the completion.
            if let Err(e) = self
                .call_op(*id, Op::Touch, Origin::Local { attempt: 0 })
                .await
            {
                tracing::error!(chat_id = %id, error = %e, "could not recover an interrupted run");
            }
        }
        Ok(ids.len())
    }
}

/// Every route's cap on one text (`protocol::limits::MAX_TEXT_BYTES`).
fn check_text(field: &str, text: &str) -> Result<(), SessionError> {
    if text.len() > limits::MAX_TEXT_BYTES {
        return Err(SessionError::TooLarge(format!(
            "`{field}` has {} bytes; at most {} are accepted",
            text.len(),
            limits::MAX_TEXT_BYTES
        )));
    }
    Ok(())
}
